"""The package map in docs/package-map.md, enforced: each package imports only itself and the
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
# ...and what the harness knows of a ComfyUI server without asking one, so its stand-in judges a graph as the
# harness does: these modules exactly, not the rest of runtimes/ (they in turn import only the core and each other).
PURE_RUNTIME_KNOWLEDGE = {"runtimes.comfyui.catalog", "runtimes.comfyui.validation", "runtimes.comfyui.problems"}


def _package_of(path: Path) -> str:
    rel = path.relative_to(SRC).parts
    return rel[0] if len(rel) > 1 else "(top)"


def _imported_modules(path: Path) -> list[tuple[int, str]]:
    """(line, module under gpuharness, as written: "core.errors", "runtimes") for every gpuharness import in the
    file, top-level or nested."""
    tree = ast.parse(path.read_text("utf-8"))
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "gpuharness":
                names = [f"gpuharness.{a.name}" for a in node.names]
            else:
                names = [f"{node.module}.{a.name}" if _is_module(f"{node.module}.{a.name}") else node.module
                         for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        found += [(node.lineno, name.split(".", 1)[1]) for name in names
                  if name.startswith("gpuharness.") and name != "gpuharness"]
    return found


#: (line, dotted name under gpuharness) for every gpuharness import in the file, top-level or nested
_modules = _imported_modules


def _is_module(name: str) -> bool:
    parts = name.split(".")[1:]
    return SRC.joinpath(*parts).with_suffix(".py").is_file() or SRC.joinpath(*parts, "__init__.py").is_file()


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, the module if it is pure runtime knowledge, else the first package under gpuharness) for every
    gpuharness import in the file."""
    return [(line, module if module in PURE_RUNTIME_KNOWLEDGE else module.split(".")[0])
            for line, module in _imported_modules(path)]


def _allowed(source: str, target: str) -> bool:
    if source == "sim" and target in PURE_RUNTIME_KNOWLEDGE:
        return True
    target = target.split(".")[0]
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
    assert packages == set(LAYERS) | {"sim"}, "add the new package to LAYERS here and to docs/package-map.md"


def test_no_module_sits_beside_the_packages():
    loose = sorted(p.name for p in SRC.glob("*.py") if p.name not in ("__init__.py", "__main__.py"))
    assert loose == [], f"put these modules into the package that owns their concept: {loose}"


@pytest.mark.parametrize("path", sorted(SRC.rglob("*.py")), ids=lambda p: str(p.relative_to(SRC)))
def test_imports_point_down_the_map(path):
    source = _package_of(path)
    wrong = [f"{path.relative_to(SRC)}:{line} imports gpuharness.{target}"
             for line, target in _imports(path) if not _allowed(source, target)]
    assert wrong == [], "imports against the package map (docs/package-map.md): " + "; ".join(wrong)


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


def test_the_simulator_borrows_only_the_pure_runtime_knowledge(tmp_path):
    borrowing = tmp_path / "borrowing.py"
    borrowing.write_text("from gpuharness.runtimes.comfyui.catalog import NodeCatalog\n"
                         "from gpuharness.runtimes.comfyui import validation\n"
                         "from gpuharness.runtimes.comfyui.client import ComfyUI\n"
                         "from gpuharness.runtimes import comfyui\n"
                         "import gpuharness.runtimes.endpoint\n")
    assert [t for _, t in _imports(borrowing) if not _allowed("sim", t)] == ["runtimes", "runtimes", "runtimes"]


@pytest.mark.parametrize("module", sorted(PURE_RUNTIME_KNOWLEDGE))
def test_pure_runtime_knowledge_imports_only_the_core_and_itself(module):
    path = SRC.joinpath(*module.split(".")).with_suffix(".py")
    imported = {name for _, name in _imported_modules(path)}
    assert {name for name in imported if name.split(".")[0] != "core"} <= PURE_RUNTIME_KNOWLEDGE, imported


def _module_of(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(("gpuharness", *(parts[:-1] if parts[-1] == "__init__" else parts)))


def _target(name: str) -> str:
    """The module an import of `name` (gpuharness.a.b, or gpuharness.a.b.attribute) loads."""
    parts = name.split(".")[1:]
    while parts and not ((SRC.joinpath(*parts).with_suffix(".py")).is_file() or (SRC.joinpath(*parts)).is_dir()):
        parts.pop()
    return ".".join(("gpuharness", *parts))


def _module_level_imports(path: Path) -> set[str]:
    """The gpuharness modules a file imports at its top level, `if TYPE_CHECKING:` blocks included (imports inside
    functions are deferred on purpose and make no circle at import time)."""
    found: set[str] = set()

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("gpuharness"):
                found.update(_target(f"{node.module}.{alias.name}") for alias in node.names)
            elif isinstance(node, ast.Import):
                found.update(_target(a.name) for a in node.names if a.name.startswith("gpuharness."))
            elif isinstance(node, (ast.If, ast.Try)):
                visit(node.body)
                visit(node.orelse)
                if isinstance(node, ast.Try):
                    for handler in node.handlers:
                        visit(handler.body)

    visit(ast.parse(path.read_text("utf-8")).body)
    return found


def import_graph() -> dict[str, set[str]]:
    """Module -> the gpuharness modules it imports at module level."""
    return {_module_of(path): _module_level_imports(path) - {_module_of(path)} for path in SRC.rglob("*.py")}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every set of modules that import one another, directly or through others (Tarjan's components)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_modules_import_each_other_in_a_circle():
    graph = import_graph()
    del graph["gpuharness"]  # the top package re-exports the core's names: every module's parent, no one's import
    assert circles(graph) == [], "modules that import each other (type-only imports count): break the circle"


def test_the_circle_finder_finds_a_circle_through_a_third_module():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(graph) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []
