"""A causal language model judged by its output: KL divergence of its next-token
distributions against the float model, and perplexity, on a short held-out text, with
weights fake-quantized tensor by tensor (each weight replaced by ``quantize(w,
cfg).dequantize()``, by ``quantize_dequantize``; the model still computes in float32, on
the CPU).

The model comes from a local folder only (``config.json``, weights, tokenizer files), read
by ``transformers`` with ``local_files_only=True`` and ``trust_remote_code=False``: no
download, no code from the folder. What cannot be used is said by ``ModelUnavailable``:
no ``config.json``, an architecture this ``transformers`` cannot build (named), no
tokenizer.

Formulas, over the ``T`` tokens of the text (at most ``max_tokens``), ``p_t`` the float
model's next-token distribution at position ``t`` and ``q_t`` the quantized model's:

- ``KL = (1 / T) Σ_t Σ_v p_t(v) (log p_t(v) - log q_t(v))`` (nats per token), and its
  largest per-position value;
- ``perplexity = exp(-(1 / (T - 1)) Σ_{t < T-1} log q_t(x_{t+1}))``, and the float
  model's with ``p``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from ..config import QuantConfig
from ..quantize import quantize_dequantize
from .texts import HELD_OUT_TEXT

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "CausalEval",
    "CausalLM",
    "ModelUnavailable",
    "Reference",
    "accumulate_importance",
    "check_folder",
    "evaluate_recipe",
    "fake_quantized",
    "load_causal_lm",
    "reference",
    "tokens",
]

DEFAULT_MAX_TOKENS = 256
MAX_TOKENS_LIMIT = 4096

Progress = Callable[[int, int], None]


class ModelUnavailable(ValueError):
    """The folder cannot give a runnable causal LM; ``str(err)`` says why."""


@dataclass(frozen=True, eq=False)
class CausalLM:
    """A loaded float32 model in eval mode, its tokenizer, and the folder it came from."""

    model: nn.Module
    tokenizer: object
    folder: Path
    architecture: str

    @property
    def parameters(self) -> int:
        return sum(p.numel() for p in self.model.parameters())


def check_folder(folder: str | Path) -> Path:
    """``folder`` if it holds a ``config.json`` (the cheap check, before anything is
    loaded); ``ModelUnavailable`` saying why its output cannot be computed otherwise."""
    folder = Path(folder)
    if not (folder / "config.json").is_file():
        raise ModelUnavailable(
            f"{folder.name} has no config.json: without the model's description its output "
            "cannot be computed (the table and the allocation use the weights alone)"
        )
    return folder


def load_causal_lm(folder: str | Path) -> CausalLM:
    """The causal LM in ``folder`` (module docstring); ``ModelUnavailable`` saying why not.

    The caller checks ``folder`` against the allowed roots first."""
    folder = check_folder(folder)
    try:
        import transformers
    except ImportError as exc:  # pragma: no cover - a dependency of sentence-transformers
        raise ModelUnavailable(f"transformers is not installed: {exc}") from None
    try:
        config = transformers.AutoConfig.from_pretrained(
            folder, local_files_only=True, trust_remote_code=False
        )
    except (ValueError, KeyError, OSError) as exc:
        raise ModelUnavailable(
            f"transformers {transformers.__version__} cannot read {folder.name}/config.json: "
            f"{_first_line(exc)}"
        ) from None
    arch = ", ".join(getattr(config, "architectures", None) or [config.model_type])
    try:
        model = transformers.AutoModelForCausalLM.from_pretrained(
            folder, local_files_only=True, trust_remote_code=False, dtype=torch.float32
        )
    except (ValueError, KeyError, OSError, RuntimeError) as exc:
        raise ModelUnavailable(
            f"transformers {transformers.__version__} cannot build {arch} "
            f"(model_type {config.model_type!r}) as a causal language model: {_first_line(exc)}"
        ) from None
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(
            folder, local_files_only=True, trust_remote_code=False
        )
    except (ValueError, KeyError, OSError, TypeError) as exc:
        raise ModelUnavailable(
            f"{folder.name} has no tokenizer transformers can load ({_first_line(exc)}): the "
            "text cannot be turned into tokens"
        ) from None
    model.eval()
    return CausalLM(model, tokenizer, folder, arch)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__


def tokens(
    lm: CausalLM, text: str = HELD_OUT_TEXT, max_tokens: int = DEFAULT_MAX_TOKENS
) -> torch.Tensor:
    """``[1, T]`` token ids of ``text``, the first ``max_tokens`` (``T >= 2``)."""
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int):
        raise TypeError(f"max_tokens must be an int, got {max_tokens!r}")
    if not 2 <= max_tokens <= MAX_TOKENS_LIMIT:
        raise ValueError(f"max_tokens must be in [2, {MAX_TOKENS_LIMIT}], got {max_tokens}")
    ids = lm.tokenizer(text, return_tensors="pt")["input_ids"][:, :max_tokens]
    if (n := int(ids.shape[1])) < 2:
        tokens_text = "1 token" if n == 1 else f"{n} tokens"
        raise ValueError(f"the text gives {tokens_text}; at least 2 are needed")
    return ids


@dataclass(frozen=True, eq=False)
class Reference:
    """The float model's log-probabilities ``[T, V]`` on ``ids`` ``[1, T]``."""

    ids: torch.Tensor
    log_probs: torch.Tensor
    seconds: float

    @property
    def n_tokens(self) -> int:
        return int(self.ids.shape[1])

    @property
    def perplexity(self) -> float:
        return _perplexity(self.log_probs, self.ids)


def _log_probs(model: nn.Module, ids: torch.Tensor) -> torch.Tensor:
    with torch.inference_mode():
        logits = model(input_ids=ids).logits[0]
    return torch.log_softmax(logits.to(torch.float64), dim=-1)


def _perplexity(log_probs: torch.Tensor, ids: torch.Tensor) -> float:
    nxt = ids[0, 1:]
    nll = -log_probs[:-1].gather(1, nxt[:, None]).mean()
    return math.exp(float(nll))


def reference(
    lm: CausalLM, text: str = HELD_OUT_TEXT, max_tokens: int = DEFAULT_MAX_TOKENS
) -> Reference:
    """The float model on the first ``max_tokens`` tokens of ``text``."""
    ids = tokens(lm, text, max_tokens)
    start = time.perf_counter()
    lp = _log_probs(lm.model, ids)
    return Reference(ids, lp, time.perf_counter() - start)


@dataclass(frozen=True)
class CausalEval:
    """The quantized model against the float one on ``tokens`` tokens (module docstring):
    ``kl`` (mean, nats per token), ``kl_max`` (the worst position), ``perplexity`` and
    ``float_perplexity``; ``quantized``: tensors fake-quantized; ``unmatched``: recipe names
    the model has no parameter for; ``seconds``: quantizing and the forward pass."""

    tokens: int
    kl: float
    kl_max: float
    perplexity: float
    float_perplexity: float
    quantized: int
    unmatched: tuple[str, ...]
    seconds: float


def _parameters(model: nn.Module) -> dict[str, nn.Parameter]:
    params = dict(model.named_parameters())
    prefix = getattr(model, "base_model_prefix", "")
    if prefix:  # checkpoints of some families drop or add the base model's prefix
        for name, p in list(params.items()):
            if name.startswith(prefix + "."):
                params.setdefault(name.removeprefix(prefix + "."), p)
    return params


@contextmanager
def fake_quantized(
    model: nn.Module, recipe: Mapping[str, QuantConfig], progress: Progress | None = None
) -> Iterator[tuple[int, tuple[str, ...]]]:
    """Within the block, every parameter named in ``recipe`` (tensor name → config; a name
    with or without the model's base prefix) holds ``quantize(w, cfg).dequantize()``;
    restored on exit, also on error. Yields ``(tensors quantized, names not found)``;
    ``progress(done, len(recipe))`` after each tensor. ``ValueError`` naming a tensor a
    config cannot take (nothing is left changed)."""
    params = _parameters(model)
    unmatched = tuple(n for n in recipe if n not in params)
    todo = [(n, cfg) for n, cfg in recipe.items() if n in params]
    saved: dict[str, torch.Tensor] = {}
    try:
        with torch.no_grad():
            for done, (name, cfg) in enumerate(todo, start=1):
                if not isinstance(cfg, QuantConfig):
                    raise TypeError(f"{name}: the recipe must map to QuantConfig, got {cfg!r}")
                p = params[name]
                w = p.detach().clone()
                try:
                    w_hat = quantize_dequantize(w.to(torch.float32), cfg).values
                except ValueError as exc:
                    raise ValueError(f"{name} {list(w.shape)}: {exc}") from exc
                saved[name] = w
                p.copy_(w_hat.to(p.dtype))
                if progress is not None:
                    progress(done, len(recipe))
        yield len(todo), unmatched
    finally:
        with torch.no_grad():
            for name, w in saved.items():
                params[name].copy_(w)


def evaluate_recipe(
    lm: CausalLM,
    ref: Reference,
    recipe: Mapping[str, QuantConfig],
    progress: Progress | None = None,
) -> CausalEval:
    """KL and perplexity with every weight of ``recipe`` (tensor name → config) replaced by
    its fake-quantized copy (``fake_quantized``); the model's weights are restored
    afterwards. ``progress(done, total)`` after each tensor and after the forward pass
    (``total = len(recipe) + 1``)."""
    total = len(recipe) + 1
    start = time.perf_counter()

    def step(done: int, _: int) -> None:
        if progress is not None:
            progress(done, total)

    with fake_quantized(lm.model, recipe, step) as (quantized, unmatched):
        lp = _log_probs(lm.model, ref.ids)
    p_log = ref.log_probs
    kl_t = (p_log.exp() * (p_log - lp)).sum(dim=-1)
    if progress is not None:
        progress(total, total)
    return CausalEval(
        tokens=ref.n_tokens,
        kl=float(kl_t.mean()),
        kl_max=float(kl_t.max()),
        perplexity=_perplexity(lp, ref.ids),
        float_perplexity=ref.perplexity,
        quantized=quantized,
        unmatched=unmatched,
        seconds=time.perf_counter() - start,
    )


def accumulate_importance(
    model: nn.Module, run: Callable[[], object]
) -> dict[str, torch.Tensor]:
    """``diag(XᵀX) / tokens`` (``importance.input_importance``) of the input of every
    ``nn.Linear`` of ``model`` while ``run()`` executes, keyed ``"<layer>.weight"``: sums
    of squares accumulated in forward pre-hooks (memory: one ``[in]`` vector per layer,
    not the inputs), hooks removed afterwards."""
    sums: dict[str, torch.Tensor] = {}
    counts: dict[str, int] = {}

    def hook_for(name: str) -> Callable[..., None]:
        def hook(mod: nn.Module, args: tuple[object, ...]) -> None:
            x = args[0]
            if not isinstance(x, torch.Tensor):
                return
            x = x.detach().reshape(-1, x.shape[-1]).to(torch.float64)
            sq = (x * x).sum(dim=0)
            sums[name] = sums[name] + sq if name in sums else sq
            counts[name] = counts.get(name, 0) + x.shape[0]

        return hook

    handles = [
        m.register_forward_pre_hook(hook_for(n))
        for n, m in model.named_modules()
        if isinstance(m, nn.Linear)
    ]
    try:
        with torch.inference_mode():
            run()
    finally:
        for h in handles:
            h.remove()
    return {f"{n}.weight": s / counts[n] for n, s in sums.items()}
