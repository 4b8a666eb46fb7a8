"""The sensitivity table: for one weight and every candidate scheme, its exact storage and
its error, one ``SensitivityRow`` per (tensor, scheme).

Per weight ``W`` ``[out, in]`` (float32 copy) and candidate config ``c``:

- storage: ``storage_cost(W.shape, c).total_bits`` (codes, scales, zero points; exact);
- ``Ŵ = quantize(W, c).dequantize()``, ``D = W - Ŵ``;
- ``mse = Σ D² / n``, ``sqnr_db = 10 log10(Σ W² / Σ D²)``;
- ``weighted_error = Σ_ij D_ij² a_j`` with the input importance ``a`` (``importance``
  module; ``a = 1`` without inputs: the plain sum of squared errors) and ``energy =
  Σ_ij W_ij² a_j`` on the same weights, so ``energy / weighted_error`` is a weighted SQNR;
- with held-out inputs ``X`` ``[tokens, in]``: ``output_mse = mean((X Dᵀ)²)``, the layer
  output's error on text no importance was computed on.

Cost: ``W`` is converted to float32 once for every scheme; each scheme quantizes it,
dequantizes into one reused buffer (integer codes) and takes both error sums in one pass
over ``W`` and ``Ŵ`` (``sums``: a compiled kernel summing float32 rows, within
``(in + 2) 2^-24`` of float64's column sums); a codebook format's pass decodes its codes
itself, so its ``Ŵ`` is never stored; ``D`` itself is made only for held-out inputs.
Without held-out inputs, a scheme of the lab's recipe with nearest rounding, one-level
scales and blocks that are runs of a row's values (``PerChannel(0)``, ``PerGroup``) takes
one compiled pass instead (``sums.scheme_error_sums``: code, dequantized value and both
sums per element, no codes or ``Ŵ`` stored; block sums within ``(L + 2) 2^-24``), on
block extremes that all such schemes share (one pass over ``W`` for ``g32``, ``g64``,
``g128`` and per channel).

A GGUF type whose blocks do not divide the rows is measured in llama-quantize's fallback
type (``stored_as``). A scheme that cannot take the weight's shape (a group size that does
not divide ``in``: quantize's ``ValueError``) gives a row with ``skipped`` set and NaN
errors. Row order: the candidates' order.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import torch

from ..config import Format
from ..quantize import quantize
from ..storage import storage_cost
from ..validation import nonfinite_text
from .candidates import Candidate, check_candidates, config_for
from .sums import (
    RowExtremes,
    codebook_error_sums,
    energy_sums,
    error_sums,
    fuses,
    row_run_length,
    scheme_error_sums,
)

__all__ = ["ROW_FIELDS", "SensitivityRow", "measure_tensor"]

_NAN = float("nan")


@dataclass(frozen=True)
class SensitivityRow:
    """One cell of the table (module docstring). ``shape``: the weight's; ``stored_bits``:
    what the weight takes as stored (``n * dtype bits``); ``total_bits``: under the
    scheme (0 when skipped); ``weighted``: whether ``a`` came from captured inputs;
    ``seconds``: quantize and measure this cell."""

    tensor: str
    scheme: str
    shape: tuple[int, ...]
    stored_bits: int
    total_bits: int
    bits_per_element: float
    mse: float
    sqnr_db: float
    weighted_error: float
    energy: float
    weighted: bool
    output_mse: float | None
    skipped: str | None
    seconds: float
    stored_as: str | None = None
    gguf_type: str | None = None

    @property
    def n_elements(self) -> int:
        return math.prod(self.shape)

    @property
    def ok(self) -> bool:
        return self.skipped is None

    def record(self) -> dict[str, object]:
        """The row as a flat dict of ``ROW_FIELDS`` (``shape`` as ``"4096×11008"``)."""
        rec = asdict(self)
        rec["shape"] = "×".join(str(d) for d in self.shape)
        rec["n_elements"] = self.n_elements
        return {k: rec[k] for k in ROW_FIELDS}


ROW_FIELDS: tuple[str, ...] = (
    "tensor",
    "scheme",
    "shape",
    "n_elements",
    "stored_bits",
    "total_bits",
    "bits_per_element",
    "mse",
    "sqnr_db",
    "weighted_error",
    "energy",
    "weighted",
    "output_mse",
    "skipped",
    "seconds",
    "stored_as",
    "gguf_type",
)


def _run_lengths(cands: Sequence[Candidate], shape: tuple[int, ...]) -> list[int]:
    """The block lengths of the candidates whose sums ``scheme_error_sums`` takes and whose
    blocks are runs of a row's values (the shared extremes' lengths)."""
    lengths = []
    for cand in cands:
        try:
            cfg = config_for(cand, shape)
        except ValueError:
            continue
        block_len = row_run_length(cfg, shape) if fuses(cfg) else None
        if block_len is not None:
            lengths.append(block_len)
    return lengths


def measure_tensor(
    name: str,
    w: torch.Tensor,
    candidates: Sequence[Candidate],
    *,
    importance: torch.Tensor | None = None,
    held_out: torch.Tensor | None = None,
    stored_bits: int | None = None,
) -> tuple[SensitivityRow, ...]:
    """One row per candidate for weight ``name`` (module docstring).

    ``w``: 2-D float; ``importance``: ``[in]`` or ``None``; ``held_out``: ``[tokens, in]``
    or ``None``; ``stored_bits``: the weight's size as stored (default: its dtype's bits
    per element). ``ValueError``/``TypeError`` for a weight that is not 2-D float, or
    inputs whose width is not ``in``. A weight holding NaN or Inf values gets a skipped row
    per candidate (``skipped`` says how many), so the allocation keeps it as stored and the
    rest of the table goes on, as the whole model page keeps such a weight float."""
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, got {type(name).__name__}")
    cands = check_candidates(candidates)
    if not isinstance(w, torch.Tensor) or not w.dtype.is_floating_point:
        raise TypeError(f"{name}: the weight must be a float tensor, got {w!r:.60}")
    if w.dim() != 2 or w.numel() == 0:
        raise ValueError(f"{name}: the weight must be 2-D and not empty, got {tuple(w.shape)}")
    shape = tuple(w.shape)
    n_in = shape[1]
    if stored_bits is None:
        stored_bits = w.numel() * w.element_size() * 8
    # one float32 copy, shared by every scheme (a no-op for a contiguous float32 weight)
    w32 = w.detach().to(torch.float32).contiguous()
    a = None
    if importance is not None:
        if importance.shape != (n_in,):
            raise ValueError(
                f"{name}: importance must have shape [{n_in}], got {list(importance.shape)}"
            )
        a = importance.to(torch.float64)
    if held_out is not None and (held_out.dim() != 2 or held_out.shape[1] != n_in):
        raise ValueError(
            f"{name}: held-out inputs must be [tokens, {n_in}], got {tuple(held_out.shape)}"
        )
    plain_energy, energy = energy_sums(w32, a)
    if not math.isfinite(plain_energy):
        if bool(torch.isfinite(w32).all()):  # finite values whose squares overflow in float64
            why = "the weight's squared values overflow"
        else:
            why = nonfinite_text(w32, "the weight")
        return tuple(
            SensitivityRow(
                name, cand.name, shape, stored_bits, 0, _NAN, _NAN, _NAN, _NAN, _NAN,
                a is not None, None, why, 0.0,
            )
            for cand in cands
        )  # fmt: skip
    if a is None:
        energy = plain_energy
    buffer: torch.Tensor | None = None  # one dequantized copy, reused by every scheme
    # Without held-out inputs a scheme's sums come from one fused pass (no codes, no Ŵ),
    # on block extremes shared by every scheme whose blocks are runs of a row's values.
    extremes = RowExtremes(w32)
    if held_out is None:
        extremes.prepare(_run_lengths(cands, shape))
    rows = []
    for cand in cands:
        start = time.perf_counter()
        try:
            cfg = config_for(cand, shape)
            cost = storage_cost(shape, cfg)
            fused = None if held_out is not None else scheme_error_sums(w32, cfg, a, extremes)
            qt = quantize(w32, cfg) if fused is None else None
        except ValueError as exc:
            rows.append(
                SensitivityRow(
                    name, cand.name, shape, stored_bits, 0, _NAN, _NAN, _NAN, _NAN, energy,
                    a is not None, None, str(exc), time.perf_counter() - start,
                )
            )  # fmt: skip
            continue
        out_mse = None
        sums = fused
        # A codebook's error is taken straight from its codes (no Ŵ in memory) unless the
        # held-out inputs need D itself.
        if sums is None and held_out is None:
            sums = codebook_error_sums(w32, qt, a)
        if sums is None:
            if buffer is None:
                buffer = torch.empty_like(w32)
            # Integer codes dequantize in place into ``buffer`` (no fresh full-size tensor
            # to fault in); a codebook's kernel makes its own tensor, which ``out`` would copy.
            w_hat = qt.dequantize(out=buffer if cfg.format is Format.INT else None)
            if held_out is not None:
                d = w32 - w_hat
                x = held_out.to(torch.float32)
                out_mse = float((x @ d.T).square().mean(dtype=torch.float64))
                del d
            sums = error_sums(w32, w_hat, a)
            del w_hat
        del qt
        sse, weighted = sums
        if sse == 0:
            sqnr = math.inf
        else:
            sqnr = 10 * math.log10(plain_energy / sse) if plain_energy > 0 else -math.inf
        rows.append(
            SensitivityRow(
                tensor=name,
                scheme=cand.name,
                shape=shape,
                stored_bits=stored_bits,
                total_bits=cost.total_bits,
                bits_per_element=cost.bits_per_element,
                mse=sse / w32.numel(),
                sqnr_db=sqnr,
                weighted_error=weighted,
                energy=energy,
                weighted=a is not None,
                output_mse=out_mse,
                skipped=None,
                seconds=time.perf_counter() - start,
                stored_as=None if cfg == cand.config else cfg.name,
                gguf_type=cfg.gguf_type,
            )
        )
    return tuple(rows)
