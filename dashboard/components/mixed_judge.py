"""The mixed-precision page's "judged by the model's output" section: the bundled model's
sentence embeddings, or a causal LM's KL divergence and perplexity on demand (with a
progress bar and the page's stated token limit), for each recipe, side by side."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import streamlit as st

from dashboard.cache import mixed as mixed_cache
from dashboard.services.display.text import literal
from dashboard.services.model.checkpoint import Checkpoint
from quant_core import HELD_OUT_SENTENCES, QuantConfig
from quant_core.mixed.causal import DEFAULT_MAX_TOKENS, ModelUnavailable, evaluate_recipe

__all__ = ["judge_output"]

_MEMO = "mx_judged"
_KEEP = 4  # KL/perplexity results kept per session (each a few numbers)


def judge_output(
    bundled: bool,
    folder: Checkpoint | None,
    problem: str | None,
    recipes: Mapping[str, Mapping[str, QuantConfig]],
) -> None:
    """Draw the section for ``recipes`` (label → tensor name → config). ``bundled``: the
    bundled MiniLM (embeddings, computed at once); ``folder``: a model folder (KL and
    perplexity when the button is pressed), ``problem``: why its output cannot be computed
    here, or ``None``."""
    if bundled:
        cols = st.columns(len(recipes))
        for col, (label, configs) in zip(cols, recipes.items(), strict=True):
            key = tuple(sorted((t, c.name) for t, c in configs.items()))
            j = mixed_cache.bundled_judgement(key, dict(configs))
            col.metric(f"Embedding cosine, {label}", f"{j.mean_cosine:.5f}")
            col.caption(f"worst sentence {j.min_cosine:.5f}")
        st.caption(f"On the {len(HELD_OUT_SENTENCES)} held-out sentences, against fp32.")
        return
    if folder is None:
        # an upload or a GGUF: the lab runs a model's output from a folder with transformers
        st.info("A single file holds weights but not the model's code: no output to judge.")
        return
    if problem is not None:
        st.info(f"The model's output is not computed: {literal(problem)}.")
        return
    max_tokens = int(
        st.number_input(
            "Tokens of the held-out text (the limit of this check)",
            min_value=16,
            max_value=1024,
            value=DEFAULT_MAX_TOKENS,
            step=16,
            key="mx_tokens",
        )
    )
    memo: dict[tuple[object, ...], dict[str, object]] = st.session_state.setdefault(_MEMO, {})
    key = (folder.key, max_tokens, tuple((k, tuple(sorted(
        (t, c.name) for t, c in v.items()))) for k, v in recipes.items()))  # fmt: skip
    if st.button("Compute KL and perplexity", key="mx_judge") and key not in memo:
        result = _run(folder.key, folder.folder, max_tokens, recipes)
        if result:  # a model that cannot be loaded says so and may be tried again
            memo[key] = result
        while len(memo) > _KEEP:
            memo.pop(next(iter(memo)))
    judged = memo.get(key)
    if not judged:
        st.caption(
            "KL divergence of next-token distributions against the float model and "
            f"perplexity, on the first {max_tokens} tokens of a held-out text shipped with "
            "the lab (the model is loaded from the folder with transformers, on the CPU)."
        )
        return
    first = next(iter(judged.values()))
    st.caption(f"Float model perplexity {first.float_perplexity:.3f} on {first.tokens} tokens.")
    cols = st.columns(len(judged))
    for col, (label, ev) in zip(cols, judged.items(), strict=True):
        col.metric(f"KL, {label}", f"{ev.kl:.5f} nats/token")
        col.metric(f"Perplexity, {label}", f"{ev.perplexity:.3f}")


def _run(
    key: str, folder: Path, max_tokens: int, recipes: Mapping[str, Mapping[str, QuantConfig]]
) -> dict[str, object]:
    try:
        lm = mixed_cache.causal_lm(key, folder)
        ref = mixed_cache.causal_reference(key, folder, max_tokens)
    except (ModelUnavailable, ValueError) as exc:
        st.warning(literal(exc))
        return {}
    bar = st.progress(0.0)
    out = {}
    for i, (label, configs) in enumerate(recipes.items()):

        def step(done: int, total: int, i: int = i, label: str = label) -> None:
            bar.progress((i + done / total) / len(recipes), text=label)

        out[label] = evaluate_recipe(lm, ref, configs, step)
    bar.empty()
    return out
