"""The batched probe: one exec, framed sections, parsed into a ProbeResult; nvidia-smi failures are classes."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from dataclasses import replace

import pytest

from gpuharness import probe
from gpuharness.probe import framing
from gpuharness.remote.connect import HostRoute, LocalRemote, open_remote
from gpuharness.sim.host import HostSpec, SimHost, with_fault


@contextlib.contextmanager
def probed(tmp_path, spec: HostSpec, **targets):
    """The probe's one exec against a running simulated host (still running inside the block)."""
    with SimHost(spec, root=tmp_path / "host") as host:
        block = host.ssh_block()
        route = HostRoute(target="dep_p", host=block["host"], port=block["port"], user="root",
                      key_file=block["key_file"], known_hosts=block["known_hosts"])
        remote = open_remote(route)
        options = {"workspace": block["workspace"], "process_pattern": "main.py",
                   "service_port": host.service_port, "log_path": str(host.log_path), **targets}
        result, parsed = probe.run(remote, probe.ProbeTargets(**options), deadline_s=60)
        remote.close()
        yield host, result, parsed


def run_probe(tmp_path, spec: HostSpec, **targets):
    with probed(tmp_path, spec, **targets) as found:
        return found


def test_one_exec_returns_every_fact_of_a_healthy_host(tmp_path):
    with probed(tmp_path, HostSpec(gpu="NVIDIA H100 80GB HBM3", gpu_count=2)) as (host, result, facts):
        service = (host.service_pid, f"{host.service_python} main.py --listen 0.0.0.0 --port 8188")
    assert host.stats == {"ssh_connections": 1, "ssh_execs": 1}
    assert facts.complete and facts.gpu_error is None
    assert [g.name for g in facts.gpus] == ["NVIDIA H100 80GB HBM3"] * 2
    assert facts.gpus[0].memory_total_mib == 81559 and facts.gpus[0].ecc_uncorrected == 0
    assert (facts.driver_version, facts.cuda_version) == ("570.86.15", "12.8")
    assert "clocks_event_reasons.active" in facts.gpu_fields
    assert host.service_port in facts.listening_ports
    assert facts.processes == (service,)
    assert facts.disk_free_bytes[str(host.workspace)] == 150 * 1024**3
    assert facts.log_tail[0] == "Starting server"
    assert facts.torch.startswith("ok max_abs_err=") and facts.smoke.interpreter == str(host.service_python)
    assert facts.digest == probe.digest_of(result.stdout, result.stderr, result.exit_status)


def test_old_drivers_are_asked_with_the_throttle_spelling(tmp_path):
    spec = HostSpec(old_spelling=True, throttle=("hw_thermal_slowdown",))
    _, _, facts = run_probe(tmp_path, spec)
    assert "clocks_event_reasons.active" not in facts.gpu_fields
    assert "clocks_throttle_reasons.active" in facts.gpu_fields
    assert facts.gpus[0].clock_event_names == ("hw_thermal_slowdown",)


def test_hung_nvidia_smi_is_cut_off_inside_the_script(tmp_path):
    _, result, facts = run_probe(tmp_path, with_fault(HostSpec(), "hung_nvidia_smi"), nvidia_smi_timeout_s=1)
    assert not result.timed_out, "the script's own deadline must fire before the exec deadline"
    assert facts.gpu_error == "nvidia_smi_timeout"
    assert facts.complete and facts.log_tail, "the other sections still come back"


@pytest.mark.parametrize(("mode", "error"), [("missing", "nvidia_smi_missing"),
                                             ("driver_mismatch", "driver_library_mismatch"),
                                             ("not_loaded", "driver_not_loaded"),
                                             ("no_devices", "no_devices_found")])
def test_nvidia_smi_failures_become_error_classes(tmp_path, mode, error):
    _, _, facts = run_probe(tmp_path, replace(HostSpec(), nvidia_smi=mode))
    assert facts.gpu_error == error
    assert facts.gpus == ()


def test_driver_mismatch_keeps_the_decisive_line(tmp_path):
    _, _, facts = run_probe(tmp_path, with_fault(HostSpec(), "driver_mismatch"))
    assert facts.gpu_error_line == "Failed to initialize NVML: Driver/library version mismatch"


def test_foreign_compute_processes_are_listed(tmp_path):
    with probed(tmp_path, HostSpec(foreign_processes=("python train_other.py",))) as (host, _, facts):
        assert {app.pid for app in facts.compute_apps} == {host.service_pid, 5000}


def test_a_truncated_transcript_is_incomplete():
    nonce = framing.new_nonce()
    facts = probe.parse(f"{nonce} gpus 0 40\n 23 20 71 75 65\n", "", None, nonce=nonce)
    assert facts.gpu_error == "probe_incomplete" and not facts.complete and facts.corrupt is None


def test_parameters_never_become_shell_code(tmp_path):
    marker = tmp_path / "pwned"
    script = probe.build_script(probe.ProbeTargets(workspace=f"/x'; touch {marker}; echo '",
                                                   process_pattern=f"$(touch {marker})"))
    LocalRemote().exec(script.text, deadline_s=60)
    assert not marker.exists()


def test_local_transport_runs_the_same_probe():
    result, facts = probe.run(LocalRemote(), probe.ProbeTargets(workspace="/"), deadline_s=60)
    assert facts.complete and result.exit_status == 0
    assert "/" in facts.disk_free_bytes


def test_process_section_falls_back_to_proc_without_a_usable_ps(tmp_path):
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "ps").write_text("#!/bin/sh\necho 'ps: unrecognized option: o' >&2\nexit 1\n")
    (fake / "ps").chmod(0o755)
    sleeper = subprocess.Popen(["sleep", "3141"])
    try:
        targets = probe.ProbeTargets(workspace="/", process_pattern="sleep 3141")
        script = probe.build_script(targets)
        facts = probe.read(script, LocalRemote().exec(f"PATH={fake}:$PATH\n" + script.text, deadline_s=60))
        assert (sleeper.pid, "sleep 3141") in facts.processes
    finally:
        sleeper.kill()
        sleeper.wait()


def test_a_service_command_line_longer_than_80_columns_is_found_whole():
    # without a terminal, procps' ps cuts args at 80 columns: a pattern at the end of a long line would be lost
    marker = "gh-service-" + "x" * 90
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", marker])
    try:
        script = probe.build_script(probe.ProbeTargets(workspace="/", process_pattern=marker))
        facts = probe.read(script, LocalRemote().exec(script.text, deadline_s=60))
    finally:
        sleeper.kill()
        sleeper.wait()
    assert (sleeper.pid, f"{sys.executable} -c import time; time.sleep(60) {marker}") in facts.processes


def _free_port() -> int:
    import socket
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


#: A service stand-in: listens on the port given (if any), then waits for its parent to end.
_SERVICE = """import os, socket, sys, time
if len(sys.argv) > 1:
    server = socket.socket(); server.bind(("127.0.0.1", int(sys.argv[1]))); server.listen()
print("ready", flush=True)
parent = os.getppid()
while os.getppid() == parent:
    time.sleep(0.2)
"""


@contextlib.contextmanager
def _two_services(tmp_path, port: int):
    """Two `python main.py` processes from two directories; only the second listens on port."""
    started = []
    try:
        for name, args in (("other", []), ("comfy", [str(port)])):
            (tmp_path / name).mkdir()
            (tmp_path / name / "main.py").write_text(_SERVICE)
            proc = subprocess.Popen([sys.executable, "main.py", *args], cwd=tmp_path / name, stdout=subprocess.PIPE,
                                    text=True)
            started.append(proc)
            assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        yield started[0], started[1]
    finally:
        for proc in started:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("listing", ["ss", "proc"])
def test_the_service_process_is_the_one_listening_on_its_port(tmp_path, listing):
    port = _free_port()
    broken_ss = ""
    if listing == "proc":  # an ss that fails (busybox's, none at all): found through /proc/net/tcp and /proc/*/fd
        (tmp_path / "bin").mkdir()
        (tmp_path / "bin" / "ss").write_text("#!/bin/sh\necho 'ss: applet not found' >&2\nexit 127\n")
        (tmp_path / "bin" / "ss").chmod(0o755)
        broken_ss = f"PATH={tmp_path / 'bin'}:$PATH\n"
    with _two_services(tmp_path, port) as (other, listener):
        script = probe.build_script(probe.ProbeTargets(workspace="/", process_pattern="main.py", service_port=port))
        facts = probe.read(script, LocalRemote().exec(broken_ss + script.text, deadline_s=60))
    pids = [pid for pid, _ in facts.processes]
    assert pids and pids[0] == listener.pid, facts.sections.get("process")
    assert other.pid not in pids
    assert facts.process_found_by == f"port {port} {listing}"


def test_without_a_listener_the_service_is_found_by_its_pattern(tmp_path):
    port = _free_port()
    with _two_services(tmp_path, _free_port()) as (other, listener):
        script = probe.build_script(probe.ProbeTargets(workspace="/", process_pattern="main.py", service_port=port))
        facts = probe.read(script, LocalRemote().exec(script.text, deadline_s=60))
    pids = [pid for pid, _ in facts.processes]
    assert other.pid in pids and listener.pid in pids
    assert facts.process_found_by == "pattern"


def test_a_simulated_host_names_its_service_by_the_port_it_listens_on(tmp_path):
    with probed(tmp_path, HostSpec()) as (host, _, facts):
        assert facts.processes[0][0] == host.service_pid
    assert facts.process_found_by == f"port {host.service_port} ss"
