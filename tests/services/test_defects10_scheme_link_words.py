"""Defect: a link whose scheme keys ``QuantConfig`` rejects showed the core's message,
written for Python callers: ``gran=block&tile=4x4&sfmt=super`` read "... granularity
PerBlock(rows=4, cols=4) has no groups", and ``recipe=llama_cpp`` on a scheme with no GGUF
type "... needs the layout of one (QuantConfig.from_name('Q4_K'), 'Q8_0', ...)": reprs and
field names, not the link's keys. Now each names the link's keys in plain words."""

from __future__ import annotations

import re

import pytest

from dashboard.services.state.scheme import config_from_query

# a Python repr or call shown to a visitor: PerBlock(rows=4, cols=4), QuantConfig.from_name(
_CODE = re.compile(r"\b[A-Z]\w*\(|\b[A-Z][A-Za-z]+\.[A-Za-z_]+|<\w|\bNone\b|range_method")


@pytest.mark.parametrize(
    ("params", "named"),
    [
        ({"gran": "block", "tile": "4x4", "sfmt": "super"}, ["sfmt=super", "gran=block"]),
        ({"gran": "channel", "sfmt": "super"}, ["sfmt=super", "gran=channel"]),
        ({"recipe": "llama_cpp"}, ["recipe=llama_cpp", "preset="]),
        ({"recipe": "llama_cpp", "fmt": "nf4"}, ["recipe=llama_cpp"]),
        ({"recipe": "llama_cpp", "gran": "group", "group": "32", "range": "mse"},
         ["recipe=llama_cpp", "range=minmax"]),
    ],
    ids=["super-block-tile", "super-channel", "llama-int8", "llama-nf4", "llama-mse"],
)
def test_a_rejected_combination_reads_as_the_links_keys(
    params: dict[str, str], named: list[str]
) -> None:
    with pytest.raises(ValueError) as info:
        config_from_query(params)
    text = str(info.value)
    assert not _CODE.search(text), text
    for key in named:
        assert key in text, text
