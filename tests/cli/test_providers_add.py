"""`gpuharness providers add`: a real key's first step, with no hand-edited providers.json; the registry is found
up the directory tree, as git finds .git."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

KEY = "sim-" + secrets.token_hex(16)  # the simulator accepts it; made at test time


@pytest.fixture
def sim_options() -> dict[str, Any]:
    return {"ready_delay_s": 0.0, "api_keys": {"vast": KEY}}


def gpuharness(cwd: Path, *argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k != "GPUHARNESS_REGISTRY"} | env
    return subprocess.run([sys.executable, "-m", "gpuharness", *argv], cwd=cwd, env=environment,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    assert gpuharness(tmp_path, "init").returncode == 0
    (tmp_path / "src" / "deep").mkdir(parents=True)
    return tmp_path


def providers(project: Path) -> list[dict[str, Any]]:
    return json.loads((project / ".pi/gpu/providers.json").read_text())["providers"]


def test_add_from_a_subdirectory_writes_the_registry_above_and_the_key_check_passes(project, sim):
    below = project / "src" / "deep"
    added = gpuharness(below, "providers", "add", "vast", "--kind", "vast", "--key-env", "VAST_API_KEY",
                       "--api-base", sim.url("vast"))
    assert added.returncode == 0, added.stderr
    assert "providers check --provider vast" in added.stdout  # the hint leads forward
    assert providers(project) == [{"name": "vast", "kind": "vast", "credential_env": "VAST_API_KEY",
                                   "api_base": sim.url("vast")}]
    assert not (below / ".pi").exists()  # nothing made where the command ran
    checked = gpuharness(below, "providers", "check", VAST_API_KEY=KEY)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert " ok " in checked.stdout
    assert KEY not in (project / ".pi/gpu/providers.json").read_text()


def test_a_second_add_of_the_same_name_is_refused_and_nothing_changes(project):
    assert gpuharness(project, "providers", "add", "vast", "--kind", "vast", "--key-env", "A_KEY").returncode == 0
    before = (project / ".pi/gpu/providers.json").read_bytes()
    again = gpuharness(project, "providers", "add", "vast", "--kind", "vast", "--key-env", "B_KEY")
    assert again.returncode == 2
    assert again.stderr.count("\n") == 1 and "already in providers.json" in again.stderr and "--replace" in again.stderr
    assert (project / ".pi/gpu/providers.json").read_bytes() == before
    replaced = gpuharness(project, "providers", "add", "vast", "--kind", "vast", "--key-env", "B_KEY", "--replace")
    assert replaced.returncode == 0
    assert [p["credential_env"] for p in providers(project)] == ["B_KEY"]


@pytest.mark.parametrize(("argv", "named"), [
    (["--kind", "vastai"], "kind is one of"),
    (["--kind", "vast", "--key-env", "vast-api-key"], "not an environment variable name"),
    (["--kind", "vast", "--key-env", "sk-live-" + secrets.token_hex(12)], "the name, never the key"),
])
def test_bad_input_is_one_line_exit_2_and_nothing_written(project, argv, named):
    before = (project / ".pi/gpu/providers.json").read_bytes()
    done = gpuharness(project, "providers", "add", "p", *argv)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and named in done.stderr
    assert "Traceback" not in done.stderr
    assert (project / ".pi/gpu/providers.json").read_bytes() == before


def test_without_a_registry_up_the_tree_nothing_is_created(tmp_path):
    done = gpuharness(tmp_path, "providers", "add", "vast", "--kind", "vast", "--key-env", "VAST_API_KEY")
    assert done.returncode == 2 and "gpuharness init" in done.stderr
    assert not (tmp_path / ".pi").exists()


def test_a_key_pasted_where_the_variable_name_goes_never_lands(project):
    name = "SK_LIVE_" + secrets.token_hex(10).upper()  # made here, never committed
    done = gpuharness(project, "providers", "add", "p", "--kind", "vast", "--key-env", name)
    assert done.returncode == 0  # shaped like a name: accepted, and only the name is stored
    assert providers(project)[0]["credential_env"] == name


def test_init_in_a_subdirectory_still_makes_its_own_registry(project):
    below = project / "src" / "deep"
    done = gpuharness(below, "init")
    assert done.returncode == 0
    assert (below / ".pi/gpu/policy.json").is_file()



def test_a_guard_action_is_added_by_command_and_read_back_by_the_guard_plan(project):
    """Massed and owned hosts place no in-pod stop: `--guard-action shutdown` is how their guard gets one, and
    the registry's schema accepts what the command writes."""
    added = gpuharness(project, "providers", "add", "massed", "--kind", "massed", "--key-env", "MASSED_API_KEY",
                       "--guard-action", "shutdown")
    assert added.returncode == 0, added.stderr
    [entry] = providers(project)
    assert entry["guard_action"] == "shutdown"
    validated = gpuharness(project, "validate")
    assert validated.returncode == 0, validated.stdout + validated.stderr
    assert "unknown field" not in validated.stdout + validated.stderr  # the schema knows it: no warning
    wrong = gpuharness(project, "providers", "add", "m2", "--kind", "massed", "--guard-action", "reboot")
    assert wrong.returncode == 2 and "--guard-action" in wrong.stderr
