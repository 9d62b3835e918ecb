"""A real OpenSSH sshd on a free loopback port, started from a temporary config, for the tests that hold the SSH
transport against it (the `sshd` fixture of tests/conftest.py).

sshd is found on PATH, at /usr/sbin/sshd, or at $GPUHARNESS_SSHD (with $GPUHARNESS_SSHD_LIBS as its
LD_LIBRARY_PATH, for an sshd unpacked with `dpkg -x`). Without one the tests skip and say so.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import paramiko
import pytest

from gpuharness.remote.route import HostRoute


def find_sshd() -> str | None:
    explicit = os.environ.get("GPUHARNESS_SSHD")
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    found = shutil.which("sshd") or ("/usr/sbin/sshd" if os.access("/usr/sbin/sshd", os.X_OK) else None)
    return found


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def login_user() -> tuple[int, int, str] | None:
    """Who sshd runs as. As root without the `sshd` privilege-separation user (no openssh-server package),
    sshd runs as an unprivileged user with a login shell instead, and can then log in only that user."""
    if os.geteuid() != 0:
        return os.getuid(), os.getgid(), pwd.getpwuid(os.getuid()).pw_name
    try:
        pwd.getpwnam("sshd")
        return None  # a normal root sshd with privilege separation
    except KeyError:
        pass
    for entry in pwd.getpwall():
        if entry.pw_uid >= 1000 and not entry.pw_shell.endswith(("nologin", "false")):
            return entry.pw_uid, entry.pw_gid, entry.pw_name
    return None


def unavailable(reason: str) -> None:
    """Skip where OpenSSH cannot run; but where CI installed it ($GPUHARNESS_REQUIRE_SSHD=1), that is a failure."""
    if os.environ.get("GPUHARNESS_REQUIRE_SSHD") == "1":
        pytest.fail(f"GPUHARNESS_REQUIRE_SSHD=1 but {reason}")
    pytest.skip(reason)


def running() -> Iterator[tuple[HostRoute, Path, bool]]:
    """Start sshd; yield its route (a client key and a known_hosts file that name it), its folder and whether it
    serves SFTP; stop it after."""
    binary = find_sshd()
    if binary is None:
        unavailable("no OpenSSH sshd binary (install openssh-server, or set GPUHARNESS_SSHD to an unpacked sshd)")
    drop = login_user()
    if os.geteuid() == 0 and drop is None:
        try:
            Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # the privilege-separation dir sshd needs as root
        except OSError as exc:
            unavailable(f"sshd runs as root here and /run/sshd cannot be created: {exc}")
    directory = Path(tempfile.mkdtemp(prefix="gh-sshd-"))  # not under pytest's 0700 tree: sshd may drop privileges
    host_key = paramiko.ECDSAKey.generate()
    host_key_path = directory / "host_ecdsa"
    host_key.write_private_key_file(str(host_key_path))
    client_key = paramiko.ECDSAKey.generate()
    client_key_path = directory / "client_key"
    client_key.write_private_key_file(str(client_key_path))
    (directory / "authorized_keys").write_text(f"{client_key.get_name()} {client_key.get_base64()}\n")
    port = free_port()
    sftp = next((p for p in (Path(binary).parent.parent / "lib/openssh/sftp-server",
                             Path("/usr/lib/openssh/sftp-server"), Path("/usr/libexec/openssh/sftp-server"))
                 if p.exists()), None)
    config = directory / "sshd_config"
    config.write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {host_key_path}\nPidFile {directory / 'sshd.pid'}\n"
        f"AuthorizedKeysFile {directory / 'authorized_keys'}\nPasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\nPermitRootLogin prohibit-password\n"
        + (f"Subsystem sftp {sftp}\n" if sftp else ""))
    user = pwd.getpwuid(os.getuid()).pw_name
    preexec = None
    if drop is not None and os.geteuid() == 0:
        uid, gid, user = drop
        for path in (directory, *directory.iterdir()):
            os.chown(path, uid, gid)

        def preexec() -> None:
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
    env = dict(os.environ)
    if os.environ.get("GPUHARNESS_SSHD_LIBS"):
        env["LD_LIBRARY_PATH"] = os.environ["GPUHARNESS_SSHD_LIBS"]
    check = subprocess.run([binary, "-t", "-f", str(config)], env=env, capture_output=True, text=True,
                           preexec_fn=preexec)
    if check.returncode != 0:
        shutil.rmtree(directory, ignore_errors=True)
        unavailable(f"sshd cannot run here: {check.stderr.strip()[:300]}")
    proc = subprocess.Popen([binary, "-D", "-e", "-f", str(config)], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, preexec_fn=preexec)
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if proc.poll() is not None:
                unavailable(f"sshd exited: {proc.stderr.read()[:300] if proc.stderr else ''}")
            time.sleep(0.05)
    known = directory / "known_hosts"
    known.write_text(f"[127.0.0.1]:{port} {host_key.get_name()} {host_key.get_base64()}\n")
    route = HostRoute(target="dep_openssh", host="127.0.0.1", port=port, user=user, key_file=str(client_key_path),
                  known_hosts=str(known))
    yield route, directory, sftp is not None
    proc.terminate()
    proc.wait(timeout=10)
    shutil.rmtree(directory, ignore_errors=True)
