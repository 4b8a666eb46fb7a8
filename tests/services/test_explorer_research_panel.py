"""The research formats' teaching panel (normalise, q_k, rescale with live numbers; the
worked table; why tanh is not clipping; the transfer curve) and their URL state."""

from __future__ import annotations

import math

import pytest
import torch

from dashboard.services.explorer.research import explore_research
from dashboard.services.explorer.research_teaching import research_panel, transfer_figure
from dashboard.services.state.research import (
    ResearchFormat,
    ResearchScheme,
    research_from_query,
    research_to_query,
    scheme_from_query,
    scheme_to_query,
)
from quant_core import PerGroup, QkVariant, QuantConfig
from quant_core.research import dorefa_levels, minmax_levels


def _balanced(line: str) -> bool:
    """Braces balance (escaped ones aside), as KaTeX needs."""
    depth = 0
    for k, c in enumerate(line):
        if k and line[k - 1] == "\\":
            continue
        depth += {"{": 1, "}": -1}.get(c, 0)
        if depth < 0:
            return False
    return depth == 0


ALL = [
    ResearchScheme(fmt, 3, variant, rescale)
    for fmt in ResearchFormat
    for variant in QkVariant
    for rescale in (False, True)
    if fmt is ResearchFormat.DOREFA or not rescale
]


def _matrix(rows: int = 4, cols: int = 10) -> torch.Tensor:
    return torch.randn(rows, cols, generator=torch.Generator().manual_seed(3)) * 1.2


@pytest.mark.parametrize("scheme", ALL, ids=lambda s: s.describe())
def test_formulas_render_and_carry_the_live_numbers(scheme: ResearchScheme) -> None:
    rexp = explore_research(_matrix(), scheme)
    panel = research_panel(rexp)
    assert len(panel.formulas) == 4  # normalise, q_k, rescale, stored form
    for line in panel.formulas:
        assert _balanced(line), line
        assert r"\text" not in line, line  # nothing KaTeX could show as raw source
    normalise, qk, rescale, stored = panel.formulas
    result = rexp.result
    if scheme.format is ResearchFormat.MINMAX_LEVELS:
        assert f"{result.x_max - result.x_min:.5g}" in normalise
        assert f"({result.x_min:.5g})" in normalise  # x_min < 0 here: in parentheses
    else:
        assert r"\tanh" in normalise and f"{2 * result.tanh_max:.5g}" in normalise
        assert (r"\max|w|" in rescale) == scheme.rescale
        if scheme.rescale:
            assert f"{result.scale:.5g}" in rescale
    top = (1 << scheme.bits) - 1
    assert (f"{top}" if scheme.variant is QkVariant.ORIGINAL else f"{top + 1}") in qk
    assert f"c - {1 << (scheme.bits - 1)}" in stored


@pytest.mark.parametrize("scheme", ALL, ids=lambda s: s.describe())
def test_worked_table_is_the_research_steps(scheme: ResearchScheme) -> None:
    x = _matrix()  # 40 values: all listed
    rexp = explore_research(x, scheme)
    table = research_panel(rexp).table
    assert len(table) == 40
    name = "x" if scheme.format is ResearchFormat.MINMAX_LEVELS else "w"
    r = rexp.result
    assert table["code c"].tolist() == r.codes.reshape(-1).tolist()
    assert table["u (normalised)"].tolist() == r.normalized.reshape(-1).tolist()
    assert table["q_k(u)"].tolist() == r.unit.reshape(-1).tolist()
    assert table[f"{name}̂"].tolist() == r.dequantized.reshape(-1).tolist()
    assert ("tanh w" in table.columns) == (scheme.format is ResearchFormat.DOREFA)


def test_big_tensor_lists_first_values_and_both_ends() -> None:
    x = _matrix(20, 30)
    table = research_panel(explore_research(x, ResearchScheme(ResearchFormat.DOREFA))).table
    flat = x.reshape(-1)
    assert len(table) == 8
    assert {int(flat.argmin()), int(flat.argmax())} <= set(table["index"])


def test_tanh_note_works_the_half_max_example() -> None:
    x = torch.tensor([[-2.0, -1.0, 0.0, 0.5, 1.0, 2.0]])
    panel = research_panel(explore_research(x, ResearchScheme(ResearchFormat.DOREFA, 3)))
    note = next(n for n in panel.notes if n.startswith("tanh is not clipping"))
    u_half = math.tanh(1.0) / (2 * math.tanh(2.0)) + 0.5  # w = 1 = max|w| / 2
    assert f"u = {u_half:.4f}" in note and "0.75" in note
    assert f"{(2 * u_half - 1) * 2.0:.4g}" in note  # where it comes out, rescaled
    stored = next(n for n in panel.notes if n.startswith("Stored:"))
    assert "max|w| = 2" in stored
    plain = research_panel(
        explore_research(x, ResearchScheme(ResearchFormat.DOREFA, 3, rescale=False))
    )
    assert any("[−1, 1]" in n for n in plain.notes)
    minmax = research_panel(explore_research(x, ResearchScheme(ResearchFormat.MINMAX_LEVELS, 3)))
    assert any("clips nothing" in n and "2/7" not in n for n in minmax.notes)
    assert any("x_min = -2, x_max = 2" in n for n in minmax.notes)


@pytest.mark.parametrize("variant", list(QkVariant), ids=lambda v: v.value)
def test_transfer_curves_use_this_tensors_parameters(variant: QkVariant) -> None:
    x = torch.tensor([[-0.5, 0.1, 0.3, 2.0]])
    fig = transfer_figure(explore_research(x, ResearchScheme(ResearchFormat.DOREFA, 2, variant)))
    identity, mm, dr = fig.data
    assert identity.name == "x̂ = x"
    # min-max levels over [min, max] = [-0.5, 2]; DoReFa over [-2, 2], rescaled by max|x| = 2
    assert set(mm.y.tolist()) <= set(minmax_levels(-0.5, 2.0, 2, variant).tolist())
    assert float(mm.x[0]) == -0.5 and float(mm.x[-1]) == 2.0
    assert set(dr.y.tolist()) <= set(dorefa_levels(2, variant, 2.0).tolist())
    assert float(dr.x[0]) == -2.0 and float(dr.x[-1]) == 2.0


@pytest.mark.parametrize("scheme", [*ALL, ResearchScheme(ResearchFormat.DOREFA, 8)], ids=str)
def test_url_round_trip(scheme: ResearchScheme) -> None:
    query = scheme_to_query(scheme)
    assert query == research_to_query(scheme)
    assert scheme_from_query(query) == scheme
    assert ("rescale" in query) == (scheme.format is ResearchFormat.DOREFA)


def test_url_defaults_and_integer_schemes_still_parse() -> None:
    assert research_from_query({"fmt": "dorefa"}) == ResearchScheme(
        ResearchFormat.DOREFA, 4, QkVariant.ORIGINAL, True
    )
    cfg = QuantConfig(bits=4, granularity=PerGroup(32))
    assert scheme_from_query(scheme_to_query(cfg)) == cfg


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"fmt": "dorefa", "bits": "9"}, r"bits='9' must be an integer in 2\.\.8"),
        ({"fmt": "dorefa", "bits": "1"}, r"bits='1'"),
        ({"fmt": "minmax_levels", "bits": "x"}, r"bits='x'"),
        ({"fmt": "dorefa", "qk": "floor"}, r"qk='floor' is not one of: original"),
        ({"fmt": "dorefa", "rescale": "yes"}, r"rescale='yes' must be 0 or 1"),
        ({"fmt": "minmax_levels", "rescale": "1"}, r"rescale='1' needs fmt=dorefa"),
        ({"fmt": "dorefa", "gran": "group"}, r"gran='group' does not apply to fmt=dorefa"),
        ({"fmt": "int", "qk": "centered"}, r"qk='centered' needs a research format"),
        ({"qk": "centered"}, r"got fmt=int"),
    ],
)
def test_bad_urls_name_the_key(params: dict[str, str], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        scheme_from_query(params)


def test_scheme_value_object_checks() -> None:
    with pytest.raises(ValueError, match=r"bits=9 is outside 2\.\.8"):
        ResearchScheme(ResearchFormat.DOREFA, 9)
    with pytest.raises(TypeError, match="variant must be a QkVariant"):
        ResearchScheme(ResearchFormat.DOREFA, 3, "centered")  # type: ignore[arg-type]
    assert ResearchScheme(ResearchFormat.MINMAX_LEVELS, rescale=True).rescale is False
    assert ResearchScheme(ResearchFormat.DOREFA, 3, QkVariant.CENTERED).describe() == (
        "DoReFa 3-bit centered ×max|w|"
    )
