"""The official clients' environments: made once and reused; where one cannot be made, its tests skip with the
reason, except in CI (GPUHARNESS_REQUIRE_CLIENTS=1), where they fail."""

from __future__ import annotations

import sys
from pathlib import Path

import official_clients
import pytest


def test_a_made_environment_is_reused_without_installing(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("GPUHARNESS_CLIENT_VENVS", str(tmp_path))
    venv = tmp_path / "venv-runpod"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(sys.executable)
    (venv / official_clients.MARKER).write_text(official_clients.PINS["runpod"])
    monkeypatch.setattr(official_clients, "_run", lambda *a: pytest.fail("installed again"))
    assert official_clients.client_python("runpod") == venv / "bin" / "python"


def test_a_stale_environment_is_made_again(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("GPUHARNESS_CLIENT_VENVS", str(tmp_path))
    venv = tmp_path / "venv-vastai"
    venv.mkdir()
    (venv / official_clients.MARKER).write_text("vastai==0.1")
    commands: list[list[str]] = []

    def run(command, what):
        commands.append([str(c) for c in command])
        venv.mkdir(exist_ok=True)  # as `python -m venv` would

    monkeypatch.setattr(official_clients, "_run", run)
    official_clients.client_python("vastai")
    assert commands[0][1:3] == ["-m", "venv"] and commands[1][-1] == "vastai==1.9.*"
    assert (venv / official_clients.MARKER).read_text() == "vastai==1.9.*"


@pytest.mark.slow
def test_an_uninstallable_client_fails_in_ci(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("GPUHARNESS_CLIENT_VENVS", str(tmp_path))
    monkeypatch.setenv("PIP_NO_INDEX", "1")  # no registry: pip cannot find the client
    monkeypatch.setenv("GPUHARNESS_REQUIRE_CLIENTS", "1")
    with pytest.raises(pytest.fail.Exception, match=r"GPUHARNESS_REQUIRE_CLIENTS=1 but .*pip install 'runpod==1.12"):
        official_clients.require("runpod")
    assert not (tmp_path / "venv-runpod" / official_clients.MARKER).exists()


def test_an_unavailable_client_skips_with_the_reason_outside_ci(tmp_path: Path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("GPUHARNESS_CLIENT_VENVS", str(blocker / "clients"))  # cannot be made
    monkeypatch.delenv("GPUHARNESS_REQUIRE_CLIENTS", raising=False)
    with pytest.raises(pytest.skip.Exception, match="the official vastai client is not installable here: cannot make"):
        official_clients.require("vastai")
