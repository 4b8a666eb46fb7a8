"""llama.cpp's own C quantizers, built from its source for reference checks.

``build(source_dir, out_dir)`` compiles ``ggml/src/ggml-quants.c`` of a llama.cpp checkout
(the llama-cpp-python source distribution vendors one) into a shared library with
``gcc -O2 -fPIC -shared -ffp-contract=off -DNDEBUG`` (no ``-march=native``: plain x86-64
SSE float32 arithmetic, no contraction into FMA, as a release build of the reference C
code computes), with stubs for the four ggml symbols the file calls but does not define.
``CQuantizer.quantize`` then runs ``quantize_<type>`` (what ``ggml_quantize_chunk``, and so
``llama-quantize``, calls: the K-quants' ``quantize_row_*_ref`` without an importance
matrix) on a float32 array and returns the block bytes.

Run as a script to regenerate the committed fixture ``tests/core/data/kquants_reference.npz``
(inputs and the C code's bytes for each type), which the tests check without the source:

    python -m tests.tools.llama_cpp_reference [--source DIR]
"""

from __future__ import annotations

import argparse
import ctypes
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np

# Where `.ci/run` unpacks llama-cpp-python's source distribution (the C tests skip without it);
# QLAB_LLAMA_CPP_SOURCE names another llama.cpp checkout.
SDIST = "llama_cpp_python-0.3.36"
DEFAULT_SOURCE = Path(
    os.environ.get(
        "QLAB_LLAMA_CPP_SOURCE",
        Path(__file__).resolve().parents[2] / ".cache" / SDIST / "vendor" / "llama.cpp",
    )
)
FIXTURE = Path(__file__).resolve().parents[1] / "core" / "data" / "kquants_reference.npz"

# name -> (ggml type id, values per block, bytes per block, C function)
TYPES: dict[str, tuple[int, int, int, str]] = {
    "Q2_K": (10, 256, 84, "quantize_q2_K"),
    "Q3_K": (11, 256, 110, "quantize_q3_K"),
    "Q4_K": (12, 256, 144, "quantize_q4_K"),
    "Q5_K": (13, 256, 176, "quantize_q5_K"),
    "Q6_K": (14, 256, 210, "quantize_q6_K"),
    "IQ4_NL": (20, 32, 18, "quantize_iq4_nl"),
    "IQ4_XS": (23, 256, 136, "quantize_iq4_xs"),
    "NVFP4": (40, 64, 36, "quantize_nvfp4"),
    "Q1_0": (41, 128, 18, "quantize_q1_0"),
}
# name -> C function decoding a row of blocks (``dequantize_row_<type>``), for types the
# gguf package does not decode (Q1_0) and as a second reference (NVFP4)
DEQUANTIZERS: dict[str, str] = {
    "NVFP4": "dequantize_row_nvfp4",
    "Q1_0": "dequantize_row_q1_0",
}

_STUBS = r"""
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
void ggml_abort(const char * file, int line, const char * fmt, ...) {
    fprintf(stderr, "ggml_abort at %s:%d\n", file, line);
    abort();
}
static const struct { int id; int64_t blck; size_t size; } SIZES[] = {
@SIZES@
};
static int find(int type) {
    for (size_t i = 0; i < sizeof(SIZES) / sizeof(SIZES[0]); ++i) {
        if (SIZES[i].id == type) return (int) i;
    }
    fprintf(stderr, "stub: type %d not modelled\n", type);
    abort();
}
size_t ggml_type_size(int type) { return SIZES[find(type)].size; }
size_t ggml_row_size(int type, int64_t ne) {
    int i = find(type);
    return SIZES[i].size * ne / SIZES[i].blck;
}
const char * ggml_type_name(int type) { (void) type; return "?"; }
"""


def source_file(source: Path) -> Path:
    return source / "ggml" / "src" / "ggml-quants.c"


def available(source: Path = DEFAULT_SOURCE) -> str | None:
    """Why the C reference cannot be built here, or ``None`` when it can."""
    if shutil.which("gcc") is None:
        return "gcc is not installed"
    if not source_file(source).is_file():
        return f"llama.cpp's source is not at {source} (ggml/src/ggml-quants.c)"
    return None


def build(source: Path, out_dir: Path) -> Path:
    """Compile ``ggml-quants.c`` and the stubs into ``out_dir/libggml_quants.so``."""
    ggml = source / "ggml"
    rows = "\n".join(f"    {{{tid}, {blck}, {size}}}," for tid, blck, size, _ in TYPES.values())
    stubs = out_dir / "stubs.c"
    stubs.write_text(_STUBS.replace("@SIZES@", rows))
    lib = out_dir / "libggml_quants.so"
    cmd = [
        "gcc", "-O2", "-fPIC", "-shared", "-ffp-contract=off", "-DNDEBUG",
        f"-I{ggml / 'include'}", f"-I{ggml / 'src'}", f"-I{ggml / 'src' / 'ggml-cpu'}",
        str(source_file(source)), str(stubs), "-o", str(lib), "-lm",
    ]  # fmt: skip
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    return lib


@dataclass
class CQuantizer:
    """The built library's quantizers."""

    lib: ctypes.CDLL

    @classmethod
    def load(cls, path: Path) -> CQuantizer:
        lib = ctypes.CDLL(str(path))
        for _, _, _, fn in TYPES.values():
            f = getattr(lib, fn)
            f.restype = ctypes.c_size_t
            f.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64,
                          ctypes.c_void_p]
        for fn in DEQUANTIZERS.values():
            f = getattr(lib, fn)
            f.restype = None
            f.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
        return cls(lib)

    def dequantize(self, name: str, data: bytes) -> np.ndarray:
        """The float32 values (flat) of the blocks ``data`` of type ``name`` under
        ``dequantize_row_<type>`` (``DEQUANTIZERS``)."""
        _, blck, size, _ = TYPES[name]
        raw = np.frombuffer(data, dtype=np.uint8)
        if raw.size % size:
            raise ValueError(f"{raw.size} bytes are not whole {name} blocks of {size}")
        raw = np.ascontiguousarray(raw)
        out = np.zeros(raw.size // size * blck, dtype=np.float32)
        getattr(self.lib, DEQUANTIZERS[name])(raw.ctypes.data, out.ctypes.data, out.size)
        return out

    def quantize(self, name: str, x: np.ndarray, importance: np.ndarray | None = None) -> bytes:
        """The bytes of ``x`` (float32 ``[rows, n]``, ``n`` a multiple of the type's block)
        under ``quantize_<type>``; ``importance``: float32 ``[n]``, llama.cpp's
        ``quant_weights`` (per column), or ``None``."""
        _, blck, size, fn = TYPES[name]
        x = np.ascontiguousarray(x, dtype=np.float32)
        rows, n = x.shape
        out = np.zeros(rows * n // blck * size, dtype=np.uint8)
        qw = None
        if importance is not None:
            qw = np.ascontiguousarray(importance, dtype=np.float32)
        written = getattr(self.lib, fn)(
            x.ctypes.data, out.ctypes.data, rows, n, None if qw is None else qw.ctypes.data
        )
        if written != out.nbytes:
            raise RuntimeError(f"{fn} wrote {written} bytes, expected {out.nbytes}")
        return out.tobytes()


def fixture_inputs(seed: int = 0) -> dict[str, np.ndarray]:
    """The fixture's inputs: named float32 ``[rows, 256]`` arrays (one super-block a row,
    eight IQ4_NL blocks), 128 rows in all, of the cases the tests name."""
    rng = np.random.default_rng(seed)

    def normal(rows: int, scale: float = 1.0) -> np.ndarray:
        return (rng.standard_normal((rows, 256)) * scale).astype(np.float32)

    cases: dict[str, np.ndarray] = {}
    cases["normal"] = normal(24)
    cases["uniform"] = rng.uniform(-1, 3, (8, 256)).astype(np.float32)
    cases["laplace"] = (rng.laplace(size=(8, 256)) * 0.02).astype(np.float32)
    cases["positive"] = rng.uniform(0.5, 2.0, (8, 256)).astype(np.float32)
    cases["negative"] = -rng.uniform(0.5, 2.0, (8, 256)).astype(np.float32)
    outlier = normal(8, 0.01)
    outlier[np.arange(8), rng.integers(0, 256, 8)] = np.float32(50.0)
    cases["outlier"] = outlier
    zeros = normal(12)
    zeros[:3] = 0.0  # all-zero super-blocks
    for r in range(3, 12):  # all-zero blocks of 16 and 32 inside nonzero super-blocks
        start = int(rng.integers(0, 8)) * 32
        zeros[r, start : start + 32] = 0.0
    cases["zeros"] = zeros
    cases["fp16_subnormal"] = normal(8, 3e-4)  # d, dmin subnormal in fp16
    cases["underflow"] = normal(8, 1e-7)  # d, dmin round to 0 in fp16
    cases["tiny"] = normal(8, 1e-38)  # float32 subnormal inputs
    cases["integers"] = rng.integers(-3, 4, (8, 256)).astype(np.float32)
    cases["constant"] = np.repeat(normal(8)[:, :1], 256, axis=1)
    sparse = normal(12)
    sparse[rng.random((12, 256)) < 0.8] = 0.0
    cases["sparse"] = sparse
    return cases


def write_fixture(source: Path, path: Path = FIXTURE) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        q = CQuantizer.load(build(source, Path(tmp)))
        cases = fixture_inputs()
        arrays: dict[str, np.ndarray] = {}
        for case, x in cases.items():
            arrays[f"x/{case}"] = x
            for name in TYPES:
                arrays[f"{name}/{case}"] = np.frombuffer(q.quantize(name, x), dtype=np.uint8)
        path.parent.mkdir(parents=True, exist_ok=True)
        np.savez_compressed(path, **arrays)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    parser.add_argument("--out", type=Path, default=FIXTURE)
    args = parser.parse_args()
    why = available(args.source)
    if why:
        raise SystemExit(why)
    write_fixture(args.source, args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
