"""The package map in the README's architecture section, enforced: each package imports only itself and the
packages below it, so there are no circles and nothing reaches upward."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from checkout import ROOT

SRC = ROOT / "src" / "gpuharness"

# Highest first. A package may import the packages listed after it (and itself), never those before it.
LAYERS = ["cli", "demo", "pytest_plugin", "plans", "operations", "audit", "runtimes", "health", "probe", "providers",
          "gpu", "diagnose", "remote", "core"]
# The simulator stands beside the product: it borrows the core's errors, the GPU class table and nvidia-smi's field
# tables, and only the demo, the plans' rehearsal and the command line (`sim serve`) may start it.
SIM_MAY_IMPORT = {"sim", "core", "gpu"}
# Floors that read less than the map would let them (a package, or one module of it): the ready gate judges the
# probe's facts and opens no connection; the GPU's facts need only the remote seam their measurement runs over;
# failure diagnosis reads text, cut into lines by the one rule for remote text, and is used by everyone above.
NARROWER: dict[str, set[str]] = {
    "health": {"health", "probe", "gpu", "diagnose", "core"},
    "gpu": {"gpu", "remote", "core"},
    "diagnose": {"diagnose", "remote.lines", "core"},
}
MAY_IMPORT_SIM = {"cli", "demo", "plans"}


def _package_of(path: Path) -> str:
    rel = path.relative_to(SRC).parts
    return rel[0] if len(rel) > 1 else "(top)"


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, first package under gpuharness) for every gpuharness import in the file, top-level or nested."""
    return [(line, name.split(".")[0]) for line, name in _modules(path)]


def _modules(path: Path) -> list[tuple[int, str]]:
    """(line, dotted name under gpuharness) for every gpuharness import in the file, top-level or nested."""
    tree = ast.parse(path.read_text("utf-8"))
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "gpuharness":
                names = [f"gpuharness.{a.name}" for a in node.names]
            else:
                names = [node.module]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] == "gpuharness" and len(parts) > 1:
                found.append((node.lineno, ".".join(parts[1:])))
    return found


def _allowed(source: str, target: str) -> bool:
    if target == source:
        return True
    if source == "sim":
        return target in SIM_MAY_IMPORT
    if target == "sim":
        return source in MAY_IMPORT_SIM
    if source == "(top)":
        return True  # gpuharness/__init__ re-exports the core's public names; __main__ calls the cli
    if source not in LAYERS or target not in LAYERS:
        return False
    return LAYERS.index(target) > LAYERS.index(source)


def test_every_package_is_on_the_map():
    packages = {p.name for p in SRC.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert packages == set(LAYERS) | {"sim"}, "add the new package to LAYERS here and to the README's map"


def test_no_module_sits_beside_the_packages():
    loose = sorted(p.name for p in SRC.glob("*.py") if p.name not in ("__init__.py", "__main__.py"))
    assert loose == [], f"put these modules into the package that owns their concept: {loose}"


@pytest.mark.parametrize("path", sorted(SRC.rglob("*.py")), ids=lambda p: str(p.relative_to(SRC)))
def test_imports_point_down_the_map(path):
    source = _package_of(path)
    wrong = [f"{path.relative_to(SRC)}:{line} imports gpuharness.{target}"
             for line, target in _imports(path) if not _allowed(source, target)]
    assert wrong == [], "imports against the package map (README, Architecture): " + "; ".join(wrong)


def _within(name: str, allowed: set[str]) -> bool:
    return any(name == floor or name.startswith(floor + ".") for floor in allowed)


@pytest.mark.parametrize("floor", sorted(NARROWER))
def test_the_narrow_floors_read_only_what_they_need(floor):
    assert (SRC / floor / "__init__.py").is_file(), f"gpuharness.{floor} is no package"
    wrong = [f"{path.relative_to(SRC)}:{line} imports gpuharness.{name}"
             for path in sorted((SRC / floor).rglob("*.py")) for line, name in _modules(path)
             if not _within(name, NARROWER[floor])]
    assert wrong == [], f"{floor} may import only {sorted(NARROWER[floor])}: " + "; ".join(wrong)


def test_the_narrow_floor_test_catches_a_module_beside_the_allowed_one(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from gpuharness.remote.ssh import SshRemote\nfrom gpuharness.remote.lines import lines_of\n")
    assert [n for _, n in _modules(bad) if not _within(n, NARROWER["diagnose"])] == ["remote.ssh"]


def test_the_map_test_catches_an_upward_import(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from gpuharness.cli import main\n")
    assert [t for _, t in _imports(bad) if not _allowed("core", t)] == ["cli"]
