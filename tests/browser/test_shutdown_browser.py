"""Stopping the server as a service manager (SIGTERM) or Ctrl-C (SIGINT) does, while a
page's run is inside torch: ``python -m dashboard`` exits with 0 and prints no C++ abort
(before the fix: exit code 134, "terminate called without an active exception")."""

from __future__ import annotations

import re
import signal

import pytest

from .conftest import ARTIFACTS, launched_app

pytestmark = pytest.mark.browser

# A sweep of the default grid over a 4096x4096 tensor: seconds of torch kernels (each scheme
# quantizes 16M values), with a progress bar that says how far it has come.
SWEEP = "sweep?src=synthetic&rows=4096&cols=4096"
UNDER_WAY = re.compile(r"\b[1-9]\d* of (\d+) schemes")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_during_a_sweep_exits_with_0(browser, sig: signal.Signals) -> None:
    log = ARTIFACTS / f"shutdown-{sig.name}.log"
    with launched_app(log) as (base, proc):
        context = browser.new_context(viewport={"width": 1500, "height": 1100})
        try:
            page = context.new_page()
            page.set_default_timeout(90_000)
            page.goto(f"{base}/{SWEEP}")
            page.get_by_role("button", name="Run sweep", exact=True).click()
            # The sweep has finished at least one scheme and has more to go: its thread is
            # computing when the signal arrives.
            page.get_by_text(UNDER_WAY).first.wait_for()
            proc.send_signal(sig)
            status = proc.wait(timeout=60)
        finally:
            context.close()
    text = log.read_text()
    assert "terminate called" not in text, text[-2000:]
    assert status == 0, text[-2000:]
