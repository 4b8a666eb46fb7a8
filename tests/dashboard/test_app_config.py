"""The served app's Streamlit settings (``.streamlit/config.toml``) as Streamlit reads them
where ``python -m dashboard`` runs (the repository's root)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from dashboard import launch

ROOT = Path(__file__).resolve().parents[2]

_READ = """
from streamlit import config
config.get_config_options(force_reparse=True)
print(config.get_option("client.toolbarMode"))
"""


def test_users_get_the_viewer_toolbar_without_deploy() -> None:
    # "auto" (Streamlit's default) shows developers' entries, the "Deploy" button among
    # them, to anyone on localhost; "viewer" hides them.
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMLIT_")}
    out = subprocess.run(
        [sys.executable, "-c", _READ], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "viewer"
    # the launcher passes no option of its own that would override it
    assert not any("toolbarMode" in arg for arg in launch.streamlit_args([]))
