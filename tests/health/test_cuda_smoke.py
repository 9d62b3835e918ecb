"""The CUDA smoke test runs in the service's own interpreter, inside the one probe exec: found from the service
process (argv[0], then /proc/PID/exe), or `runtime_python` in the deployment, falling back to python3. It never skips
as "torch not installed" where the service imports torch, and a host without a GPU fails it (pytester runs of the
real checks against simulated hosts, whose service runs from a venv with torch while the system python3 has none)."""

from __future__ import annotations

import os
import subprocess
import uuid

from health_world import run_checks

from gpuharness import probe
from gpuharness.health import rules
from gpuharness.remote.local import LocalRemote
from gpuharness.sim.host import HostSpec, python_environment, torch_stand_in, with_fault


def smoke_check(pytester, world, dep):
    result = run_checks(pytester, world, "-k", "cuda_smoke_test", "--deployment", dep)
    lines = [line for line in result.outlines if line.startswith(("PASSED", "FAILED", "SKIPPED")) and dep in line]
    assert lines, "\n".join(result.outlines[-30:])
    return lines[0]


def test_the_smoke_test_runs_in_the_services_venv_not_the_system_python(pytester, world):
    host = world.add("dep_ok")
    line = smoke_check(pytester, world, "dep_ok")
    assert line.startswith("PASSED")
    exe = os.readlink(f"/proc/{host.service_pid}/exe")
    base = subprocess.run([exe, "-c", "import torch"], capture_output=True, text=True)
    assert base.returncode != 0, "the venv's base interpreter (what /proc/PID/exe names) has no torch"
    system = subprocess.run([str(host.root / "system" / "bin" / "python3"), "-c", "import torch"],
                            capture_output=True, text=True)
    assert system.returncode != 0, "the host's system python3 has no torch"
    assert host.stats == {"ssh_connections": 1, "ssh_execs": 1}, "inside the one probe exec"


def test_a_service_interpreter_without_torch_fails_and_never_skips(pytester, world):
    host = world.add("dep_bad", with_fault(HostSpec(), "service_without_torch"))
    line = smoke_check(pytester, world, "dep_bad")
    assert line.startswith("FAILED"), line
    assert "a comfyui service imports torch, but torch is not importable by" in line
    assert f"{host.service_python} (the service's own interpreter)" in line
    assert "No module named 'torch'" in line and "reinstall torch into it" in line
    assert world.deployment("dep_bad")["health"]["cause"] == "torch_missing"


def test_a_host_without_a_gpu_fails_the_smoke_test_and_says_so(pytester, world):
    world.add("dep_nogpu", with_fault(HostSpec(), "no_gpu"))
    line = smoke_check(pytester, world, "dep_nogpu")
    assert line.startswith("FAILED"), line
    assert "the host has no usable GPU: torch in" in line and "devices=0" in line
    assert "nvidia-smi: nvidia_smi_missing" in line
    assert world.deployment("dep_nogpu")["health"]["cause"] == "no_gpu"


def test_runtime_python_in_the_deployment_names_the_interpreter(pytester, world):
    host = world.add("dep_named", process="no-such-service")  # the probe finds no service process to ask
    with world.registry.update("deployments.json") as doc:
        doc["deployments"][0]["runtime_python"] = str(host.service_python)
    assert smoke_check(pytester, world, "dep_named").startswith("PASSED")
    with world.registry.update("deployments.json") as doc:
        doc["deployments"][0]["runtime_python"] = str(host.root / "system" / "bin" / "python3")
    line = smoke_check(pytester, world, "dep_named")
    assert line.startswith("FAILED") and "(runtime_python in deployments.json)" in line
    assert "point it at the service's interpreter" in line


def test_without_a_service_process_python3_is_asked_and_a_comfyui_host_fails_with_what_to_set(pytester, world):
    # no process matches the pattern, nothing listens on the port (the probe picks a listener before a pattern)
    world.add("dep_lost", process="no-such-service", service_port=9)
    line = smoke_check(pytester, world, "dep_lost")
    assert line.startswith("FAILED") and "python3 on PATH: the probe found no interpreter of the service" in line
    assert "set runtime_python in deployments.json" in line


def test_a_service_that_does_not_load_torch_skips_where_its_interpreter_has_none(pytester, world):
    world.add("dep_llm", HostSpec(runtime="openai", torch="absent", log_lines=()))
    line = smoke_check(pytester, world, "dep_llm")
    assert line.startswith("SKIPPED") and "the service does not load it" in line


def test_the_interpreter_of_a_bare_argv0_is_found_on_the_services_own_path(tmp_path):
    venv = python_environment(tmp_path / "venv", torch_stand_in(HostSpec(), busy=tmp_path))
    marker = f"gh-service-{uuid.uuid4().hex}"
    service = subprocess.Popen(["python", "-c", "import time; time.sleep(60)", marker],
                               env={"PATH": f"{venv.parent}:/usr/bin:/bin"}, cwd=tmp_path)
    try:
        _, facts = probe.run(LocalRemote(), probe.ProbeTargets(workspace=str(tmp_path), process_pattern=marker),
                             deadline_s=60)
    finally:
        service.kill()
        service.wait()
    assert (facts.smoke.found_by, facts.smoke.interpreter) == ("service_argv0", str(venv)), facts.sections["torch"]
    assert rules.cuda_smoke(facts, "comfyui").ok


def test_a_relative_argv0_is_resolved_against_the_services_working_directory(tmp_path):
    python_environment(tmp_path / "venv", {})
    marker = f"gh-service-{uuid.uuid4().hex}"
    service = subprocess.Popen(["./venv/bin/python", "-c", "import time; time.sleep(60)", marker], cwd=tmp_path,
                               executable=str(tmp_path / "venv" / "bin" / "python"))
    try:
        _, facts = probe.run(LocalRemote(), probe.ProbeTargets(workspace=str(tmp_path), process_pattern=marker),
                             deadline_s=60)
    finally:
        service.kill()
        service.wait()
    assert facts.smoke.found_by == "service_argv0"
    assert os.path.normpath(str(facts.smoke.interpreter)) == os.path.join(os.path.realpath(tmp_path), "venv", "bin",
                                                                          "python")
    assert facts.smoke.outcome == "absent"
    verdict = rules.cuda_smoke(facts, "comfyui")
    assert verdict.cause == "torch_missing" and "the service's own interpreter" in verdict.message
