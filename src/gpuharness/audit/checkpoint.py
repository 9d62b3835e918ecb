"""The audit checkpoint `<registry>/audit/checkpoint.json`: what a passing audit proved about the ledger.

It holds the line count, byte length and sha256 of the audited prefix, the known deployment ids, the running
spend aggregates and each job's current state, so the next audit can prove the prefix unchanged and validate
only the lines appended since.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, final

import orjson

from gpuharness.audit.ledger_pass import ChunkResult, JobState, contributions
from gpuharness.clock import now_ts
from gpuharness.statefile import atomic_write_bytes

VERSION = 1
FILE_NAME = "checkpoint.json"
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
GROUPINGS = ("day", "month", "provider", "gpu", "deployment", "day_provider")


@final
@dataclass(slots=True)
class LedgerState:
    """The ledger as audited so far: its size, digest, job states and spend aggregates."""

    line_count: int = 0
    byte_length: int = 0
    prefix_sha256: str = EMPTY_SHA256
    jobs: dict[str, JobState] = field(default_factory=dict)
    aggregates: dict[str, dict[str, float]] = field(default_factory=lambda: {g: {} for g in GROUPINGS})
    ledger_deployments: set[str] = field(default_factory=set)
    last_activity: dict[str, float] = field(default_factory=dict)

    def absorb(self, result: ChunkResult) -> None:
        """Fold one range's final job states into the running state and aggregates."""
        jobs = self.jobs
        aggregates = self.aggregates
        for job_id, state in result.jobs.items():
            old = jobs.get(job_id)
            if old is not None and old[1]:
                for grouping, key in contributions(old):
                    aggregates[grouping][key] = aggregates[grouping].get(key, 0.0) - old[1]
            if state[1]:
                for grouping, key in contributions(state):
                    aggregates[grouping][key] = aggregates[grouping].get(key, 0.0) + state[1]
            jobs[job_id] = state
        self.ledger_deployments |= result.deployments
        for deployment, moment in result.last_activity.items():
            if moment > self.last_activity.get(deployment, 0.0):
                self.last_activity[deployment] = moment
        self.line_count += result.lines

    def rounded(self, grouping: str) -> dict[str, float]:
        """An aggregate with float noise removed, sorted by key."""
        return {k: round(v, 6) for k, v in sorted(self.aggregates[grouping].items())}


@final
@dataclass(slots=True)
class Checkpoint:
    """A loaded checkpoint."""

    written_at: str
    state: LedgerState
    deployment_ids: list[str]
    policy_sha256: str
    #: (line_count, byte_length, prefix_sha256) as written; `state` moves on as new lines are audited
    attested: tuple[int, int, str] = (0, 0, EMPTY_SHA256)


def checkpoint_path(registry_root: Path) -> Path:
    """Where the checkpoint of a registry lives."""
    return registry_root / "audit" / FILE_NAME


def policy_digest(policy: dict[str, Any]) -> str:
    """A stable digest of the policy, to know whether ceilings changed since a checkpoint."""
    return hashlib.sha256(orjson.dumps(policy, option=orjson.OPT_SORT_KEYS)).hexdigest()


def load(path: Path) -> Checkpoint | None:
    """The checkpoint at path, None when there is none; ValueError when it is unreadable."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        doc = orjson.loads(raw)
        if doc.get("version") != VERSION:
            raise ValueError(f"version {doc.get('version')!r}, expected {VERSION}")
        ledger = doc["ledger"]
        state = LedgerState(
            line_count=int(ledger["line_count"]), byte_length=int(ledger["byte_length"]),
            prefix_sha256=str(ledger["prefix_sha256"]),
            jobs={k: tuple(v) for k, v in doc["jobs"].items()},  # type: ignore[misc]
            aggregates={g: dict(doc["aggregates"].get(g, {})) for g in GROUPINGS},
            ledger_deployments=set(doc["ledger_deployment_ids"]),
            last_activity=dict(doc["last_activity"]))
        return Checkpoint(str(doc["written_at"]), state, list(doc["deployment_ids"]), str(doc["policy_sha256"]),
                          (state.line_count, state.byte_length, state.prefix_sha256))
    except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError, ValueError) as exc:
        raise ValueError(f"unreadable checkpoint ({type(exc).__name__}: {exc})") from None


def unchanged(previous: Checkpoint | None, doc: dict[str, Any]) -> bool:
    """Whether a checkpoint already attests the same ledger prefix, deployments and policy.

    Everything else in it is derived from those, so it need not be rewritten (a committed fixture stays clean).
    """
    if previous is None:
        return False
    lines, length, sha = previous.attested
    return bool(doc["ledger"] == {"line_count": lines, "byte_length": length, "prefix_sha256": sha}
            and doc["deployment_ids"] == sorted(previous.deployment_ids)
            and doc["policy_sha256"] == previous.policy_sha256)


def document(state: LedgerState, deployment_ids: list[str], policy_sha256: str) -> dict[str, Any]:
    """The JSON form of a checkpoint."""
    return {
        "version": VERSION,
        "written_at": now_ts(),
        "ledger": {"line_count": state.line_count, "byte_length": state.byte_length,
                   "prefix_sha256": state.prefix_sha256},
        "deployment_ids": sorted(deployment_ids),
        "ledger_deployment_ids": sorted(state.ledger_deployments),
        "policy_sha256": policy_sha256,
        "aggregates": {g: state.rounded(g) for g in GROUPINGS},
        "last_activity": dict(sorted(state.last_activity.items())),
        "jobs": state.jobs,
    }


def write(path: Path, doc: dict[str, Any], previous: Checkpoint | None = None) -> bool:
    """Atomically write the checkpoint unless `previous` already attests the same; True when written."""
    if unchanged(previous, doc):
        return False
    atomic_write_bytes(path, orjson.dumps(doc, option=orjson.OPT_INDENT_2 if len(doc["jobs"]) < 5000 else 0)
                       + b"\n")
    return True
