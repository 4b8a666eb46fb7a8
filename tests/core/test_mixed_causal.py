"""quant_core.mixed.causal on a tiny random Llama written by transformers' save_pretrained:
loading from a local folder only, KL and perplexity against a direct computation, the
weights restored, and every refusal named."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
import torch
from torch.nn import functional as F

from quant_core import Mode, PerGroup, QuantConfig, capture_linear_inputs, quantize
from quant_core.mixed import candidate_named, input_importance
from quant_core.mixed.causal import (
    ModelUnavailable,
    accumulate_importance,
    evaluate_recipe,
    fake_quantized,
    load_causal_lm,
    reference,
    tokens,
)
from quant_core.mixed.texts import CALIBRATION_TEXT, HELD_OUT_TEXT

INT8 = candidate_named("int8_pc").config
INT2 = QuantConfig(bits=2, mode=Mode.ASYMMETRIC, granularity=PerGroup(64))


@pytest.fixture(scope="module")
def lm(tiny_llama: Path):
    return load_causal_lm(tiny_llama)


def test_the_texts_share_no_sentence() -> None:
    def sentences(text: str) -> set[str]:
        return {s.strip() for s in text.replace("\n", " ").split(".") if len(s.strip()) > 20}

    assert not sentences(CALIBRATION_TEXT) & sentences(HELD_OUT_TEXT)


def test_loads_from_the_folder(lm) -> None:
    assert lm.architecture == "LlamaForCausalLM"
    assert all(p.dtype == torch.float32 for p in lm.model.parameters())
    ids = tokens(lm, max_tokens=64)
    assert ids.shape == (1, 64)


def test_kl_and_perplexity_against_a_direct_computation(lm) -> None:
    ref = reference(lm, max_tokens=96)
    recipe = {n: INT2 for n, p in lm.model.named_parameters() if p.dim() == 2}
    before = {n: p.detach().clone() for n, p in lm.model.named_parameters()}
    ev = evaluate_recipe(lm, ref, recipe)
    after = dict(lm.model.named_parameters())
    assert all(torch.equal(before[n], after[n]) for n in before)  # restored exactly
    assert ev.quantized == len(recipe) and ev.unmatched == () and ev.tokens == 96
    # the same model, its weights fake-quantized by hand
    with torch.no_grad():
        for n in recipe:
            after[n].copy_(quantize(before[n], INT2).dequantize())
        logits = lm.model(input_ids=ref.ids).logits[0].double()
        for n in recipe:
            after[n].copy_(before[n])
    q_log = torch.log_softmax(logits, dim=-1)
    kl = F.kl_div(q_log, ref.log_probs, log_target=True, reduction="none").sum(-1)
    # float32 logits: the two runs agree to the last bits; KL is a difference of such values
    assert ev.kl == pytest.approx(float(kl.mean()), rel=1e-6, abs=1e-9)
    assert ev.kl_max == pytest.approx(float(kl.max()), rel=1e-6, abs=1e-9)
    nll = -q_log[:-1].gather(1, ref.ids[0, 1:, None]).mean()
    assert ev.perplexity == pytest.approx(math.exp(float(nll)), rel=1e-9)
    assert ev.kl > 0 and ev.float_perplexity == ref.perplexity


def test_no_recipe_is_the_float_model_and_int8_is_closer_than_int2(lm) -> None:
    ref = reference(lm, max_tokens=64)
    same = evaluate_recipe(lm, ref, {})
    assert same.kl == 0.0 and same.perplexity == ref.perplexity
    names = [n for n, p in lm.model.named_parameters() if p.dim() == 2]
    steps: list[tuple[int, int]] = []
    e8 = evaluate_recipe(lm, ref, dict.fromkeys(names, INT8), lambda d, t: steps.append((d, t)))
    e2 = evaluate_recipe(lm, ref, dict.fromkeys(names, INT2))
    assert 0 < e8.kl < e2.kl
    assert steps[0] == (1, len(names) + 1) and steps[-1] == (len(names) + 1, len(names) + 1)


def test_a_tensor_the_config_cannot_take_is_named_and_nothing_changes(lm) -> None:
    before = {n: p.detach().clone() for n, p in lm.model.named_parameters()}
    g512 = QuantConfig(bits=4, granularity=PerGroup(512))
    recipe = {"model.layers.0.self_attn.q_proj.weight": INT8,
              "model.layers.0.mlp.down_proj.weight": g512}  # fmt: skip
    with (
        pytest.raises(ValueError, match=r"down_proj\.weight \[128, 256\]: group size 512"),
        fake_quantized(lm.model, recipe),
    ):
        pass
    assert all(torch.equal(before[n], p) for n, p in lm.model.named_parameters())
    with fake_quantized(lm.model, {"nope.weight": INT8}) as (done, unmatched):
        assert done == 0 and unmatched == ("nope.weight",)


def test_importance_from_hooks_equals_the_captured_inputs(lm) -> None:
    ids = tokens(lm, CALIBRATION_TEXT, 48)
    imp = accumulate_importance(lm.model, lambda: lm.model(input_ids=ids))
    with torch.inference_mode():
        cap = capture_linear_inputs(lm.model, lambda: lm.model(input_ids=ids))
    assert set(imp) == {f"{n}.weight" for n in cap.inputs}
    for name, x in cap.inputs.items():
        assert torch.allclose(imp[f"{name}.weight"], input_importance(x), rtol=1e-12)


def test_refusals_name_the_problem(tiny_llama: Path, tmp_path: Path) -> None:
    bare = tmp_path / "bare"
    bare.mkdir()
    shutil.copy(tiny_llama / "model.safetensors", bare)
    with pytest.raises(ModelUnavailable, match=r"no config\.json"):
        load_causal_lm(bare)
    alien = tmp_path / "alien"
    shutil.copytree(tiny_llama, alien)
    config = json.loads((alien / "config.json").read_text())
    config |= {"model_type": "quantumlm", "architectures": ["QuantumLMForCausalLM"]}
    (alien / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelUnavailable, match="quantumlm"):
        load_causal_lm(alien)
    untokenized = tmp_path / "untokenized"
    shutil.copytree(tiny_llama, untokenized)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (untokenized / name).unlink()
    with pytest.raises(ModelUnavailable, match="no tokenizer"):
        load_causal_lm(untokenized)
    lm = load_causal_lm(tiny_llama)
    with pytest.raises(ValueError, match=r"max_tokens must be in \[2, 4096\]"):
        tokens(lm, max_tokens=1)
