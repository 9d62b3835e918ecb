"""Every health check fails on a simulated host with the matching fault, with an actionable message,
and the deployment is not marked ready (pytester runs of the real checks/health suite)."""

from __future__ import annotations

import json
from dataclasses import replace

import paramiko
from health_world import run_checks

from gpuharness.probe import transcripts
from gpuharness.sim.host import HostSpec, with_fault
from gpuharness.sim.runtimes import RuntimeFaults


def assert_fails(pytester, world, spec, check, *messages, dep="dep_bad", **fields):
    world.add(dep, spec, **fields)
    result = run_checks(pytester, world)
    lines = [line for line in result.outlines if line.startswith(f"FAILED test_health.py::test_{check}[{dep}]")]
    assert lines, f"test_{check}[{dep}] did not fail:\n" + "\n".join(result.outlines[-30:])
    for message in messages:
        assert message in lines[0], lines[0]
    deployment = world.deployment(dep)
    assert deployment["status"] == "health-checking", "a failing deployment must not become ready"
    assert deployment.get("ready_at") is None
    assert deployment["health"]["status"] == "failed"
    assert f"test_{check}" in {f"test_{name}" for name in deployment["health"]["failed_checks"]}
    return result, deployment


def test_healthy_host_passes_every_check_and_becomes_ready(pytester, world):
    world.add("dep_ok")
    result = run_checks(pytester, world)
    result.assert_outcomes(passed=15, skipped=1)
    deployment = world.deployment("dep_ok")
    assert deployment["status"] == "ready" and deployment["ready_at"]
    assert deployment["health"]["probe_digest"].startswith("sha256:")
    assert world.hosts["dep_ok"].stats == {"ssh_connections": 1, "ssh_execs": 1}


def test_unreachable_host_fails_host_reachable(pytester, world):
    host = world.add("dep_bad")
    host.stop()
    result = run_checks(pytester, world)
    result.stdout.fnmatch_lines(["FAILED test_health.py::test_host_reachable[[]dep_bad[]]*not reachable by "
                                 "root@127.0.0.1:*"])
    assert world.deployment("dep_bad")["status"] == "health-checking"


def test_changed_host_key_fails_host_reachable(pytester, world):
    host = world.add("dep_bad")
    host.known_hosts_path.write_text("")
    host.write_known_hosts(host.known_hosts_path, key=paramiko.ECDSAKey.generate())
    result = run_checks(pytester, world)
    result.stdout.fnmatch_lines(["FAILED*test_host_reachable[[]dep_bad[]]*HOST KEY CHANGED*refusing to connect*"])
    assert host.stats["ssh_execs"] == 0
    assert world.deployment("dep_bad")["health"]["cause"] == "host_key_changed"


def test_wrong_gpu_model_fails_gpu_matches_order(pytester, world):
    assert_fails(pytester, world, HostSpec(), "gpu_matches_order", "ordered H100", "NVIDIA GeForce RTX 4090",
                 "destroy it and order again", gpu="H100")


def test_missing_gpu_fails_gpu_matches_order(pytester, world):
    assert_fails(pytester, world, HostSpec(), "gpu_matches_order", "ordered 2 x RTX 4090, the host shows 1",
                 gpu_count=2)


def test_driver_library_mismatch_fails_the_gpu_checks(pytester, world):
    _, deployment = assert_fails(pytester, world, with_fault(HostSpec(), "driver_mismatch"), "gpu_matches_order",
                                 "driver_library_mismatch", "reboot the host or replace the instance")
    assert deployment["health"]["cause"] == "driver_library_mismatch"


def test_old_driver_fails_driver_and_cuda_minimum(pytester, world):
    assert_fails(pytester, world, HostSpec(driver="535.54.03", cuda="12.2"), "driver_and_cuda_meet_minimum",
                 "driver 535.54.03 < required 550.0")


def test_uncorrected_ecc_errors_fail(pytester, world):
    assert_fails(pytester, world, HostSpec(gpu="NVIDIA RTX A6000", ecc_uncorrected=3), "no_uncorrected_ecc",
                 "uncorrected ECC errors on GPU 0: 3", "replace the instance", gpu="RTX A6000")


def test_thermal_throttling_fails(pytester, world):
    assert_fails(pytester, world, HostSpec(throttle=("hw_thermal_slowdown",)), "no_harmful_throttling",
                 "hw_thermal_slowdown")


def test_hot_gpu_fails_temperature_limit(pytester, world):
    assert_fails(pytester, world, HostSpec(temperature_c=93), "temperature_under_limit", "93 C",
                 "temperature_max_c is 85 C")


def test_foreign_compute_process_fails(pytester, world):
    assert_fails(pytester, world, HostSpec(foreign_processes=("python miner.py",)), "no_foreign_compute_processes",
                 "pid 5000 python miner.py", "stop it, or replace the instance")


def test_full_disk_fails_disk_room(pytester, world):
    _, deployment = assert_fails(pytester, world, with_fault(HostSpec(), "full_disk"), "disk_has_room_for_model",
                                 "0.2 GiB free", "model 6.5 GiB + margin 10 GiB")
    assert deployment["health"]["cause"] == "disk_full"


def test_service_down_fails_process_and_port(pytester, world):
    assert_fails(pytester, world, HostSpec(service_up=False), "service_process_and_port",
                 "no process matching 'main.py' is running")


def test_hung_nvidia_smi_is_cut_off_and_fails(pytester, world):
    _, deployment = assert_fails(pytester, world, with_fault(HostSpec(), "hung_nvidia_smi"), "gpu_matches_order",
                                 "nvidia_smi_timeout")
    assert deployment["health"]["cause"] == "nvidia_smi_timeout"


def test_oom_in_generation_fails_log_tail_and_test_generation(pytester, world):
    result, deployment = assert_fails(pytester, world, with_fault(HostSpec(), "oom"), "test_generation_succeeds",
                                      "torch.OutOfMemoryError", "lowvram")
    result.stdout.fnmatch_lines(
        ["FAILED*test_log_tail_has_no_classified_failure[[]dep_bad[]]*Allocation on device*lowvram*"])
    assert deployment["health"]["cause"] == "cuda_oom"


def test_missing_custom_node_fails_test_generation(pytester, world):
    # the workflow samples with the node whose import failed (a node it does not use fails nothing: issue 9)
    _, deployment = assert_fails(pytester, world, with_fault(HostSpec(), "missing_custom_node"),
                                 "test_generation_succeeds", "ClownsharKSampler", "pin",
                                 workflow="sdxl-custom-sampler")
    assert deployment["health"]["cause"] == "custom_node_missing"  # what the workflow lacks (issue 9)


def test_unhealthy_service_endpoint_fails(pytester, world):
    assert_fails(pytester, world, HostSpec(runtime_faults=RuntimeFaults(health_down=True)), "service_health_endpoint",
                 "503")


def test_generation_that_never_finishes_fails_on_its_timeout(pytester, world):
    with world.registry.update("workflows.json") as doc:
        doc["workflows"][0]["test_generation"]["timeout_s"] = 0.3
    assert_fails(pytester, world, HostSpec(runtime_faults=RuntimeFaults(never_finishes=True)),
                 "test_generation_succeeds", "did not finish within its timeout of 0.3s")


def test_wrong_model_served_fails_test_generation(pytester, world):
    assert_fails(pytester, world, HostSpec(runtime="openai", runtime_faults=RuntimeFaults(wrong_model=True),
                                           log_lines=()), "test_generation_succeeds", "does not serve")


def test_a_cuda_smoke_mismatch_fails_with_the_error_it_measured(pytester, world):
    assert_fails(pytester, world, HostSpec(torch="mismatch"), "cuda_smoke_test", "max_abs_err=41.7")


def test_stuck_job_fails_progress_on_the_second_observation(pytester, world):
    world.add("dep_run", HostSpec(), status="running")
    first = run_checks(pytester, world, "-k", "test_job_progress_advanced", "--deployment", "dep_run")
    first.assert_outcomes(skipped=1)
    second = run_checks(pytester, world, "-k", "test_job_progress_advanced", "--deployment", "dep_run")
    second.stdout.fnmatch_lines(["FAILED*test_job_progress_advanced[[]dep_run[]]*no progress since*"])
    host = world.hosts["dep_run"]
    host.log_path.write_text(host.log_path.read_text() + "step 2 of 20\n")
    third = run_checks(pytester, world, "-k", "test_job_progress_advanced", "--deployment", "dep_run")
    third.assert_outcomes(passed=1)
    assert world.deployment("dep_run")["status"] == "running"


def test_ssh_latency_does_not_break_the_checks(pytester, world):
    world.add("dep_slow", with_fault(HostSpec(), "ssh_latency"))
    run_checks(pytester, world).assert_outcomes(passed=15, skipped=1)
    assert world.deployment("dep_slow")["status"] == "ready"


def test_secrets_in_the_log_never_reach_the_transcript(pytester, world, monkeypatch):
    monkeypatch.setenv("GPUHARNESS_TEST_SECRET", "sk-planted-secret-42")
    world.add("dep_sec", replace(HostSpec(), log_lines=("token=sk-planted-secret-42", "api_key: abcdef123456")))
    cassettes = pytester.path / "cassettes"
    run_checks(pytester, world, "--gpu-mode", "record", "--cassettes", str(cassettes))
    raw = (cassettes / "ssh" / "dep_sec.json").read_text()
    text = transcripts.recorded_text(json.loads(raw))  # the log's section, decoded from its frame
    for kept in (raw, text):
        assert "sk-planted-secret-42" not in kept and "abcdef123456" not in kept
    assert "REDACTED" in text and "token=" in text


def test_an_owned_local_host_is_probed_as_a_subprocess(pytester, world):
    world.add("dep_local", ssh={"transport": "local", "workspace": str(world.root)})
    world.hosts["dep_local"].stop()  # nothing goes over SSH: the probe runs on this machine
    result = run_checks(pytester, world, "-k", "host_reachable or disk_has_room or gpu_matches_order")
    result.stdout.fnmatch_lines(["*test_host_reachable[[]dep_local[]] PASSED*"])
    connections = world.registry.items("connections.json")
    assert connections[0]["kind"] == "local" and connections[0]["route"] == "local"


def test_control_characters_in_a_host_log_reach_the_terminal_escaped(pytester, world):
    # a host's log lines are data: an OSC title, a screen clear and a bell in them are shown, never obeyed
    world.add("dep_esc", replace(HostSpec(), log_lines=(
        "Cannot import /workspace/ComfyUI/comfy_extras/nodes_audio.py module for custom nodes: "
        "No module named 'torchaudio'\x1b]0;pwned\x07",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\x1b[2J\x9b31m")))
    result = run_checks(pytester, world)
    text = "\n".join(result.outlines + result.errlines)
    assert "test_log_tail_has_no_classified_failure[dep_esc] FAILED" in text or \
        "FAILED test_health.py::test_log_tail_has_no_classified_failure[dep_esc]" in text
    for raw in ("\x1b", "\x07", "\x9b"):
        assert raw not in text, f"{raw!r} reached the terminal raw"
    assert "\\x9b31m" in text, text[-3000:]  # shown as its escape (ESC sequences the log reader drops)
