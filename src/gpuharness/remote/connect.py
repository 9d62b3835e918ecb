"""SSH and local transports implementing the Remote seam (`gpuharness.remote`)."""

from __future__ import annotations

from gpuharness.remote.hostkeys import fingerprint
from gpuharness.remote.local import LocalRemote
from gpuharness.remote.route import HostRoute, parse_route, resolve
from gpuharness.remote.ssh import SSHRemote

__all__ = ["HostRoute", "LocalRemote", "SSHRemote", "fingerprint", "open_remote", "parse_route", "resolve"]


def open_remote(route: HostRoute, *, connect_timeout_s: float = 15.0) -> SSHRemote | LocalRemote:
    """Open the one connection for this target and phase. One attempt: errors are RemoteError, never retried."""
    if route.transport == "local":
        return LocalRemote(route.target)
    return SSHRemote(route, connect_timeout_s=connect_timeout_s)

