"""The providers' official clients (pip `vastai`, `runpod`), each in a virtual environment of its own.

Their pins conflict with each other and with ours, so they never enter the project's dependencies: the first test
session that needs one creates `<clients dir>/venv-<name>` from the registry (under a file lock, for xdist workers
and parallel sessions) and later sessions reuse it. `.ci/run` creates them before the tests. Where a client cannot
be installed the tests skip with the reason, except under GPUHARNESS_REQUIRE_CLIENTS=1 (CI), where they fail.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
from filelock import FileLock

#: the versions the contract tests were written against (their source is what the simulator copies)
PINS = {"vastai": "vastai==1.9.*", "runpod": "runpod==1.12.*"}
MARKER = ".gpuharness-client"
INSTALL_TIMEOUT_S = 900


class ClientUnavailable(Exception):
    """The client's virtual environment could not be made (no registry, no venv module...)."""


def clients_dir() -> Path:
    """Where the client environments live: $GPUHARNESS_CLIENT_VENVS, else ~/.cache/gpuharness/clients."""
    configured = os.environ.get("GPUHARNESS_CLIENT_VENVS")
    return Path(configured) if configured else Path.home() / ".cache" / "gpuharness" / "clients"


def _run(command: Sequence[str | Path], what: str) -> None:
    try:
        done = subprocess.run([str(c) for c in command], capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ClientUnavailable(f"{what}: {exc}") from None
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise ClientUnavailable(f"{what} failed (exit {done.returncode}): {' / '.join(tail)}")


def client_python(name: str) -> Path:
    """The python of the client's environment, made (once) from the registry when it is missing or stale."""
    pin = PINS[name]
    root = clients_dir()
    venv = root / f"venv-{name}"
    python = venv / "bin" / "python"
    marker = venv / MARKER
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ClientUnavailable(f"cannot make {root}: {exc}") from None
    with FileLock(str(root / f"venv-{name}.lock"), timeout=INSTALL_TIMEOUT_S):
        if marker.is_file() and marker.read_text() == pin and python.exists():
            return python
        shutil.rmtree(venv, ignore_errors=True)
        _run([sys.executable, "-m", "venv", venv], f"python -m venv {venv}")
        _run([python, "-m", "pip", "install", "-q", "--disable-pip-version-check", pin], f"pip install {pin!r}")
        marker.write_text(pin)
    return python


def require(name: str) -> Path:
    """client_python, or skip with the reason (fail under GPUHARNESS_REQUIRE_CLIENTS=1)."""
    try:
        return client_python(name)
    except ClientUnavailable as exc:
        reason = f"the official {name} client is not installable here: {exc}"
        if os.environ.get("GPUHARNESS_REQUIRE_CLIENTS") == "1":
            pytest.fail(f"GPUHARNESS_REQUIRE_CLIENTS=1 but {reason}")
        pytest.skip(reason)


def isolated_env(home: Path, extra: Mapping[str, str]) -> dict[str, str]:
    """An environment with its own HOME and XDG dirs (the clients keep keys, roles and caches there)."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "LANG": "C.UTF-8",
           "XDG_CONFIG_HOME": str(home / "config"), "XDG_CACHE_HOME": str(home / "cache"),
           "XDG_STATE_HOME": str(home / "state"), "XDG_DATA_HOME": str(home / "data"), "COLUMNS": "200",
           "NO_COLOR": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    env.update(extra)
    return env


def run_python(python: Path, code: str, env: Mapping[str, str], timeout: float = 120) -> object:
    """Run code in the client's python; it prints one JSON document, which is returned."""
    done = subprocess.run([str(python), "-c", code], capture_output=True, text=True, env=dict(env), timeout=timeout)
    assert done.returncode == 0, f"client script failed (exit {done.returncode}):\n{done.stdout}\n{done.stderr}"
    return json.loads(done.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    # `.ci/run` makes both environments before the tests (one install each, outside the xdist workers)
    failed = 0
    for client in PINS:
        try:
            print(f"{client}: {client_python(client)}")
        except ClientUnavailable as exc:
            print(f"{client}: not installable: {exc}", file=sys.stderr)
            failed = 1
    raise SystemExit(failed)
