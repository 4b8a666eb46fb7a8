"""The app installs what the app needs: ``requirements.txt`` is the app alone (what a user
installs), ``requirements-dev.txt`` adds the tests' tools and references on top of it."""

from __future__ import annotations

import ast
import importlib.metadata as metadata
import re
import sys
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
APP = ROOT / "requirements.txt"
DEV = ROOT / "requirements-dev.txt"
TEST_ONLY = {
    "pytest",
    "pytest-timeout",
    "hypothesis",
    "playwright",
    "ruff",
    "torchao",
    "bitsandbytes",
    "ray",
}
"""Packages only the tests, benchmarks and their references use: torchao being importable
made ``transformers`` load it, and print "Failed to load … _C_mxfp8", when the Whole model
page opened."""


OPTIONAL_IMPORTS = {"ray"}
"""Imported by the app only when asked for, inside a function: Ray is the Mixed precision
page's optional cluster backend (``QLAB_RAY_ADDRESS``), and the page says how to install it
when it is missing (``tests/services/test_mixed_runner.py`` checks it is not loaded
otherwise)."""


def requirement_lines(path: Path) -> list[str]:
    """The lines of a requirements file, comments and blank lines left out."""
    lines = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
    return [line for line in lines if line]


def pinned(path: Path) -> dict[str, Requirement]:
    """The packages ``path`` names (not its ``-r``/``-e`` lines), by canonical name."""
    reqs = [Requirement(line) for line in requirement_lines(path) if not line.startswith("-")]
    return {canonicalize_name(r.name): r for r in reqs}


def test_the_apps_requirements_name_no_test_only_package() -> None:
    app = pinned(APP)
    assert not TEST_ONLY & set(app), sorted(TEST_ONLY & set(app))
    # The dev file is the app's plus the test-only packages, each pinned.
    dev_lines = requirement_lines(DEV)
    assert dev_lines[0] == "-r requirements.txt"
    assert set(pinned(DEV)) == TEST_ONLY
    assert "-e ." in requirement_lines(APP)


def test_every_package_is_pinned_to_the_version_installed_here() -> None:
    for name, req in {**pinned(APP), **pinned(DEV)}.items():
        (spec,) = req.specifier
        assert spec.operator == "==", f"{name} is not pinned: {req}"
        installed = metadata.version(name)
        # torch's CPU build is 2.13.0+cpu: the local label is not part of the pin.
        assert installed.split("+", 1)[0] == spec.version, f"{name}: {installed} installed"


def _imported_top_modules() -> set[str]:
    """Every module the app's packages import at top level name (``torch`` for
    ``torch.nn``), in any function too, less the standard library and the app itself."""
    names: set[str] = set()
    for folder in ("dashboard", "quant_core"):
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    names |= {alias.name.split(".")[0] for alias in node.names}
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names.add(node.module.split(".")[0])
    return names - set(sys.stdlib_module_names) - {"__future__", "dashboard", "quant_core"}


def _closure(names: set[str]) -> set[str]:
    """``names`` and every distribution they require, transitively (extras left out)."""
    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = canonicalize_name(todo.pop())
        if name in seen:
            continue
        seen.add(name)
        for line in metadata.requires(name) or []:
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return seen


def test_every_module_the_app_imports_comes_with_the_apps_requirements() -> None:
    installed = _closure(set(pinned(APP)))
    providers = metadata.packages_distributions()
    missing = {}
    for module in sorted(_imported_top_modules() - OPTIONAL_IMPORTS):
        dists = {canonicalize_name(d) for d in providers.get(module, [])}
        assert dists, f"{module} is imported but no installed distribution provides it"
        if not dists & installed:
            missing[module] = sorted(dists)
    assert not missing, f"imported by the app, not installed by requirements.txt: {missing}"
    assert not installed & TEST_ONLY, sorted(installed & TEST_ONLY)


def test_the_readme_installs_the_app_alone_and_ci_the_tests() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "pip install -r requirements.txt && python -m dashboard" in readme
    assert "bash .ci/run" in readme
    ci = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"pip install .*-r requirements-dev\.txt", ci), ci
