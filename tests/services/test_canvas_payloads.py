"""What the browser's charts are sent: the zoom window's cells (exact float32), its
palettes and colour-bar notes; the histogram's bins, levels and clipped ranges; the worked
table's text; the image maps' addresses, sizes and colour bars; the metric cards. The
drawing itself is checked in Chromium (tests/browser)."""

from __future__ import annotations

import base64
import io
import json

import numpy as np
import pandas as pd
import pytest
import torch
from PIL import Image

from dashboard.services.display.image import palette
from dashboard.services.display.metric_help import Metric, metric_help
from dashboard.services.display.table import cell_text, table_payload
from dashboard.services.explorer.cells import hover_fields, rich_customdata, rich_hover
from dashboard.services.explorer.colour import colourbar_payload
from dashboard.services.explorer.explore import explore
from dashboard.services.explorer.heatmaps import ViewOptions, overview_figures
from dashboard.services.explorer.histogram import (
    MAX_DRAWN_LEVELS,
    histogram_payload,
    histogram_view,
)
from dashboard.services.explorer.map_image import MapImage, maps_payload
from dashboard.services.explorer.metric_cards import (
    compact,
    exploration_cards,
    metrics_payload,
)
from dashboard.services.explorer.zoom import MAGENTA, zoom_payload, zoom_view
from quant_core import Format, Mode, PerChannel, PerGroup, QuantConfig, ZeroPoint


def decoded_cells(payload: dict) -> np.ndarray:
    raw = np.frombuffer(base64.b64decode(payload["cells"]), dtype="<f4")
    return raw.reshape(payload["nrows"], payload["ncols"], len(payload["fields"]))


def randn(rows: int, cols: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(rows, cols, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize(
    "cfg",
    [
        QuantConfig(4, Mode.ASYMMETRIC, PerGroup(16)),
        QuantConfig(4, Mode.ASYMMETRIC, PerGroup(16), zero_point=ZeroPoint.FLOAT_MIN),
        QuantConfig(3, Mode.SYMMETRIC, PerChannel(0)),
        QuantConfig(format=Format.NF4, granularity=PerGroup(16)),
    ],
    ids=["zero_point", "float_min", "symmetric", "nf4"],
)
def test_zoom_cells_arrive_exact_and_named(cfg: QuantConfig) -> None:
    x = randn(40, 48)
    exp = explore(x, cfg)
    view = zoom_view(exp, 8, 16, 16)
    payload = json.loads(json.dumps(zoom_payload(view)))  # what goes over the wire
    cells = decoded_cells(payload)
    want = rich_customdata(exp, slice(8, 24), slice(16, 32))
    np.testing.assert_array_equal(cells, want)  # bit for bit: hover values are exact
    np.testing.assert_array_equal(cells[..., 0], x[8:24, 16:32].numpy())
    np.testing.assert_array_equal(cells[..., 2], exp.qt.dequantize()[8:24, 16:32].numpy())
    assert (payload["row0"], payload["col0"], payload["nrows"], payload["ncols"]) == (8, 16, 16, 16)
    labels = [f["label"] for f in payload["fields"]]
    assert labels == [f.label for f in hover_fields(exp)]
    error = "error (original − dequantized)"
    assert labels[:5] == ["original", "code", "dequantized", error, "scale"]
    extra = {ZeroPoint.FLOAT_MIN: ["offset m"]}.get(cfg.zero_point, ["zero point"])
    want_extra = extra if cfg.format is Format.INT and cfg.mode is Mode.ASYMMETRIC else []
    assert labels[5:] == want_extra
    # the plotly hover of the small overview maps names the same fields
    for label in labels:
        assert label in rich_hover(exp)
    assert payload["title"] == "Zoom: rows 8–23, cols 16–31 (full resolution)"


def test_zoom_panels_share_the_value_range_and_carry_their_palettes() -> None:
    exp = explore(randn(64, 64, 1), QuantConfig(3, Mode.SYMMETRIC))
    view = zoom_view(exp, 0, 0, 32)
    payload = zoom_payload(view)
    original, codes, deq, err = payload["panels"]
    assert [p["title"] for p in payload["panels"]] == ["Original", "Codes", "Dequantized", "Error"]
    assert [p["field"] for p in payload["panels"]] == [0, 1, 2, 3]
    assert (original["lo"], original["hi"]) == (deq["lo"], deq["hi"])
    assert original["lo"] == -original["hi"] and err["lo"] == -err["hi"]
    assert (codes["lo"], codes["hi"]) == (-4.0, 3.0)
    for panel, p in zip(payload["panels"], view.panels, strict=True):
        assert panel["palette"] == palette(p.limits.colorscale).reshape(-1).tolist()
        assert len(panel["ticks"]) == (8 if panel is codes else 4)
    assert codes["ticks"] == ["-4", "-3", "-2", "-1", "0", "1", "2", "3"]  # every 3-bit code
    assert codes["note"] == ["code"]
    # the note, three short lines: convention, limit, values beyond
    lim = original["hi"]
    beyond = int(np.count_nonzero(np.abs(view.values(0)) > lim))
    assert original["note"] == [
        "red = positive, blue = negative",
        f"±{lim:.3g} (99.5th pct of |x|)",
        f"({beyond:,} values beyond, saturated)",
    ]
    assert payload["nan"] == [255, 255, 255]


def test_zoom_window_is_clipped_to_the_matrix() -> None:
    exp = explore(randn(20, 30), QuantConfig(4))
    view = zoom_view(exp, 17, 99, 16)
    assert (view.rows, view.cols) == (range(17, 20), range(29, 30))
    assert zoom_view(exp, -5, -5, 16).rows == range(0, 16)
    assert decoded_cells(zoom_payload(view)).shape == (3, 1, 5)


def test_zoom_of_a_tensor_with_nonfinite_values_paints_them_magenta() -> None:
    x = randn(16, 16)
    x[2, 3] = float("nan")
    x[5, 5] = float("inf")
    exp = explore(x, QuantConfig(4, Mode.SYMMETRIC))
    payload = zoom_payload(zoom_view(exp, 0, 0, 16))
    assert payload["nan"] == list(MAGENTA)
    cells = decoded_cells(payload)
    assert np.isnan(cells[2, 3, 1]) and np.isnan(cells[5, 5, 1])  # no code for a stand-in
    assert np.isnan(cells[2, 3, 0]) and np.isnan(cells[5, 5, 0])  # left out, shown as no value


def test_histogram_payload_bins_levels_and_clipped_ranges() -> None:
    x = torch.cat([torch.linspace(-1, 1, 999), torch.tensor([40.0])]).reshape(1, -1)
    cfg = QuantConfig(4, Mode.SYMMETRIC, range_method="percentile", percentile=99.0)
    exp = explore(x, cfg)
    view = histogram_view(exp, 0)
    payload = json.loads(json.dumps(histogram_payload(view)))
    counts = payload["counts"]
    assert sum(counts) == 1000 and all(isinstance(c, int) for c in counts)
    assert payload["lo"] == -1.0
    assert payload["lo"] + payload["width"] * len(counts) == pytest.approx(40.0)
    assert payload["levels"] == exp.qt.levels(0).numpy().astype(np.float64).tolist()
    assert payload["levels_label"] == "16 quantization levels"
    (top, _), *_ = [c for c in payload["clipped"] if c[1] == 40.0]
    # clipped from where rounding stops reaching the top level: half a step above it
    step = payload["levels"][1] - payload["levels"][0]
    assert top == pytest.approx(max(payload["levels"]) + step / 2, rel=1e-6)
    assert payload["title"] == "Whole tensor: 1,000 values, 15 of 16 codes used; shaded = clipped"


def test_histogram_leaves_out_levels_too_dense_to_draw() -> None:
    exp = explore(randn(8, 64), QuantConfig(12, Mode.SYMMETRIC))
    view = histogram_view(exp, 0)
    assert view.n_levels == 4096 > MAX_DRAWN_LEVELS and view.levels is None
    assert "too dense to draw" in view.title
    assert histogram_payload(view)["levels"] is None


def test_histogram_of_a_block_without_finite_values_says_so() -> None:
    x = randn(4, 8)
    x[1] = float("nan")
    exp = explore(x, QuantConfig(4, Mode.SYMMETRIC, PerChannel(0)))
    payload = histogram_payload(histogram_view(exp, 1))
    assert payload["counts"] is None and "no finite values" in payload["title"]


def test_cell_text() -> None:
    assert [cell_text(v) for v in (3, np.int64(-7), 0.0123456789, -0.0, np.float32(2.5))] == [
        "3",
        "-7",
        "0.0123457",
        "0",
        "2.5",
    ]
    assert [cell_text(v) for v in (float("nan"), float("inf"), -1e30, "yes", True)] == [
        "NaN",
        "inf",
        "-1e+30",
        "yes",
        "True",
    ]


def test_table_payload_keeps_columns_rows_and_alignment() -> None:
    frame = pd.DataFrame({"i": [0, 1], "r": [0.5, -1.25], "clamped?": ["", "yes"]})
    assert table_payload(frame) == {
        "columns": ["i", "r", "clamped?"],
        "rows": [["0", "0.5", ""], ["1", "-1.25", "yes"]],
        "numeric": [True, True, False],
    }


def test_image_maps_payload_names_sizes_addresses_and_colour_bars() -> None:
    x = randn(300, 300, seed=4)
    x[5, 7] = 50.0  # beyond the colour range: ringed
    figs = overview_figures(
        explore(x, QuantConfig(4, Mode.ASYMMETRIC, PerGroup(50))), ViewOptions()
    )
    maps = dict(zip(("original", "codes", "dequantized", "error"), figs.all(), strict=True))
    srcs = {name: f"media/{name}.png" for name in maps}
    payload = maps_payload(maps, srcs)
    assert [m["name"] for m in payload["maps"]] == list(maps)
    json.dumps(payload)  # JSON as it is
    for sent, (name, m) in zip(payload["maps"], maps.items(), strict=True):
        assert isinstance(m, MapImage)
        assert sent["src"] == f"media/{name}.png"
        assert (sent["width"], sent["height"]) == Image.open(io.BytesIO(m.png)).size
        assert sent["title"] == m.title and sent["subtitle"] == m.subtitle
        assert sent["bar"] == colourbar_payload(m.limits, 5)
        assert sent["bar"]["palette"] == palette(m.limits.colorscale).reshape(-1).tolist()
    original = payload["maps"][0]
    assert original["title"] == "Original" and original["marked"].startswith("rings: ")
    assert payload["maps"][1]["marked"] == ""  # codes: no rings
    # the codes shown signed, the zero point taken off: -8 to 7 at 4 bits
    codes_ticks = payload["maps"][1]["bar"]["ticks"]
    assert (codes_ticks[0], codes_ticks[-1]) == ("-8", "7")
    with pytest.raises(ValueError, match="no image address for the maps \\['error'\\]"):
        maps_payload(maps, {k: v for k, v in srcs.items() if k != "error"})


def test_metric_cards_read_the_exploration() -> None:
    # 4 x 128 values, int4 asymmetric, one group a row: per element 4 code bits plus
    # (32-bit scale + 4-bit zero point) / 128 = 4.28125 bits; 7.47x smaller than fp32.
    exp = explore(randn(4, 128, seed=5), QuantConfig(4, Mode.ASYMMETRIC, PerGroup(128)))
    errors, storage = exploration_cards(exp)
    assert [c.label for c in errors] == [
        "MSE",
        "RMSE",
        "Max abs error",
        "SQNR",
        "Cosine similarity",
        "Mean abs error",
    ]
    cards = {c.label: c for c in (*errors, *storage)}
    assert len(cards) == 12
    m = exp.metrics
    assert cards["MSE"].value == compact(m.mse)
    assert cards["MSE"].help == metric_help(Metric.MSE, repr(m.mse))
    assert cards["SQNR"].value == f"{m.sqnr_db:.1f} dB"
    assert cards["Bits per element"].value == "4.281"
    assert cards["Bits per element"].help == metric_help(
        Metric.BITS_PER_ELEMENT,
        "4-bit codes + 4 scales x 32 bits + 4 zero points x 4 bits, over 512 elements",
    )
    assert cards["Smaller than fp32"].value == "7.47×"
    assert cards["Smaller than fp32"].help == Metric.SIZE_RATIO.definition
    # min/max ranges: nothing clipped, and each row's extremes land on codes 0 and 15
    assert cards["Clipped"].value == "0"
    assert int(cards["Saturated codes"].value) >= 8
    payload = metrics_payload((errors, storage), exp.describe())
    assert [len(row) for row in payload["rows"]] == [6, 6]
    assert payload["of"] == "int4 asym g128"
    assert payload["rows"][1][0] == {
        "label": "Bits per element",
        "value": "4.281",
        "help": cards["Bits per element"].help,
    }
