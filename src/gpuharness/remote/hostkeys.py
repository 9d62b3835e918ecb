"""Host key checking: known_hosts with `[host]:port` entries; unknown or changed keys are refused.
Trust on first use happens only when the route opted in, and the caller records it."""

from __future__ import annotations

import base64
import hashlib
import os
import shlex
from pathlib import Path
from typing import final

import paramiko

from gpuharness.remote import RemoteError


def fingerprint(key: paramiko.PKey) -> str:
    """OpenSSH-style `type SHA256:...` fingerprint."""
    digest = base64.b64encode(hashlib.sha256(key.asbytes()).digest()).decode().rstrip("=")
    return f"{key.get_name()} SHA256:{digest}"


@final
class FirstUsePolicy(paramiko.MissingHostKeyPolicy):
    """Refuses unknown keys, or (opt-in) accepts and appends them to known_hosts, remembering what it did."""

    def __init__(self, target: str, known_hosts: str, *, trust_on_first_use: bool) -> None:
        self.target = target
        self.known_hosts = known_hosts
        self.trust_on_first_use = trust_on_first_use
        self.accepted: str | None = None

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        if not self.trust_on_first_use:
            host, port = split_known_hosts_name(hostname)
            raise RemoteError(
                "host_key_unknown",
                f"host key {fingerprint(key)} for {hostname} is not in {self.known_hosts}; refusing to connect",
                target=self.target,
                remedy=f"verify the key out of band, then pin it: `ssh-keyscan -p {port} {shlex.quote(host)} >> "
                       f"{shlex.quote(self.known_hosts)}`; or opt {self.target} into trust on first use in "
                       "connections.json")
        path = Path(os.path.expanduser(self.known_hosts))
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as handle:
            handle.write(f"{hostname} {key.get_name()} {key.get_base64()}\n")
        client.get_host_keys().add(hostname, key.get_name(), key)
        self.accepted = fingerprint(key)


def load_known_hosts(client: paramiko.SSHClient, known_hosts: str) -> None:
    """Load known_hosts if it exists; a missing file just means every key is unknown."""
    path = Path(os.path.expanduser(known_hosts))
    if path.is_file():
        client.get_host_keys().load(str(path))


def split_known_hosts_name(name: str) -> tuple[str, int]:
    """`[host]:port` or `host` (port 22), as known_hosts and paramiko name a host."""
    if name.startswith("[") and "]:" in name:
        host, _, port = name[1:].partition("]:")
        if port.isdigit():
            return host, int(port)
    return name, 22


def changed_key_error(target: str, known_hosts: str, exc: paramiko.BadHostKeyException) -> RemoteError:
    return RemoteError(
        "host_key_changed",
        f"HOST KEY CHANGED for {exc.hostname}: got {fingerprint(exc.key)}, known_hosts has "
        f"{fingerprint(exc.expected_key)}; refusing to connect (a rebuilt instance or a man in the middle)",
        target=target,
        remedy=f"verify the instance out of band, then remove the old line: `ssh-keygen -R "
               f"{shlex.quote(exc.hostname)} -f {shlex.quote(known_hosts)}`")
