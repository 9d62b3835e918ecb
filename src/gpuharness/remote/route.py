"""Where and how to reach a target: the deployment's ssh block, a live route from connections.json,
or an ssh config alias (with ProxyJump / ProxyCommand)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, final

import paramiko

from gpuharness.core.clock import parse_ts, utcnow
from gpuharness.core.deployment import Deployment, SshAccess
from gpuharness.core.errors import UserError

DEFAULT_KNOWN_HOSTS = "~/.ssh/known_hosts"
DEFAULT_CONFIG = "~/.ssh/config"
_ROUTE = re.compile(r"^(?:ssh://)?(?:(?P<user>[^@/\s]+)@)?(?P<host>\[[^\]]+\]|[^:/\s]+)(?::(?P<port>\d+))?/?$")


@final
@dataclass(frozen=True, slots=True)
class HostRoute:
    """One way to reach a host. `label` is what the journal and connections.json record."""

    target: str
    transport: Literal["ssh", "local"] = "ssh"
    host: str = "127.0.0.1"
    port: int = 22
    user: str | None = None
    key_file: str | None = None
    known_hosts: str = DEFAULT_KNOWN_HOSTS
    alias: str | None = None
    jump: HostRoute | None = None
    proxy_command: str | None = None
    trust_on_first_use: bool = False

    @property
    def label(self) -> str:
        if self.transport == "local":
            return "local"
        text = f"{self.user + '@' if self.user else ''}{self.host}:{self.port}"
        if self.jump is not None:
            text += f" via {self.jump.label}"
        elif self.proxy_command:
            text += " via ProxyCommand"
        return f"alias {self.alias} -> {text}" if self.alias else text

    @property
    def known_hosts_name(self) -> str:
        """The known_hosts lookup name: `[host]:port` for a non-22 port."""
        return self.host if self.port == 22 else f"[{self.host}]:{self.port}"


def parse_route(target: str, text: str, **defaults: Any) -> HostRoute:
    """`user@host:port` (optionally `ssh://...`) -> HostRoute."""
    match = _ROUTE.match(text.strip())
    if not match:
        raise UserError(f"cannot read route {text!r}", place=target, hint="write it as user@host:port")
    host = match.group("host").strip("[]")
    fields = dict(defaults)
    port = int(match.group("port") or fields.pop("port", 22))
    user = match.group("user") or fields.pop("user", None)
    fields.pop("port", None)
    fields.pop("user", None)
    return HostRoute(target=target, host=host, port=port, user=user, **fields)


def from_alias(target: str, alias: str, config_file: str | None = None, **defaults: Any) -> HostRoute:
    """Resolve an ssh config alias the way OpenSSH would: HostName, Port, User, IdentityFile,
    UserKnownHostsFile, ProxyJump (first hop) and ProxyCommand. paramiko does not apply these itself."""
    path = Path(os.path.expanduser(config_file or DEFAULT_CONFIG))
    if not path.is_file():
        raise UserError(f"ssh config not found for alias {alias!r}", path=path, place=target,
                        hint="set ssh.config_file in deployments.json or create the alias")
    config = paramiko.SSHConfig.from_path(str(path))
    if alias not in config.get_hostnames():
        raise UserError(f"alias {alias!r} is not defined", path=path, place=target,
                        hint="add a Host block for it, or set ssh.host/ssh.port instead")
    entry = config.lookup(alias)
    identity = entry.get("identityfile")
    known = entry.get("userknownhostsfile")
    jump: HostRoute | None = None
    if entry.get("proxyjump"):
        first_hop = str(entry["proxyjump"]).split(",")[0].strip()
        if first_hop in config.get_hostnames():
            jump = from_alias(f"{target}/jump", first_hop, str(path), **defaults)
        else:
            jump = parse_route(f"{target}/jump", first_hop, **defaults)
    fields: dict[str, Any] = dict(defaults)
    if identity:
        fields["key_file"] = os.path.expanduser(identity[0])
    if known:
        fields["known_hosts"] = os.path.expanduser(str(known).split()[0])
    return HostRoute(target=target, host=str(entry.get("hostname", alias)), port=int(entry.get("port", 22)),
                 user=entry.get("user") or fields.pop("user", None), alias=alias, jump=jump,
                 proxy_command=None if jump else entry.get("proxycommand"),
                 **{k: v for k, v in fields.items() if k in {"key_file", "known_hosts", "trust_on_first_use"}})


def live_connection(connections: list[dict[str, Any]], target: str,
                    now: datetime | None = None) -> dict[str, Any] | None:
    """The connections.json entry for target whose heartbeat is within its ttl, if any."""
    now = now or utcnow()
    for entry in connections:
        if entry.get("target") != target or entry.get("kind") not in {"ssh", "bridge", "tunnel", "local"}:
            continue
        if not (entry.get("route") or entry.get("alias") or entry.get("kind") == "local"):
            continue
        beat, ttl = entry.get("heartbeat_at"), entry.get("ttl_s")
        if beat and ttl is not None and (now - parse_ts(beat)).total_seconds() > float(ttl):
            continue
        return entry
    return None


def resolve(deployment: Deployment, connections: list[dict[str, Any]] | None = None,
            now: datetime | None = None) -> HostRoute:
    """The route to a deployment: a live connections.json route first, then its ssh block."""
    target = deployment.id
    ssh = deployment.ssh or SshAccess()
    entry = live_connection(connections or [], target, now)
    tofu = bool(entry and entry.get("trust_on_first_use"))
    if not tofu:
        tofu = any(c.get("target") == target and c.get("trust_on_first_use") for c in connections or [])
    defaults: dict[str, Any] = {"trust_on_first_use": tofu}
    if ssh.key_file:
        defaults["key_file"] = os.path.expanduser(ssh.key_file)
    if ssh.known_hosts:
        defaults["known_hosts"] = os.path.expanduser(ssh.known_hosts)
    if ssh.user:
        defaults["user"] = ssh.user
    if entry is not None:
        if entry.get("kind") == "local":
            return HostRoute(target=target, transport="local")
        if entry.get("alias"):
            return from_alias(target, entry["alias"], ssh.config_file, **defaults)
        return parse_route(target, entry["route"], **defaults)
    if ssh.is_local:
        return HostRoute(target=target, transport="local")
    if ssh.alias:
        return from_alias(target, ssh.alias, ssh.config_file, **defaults)
    if not ssh.host:
        raise UserError(f"deployment {target} has no ssh route", place=f"deployments[{target}].ssh",
                        hint="record ssh.host/ssh.port (or ssh.alias, or transport: local)")
    defaults.pop("user", None)
    return replace(HostRoute(target=target, host=ssh.host, port=ssh.port or 22, user=ssh.user), **defaults)
