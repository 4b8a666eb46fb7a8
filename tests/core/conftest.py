"""Shared fixtures of the quant_core tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

from quant_core import Backend, kernels

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.fixture(params=DEVICES)
def device(request: pytest.FixtureRequest) -> torch.device:
    """Every device the tests can run on: CPU, and CUDA when present."""
    return torch.device(request.param)


@pytest.fixture
def gen() -> torch.Generator:
    """A CPU generator with a fixed seed: test data is the same on every run."""
    return torch.Generator().manual_seed(1234)


@pytest.fixture(scope="module", params=list(Backend), ids=lambda b: b.value)
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    """Run a module's tests on each backend in turn: eager, then compiled for every CPU
    tensor however small (``min_elements=1``), so the small test tensors take the compiled
    kernels too. Module-scoped, so Hypothesis tests may use it; a module opts in with
    ``pytestmark = pytest.mark.usefixtures("backend")``. Under ``QLAB_COMPILE=0`` the
    compiled runs are skipped: the compiled path is forced off."""
    chosen: Backend = request.param
    if chosen is Backend.COMPILED and kernels.backend_from_env() is Backend.EAGER:
        pytest.skip(f"{kernels.ENV_VAR}=0 forces the eager path")
    kernels.set_backend(chosen, min_elements=1)
    try:
        yield chosen
    finally:
        kernels.set_backend(None)
