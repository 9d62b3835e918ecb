"""The tests mirror the packages, as pytest's testing/ mirrors its modules: each test module sits in the folder of
the package it specifies (tests/core/, tests/health/, ...), in tests/adversarial/ or in tests/project/ (the whole
product). tests/ itself holds conftest.py and the helpers every folder imports."""

from __future__ import annotations

import re
from collections import defaultdict

from checkout import ROOT

TESTS = ROOT / "tests"
PACKAGES = sorted(p.name for p in (ROOT / "src" / "gpuharness").iterdir() if (p / "__init__.py").is_file())
#: folders that are no package: issue 17's attack tests, and the tests of the whole product
OTHER_FOLDERS = ("adversarial", "project")


def test_no_test_module_sits_at_the_top_of_tests():
    loose = sorted(p.name for p in TESTS.glob("test_*.py"))
    assert loose == [], (f"{', '.join(loose)}: move each into tests/<package>/ (the package it specifies, one of "
                         f"{', '.join(PACKAGES)}), or tests/adversarial/ or tests/project/, with git mv")


def test_every_test_folder_is_a_package_or_a_named_other():
    folders = sorted(p.name for p in TESTS.iterdir() if p.is_dir() and not p.name.startswith((".", "__")))
    strays = [name for name in folders if name not in PACKAGES and name not in OTHER_FOLDERS]
    assert strays == [], f"tests/{strays[0]}/ names no package of src/gpuharness ({', '.join(PACKAGES)})"


def test_test_module_names_are_unique_across_folders():
    """The folders are no Python packages (pytest's prepend import mode), so two test modules of one name would
    clash at collection."""
    places: dict[str, list[str]] = defaultdict(list)
    for path in TESTS.rglob("test_*.py"):
        places[path.name].append(str(path.relative_to(ROOT)))
    clashes = {name: where for name, where in places.items() if len(where) > 1}
    assert clashes == {}, f"test modules of one name: {clashes}; rename one"


def test_no_test_finds_the_repository_by_its_own_depth():
    """Counting a test file's parents up to the repository breaks when the test moves to another folder;
    tests/checkout.py's ROOT does not. (A test's own folder, Path(__file__).parent, is its own business.)"""
    by_depth = re.compile(r"__file__\)(\.resolve\(\))?\.(parents\[|parent\.parent)")
    found = [f"{path.relative_to(ROOT)}:{number}" for path in TESTS.rglob("*.py") if path.name != "checkout.py"
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if by_depth.search(line)]
    assert found == [], f"{', '.join(found)}: use `from checkout import ROOT` instead"
