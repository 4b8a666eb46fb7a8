"""Compiled kernels for quantize's large passes, and the switch between them and eager.

``quantize`` and ``dequantize`` spend their time in three passes over the data: each block's
extremes (a min/max reduction), the codes (``q = clamp(round((r - m)/s + z), qmin, qmax)``)
and the dequantized values (``r_hat = clamp((q - z) s + m, -F, F)``, ``F`` float32's max);
``error_metrics`` adds one over ``x`` and ``x_hat``. On CPU, with ``Backend.COMPILED``, each
pass is one ``torch.compile`` (Inductor) kernel: one C++/OpenMP loop that reads its inputs
once and writes its outputs once, instead of a chain of torch operators over cache-sized
pieces (``quant_core.chunks``, the eager path, which stays the reference and the fallback).

Bit for bit. The compiled path returns the eager path's codes, scales, zero points, offsets
and dequantized values exactly:

- Only elementwise passes and min/max are compiled. Per-block arithmetic (scales, zero
  points, offsets on ``[n_blocks, 1]`` tensors) runs eagerly, in both paths, and so do sums
  whose order decides a result (the MSE search's errors): Inductor may sum in another order.
  One exception, ``absmean`` (BitNet's ``mean|r|``): a compiled float64 sum whose float32
  mean is returned only where an error bound valid for every order of summation, torch's
  included, proves it equal to the eager one (else the eager path runs).
- Every elementwise formula does eager's IEEE operations in eager's order: Inductor keeps
  the graph's order, does not contract ``a * b + c`` into an FMA (torch builds its C++ with
  ``-ffp-contract=off`` and without unsafe math) and divides by a tensor as division on CPU.
  ``round`` is half to even in both (``nearbyint`` / ``_mm256_round_ps``). The kernels use
  one formula for every zero-point convention, with ``z = 0`` or ``m = 0`` where a scheme
  has none; adding such a zero can only turn a ``-0`` into ``+0`` before rounding, which no
  integer code or dequantized value can show.
- Min and max are exact in any order, but the sign of a zero extreme depends on the order:
  both paths give ``+0`` for a zero extreme (``canonical_zeros``).
- Codebook kernels select instead of gathering (Inductor turns a gather into a scalar
  loop): codes are counts of midpoints below ``v`` (for FP4/FP6, ``|v|`` against the
  magnitudes' midpoints, the sign bit or'ed in; FP6 rounds ``|v|``'s float32 bits to its
  mantissa, to nearest even, the same codes), the float formats (FP4, FP6, FP8) decode
  from the code's bits (each table checked code by code against that formula), and
  other tables of up to 64 entries by a tree of selects on the code; each gives the
  table entry exactly. ``PerBlock`` tiles run on a ``[R/r, r, C/c, c]`` view of the
  matrix with the tile scales broadcast: the same elementwise formula, no gathering.
- Stochastic rounding draws its noise eagerly with the caller's generator, one draw of the
  blocks' shape as the eager path does, and passes it in: the same seed gives the same codes.
- ``quant_core.warmup.warm_up`` checks all of this on probes against the eager path; a
  difference turns the compiled path off with one warning.

Compile cost. Kernels compile with ``dynamic=True`` (sizes are symbols) and take the code
range as data (``qmin``/``qmax`` 0-d tensors), so a new shape or bit width reuses the
compiled kernel. Each kernel compiles once per code dtype (int8 for bits <= 8, int16 above)
and per layout class: contiguous or transposed blocks (``PerChannel(1)`` of a matrix), and
Dynamo's specialisations of sizes 1 (``n_blocks == 1``, per tensor; ``block_len == 1``).
``quant_core.warm_up_in_background`` compiles the common ones in a daemon thread; meanwhile other
threads run eagerly (same results) instead of waiting. Inductor keeps compiled kernels in its
on-disk cache (``$TORCHINDUCTOR_CACHE_DIR``, by default ``/tmp/torchinductor_$USER``), so a
later process skips the C++ compiler.

Which backend runs: ``QLAB_COMPILE=0`` (or ``false``/``off``/``no``) forces the eager path
for the process, whatever the code asks; otherwise (unset, ``1``/``true``/``on``/``yes``)
``use_backend`` (this thread) over ``set_backend`` (the process) over the default, compiled.
Compiled kernels run only on CPU tensors of at
least ``MIN_ELEMENTS`` elements (a kernel call costs tens of microseconds before any work;
``use_backend(Backend.COMPILED, min_elements=1)`` lowers it); anything else runs eagerly.
A machine where compiling fails (no C++ compiler, an unsupported platform) logs one warning
and runs eagerly from then on; no error reaches the caller.

The mixed-precision table's sums of squares (``quant_core.mixed.sums``) have their passes
here too (``error_passes``): ``row_square_sums``, ``codebook_square_sums`` and the fused
quantize-dequantize-error passes ``fused_int_block_sums`` and ``fused_codebook_block_sums``
(float32 sums in Inductor's order, which the caller adds in float64; its reference is the
float64 formula, not a bit-for-bit twin). ``runs_compiled`` says whether a compiled pass
would run, for callers that prepare its inputs at some cost.
"""

from __future__ import annotations

from .error_passes import (
    codebook_square_sums,
    decodes_without_gather,
    fused_codebook_block_sums,
    fused_int_block_sums,
    row_square_sums,
)
from .passes import (
    absmean,
    bin_indices,
    canonical_zeros,
    count_beyond,
    decode_codebook,
    decode_int,
    decode_int_offset,
    encode_codebook,
    encode_codebook_values,
    encode_int,
    encode_int_values,
    encode_values_with,
    error_sums,
    extremes,
    int_squared_error,
    tile_extremes,
)
from .switch import (
    ENV_VAR,
    MIN_ELEMENTS,
    Backend,
    active_backend,
    backend_from_env,
    compile_failure,
    runs_compiled,
    set_backend,
    use_backend,
    wait_for_warm_up,
    warm_up_running,
)

__all__ = [
    "ENV_VAR",
    "MIN_ELEMENTS",
    "Backend",
    "absmean",
    "active_backend",
    "backend_from_env",
    "bin_indices",
    "canonical_zeros",
    "codebook_square_sums",
    "compile_failure",
    "count_beyond",
    "decode_codebook",
    "decode_int",
    "decode_int_offset",
    "decodes_without_gather",
    "encode_codebook",
    "encode_codebook_values",
    "encode_int",
    "encode_int_values",
    "encode_values_with",
    "error_sums",
    "extremes",
    "fused_codebook_block_sums",
    "fused_int_block_sums",
    "int_squared_error",
    "row_square_sums",
    "runs_compiled",
    "set_backend",
    "tile_extremes",
    "use_backend",
    "wait_for_warm_up",
    "warm_up_running",
]
