"""What an allocation is taken away as: llama.cpp ``--tensor-type`` lines, a JSON recipe, and
the table as CSV. Plain text out; nothing is written to disk here.

``tensor_type_lines``: ``llama-quantize`` takes ``--tensor-type PATTERN=TYPE`` (and a
``--tensor-type-file`` with one such line each), ``PATTERN`` a regular expression searched
in GGUF tensor names. Hugging Face names of Llama-family checkpoints (Llama, Mistral,
Qwen2: ``model.layers.N.self_attn.q_proj.weight``...) and of BERT (MiniLM:
``encoder.layer.N.attention.self.query.weight``...) are renamed as llama.cpp's converter
names them (``blk.N.attn_q.weight``); layers that share a role and a type are joined into
one pattern, ``^blk\\.(0|3|7)\\.attn_q\\.weight$=q4_k``. The type is the one the table
measured (``SensitivityRow.gguf_type``: llama-quantize's fallback where the scheme's blocks
do not divide the rows). A tensor kept as stored (no candidate could take it) gets a line
keeping its stored type, where that is one llama-quantize writes (``F32``, ``F16``,
``BF16``): with no line llama-quantize would give it the file type's default, and the
size and the error the allocation counted would not be the file's. A tensor whose scheme
has no GGUF type, kept as stored in another type (``float64``) or in one not given, or
whose name has no GGUF spelling here is listed in ``skipped``, saying which.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

from ..config import PerChannel, PerGroup, QuantConfig
from .allocation import STORED, Allocation, Budget
from .candidates import Candidate, gguf_type
from .sensitivity import ROW_FIELDS, SensitivityRow

__all__ = [
    "RECIPE_VERSION",
    "NoLine",
    "NoLineWhy",
    "TensorTypeExport",
    "config_record",
    "gguf_name",
    "kept_type_reason",
    "recipe_json",
    "table_csv",
    "tensor_type_lines",
]

RECIPE_VERSION = 1

_LAYER = re.compile(r"^model\.layers\.(\d+)\.(.+)\.weight$")
_ROLES = {
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
}
_GLOBAL = {"model.embed_tokens.weight": "token_embd.weight", "lm_head.weight": "output.weight"}

# A stored float type (``TensorInfo.dtype``, torch's spelling: a safetensors header's, and a
# float GGUF's as ``gguf_checkpoint`` spells it) -> the ggml type name llama-quantize writes
# it as. llama-quantize's ``parse_ggml_type`` takes any ``ggml_type_name`` (case-insensitive),
# but ``ggml_quantize_chunk`` writes only F32, F16 and BF16 of the unquantized types; F64
# would abort there, so a float64 tensor gets no line.
_STORED_TYPES = {"float32": "f32", "float16": "f16", "bfloat16": "bf16"}


# BERT (MiniLM, the bundled model), as llama.cpp's converter names it (``BertModel``; the
# ``gguf`` package's ``TensorNameMap`` for ``MODEL_ARCH.BERT`` gives the same names, which
# the tests check). The pooler is dropped by the converter; the position and token-type
# embeddings are converted but llama-quantize never quantizes them (``llama-quant.cpp``:
# "do not quantize positional embeddings and token types (BERT)").
_BERT_LAYER = re.compile(r"^(?:bert\.)?encoder\.layer\.(\d+)\.(.+)\.weight$")
_BERT_ROLES = {
    "attention.self.query": "attn_q",
    "attention.self.key": "attn_k",
    "attention.self.value": "attn_v",
    "attention.output.dense": "attn_output",
    "intermediate.dense": "ffn_up",
    "output.dense": "ffn_down",
}
_BERT_GLOBAL = {"embeddings.word_embeddings.weight": "token_embd.weight"}
_NOT_QUANTIZED = frozenset(
    {"embeddings.position_embeddings.weight", "embeddings.token_type_embeddings.weight"}
)


# A name llama.cpp's converter already gave: a layer's ``blk.N.ROLE.weight`` or a global
# tensor (the roles are GGUF's, lower-case words: ``attn_q``, ``ffn_down``, ``token_embd``).
_GGUF_NAME = re.compile(r"^(?:blk\.\d+\.[a-z0-9_]+|token_embd|output)\.weight$")


def _unprefixed(name: str) -> str:
    return name.removeprefix("bert.")


def gguf_name(name: str) -> str | None:
    """llama.cpp's name of a Llama-family or BERT tensor
    (``model.layers.3.mlp.down_proj.weight`` → ``blk.3.ffn_down.weight``,
    ``encoder.layer.0.intermediate.dense.weight`` → ``blk.0.ffn_up.weight``; a name that is
    llama.cpp's already, a float GGUF's, as it is), or ``None`` when it has none here."""
    if name in _GLOBAL:
        return _GLOBAL[name]
    if _GGUF_NAME.match(name):  # a GGUF's own tensor (a float .gguf measured as it is)
        return name
    m = _LAYER.match(name)
    if m and m[2] in _ROLES:
        return f"blk.{m[1]}.{_ROLES[m[2]]}.weight"
    if _unprefixed(name) in _BERT_GLOBAL:
        return _BERT_GLOBAL[_unprefixed(name)]
    m = _BERT_LAYER.match(name)
    if m and m[2] in _BERT_ROLES:
        return f"blk.{m[1]}.{_BERT_ROLES[m[2]]}.weight"
    return None


class NoLineWhy(Enum):
    """Why a tensor gets no ``--tensor-type`` line."""

    NO_NAME = "no llama.cpp name for it here"
    NO_GGUF_TYPE = "its scheme has no GGUF type"
    NEVER_QUANTIZED = "llama-quantize never quantizes it"
    KEPT_TYPE = "kept as stored in a type llama-quantize does not write"


@dataclass(frozen=True)
class NoLine:
    """A tensor no line covers: ``why`` the kind, ``text`` the sentence for this tensor
    ("int4_g128 has no GGUF type", "kept as stored in float64, which llama-quantize does
    not write")."""

    tensor: str
    why: NoLineWhy
    text: str


@dataclass(frozen=True)
class TensorTypeExport:
    """``lines``: ``PATTERN=type`` (lower-case GGUF type names), one per role and type;
    ``skipped``: the tensors no line covers, each with why."""

    lines: tuple[str, ...]
    skipped: tuple[NoLine, ...]

    def command_args(self) -> str:
        """The lines as ``llama-quantize`` arguments: ``--tensor-type 'P=t' ...``."""
        return " ".join(f"--tensor-type '{line}'" for line in self.lines)

    def file_text(self) -> str:
        """The ``--tensor-type-file`` content."""
        return "".join(f"{line}\n" for line in self.lines)


def kept_type_reason(dtype: str | None) -> str:
    """Why a tensor kept as stored in ``dtype`` (torch's spelling; ``None``: not given) gets
    no ``--tensor-type`` line: "kept as stored in float64, which llama-quantize does not
    write"."""
    if dtype is None:
        return "kept as stored, its stored type not given"
    return f"kept as stored in {dtype}, which llama-quantize does not write"


def tensor_type_lines(
    allocation: Allocation,
    rows: Sequence[SensitivityRow],
    stored_types: Mapping[str, str] | None = None,
) -> TensorTypeExport:
    """The allocation as ``--tensor-type`` lines (module docstring); ``rows``: the table;
    ``stored_types``: tensor name -> its stored dtype in torch's spelling (``"bfloat16"``),
    for the tensors kept as stored."""
    cells = {(r.tensor, r.scheme): r for r in rows}
    stored_types = stored_types or {}
    groups: dict[tuple[str, str], list[str]] = {}
    skipped: list[NoLine] = []
    for tensor, scheme in allocation.recipe().items():
        if scheme == STORED:
            dtype = stored_types.get(tensor)
            gtype = _STORED_TYPES.get(dtype) if dtype is not None else None
            if gtype is None:
                skipped.append(NoLine(tensor, NoLineWhy.KEPT_TYPE, kept_type_reason(dtype)))
                continue
        else:
            cell = cells.get((tensor, scheme))
            gtype = cell.gguf_type if cell is not None else None
            if gtype is None:
                skipped.append(
                    NoLine(tensor, NoLineWhy.NO_GGUF_TYPE, f"{scheme} has no GGUF type")
                )
                continue
        if _unprefixed(tensor) in _NOT_QUANTIZED:
            never = NoLineWhy.NEVER_QUANTIZED
            skipped.append(NoLine(tensor, never, never.value))
            continue
        name = gguf_name(tensor)
        if name is None:
            skipped.append(NoLine(tensor, NoLineWhy.NO_NAME, NoLineWhy.NO_NAME.value))
            continue
        m = re.match(r"^blk\.(\d+)\.(.+)$", name)
        role, layer = (m[2], m[1]) if m else (name, "")
        groups.setdefault((role, gtype.lower()), []).append(layer)
    lines = []
    for (role, gtype), layers in groups.items():
        suffix = re.escape(role)
        if layers == [""]:
            pattern = f"^{suffix}$"
        else:
            joined = "|".join(sorted(set(layers), key=int))
            pattern = f"^blk\\.({joined})\\.{suffix}$"
        lines.append(f"{pattern}={gtype}")
    return TensorTypeExport(tuple(lines), tuple(skipped))


def config_record(cfg: QuantConfig) -> dict[str, object]:
    """A config's fields as plain JSON values (enums by value, the granularity by kind)."""
    gran = cfg.granularity
    if isinstance(gran, PerGroup):
        g: dict[str, object] = {"kind": "group", "group_size": gran.group_size}
    elif isinstance(gran, PerChannel):
        g = {"kind": "channel", "axis": gran.axis}
    else:
        g = {"kind": "tensor"}
    return {
        "name": cfg.name,
        "describe": cfg.describe(),
        "format": cfg.format.value,
        "bits": cfg.bits,
        "mode": cfg.mode.value,
        "granularity": g,
        "range_method": cfg.range_method.value,
        "scale_dtype": cfg.scale_dtype.value,
        "zero_point": cfg.zero_point.value,
        "gguf_type": gguf_type(cfg),
    }


def recipe_json(
    allocation: Allocation,
    candidates: Sequence[Candidate],
    budget: Budget | None = None,
    source: str | None = None,
    rows: Sequence[SensitivityRow] = (),
) -> str:
    """The JSON recipe: ``{"version", "source", "budget", "bits_per_weight", "bytes",
    "schemes": {name: config_record}, "tensors": {tensor: scheme}, "stored_as": {tensor:
    config name}}`` (``"stored"`` for a tensor kept as stored; ``stored_as`` lists the
    tensors ``rows`` say are stored in llama-quantize's fallback type), with only the
    schemes used listed."""
    used = set(allocation.choice)
    recipe = allocation.recipe()
    fallbacks = {
        r.tensor: r.stored_as for r in rows if r.stored_as and recipe.get(r.tensor) == r.scheme
    }
    doc = {
        "version": RECIPE_VERSION,
        "source": source,
        "budget": budget.describe() if budget is not None else None,
        "bits_per_weight": round(allocation.bits_per_weight, 6),
        "bytes": allocation.total_bytes,
        "schemes": {c.name: config_record(c.config) for c in candidates if c.name in used},
        "tensors": recipe,
        "stored_as": fallbacks,
    }
    return json.dumps(doc, indent=2, ensure_ascii=False)


_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _cell_text(value: object) -> object:
    """A CSV cell: ``None`` empty, non-finite floats as ``inf``/``nan``, and text that a
    spreadsheet would run as a formula (a tensor named ``=HYPERLINK(...)`` in a folder
    someone else made) behind a ``'``, as OWASP advises; numbers are left as numbers."""
    if value is None:
        return ""
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value


def table_csv(rows: Sequence[SensitivityRow], chosen: Mapping[str, str] | None = None) -> str:
    """The table as CSV: ``ROW_FIELDS`` and ``chosen`` (whether the allocation ``chosen``,
    tensor → scheme, picked the cell), one line per (tensor, scheme); non-finite numbers
    as ``inf``/``nan``, text that would start a spreadsheet formula behind a ``'``."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([*ROW_FIELDS, "chosen"])
    for row in rows:
        rec = row.record()
        values = [_cell_text(rec[k]) for k in ROW_FIELDS]
        pick = chosen is not None and chosen.get(row.tensor) == row.scheme
        writer.writerow([*values, pick])
    return out.getvalue()
