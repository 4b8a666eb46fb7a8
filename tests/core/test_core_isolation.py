"""quant_core is a plain library: importing it (or its benchmark) never loads Streamlit."""

from __future__ import annotations

import subprocess
import sys


def test_import_does_not_load_streamlit():
    code = (
        "import sys, quant_core, quant_core.bench; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('streamlit', 'plotly')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
