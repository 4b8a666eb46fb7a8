"""Weights packing, drawn: codes as bits, the bytes ``quant_core.pack`` makes of them, and
the codes ``quant_core.unpack`` reads back.

``pack`` is LSB first (see ``quant_core.packing``): code ``i`` of ``b`` bits occupies bits
``i*b .. i*b + b - 1`` of the bit stream, bit ``p`` of the stream is bit ``p % 8`` of byte
``p // 8``. So the course's four 2-bit codes ``[1, 0, 3, 2]`` make one byte whose bits,
written from the most significant, are ``10 11 00 01``: code 3 first, code 0 last,
``0b10110001 = 177``. The picture's bit ownership is derived here from that rule alone;
the byte values are ``pack``'s, and the tests check that the two agree.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import plotly.graph_objects as go
import torch

from quant_core import pack, packed_size, unpack

__all__ = [
    "COURSE_CODES",
    "MAX_DRAWN_CODES",
    "MAX_PACKING_CODES",
    "PACKING_BITS",
    "PackingPicture",
    "packing_figure",
    "packing_picture",
    "parse_codes",
]

PACKING_BITS = (2, 3, 4, 8)
COURSE_CODES = (1, 0, 3, 2)
"""The course's ``unpacked_tensor``: four 2-bit codes, packed into the byte 177."""
MAX_PACKING_CODES = 4096
MAX_DRAWN_CODES = 24
_PALETTE = (
    "#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2", "#ff9da6", "#9d755d",
)
_PADDING = "#d0d0d0"


@dataclass(frozen=True)
class PackingPicture:
    """``codes`` (unsigned, each ``< 2^bits``) packed at ``bits`` bits.

    ``code_bits``: each code's bits, most significant first (``"01"`` for 1 at 2 bits);
    ``packed``: the bytes ``quant_core.pack`` makes; ``byte_bits``: each byte's bits, most
    significant first (``"10110001"``); ``owners``: for each byte, for each of its bits in
    the same order, the index of the code that bit belongs to (``None``: padding after the
    last code); ``owner_bits``: which bit of that code it is (0: the least significant);
    ``unpacked``: ``quant_core.unpack``'s codes read back from ``packed``.
    """

    bits: int
    codes: tuple[int, ...]
    code_bits: tuple[str, ...]
    packed: tuple[int, ...]
    byte_bits: tuple[str, ...]
    owners: tuple[tuple[int | None, ...], ...]
    owner_bits: tuple[tuple[int | None, ...], ...]
    unpacked: tuple[int, ...]

    @property
    def n_codes(self) -> int:
        return len(self.codes)

    @property
    def packed_bytes(self) -> int:
        """Bytes of the packed tensor: ``ceil(n * bits / 8)``."""
        return len(self.packed)

    @property
    def one_per_byte_bytes(self) -> int:
        """Bytes when each code takes a whole int8/uint8 (as a ``torch.uint8`` tensor)."""
        return self.n_codes * max(1, math.ceil(self.bits / 8))

    @property
    def fp32_bytes(self) -> int:
        return 4 * self.n_codes

    @property
    def padding_bits(self) -> int:
        return 8 * self.packed_bytes - self.bits * self.n_codes

    def describe_byte(self, j: int) -> str:
        """``"byte 0 = 0b10110001 = 177 (codes 3, 2, 1, 0)"``: the codes from the byte's top
        bits to its bottom ones."""
        owners = [o for o in dict.fromkeys(self.owners[j]) if o is not None]
        codes = ", ".join(str(o) for o in owners)
        return f"byte {j} = 0b{self.byte_bits[j]} = {self.packed[j]} (codes {codes})"


_CODE_SPLIT = re.compile(r"[\s,;\[\]()]+")


def parse_codes(text: str, bits: int) -> tuple[int, ...]:
    """Codes typed as ``"1, 0, 3, 2"`` (also ``[1, 0, 3, 2]`` or space separated): unsigned
    integers below ``2^bits``. Raises ``ValueError`` naming the first bad one, for none, or
    for more than ``MAX_PACKING_CODES``."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    _check_bits(bits)
    tokens = [t for t in _CODE_SPLIT.split(text.strip()) if t]
    if not tokens:
        raise ValueError("no codes: type some integers, such as 1, 0, 3, 2")
    if len(tokens) > MAX_PACKING_CODES:
        raise ValueError(f"{len(tokens):,} codes; the picture takes up to {MAX_PACKING_CODES:,}")
    top = (1 << bits) - 1
    codes = []
    for i, tok in enumerate(tokens):
        if not (tok.isascii() and tok.isdigit() and len(tok) <= 6):
            shown = tok if len(tok) <= 12 else tok[:11] + "…"
            raise ValueError(f"code {i + 1}, {shown!r}, is not a non-negative integer")
        value = int(tok)
        if value > top:
            raise ValueError(
                f"code {i + 1}, {value}, does not fit in {bits} bits (0 to {top})"
            )
        codes.append(value)
    return tuple(codes)


def _check_bits(bits: object) -> int:
    if bits not in PACKING_BITS or isinstance(bits, bool):
        raise ValueError(f"bits={bits!r}: the packing picture takes {PACKING_BITS}")
    return bits  # type: ignore[return-value]


def packing_picture(codes: tuple[int, ...], bits: int) -> PackingPicture:
    """The picture of ``codes`` packed at ``bits`` (2, 3, 4 or 8): bytes from
    ``quant_core.pack``, bit ownership from the LSB-first rule, codes back from
    ``quant_core.unpack``. ``ValueError`` for a code outside ``0 .. 2^bits - 1``."""
    _check_bits(bits)
    if not codes or any(not 0 <= c < (1 << bits) for c in codes):
        raise ValueError(f"codes must be 0..{(1 << bits) - 1}, at least one, got {codes!r}")
    tensor = torch.tensor(codes, dtype=torch.int64)
    packed = pack(tensor, bits)
    n = len(codes)
    unpacked = unpack(packed, bits, n, signed=False)
    owners, owner_bits = [], []
    for j in range(packed_size(n, bits)):
        row_owner, row_bit = [], []
        for k in range(7, -1, -1):  # most significant first, as the bits are written
            p = 8 * j + k
            code = p // bits
            row_owner.append(code if code < n else None)
            row_bit.append(p % bits if code < n else None)
        owners.append(tuple(row_owner))
        owner_bits.append(tuple(row_bit))
    return PackingPicture(
        bits=bits,
        codes=tuple(codes),
        code_bits=tuple(format(c, f"0{bits}b") for c in codes),
        packed=tuple(int(b) for b in packed),
        byte_bits=tuple(format(int(b), "08b") for b in packed),
        owners=tuple(owners),
        owner_bits=tuple(owner_bits),
        unpacked=tuple(int(c) for c in unpacked),
    )


def _colour(code: int | None) -> str:
    return _PADDING if code is None else _PALETTE[code % len(_PALETTE)]


def packing_figure(pic: PackingPicture) -> go.Figure:
    """Codes (one row each, bits most significant first) above the packed bytes (one row
    each, 8 bits most significant first), each bit coloured by the code it belongs to
    (grey: padding), and the codes unpacked again. The first ``MAX_DRAWN_CODES`` codes and
    the bytes they reach are drawn; the page says when there are more."""
    n_codes = min(pic.n_codes, MAX_DRAWN_CODES)
    n_bytes = min(pic.packed_bytes, math.ceil(n_codes * pic.bits / 8))
    shapes: list[dict] = []
    notes: list[dict] = []

    def text(x: float, y: float, value: str, anchor: str, colour: str | None = None) -> None:
        font = {"size": 13} if colour is None else {"size": 13, "color": colour}
        notes.append(
            {"x": x, "y": y, "text": value, "showarrow": False, "xanchor": anchor, "font": font}
        )

    def cell(x: float, y: float, bit: str, code: int | None) -> None:
        shapes.append(
            {
                "type": "rect",
                "x0": x,
                "x1": x + 0.92,
                "y0": y,
                "y1": y + 0.8,
                "fillcolor": _colour(code),
                "line": {"width": 0},
            }
        )
        text(x + 0.46, y + 0.4, bit, "center", "#fff")

    y = 0.0
    text(-0.3, y + 0.4, "<b>your codes</b>, bits high to low", "right")
    for i in range(n_codes):
        y -= 1
        for k, bit in enumerate(pic.code_bits[i]):
            cell(float(k), y, bit, i)
        text(-0.3, y + 0.4, f"code {i} = {pic.codes[i]}", "right")
    y -= 1.4
    text(-0.3, y + 0.4, "<b>packed bytes</b>, bit 7 … bit 0", "right")
    for j in range(n_bytes):
        y -= 1
        for k in range(8):
            cell(float(k), y, pic.byte_bits[j][k], pic.owners[j][k])
        text(-0.3, y + 0.4, f"byte {j}", "right")
        text(8.2, y + 0.4, f"= {pic.packed[j]}", "left")
    y -= 1.4
    shown = ", ".join(str(c) for c in pic.unpacked[:n_codes])
    more = ", …" if pic.n_codes > n_codes else ""
    text(-0.3, y + 0.4, "<b>unpacked</b>", "right")
    text(0.0, y + 0.4, f"[{shown}{more}]", "left")
    return go.Figure(
        layout={
            "shapes": shapes,
            "annotations": notes,
            "xaxis": {"visible": False, "range": [-6.0, 10.5], "fixedrange": True},
            "yaxis": {"visible": False, "range": [y - 0.4, 1.4], "fixedrange": True},
            "height": int(30 * (n_codes + n_bytes + 6)),
            "margin": {"l": 10, "r": 10, "t": 10, "b": 10},
            "plot_bgcolor": "rgba(0,0,0,0)",
            "paper_bgcolor": "rgba(0,0,0,0)",
        }
    )
