"""The browser charts' own tick rules (``dashboard/components/assets``), run in Node on the
same source the page loads: the histogram's count axis."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

ASSETS = Path(__file__).resolve().parents[2] / "dashboard" / "components" / "assets"
NODE = shutil.which("node")

pytestmark = pytest.mark.skipif(NODE is None, reason="needs Node.js to run the chart code")

_RUN = """
const fs = require("fs");
const dir = process.argv[1];
const src = fs.readFileSync(dir + "/common.js", "utf8") + "\\n"
  + fs.readFileSync(dir + "/histogram.js", "utf8").replace(/export default function[\\s\\S]*$/, "");
const api = new Function(src + "\\nreturn { countTicks, countText };")();
const out = {};
for (const top of JSON.parse(process.argv[2])) {
  const t = api.countTicks(top, 5);
  out[top] = t.ticks.map(api.countText);
}
console.log(JSON.stringify(out));
"""


def count_axis(tops: list[float]) -> dict[str, list[str]]:
    """The histogram's y tick labels for a tallest bar of ``top`` (``max count x 1.05``)."""
    done = subprocess.run(
        [str(NODE), "-e", _RUN, str(ASSETS), json.dumps(tops)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout)


def test_histogram_counts_are_whole_numbers() -> None:
    # a block of a few values: its tallest bar 2 (top 2.1) was labelled "0, 1, 1, 2, 2"
    axis = count_axis([1.05, 2.1, 3.15, 8.4, 105, 52_500, 1_050_000])
    assert axis["2.1"] == ["0", "1", "2"]
    assert axis["1.05"] == ["0", "1"]
    assert axis["3.15"] == ["0", "1", "2", "3"]
    assert axis["8.4"] == ["0", "2", "4", "6", "8"]
    assert axis["105"] == ["0", "50", "100"]
    assert axis["52500"] == ["0", "20k", "40k"]
    assert axis["1050000"] == ["0", "500k", "1M"]
    for labels in axis.values():
        assert len(set(labels)) == len(labels), labels  # no label twice
