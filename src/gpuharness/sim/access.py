"""How a simulator's hosts are reached: one client key that every host accepts, and one known_hosts file that
lists each running host's key, as a provider that publishes its hosts' keys would. `gpuharness sim serve
--configure` records both in providers.json, so the documented commands connect without pinning anything by hand."""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from pathlib import Path
from typing import final

import paramiko


@final
class HostAccess:
    """The client key (a private key file, mode 0600) and the known_hosts file of one simulator's hosts.

    It lives in its own directory outside the registry (a private key is a secret), removed by close()."""

    __slots__ = ("_lock", "client_key", "key_file", "known_hosts", "root")

    def __init__(self, root: str | Path | None = None) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="gh-sim-access-") if root is None else root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.client_key = paramiko.ECDSAKey.generate()
        self.key_file = self.root / "client_key"
        self.client_key.write_private_key_file(str(self.key_file))
        os.chmod(self.key_file, 0o600)
        self.known_hosts = self.root / "known_hosts"
        self.known_hosts.touch()
        self._lock = threading.Lock()

    def publish(self, name: str, key: paramiko.PKey) -> None:
        """List a running host's key under its known_hosts name (`[127.0.0.1]:port`)."""
        with self._lock, self.known_hosts.open("a", encoding="utf-8") as handle:
            handle.write(f"{name} {key.get_name()} {key.get_base64()}\n")

    def withdraw(self, name: str) -> None:
        """Drop a stopped host's line: a later host may get its port, with another key."""
        with self._lock:
            try:
                lines = self.known_hosts.read_text(encoding="utf-8").splitlines(keepends=True)
            except FileNotFoundError:
                return
            self.known_hosts.write_text("".join(x for x in lines if not x.startswith(name + " ")), encoding="utf-8")

    def close(self) -> None:
        """Remove the key and the known_hosts file."""
        shutil.rmtree(self.root, ignore_errors=True)
