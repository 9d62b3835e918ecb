"""A deployment: the typed record of deployments.json, and the facts derived from it.

The file stays plain JSON kept by people and agents too: a record read from it keeps its unknown fields and
which known fields it spelled out, so writing it back changes only what was changed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from datetime import datetime, timedelta
from typing import Any, Final, final

from gpuharness.core import json_text, runtimes, schema
from gpuharness.core.clock import parse_ts

STATES: Final = ("provisioning", "installing", "configuring", "health-checking", "ready", "running",
                 "retrieving", "destroying", "destroyed", "error", "stopped")
LIVE: Final = frozenset(STATES) - {"destroyed"}
#: live states that bill cost_hr: a stopped instance keeps its disk but not its GPU rate
BILLING: Final = LIVE - {"stopped"}
#: Where install writes, jobs keep outputs, retrieve reads and the disk check measures, unless ssh.workspace says
#: otherwise. Relative: under the login directory, so it exists for any user on any host (a container's
#: /workspace does not exist on a VM or an owned server, and a non-root user cannot create it).
DEFAULT_WORKSPACE: Final = "gh-workspace"


@final
@dataclass(frozen=True, slots=True)
class SshAccess:
    """The deployment's `ssh` block: how to reach its host, and where it works there."""

    host: str | None = None
    port: int | None = None
    user: str | None = None
    alias: str | None = None
    transport: str | None = None
    key_file: str | None = None
    known_hosts: str | None = None
    config_file: str | None = None
    workspace: str | None = None

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> SshAccess:
        port = value.get("port")
        return cls(host=_text(value.get("host")), port=None if port is None else int(port),
                   user=_text(value.get("user")), alias=_text(value.get("alias")),
                   transport=_text(value.get("transport")),
                   key_file=_text(value.get("key_file")), known_hosts=_text(value.get("known_hosts")),
                   config_file=_text(value.get("config_file")), workspace=_text(value.get("workspace")))

    def to_json(self) -> dict[str, Any]:
        """The block as written: only what is set."""
        out: dict[str, Any] = {}
        for name in ("host", "port", "user", "alias", "transport", "key_file", "known_hosts", "config_file",
                     "workspace"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        return out

    @property
    def is_local(self) -> bool:
        """The "host" is this machine (transport local): no SSH at all."""
        return self.transport == "local"

    @property
    def label(self) -> str:
        """`ssh user@host:port`, as the journal records the route."""
        return f"ssh {self.user or 'root'}@{self.host}:{self.port or 22}"


@final
@dataclass(frozen=True, slots=True)
class ShutdownRule:
    """When a paid resource must go: idle minutes, max hours, a deadline (whichever comes first)."""

    idle_minutes: float | None = None
    max_hours: float | None = None
    deadline: str | None = None

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> ShutdownRule:
        # numbers stay as written (20 stays 20, not 20.0, when the record is given back)
        return cls(idle_minutes=value.get("idle_minutes"), max_hours=value.get("max_hours"),
                   deadline=_text(value.get("deadline")))

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in (("idle_minutes", self.idle_minutes), ("max_hours", self.max_hours),
                                  ("deadline", self.deadline)) if v is not None}

    def words(self) -> str:
        """The rule in words: `idle 15 min, whichever first: max 2 h`."""
        parts = []
        if self.idle_minutes is not None:
            parts.append(f"idle {self.idle_minutes:g} min")
        if self.max_hours is not None:
            parts.append(f"max {self.max_hours:g} h")
        if self.deadline is not None:
            parts.append(f"deadline {self.deadline}")
        if not parts:
            return "NONE (no shutdown rule)"
        return ", whichever first: ".join(parts) if len(parts) > 1 else parts[0]


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


@final
@dataclass(frozen=True, slots=True)
class Deployment:
    """One entry of deployments.json (the schema, deployments.schema.json, stays the contract)."""

    id: str
    provider: str
    status: str
    cost_hr: float
    created_at: str
    instance_id: str | None = None
    gpu: str | None = None
    gpu_count: int = 1
    runtime: str | None = None
    model: str | None = None
    workflow: str | None = None
    image: str | None = None
    region: str | None = None
    endpoint: str | None = None
    ssh: SshAccess | None = None
    ready_at: str | None = None
    destroyed_at: str | None = None
    shutdown_rule: ShutdownRule | None = None
    owner: str | None = None
    reason: str | None = None
    checkpoint_path: str | None = None
    idempotency_key: str | None = None
    interruptible: bool = False
    labels: Mapping[str, str] = field(default_factory=dict)
    health: Mapping[str, Any] | None = None
    error: str | None = None
    service_port: int | None = None
    log_path: str | None = None
    process: str | None = None
    #: the interpreter the service runs under, where the record names it (else the probe finds it)
    runtime_python: str | None = None
    #: fields this version does not know, kept as read so a write gives them back
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False)
    #: known fields the record spelled out (null included), so a write gives back the same keys
    written: frozenset[str] = field(default=frozenset(), compare=False, repr=False)

    @classmethod
    def from_json(cls, record: Mapping[str, Any]) -> Deployment:
        """The record as read (validated by the registry against the schema first)."""
        ssh, rule = record.get("ssh"), record.get("shutdown_rule")
        gpu_count, port = record.get("gpu_count"), record.get("service_port")
        return cls(
            id=str(record["id"]), provider=str(record["provider"]), status=str(record["status"]),
            cost_hr=float(record.get("cost_hr") or 0.0), created_at=str(record.get("created_at") or ""),
            instance_id=_text(record.get("instance_id")), gpu=_text(record.get("gpu")),
            gpu_count=int(gpu_count) if gpu_count is not None else 1, runtime=_text(record.get("runtime")),
            model=_text(record.get("model")), workflow=_text(record.get("workflow")),
            image=_text(record.get("image")), region=_text(record.get("region")),
            endpoint=_text(record.get("endpoint")),
            ssh=SshAccess.from_json(ssh) if isinstance(ssh, Mapping) else None,
            ready_at=_text(record.get("ready_at")), destroyed_at=_text(record.get("destroyed_at")),
            shutdown_rule=ShutdownRule.from_json(rule) if isinstance(rule, Mapping) else None,
            owner=_text(record.get("owner")), reason=_text(record.get("reason")),
            checkpoint_path=_text(record.get("checkpoint_path")),
            idempotency_key=_text(record.get("idempotency_key")), interruptible=bool(record.get("interruptible")),
            labels=dict(record.get("labels") or {}),
            health=dict(record["health"]) if isinstance(record.get("health"), Mapping) else None,
            error=_text(record.get("error")), service_port=int(port) if port is not None else None,
            log_path=_text(record.get("log_path")), process=_text(record.get("process")),
            runtime_python=_text(record.get("runtime_python")),
            extra={k: v for k, v in record.items() if k not in KNOWN_FIELDS},
            written=frozenset(k for k in record if k in KNOWN_FIELDS))

    @classmethod
    def as_found(cls, record: Mapping[str, Any]) -> Deployment:
        """A record as the audit meets it, which the schema may refuse (the schema rule reports it): a known field
        of the wrong type reads as missing (its default; `written` does not name it), so every other rule still
        judges the rest. id, provider and status read as their text ("None" where missing)."""
        clean: dict[str, Any] = {k: v for k, v in record.items() if k not in KNOWN_FIELDS or _fits(k, v)}
        for name in ("id", "provider", "status"):
            clean.setdefault(name, str(record.get(name)))
        found = cls.from_json(clean)
        return replace(found, written=frozenset(k for k in record if k in clean and k in KNOWN_FIELDS and
                                                _fits(k, record[k])))

    def to_json(self) -> dict[str, Any]:
        """The record in the file's form: the fields it spelled out or that are set, then the unknown ones."""
        out: dict[str, Any] = {}
        for name in KNOWN_FIELDS:
            value = getattr(self, name)
            if name in self.written or name in REQUIRED_FIELDS or value != _DEFAULTS[name]:
                out[name] = json_value(value)
        out.update(self.extra)
        return out

    # -- derived facts ---------------------------------------------------------------------------------------

    @property
    def workspace(self) -> str:
        """The working directory on the host (ssh.workspace, else DEFAULT_WORKSPACE)."""
        return (self.ssh.workspace if self.ssh is not None else None) or DEFAULT_WORKSPACE

    @property
    def outputs_folder(self) -> str:
        """The folder of its workspace where its jobs keep their outputs: its runtime's (ComfyUI writes to its own
        `output`), else core.runtimes.DEFAULT_OUTPUTS."""
        entry = runtimes.runtime(self.runtime)
        return entry.outputs if entry is not None else runtimes.DEFAULT_OUTPUTS

    @property
    def outputs_dir(self) -> str:
        """Where its jobs keep their outputs on its host: <workspace>/<outputs_folder>."""
        return f"{self.workspace}/{self.outputs_folder}"

    @property
    def watched_dirs(self) -> tuple[str, ...]:
        """Every folder of its workspace where some runtime's jobs keep outputs, its own first: where work the
        harness did not start would leave files too."""
        folders = dict.fromkeys((self.outputs_folder, *runtimes.output_folders(), runtimes.DEFAULT_OUTPUTS))
        return tuple(f"{self.workspace}/{folder}" for folder in folders)

    @property
    def ssh_route(self) -> str | None:
        """`ssh user@host:port` when the record names an SSH host or alias, else None (no route of ours)."""
        if self.ssh is None or self.ssh == SshAccess():
            return None
        return self.ssh.label

    @property
    def is_serverless(self) -> bool:
        """A serverless endpoint (its runtime has no host of ours; provision sets it from the provider's kind): there
        is nothing to install, probe or retrieve over SSH, whatever else the record holds."""
        entry = runtimes.runtime(self.runtime)
        return entry is not None and not entry.has_host

    @property
    def is_live(self) -> bool:
        """Not destroyed: it holds, or may hold, a resource."""
        return self.status in LIVE

    @property
    def bills(self) -> bool:
        """Whether its state bills cost_hr (live and not stopped)."""
        return self.status in BILLING

    @property
    def burn_hr(self) -> float:
        """What it costs per hour now: cost_hr while it bills, else nothing."""
        return self.cost_hr if self.bills else 0.0

    @property
    def launch_unfinished(self) -> bool:
        """A launch was recorded and not finished: `provisioning` without an instance id or without the route a
        running instance gets, or `error` before any instance id was seen. With no live process holding its
        launch claim (core.claims), its launcher died: provision resumes it by its key, destroy terminates what
        carries its key, and reconcile links or reports it."""
        if self.is_serverless:
            return False
        if self.status == "error":
            return not self.instance_id
        return self.status == "provisioning" and (
            not self.instance_id or (self.ssh_route is None and self.endpoint is None))

    @property
    def never_came_up(self) -> bool:
        """Its launch was recorded and its instance never reached running with a route (SSH or endpoint): a
        `provision` cut short by --up-deadline or a crash. `provision --resume ID` waits for it again; destroy ends
        it (core.lifecycle.resume_or_destroy)."""
        return (not self.is_serverless and self.status in ("provisioning", "error") and self.ssh_route is None
                and self.endpoint is None)

    @property
    def shutdown_deadline(self) -> datetime | None:
        """The moment its shutdown rule ends it at the latest: the deadline or created_at + max_hours, whichever
        is first (idle minutes depend on activity, not on the clock, so they set no deadline)."""
        rule = self.shutdown_rule
        if rule is None:
            return None
        moments = []
        if rule.deadline:
            moments.append(parse_ts(rule.deadline))
        if rule.max_hours is not None and self.created_at:
            moments.append(parse_ts(self.created_at) + timedelta(hours=rule.max_hours))
        return min(moments, default=None)


KNOWN_FIELDS: Final = tuple(f.name for f in fields(Deployment) if f.name not in ("extra", "written"))
REQUIRED_FIELDS: Final = frozenset({"id", "provider", "status", "cost_hr", "created_at"})
_DEFAULTS: Final[dict[str, Any]] = {f.name: (f.default_factory() if callable(f.default_factory) else f.default)
                                    for f in fields(Deployment) if f.name in KNOWN_FIELDS}


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


#: what a known field's value must be for Deployment.as_found to read it (others are strings or null)
_SHAPES: Final[dict[str, Any]] = {
    "cost_hr": _number, "gpu_count": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "service_port": lambda v: v is None or (isinstance(v, int) and not isinstance(v, bool)),
    "interruptible": lambda v: isinstance(v, bool),
    "labels": lambda v: isinstance(v, Mapping), "health": lambda v: v is None or isinstance(v, Mapping),
    "ssh": lambda v: v is None or (isinstance(v, Mapping) and (v.get("port") is None or
                                                              isinstance(v.get("port"), int))),
    "shutdown_rule": lambda v: v is None or (isinstance(v, Mapping) and all(
        v.get(k) is None or _number(v.get(k)) for k in ("idle_minutes", "max_hours"))),
}


def _fits(name: str, value: Any) -> bool:
    shape = _SHAPES.get(name)
    return shape(value) if shape is not None else value is None or isinstance(value, str)


def json_value(value: Any) -> Any:
    """A field value in the file's form (nested records become their JSON objects)."""
    if isinstance(value, (SshAccess, ShutdownRule)):
        return value.to_json()
    if isinstance(value, Mapping):
        return dict(value)
    return value


def live_burn(deployments: Iterable[Deployment]) -> tuple[float, int]:
    """Hourly burn and count of the deployments that bill: what max_cost_hr and max_concurrent_deployments are
    measured against, by provision, offers and the audit alike."""
    billing = [d for d in deployments if d.bills]
    return sum(d.cost_hr for d in billing), len(billing)


def id_refusal(value: str) -> str | None:
    """Why `value` cannot name a deployment (the id pattern of deployments.schema.json, its one owner), or None: so
    a requested id is told as such before any ceiling is weighed or any record written."""
    unwritable = json_text.unwritable(value)
    if unwritable is not None:
        return f"{value!r}: {unwritable[1]}"
    pattern = schema.load_schema("deployments")["properties"]["deployments"]["items"]["properties"]["id"]["pattern"]
    if not schema.matches(pattern, value):
        return f"{value!r} is not a deployment id: letters, digits, '_', '.' and '-' only ({pattern})"
    return None
