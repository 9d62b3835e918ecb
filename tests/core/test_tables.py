"""The tables the packages above the core fill in (core.tables): each is read whole (its built-in entries imported
the first time any table is read, never half filled), an entry is declared once, and importing the core alone
imports none of the declarations."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gpuharness.core import tables
from gpuharness.core.tables import Table


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The tables' loading state as before the first read, with a loader that records what it does."""
    done: list[str] = []
    monkeypatch.setattr(tables, "_state", ["unnamed"])
    monkeypatch.setattr(tables, "_loader", [])
    monkeypatch.setattr(tables, "TABLES", dict(tables.TABLES))
    return done


def test_a_table_is_filled_by_its_loader_on_the_first_read_and_only_then(fresh):
    table = Table[int]("numbers for a test")
    tables.load_builtins_with(lambda: fresh.append("loaded") or table.register("one", 1))
    assert fresh == []
    assert dict(table) == {"one": 1} and fresh == ["loaded"]
    assert table["one"] == 1 and len(table) == 1 and fresh == ["loaded"]


def test_a_table_read_while_its_entries_load_is_refused(fresh):
    table = Table[int]("numbers read too early")
    tables.load_builtins_with(lambda: table.register("two", len(table)))  # a declaration reading the table
    with pytest.raises(RuntimeError, match="read while the built-in entries load: read it when called"):
        table.get("two")


def test_a_table_read_before_its_entries_are_named_is_refused(fresh):
    with pytest.raises(RuntimeError, match="before they were named"):
        list(Table[int]("numbers nobody named"))


def test_an_entry_is_declared_once_and_each_change_moves_the_generation(fresh):
    table = Table[str]("words for a test")
    tables.load_builtins_with(lambda: None)
    before = tables.generation()
    table.register("a", "alpha")
    table.register("a", "alpha")  # the same declaration again (a module imported twice) is no change of mind
    with pytest.raises(ValueError, match="'a' is declared twice"):
        table.register("a", "another")
    assert tables.generation() > before and table["a"] == "alpha"


def test_importing_the_core_imports_no_declaration_and_reading_a_table_imports_them_all():
    script = ("import sys\n"
              "from gpuharness.core.deployment import Deployment\n"
              "assert 'gpuharness.runtimes' not in sys.modules and 'httpx' not in sys.modules, sorted(sys.modules)\n"
              "deployment = Deployment.from_json({'id': 'd', 'provider': 'p', 'status': 'ready', "
              "'runtime': 'serverless'})\n"
              "assert deployment.is_serverless\n"
              "import gpuharness\n"
              "assert all(name in sys.modules for name in gpuharness.BUILTIN)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
