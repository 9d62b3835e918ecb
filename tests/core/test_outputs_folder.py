"""Where a deployment's jobs keep their outputs is derived once, from its runtime's entry (Runtime.outputs), as
Deployment.outputs_dir: install makes that folder, the executors write there, reap watches it and the simulated
host serves from it. A runtime that names its own folder moves all of them at once."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuharness.core.deployment import Deployment
from gpuharness.core.runtimes import DEFAULT_OUTPUTS, RUNTIMES, Runtime, output_folders
from gpuharness.operations.comfyui_job import ComfyJobExecutor
from gpuharness.operations.install import install_script
from gpuharness.remote.http import PhaseHttp
from gpuharness.sim.host import HostSpec, SimHost

TOY = "toy_outputs"


def _deployment(runtime: str | None, workspace: str = "gh-workspace") -> Deployment:
    return Deployment.from_json({"id": "dep_o", "provider": "sim", "status": "ready", "runtime": runtime,
                                 "endpoint": "http://127.0.0.1:9", "ssh": {"host": "h", "workspace": workspace}})


def test_every_runtimes_deployment_keeps_outputs_in_its_runtimes_folder():
    for name, entry in RUNTIMES.items():
        assert _deployment(name).outputs_dir == f"gh-workspace/{entry.outputs}", name
    assert RUNTIMES["comfyui"].outputs == "output"  # ComfyUI's own folder name
    assert _deployment(None).outputs_dir == f"gh-workspace/{DEFAULT_OUTPUTS}"
    assert _deployment("a runtime of a later version").outputs_dir == f"gh-workspace/{DEFAULT_OUTPUTS}"


@settings(max_examples=60, deadline=None)
@given(folder=st.from_regex(r"[a-z][a-z0-9_]{0,11}", fullmatch=True),
       workspace=st.sampled_from(["gh-workspace", "/workspace", "work space", "-ws"]))
def test_a_runtime_naming_its_own_folder_moves_every_reader_of_it(folder, workspace):
    RUNTIMES[TOY] = Runtime(TOY, outputs=folder)
    try:
        deployment = _deployment(TOY, workspace)
        assert deployment.outputs_dir == f"{workspace}/{folder}"
        assert deployment.watched_dirs[0] == deployment.outputs_dir  # reap looks there first
        assert {f"{workspace}/{name}" for name in output_folders()} <= set(deployment.watched_dirs)
        assert folder in output_folders()
    finally:
        del RUNTIMES[TOY]


def test_a_runtime_folder_is_one_plain_name():
    for bad in ("", ".", "..", "a/b", "../out"):
        with pytest.raises(ValueError, match="must be one folder name"):
            Runtime(TOY, outputs=bad)


def test_install_makes_the_deployments_outputs_folder(tmp_path: Path):
    text = install_script("ws", [], outputs="results_here")
    done = subprocess.run(["sh", "-c", text], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in (tmp_path / "ws").iterdir()) == ["jobs", "models", "results_here"]


def test_the_comfyui_executor_names_outputs_under_the_deployments_folder():
    deployment = _deployment("comfyui")
    executor = ComfyJobExecutor(deployment, http=PhaseHttp("http://127.0.0.1:9"))
    try:
        assert executor.output_dir == deployment.outputs_dir
    finally:
        executor.close()


def test_the_simulated_host_serves_outputs_from_its_runtimes_folder():
    with SimHost(HostSpec(log_lines=())) as host:
        runtime = host.spec.runtime
        assert runtime is not None and host.outputs_dir == host.workspace / RUNTIMES[runtime].outputs
        assert host.outputs_dir.is_dir() and host.runtime is not None
        assert host.runtime.output_root == host.outputs_dir
