"""One deployment's probe, taken live (one connection, one exec, one attempt) or replayed from its recorded
transcript, as a ProbeRecord: what every check of the run reads, whichever way it was taken."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, final

from gpuharness.core.deployment import Deployment
from gpuharness.core.errors import UserError
from gpuharness.core.json_fields import JsonFields
from gpuharness.core.policy import Policy
from gpuharness.core.registry import Registry
from gpuharness.core.regular_file import read_recording
from gpuharness.probe import facts, measuring, server_catalog, targets, transcripts
from gpuharness.probe.facts import ProbeResult
from gpuharness.probe.measuring import MeasurementRecord
from gpuharness.probe.script import PROBE_VERSION, build_script
from gpuharness.probe.server_catalog import CatalogObservation
from gpuharness.remote import RemoteError
from gpuharness.remote.connections import record_probe


@final
@dataclass(frozen=True, slots=True)
class Transcript:
    """What the probe's one exec returned (a replay has no timing), with the nonce its output is framed under and
    the probe version that wrote it (a live probe is always the current one: read under its nonce)."""

    stdout: str
    stderr: str = ""
    exit_status: int | None = None
    timed_out: bool = False
    duration_s: float | None = None
    nonce: str | None = None
    probe_version: int = PROBE_VERSION

    @property
    def digest(self) -> str:
        return facts.digest_of(self.stdout, self.stderr, self.exit_status)

    def parse(self) -> ProbeResult:
        """Its facts, parsed once per process however many checks (each with its own copy of the record) read
        them: kept by the transcript's digest."""
        key = f"{self.digest} v{self.probe_version} {self.nonce}"
        parsed = PARSED.get(key)
        if parsed is None:
            parsed = facts.parse_transcript(self.stdout, self.stderr, self.exit_status,
                                            probe_version=self.probe_version, nonce=self.nonce)
            if len(PARSED) >= _PARSED_MAX:
                PARSED.pop(next(iter(PARSED)))
            PARSED[key] = parsed
        return parsed


#: The facts of the transcripts this process parsed, by digest (a health run reads each deployment's once).
PARSED: dict[str, ProbeResult] = {}
_PARSED_MAX = 1024


@final
@dataclass(frozen=True, slots=True)
class ProbeFailure:
    """Why there is no transcript: a transport error kind (unreachable, host_key_unknown, ...) or a missing input
    (no_route, no_transcript, bad_transcript)."""

    kind: str
    message: str


@final
@dataclass(frozen=True, slots=True)
class ProgressObservation:
    """A running job's progress marker now and at its previous observation in the journal."""

    current: dict[str, int]
    previous: dict[str, Any] | None = None
    previous_at: str | None = None
    problem: str | None = None  # the journal could not be read or written


@final
@dataclass(frozen=True, slots=True)
class ProbeRecord(JsonFields):
    """One deployment's probe for this run: a transcript, or why there is none (or why none applies), and the
    server's node catalog taken in the same phase (ComfyUI runtimes)."""

    route: str | None
    transcript: Transcript | None = None
    failure: ProbeFailure | None = None
    not_applicable: str | None = None
    source: str | None = None  # a replay's recorded provenance
    connections: int = 0
    execs: int = 0
    probed_at: str | None = None
    progress: ProgressObservation | None = None
    catalog: CatalogObservation | None = None
    measurement: MeasurementRecord | None = None  # the GPU measurement, where the policy asks for one

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ProbeRecord:
        fields = dict(data)
        for name, kind in (("transcript", Transcript), ("failure", ProbeFailure), ("progress", ProgressObservation),
                           ("catalog", CatalogObservation), ("measurement", MeasurementRecord)):
            if fields.get(name) is not None:
                fields[name] = kind(**fields[name])
        return cls(**fields)


def live(registry: Registry, deployment: Deployment, *, record_to: Path | None = None,
         catalog: CatalogObservation | None = None) -> ProbeRecord:
    """Connect once by the recorded route, run the probe in one exec, record the route's last probe in
    connections.json, and (record mode) the scrubbed transcript at `record_to`, naming the run's `catalog`.
    A UserError: no usable route."""
    from gpuharness.remote.connect import open_remote, resolve  # paramiko (~0.2 s): only a live probe needs it

    policy = Policy(registry.policy_document())
    route = resolve(deployment, registry.items("connections.json"))
    started = time.monotonic()
    try:
        remote = open_remote(route, connect_timeout_s=policy.health_timeouts.connect_s)
    except RemoteError as exc:  # one attempt: never retried
        record_probe(registry, route, phase="health", result=f"failed: {exc.kind}")
        return ProbeRecord(route=route.label, failure=ProbeFailure(exc.kind, str(exc)), catalog=catalog)
    script = build_script(targets.probe_targets(deployment, policy))
    try:
        result = remote.exec(script.text, deadline_s=targets.probe_deadline_s(policy))
        workflow = targets.manifest(registry, "workflows.json", "id", deployment.workflow) or {}
        measured = measuring.take(remote, deployment, policy, facts.read(script, result), workflow.get("precision"))
    except RemoteError as exc:
        return ProbeRecord(route=route.label, failure=ProbeFailure(exc.kind, str(exc)), catalog=catalog)
    finally:
        remote.close()
    transcript = Transcript(result.stdout, result.stderr, result.exit_status, result.timed_out,
                            round(time.monotonic() - started, 3), nonce=script.nonce)
    outcome = "timed out" if result.timed_out else f"exit {result.exit_status}"
    record_probe(registry, route, phase="health", result=outcome,
                 accepted_key=getattr(remote, "accepted_host_key", None))
    if record_to is not None:
        transcripts.write(record_to, deployment, route, result, script.nonce, transcripts.known_secrets(registry),
                          catalog=catalog, measurement=measured)
    return ProbeRecord(route=route.label, transcript=transcript, connections=getattr(remote, "connections", 0),
                       execs=getattr(remote, "execs", 1), catalog=catalog, measurement=measured)


def replay(path: Path, deployment_id: str, *, catalog: bool = False) -> ProbeRecord:
    """The recorded transcript at `path` (with the server catalog it names, when `catalog`), or what to do when
    there is none."""
    if not path.is_file():
        return ProbeRecord(route="offline", failure=ProbeFailure(
            "no_transcript", f"no probe transcript {path}; record one with `pytest checks/health --gpu-mode record "
                             f"--deployment {deployment_id}` or run live with --gpu-mode live"))
    try:
        document = read_recording(path, what="a probe transcript")
    except (OSError, ValueError) as exc:  # not JSON, or nested too deeply
        return ProbeRecord(route="offline", failure=ProbeFailure("bad_transcript", f"{path}: not JSON: {exc}"))
    except UserError as exc:  # not a regular file, or over its cap
        return ProbeRecord(route="offline", failure=ProbeFailure("bad_transcript", exc.line()))
    transcript = Transcript(document.get("stdout", ""), document.get("stderr", ""), document.get("exit_status"),
                            nonce=document.get("nonce"), probe_version=_version(document.get("probe_version")))
    return ProbeRecord(route=f"offline replay of {path.name} ({document.get('source', 'unknown source')})",
                       transcript=transcript, source=document.get("source"),
                       catalog=server_catalog.recorded(document, path) if catalog else None,
                       measurement=measuring.recorded(document))


def _version(recorded: object) -> int:
    """A recording's probe version: what it says, else 1 (the first recordings named none)."""
    return recorded if isinstance(recorded, int) and not isinstance(recorded, bool) else 1
