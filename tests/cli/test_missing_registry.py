"""A mistyped --registry: only `init` creates a registry. Every other command that reads one gives exit 2 and one
line for a missing one (or a directory that holds none of its files), and creates nothing there or around it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpuharness.cli import main
from gpuharness.core.registry import ENV_VAR

COMMANDS: list[list[str]] = [
    ["status"], ["status", "--refresh"], ["reap"], ["reap", "--apply"], ["offers", "--gpu", "RTX 4090"],
    ["providers", "check"], ["run", "dep_a", "--inputs", "{}"], ["install", "dep_a"], ["configure", "dep_a"],
    ["retrieve", "dep_a"], ["destroy", "dep_a", "--confirm", "dep_a"], ["validate"], ["spend"], ["ledger", "show"],
    ["ledger", "append", "--line", '{"id": "J-1"}'],
    ["provision", "--provider", "vast", "--gpu", "RTX 4090", "--image", "comfy:1", "--cost-hr", "0.4",
     "--idle-minutes", "15"],
    ["plan", "make", "--terminate", "dep_a", "-o", "plan.json"], ["plan", "apply", "plan.json", "--yes"],
    ["workflow", "list"], ["workflow", "show", "wf"],
    ["workflow", "check", "--workflow", "wf", "--catalog", "plan.json"],
    ["economics", "--deployment", "dep_a", "--gap-minutes", "5"],
    ["sim", "serve", "--port", "0", "--configure"],
]


def listing(root: Path) -> list[str]:
    return sorted(str(Path(d) / name) for d, dirs, files in os.walk(root) for name in [*dirs, *files])


@pytest.fixture
def around(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(ENV_VAR, raising=False)
    (tmp_path / "empty").mkdir()
    (tmp_path / "plan.json").write_text("{}")
    return tmp_path


@pytest.mark.parametrize("argv", COMMANDS, ids=lambda argv: " ".join(argv[:2]))
@pytest.mark.parametrize("where", ["typo", "empty", "env"])
def test_a_missing_registry_is_exit_2_and_creates_nothing(around, monkeypatch, capsys, argv, where):
    before = listing(around)
    if where == "env":
        monkeypatch.setenv(ENV_VAR, str(around / ".pi" / "gpuu"))
        args = argv
    else:
        args = [*argv, "--registry", str(around / ("reg1stry" if where == "typo" else "empty"))]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("gpuharness: error:") and err.count("\n") == 1, err
    assert ("holds none of its files" if where == "empty" else "no registry directory here") in err
    assert "run `gpuharness init` or pass --registry DIR" in err
    assert listing(around) == before


def test_init_still_creates_the_registry_it_is_given(around, capsys):
    assert main(["init", "--registry", str(around / "reg")]) == 0
    assert (around / "reg" / "policy.json").is_file()
    assert main(["status", "--registry", str(around / "reg")]) == 0
    assert "(no deployments)" in capsys.readouterr().out
