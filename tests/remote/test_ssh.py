"""The SSH transport against a real loopback SSH server (the simulated host): host keys, deadlines,
one attempt, jump hosts, ProxyCommand, SFTP resume, and live routes from connections.json."""

from __future__ import annotations

import socket
import sys
import threading
from dataclasses import replace

import paramiko
import pytest

from gpuharness.core.deployment import Deployment, SshAccess
from gpuharness.remote import RemoteError
from gpuharness.remote.connect import HostRoute, LocalRemote, open_remote, resolve
from gpuharness.remote.route import from_alias
from gpuharness.sim.host import HostSpec, SimHost


@pytest.fixture
def host(tmp_path):
    with SimHost(HostSpec(), root=tmp_path / "host") as sim:
        yield sim


def route_to(sim: SimHost, **fields) -> HostRoute:
    block = sim.ssh_block()
    values = {"target": "dep_t", "host": block["host"], "port": block["port"], "user": "root",
              "key_file": block["key_file"], "known_hosts": block["known_hosts"], **fields}
    return HostRoute(**values)


def test_exec_returns_stdout_stderr_and_exit_status(host):
    remote = open_remote(route_to(host))
    result = remote.exec("echo out; echo err >&2; exit 3\n", deadline_s=30)
    remote.close()
    assert (result.stdout, result.stderr, result.exit_status, result.timed_out) == ("out\n", "err\n", 3, False)


def test_unknown_host_key_is_refused_with_a_clear_message(host, tmp_path):
    empty = tmp_path / "empty_known_hosts"
    with pytest.raises(RemoteError) as info:
        open_remote(route_to(host, known_hosts=str(empty)))
    assert info.value.kind == "host_key_unknown"
    assert f"[127.0.0.1]:{host.ssh_port}" in str(info.value)
    assert "ssh-keyscan" in str(info.value) and "trust on first use" in str(info.value)
    assert not empty.exists(), "a refused key must not be written anywhere"


def test_changed_host_key_is_refused(host, tmp_path):
    forged = tmp_path / "forged_known_hosts"
    host.write_known_hosts(forged, key=paramiko.ECDSAKey.generate())
    with pytest.raises(RemoteError) as info:
        open_remote(route_to(host, known_hosts=str(forged)))
    assert info.value.kind == "host_key_changed"
    assert "HOST KEY CHANGED" in str(info.value) and "remove the old line" in str(info.value)
    assert host.stats["ssh_execs"] == 0


def test_trust_on_first_use_accepts_and_records_only_when_opted_in(host, tmp_path):
    known = tmp_path / "kh"
    remote = open_remote(route_to(host, known_hosts=str(known), trust_on_first_use=True))
    assert remote.accepted_host_key is not None and remote.accepted_host_key.startswith("ecdsa-sha2-nistp256 SHA256:")
    remote.close()
    assert f"[127.0.0.1]:{host.ssh_port} ecdsa-sha2-nistp256" in known.read_text()
    again = open_remote(route_to(host, known_hosts=str(known)))  # now known: no opt-in needed
    assert again.accepted_host_key is None
    again.close()


def test_exec_deadline_cuts_off_a_hung_command_without_blocking(host):
    remote = open_remote(route_to(host))
    result = remote.exec("echo started; sleep 60\n", deadline_s=0.5)
    assert result.timed_out and result.exit_status is None
    assert result.stdout == "started\n"
    assert result.duration_s < 60
    after = remote.exec("echo still usable\n", deadline_s=30)
    remote.close()
    assert after.stdout == "still usable\n"


def test_large_output_on_both_streams_is_drained(host):
    remote = open_remote(route_to(host))
    script = "head -c 3000000 /dev/zero | tr '\\0' a; head -c 3000000 /dev/zero | tr '\\0' b >&2\n"
    result = remote.exec(script, deadline_s=60)
    remote.close()
    assert (len(result.stdout), len(result.stderr), result.exit_status) == (3_000_000, 3_000_000, 0)


def test_connection_error_is_one_attempt_and_no_retry(tmp_path):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    accepts = []

    def refuse() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            accepts.append(1)
            conn.close()

    threading.Thread(target=refuse, daemon=True).start()
    route = HostRoute(target="dep_x", host="127.0.0.1", port=listener.getsockname()[1], user="root",
                  known_hosts=str(tmp_path / "kh"))
    with pytest.raises(RemoteError) as info:
        open_remote(route, connect_timeout_s=5)
    listener.close()
    assert info.value.kind in {"unreachable", "timeout"}
    assert len(accepts) == 1


def test_jump_host_from_an_ssh_config_alias(tmp_path):
    with SimHost(HostSpec(), root=tmp_path / "jump") as jump, SimHost(HostSpec(), root=tmp_path / "gpu") as gpu:
        gpu.authorized.add(jump.client_key.get_base64())
        known = tmp_path / "known_hosts"
        jump.write_known_hosts(known)
        gpu.write_known_hosts(known)
        config = tmp_path / "ssh_config"
        config.write_text(
            f"Host bastion\n  HostName 127.0.0.1\n  Port {jump.ssh_port}\n  User root\n"
            f"  IdentityFile {jump.client_key_path}\n  UserKnownHostsFile {known}\n"
            f"Host gpu-box\n  HostName 127.0.0.1\n  Port {gpu.ssh_port}\n  User root\n  ProxyJump bastion\n"
            f"  IdentityFile {jump.client_key_path}\n  UserKnownHostsFile {known}\n")
        route = from_alias("dep_j", "gpu-box", str(config))
        assert route.jump is not None and route.jump.port == jump.ssh_port
        remote = open_remote(route)
        result = remote.exec("echo via-jump\n", deadline_s=30)
        remote.close()
        assert result.stdout == "via-jump\n"
        assert (jump.stats["ssh_execs"], gpu.stats["ssh_execs"]) == (0, 1)
        assert route.label == (f"alias gpu-box -> root@127.0.0.1:{gpu.ssh_port} "
                               f"via alias bastion -> root@127.0.0.1:{jump.ssh_port}")


def test_proxy_command_from_an_ssh_config_alias(host, tmp_path):
    relay = tmp_path / "relay.py"
    relay.write_text(
        "import socket, sys, threading\n"
        "s = socket.create_connection((sys.argv[1], int(sys.argv[2])))\n"
        "def up():\n"
        "    while d := sys.stdin.buffer.read1(65536):\n"
        "        s.sendall(d)\n"
        "threading.Thread(target=up, daemon=True).start()\n"
        "while d := s.recv(65536):\n"
        "    sys.stdout.buffer.write(d); sys.stdout.buffer.flush()\n")
    config = tmp_path / "ssh_config"
    config.write_text(
        f"Host proxied\n  HostName 127.0.0.1\n  Port {host.ssh_port}\n  User root\n"
        f"  IdentityFile {host.client_key_path}\n  UserKnownHostsFile {host.known_hosts_path}\n"
        f"  ProxyCommand {sys.executable} {relay} %h %p\n")
    route = from_alias("dep_p", "proxied", str(config))
    assert route.proxy_command is not None
    remote = open_remote(route)
    result = remote.exec("echo via-proxy\n", deadline_s=30)
    remote.close()
    assert result.stdout == "via-proxy\n"


def test_sftp_get_file_resumes_a_partial_download(host, tmp_path):
    artifact = host.workspace / "output" / "big.bin"
    artifact.write_bytes(bytes(range(256)) * 4000)
    local = tmp_path / "big.bin"
    local.write_bytes(artifact.read_bytes()[:100_000])
    remote = open_remote(route_to(host))
    with local.open("ab") as sink:
        moved = remote.get_file(str(artifact), sink, offset=local.stat().st_size)
    remote.close()
    assert moved == artifact.stat().st_size - 100_000
    assert local.read_bytes() == artifact.read_bytes()


def test_sftp_refuses_paths_outside_the_sandbox(host, tmp_path):
    remote = open_remote(route_to(host))
    with pytest.raises(RemoteError):
        with (tmp_path / "passwd").open("wb") as sink:
            remote.get_file("/etc/passwd", sink)
    remote.close()


def test_local_transport_runs_the_script_as_a_subprocess_with_a_deadline(tmp_path):
    remote = LocalRemote("dep_local")
    assert remote.exec("echo hi; exit 4\n", deadline_s=30).exit_status == 4
    hung = remote.exec("sleep 60\n", deadline_s=0.3)
    assert hung.timed_out and hung.exit_status is None


def test_live_route_from_connections_is_reused_and_stale_one_ignored(host):
    deployment = Deployment(id="dep_t", provider="owned", status="ready", cost_hr=0.0,
                            created_at="2026-11-30T20:00:00Z", ssh=SshAccess.from_json({**host.ssh_block(), "port": 1}))
    live = {"target": "dep_t", "kind": "ssh", "route": f"root@127.0.0.1:{host.ssh_port}",
            "heartbeat_at": "2026-11-30T20:00:00Z", "ttl_s": 600}
    from gpuharness.core.clock import parse_ts
    now = parse_ts("2026-11-30T20:05:00Z")
    assert resolve(deployment, [live], now).port == host.ssh_port
    stale = replace_ttl(live, 60)
    assert resolve(deployment, [stale], now).port == 1


def replace_ttl(entry, ttl):
    return {**entry, "ttl_s": ttl}


def test_route_label_names_the_route_without_secrets(host):
    route = route_to(host)
    assert route.label == f"root@127.0.0.1:{host.ssh_port}"
    assert "key" not in route.label
    assert replace(route, port=22).known_hosts_name == "127.0.0.1"
