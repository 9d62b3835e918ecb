"""The probe through a real OpenSSH sshd on a free loopback port, started from a temporary config (the `sshd`
fixture, tests/openssh_server.py). Without an sshd the tests skip and say so."""

from __future__ import annotations

import os
from dataclasses import replace

import paramiko
import pytest

from gpuharness import probe
from gpuharness.remote import RemoteError
from gpuharness.remote.connect import open_remote

pytestmark = pytest.mark.sshd


def test_probe_runs_through_openssh_in_one_exec(sshd):
    route, directory, _ = sshd
    remote = open_remote(route)
    result, facts = probe.run(remote, probe.ProbeTargets(workspace=str(directory)), deadline_s=60)
    remote.close()
    assert result.exit_status == 0 and not result.timed_out, result.stderr
    assert facts.complete
    assert facts.disk_free_bytes[str(directory)] and facts.disk_free_bytes["/"]
    assert facts.gpus or facts.gpu_error in {"nvidia_smi_missing", "driver_not_loaded", "no_devices_found"}


def test_openssh_host_key_mismatch_is_refused(sshd):
    route, directory, _ = sshd
    forged = directory / "forged_known_hosts"
    other = paramiko.ECDSAKey.generate()
    forged.write_text(f"[127.0.0.1]:{route.port} {other.get_name()} {other.get_base64()}\n")
    with pytest.raises(RemoteError) as info:
        open_remote(replace(route, known_hosts=str(forged)))
    assert info.value.kind == "host_key_changed"


def test_openssh_exec_deadline_and_sftp_resume(sshd, tmp_path):
    route, directory, has_sftp = sshd
    remote = open_remote(route)
    hung = remote.exec("sleep 30\n", deadline_s=0.5)
    assert hung.timed_out and hung.exit_status is None
    if has_sftp:
        source = directory / "artifact.bin"
        source.write_bytes(os.urandom(200_000))
        source.chmod(0o644)
        local = tmp_path / "artifact.bin"
        local.write_bytes(source.read_bytes()[:50_000])
        with local.open("ab") as sink:
            assert remote.get_file(str(source), sink, offset=50_000) == 150_000
        assert local.read_bytes() == source.read_bytes()
    remote.close()
