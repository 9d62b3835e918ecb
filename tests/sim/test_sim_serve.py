"""`gpuharness sim serve --configure` records how its hosts are reached (one client key, a known_hosts file that
lists each running host), `--detach` returns once it serves, and `sim stop` / SIGTERM stop it and its files."""

from __future__ import annotations

import os
import signal
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from lifecycle_fakes import make_world

from gpuharness.core.registry import Registry
from gpuharness.operations.provision import ProvisionRequest, provision
from gpuharness.remote.connect import open_remote
from gpuharness.remote.route import HostRoute
from gpuharness.sim.access import HostAccess
from gpuharness.sim.host import SimHost


def gpuharness(*args: str, cwd: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUHARNESS_")}
    env["TMPDIR"] = str(cwd / "tmp")
    (cwd / "tmp").mkdir(exist_ok=True)
    return subprocess.run([sys.executable, "-m", "gpuharness", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


def _pid(stdout: str) -> int:
    return int(stdout.split("(pid ", 1)[1].split(";", 1)[0])


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def test_simulated_hosts_accept_one_key_and_publish_their_host_keys_while_running(tmp_path):
    access = HostAccess(tmp_path / "access")
    assert stat.S_IMODE(access.key_file.stat().st_mode) == 0o600
    hosts = [SimHost(root=tmp_path / f"h{n}", access=access).start() for n in range(2)]
    lines = access.known_hosts.read_text().splitlines()
    assert sorted(line.split()[0] for line in lines) == sorted(h.known_hosts_name for h in hosts)
    for host in hosts:
        route = HostRoute(target="t", host=host.ssh_host, port=host.ssh_port, user="root",
                          key_file=str(access.key_file), known_hosts=str(access.known_hosts))
        remote = open_remote(route)
        try:
            assert remote.exec("echo hello", deadline_s=10).stdout == "hello\n"
        finally:
            remote.close()
    hosts[0].stop()
    assert [line.split()[0] for line in access.known_hosts.read_text().splitlines()] == [hosts[1].known_hosts_name]
    hosts[1].stop()
    assert access.known_hosts.read_text() == ""
    access.close()
    assert not access.root.exists()


def test_provision_records_the_providers_ssh_key_and_known_hosts(tmp_path):
    world = make_world(tmp_path)
    with world.registry.update("providers.json") as doc:
        doc["providers"][0].update(ssh_key_file="/keys/sim", known_hosts="/keys/known_hosts")
    request = ProvisionRequest(provider="vast", gpu="RTX 4090", image="comfyui:1", cost_hr=0.5, idle_minutes=15)
    ssh = provision(world.ctx, request, poll_s=5).deployment.ssh
    assert (ssh.key_file, ssh.known_hosts) == ("/keys/sim", "/keys/known_hosts")
    # the command line's --ssh-key / --known-hosts win over the provider's
    mine = ProvisionRequest(provider="vast", gpu="RTX 4090", image="comfyui:2", cost_hr=0.5, idle_minutes=15,
                            ssh_key_file="/mine", known_hosts="/mine_hosts")
    ssh = provision(world.ctx, mine, poll_s=5).deployment.ssh
    assert (ssh.key_file, ssh.known_hosts) == ("/mine", "/mine_hosts")


@pytest.mark.slow
def test_sim_serve_configure_detach_records_access_and_sim_stop_removes_it(tmp_path):
    assert gpuharness("init", cwd=tmp_path).returncode == 0
    served = gpuharness("sim", "serve", "--port", "0", "--configure", "--detach", cwd=tmp_path)
    assert served.returncode == 0, served.stderr
    pid = _pid(served.stdout)
    try:
        assert served.stdout.startswith("ready http://127.0.0.1:")
        assert "known_hosts" in served.stderr and "sim-text-to-image" in served.stderr
        registry = Registry(tmp_path / ".pi" / "gpu")
        entries = {e["name"]: e for e in registry.providers()}
        for name in ("runpod", "vast", "massed"):
            assert Path(entries[name]["ssh_key_file"]).is_file()
            assert Path(entries[name]["known_hosts"]).is_file()
        assert "ssh_key_file" not in entries["runpod-serverless"]  # no host to reach
        key_dir = Path(entries["vast"]["ssh_key_file"]).parent
        assert not key_dir.is_relative_to(registry.root)  # a private key is a secret: never in the registry
        model = {m["name"]: m for m in registry.items("models.json")}["sim-h3-mini"]
        assert Path(model["files"][0]["url"].removeprefix("file://")).is_file()
        assert "sim-text-to-image" in {w["id"] for w in registry.items("workflows.json")}
        assert gpuharness("validate", cwd=tmp_path).returncode == 0
        stopped = gpuharness("sim", "stop", cwd=tmp_path)
        assert stopped.returncode == 0, stopped.stderr
        assert stopped.stdout.startswith("stopped the simulator at http://127.0.0.1:")
        assert not key_dir.exists()
    finally:
        _kill(pid)


def test_detached_sim_serve_on_a_busy_port_fails_in_one_line(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        result = gpuharness("sim", "serve", "--port", str(port), "--detach", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and "cannot listen on 127.0.0.1" in result.stderr


def test_sim_stop_without_a_simulator_fails_in_one_line(tmp_path):
    assert gpuharness("init", cwd=tmp_path).returncode == 0
    result = gpuharness("sim", "stop", cwd=tmp_path)
    assert result.returncode == 2
    assert "points at 0 loopback simulator" in result.stderr and result.stderr.count("\n") == 1
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    result = gpuharness("sim", "stop", "--port", str(port), cwd=tmp_path)
    assert result.returncode == 2 and "no simulator answers" in result.stderr


def test_sim_serve_stops_on_sigterm_and_removes_its_hosts_files(tmp_path):
    (tmp_path / "tmp").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUHARNESS_")}
    env["TMPDIR"] = str(tmp_path / "tmp")
    proc = subprocess.Popen([sys.executable, "-m", "gpuharness", "sim", "serve", "--port", "0"], cwd=tmp_path,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith("ready http://127.0.0.1:")
        assert list((tmp_path / "tmp").glob("gh-sim-access-*"))
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        assert list((tmp_path / "tmp").iterdir()) == []
    finally:
        proc.kill()
        proc.wait()


def test_sim_serve_cleans_up_when_sigterm_comes_while_it_is_still_starting(tmp_path):
    # the key directory appears before the simulator is configured and ready: a SIGTERM then must still remove it
    (tmp_path / "tmp").mkdir()
    assert gpuharness("init", cwd=tmp_path).returncode == 0
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUHARNESS_")}
    env["TMPDIR"] = str(tmp_path / "tmp")
    proc = subprocess.Popen([sys.executable, "-m", "gpuharness", "sim", "serve", "--port", "0", "--configure"],
                            cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while not list((tmp_path / "tmp").glob("gh-sim-access-*")) and proc.poll() is None:
            pass
        proc.send_signal(signal.SIGTERM)
        proc.send_signal(signal.SIGTERM)  # a second one must not cut the cleanup short
        assert proc.wait(timeout=30) == 0
        assert list((tmp_path / "tmp").iterdir()) == []
    finally:
        proc.kill()
        proc.wait()


def test_sim_stop_refuses_a_non_loopback_url(tmp_path):
    result = gpuharness("sim", "stop", "--url", "http://203.0.113.9:8765", cwd=tmp_path)
    assert result.returncode == 2 and "not a loopback address" in result.stderr
    assert result.stdout == ""
