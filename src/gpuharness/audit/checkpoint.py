"""The audit checkpoint `<registry>/audit/checkpoint.json`: what a passing audit proved about the ledger.

It holds the line count, byte length and sha256 of the audited prefix, the known deployment ids, the running
spend aggregates, the open jobs and unsynced artifacts, and names the job-state files (`audit/jobs-*.jsonl`,
one JSON array per job: id, status, cost_usd, day, provider, gpu, deployment; a later file overrides an
earlier one), so the next audit can prove the prefix unchanged and validate only the lines appended since.
"""

from __future__ import annotations

import contextlib
import hashlib
import shutil
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, final

import msgspec
import orjson

from gpuharness.audit.ledger_pass import JobState, LatestSync, PassResult, UnsyncedArtifact
from gpuharness.core.clock import now_ts
from gpuharness.core.statefile import atomic_write_bytes, exclusive_lock, fsync_dir

VERSION = 2
FILE_NAME = "checkpoint.json"
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
GROUPINGS = ("day", "month", "provider", "gpu", "deployment", "day_provider")
#: Past this many job-state files the next audit re-baselines with a full pass (which writes fresh ones).
MAX_JOB_FILES = 32


@final
@dataclass(slots=True)
class LedgerState:
    """The ledger as audited so far: size, digest, spend aggregates and the few per-job facts kept in memory."""

    line_count: int = 0
    byte_length: int = 0
    prefix_sha256: str = EMPTY_SHA256
    job_count: int = 0
    #: job-state files: names under audit/ (committed) or absolute paths (written by this run, pending)
    job_files: list[str] = field(default_factory=list)
    aggregates: dict[str, dict[str, float]] = field(default_factory=lambda: {g: {} for g in GROUPINGS})
    dep_lines: dict[str, int] = field(default_factory=dict)
    dep_examples: dict[str, list[str]] = field(default_factory=dict)
    last_ts: dict[str, str] = field(default_factory=dict)
    open_jobs: dict[str, str] = field(default_factory=dict)
    unsynced: dict[str, UnsyncedArtifact] = field(default_factory=dict)
    synced_max: dict[str, LatestSync] = field(default_factory=dict)

    def absorb(self, part: PassResult) -> None:
        """Fold a pass's deltas into the running state."""
        for grouping, deltas in part.spend.items():
            bucket = self.aggregates.setdefault(grouping, {})
            for key, delta in deltas.items():
                bucket[key] = bucket.get(key, 0.0) + delta
        for job_id in part.closed:
            self.open_jobs.pop(job_id, None)
        self.open_jobs.update(part.opened)
        for job_id in part.resynced:
            self.unsynced.pop(job_id, None)
        self.unsynced.update(part.unsynced)
        for deployment, latest in part.synced_max.items():
            if latest.synced_at > self.synced_max.get(deployment, LatestSync("", "")).synced_at:
                self.synced_max[deployment] = latest
        for deployment, count in part.dep_lines.items():
            self.dep_lines[deployment] = self.dep_lines.get(deployment, 0) + count
            examples = self.dep_examples.setdefault(deployment, [])
            for job_id in part.dep_examples.get(deployment, []):
                if len(examples) < 3 and job_id not in examples:
                    examples.append(job_id)
        for deployment, ts in part.last_ts.items():
            if ts > self.last_ts.get(deployment, ""):
                self.last_ts[deployment] = ts
        self.job_count += part.new_jobs
        if part.jobs_file:
            self.job_files.append(part.jobs_file)

    @property
    def ledger_deployments(self) -> set[str]:
        return set(self.dep_lines)

    def rounded(self, grouping: str) -> dict[str, float]:
        """An aggregate with float noise removed, sorted by key."""
        return {k: round(v, 6) for k, v in sorted(self.aggregates.get(grouping, {}).items())}


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
            prefix_sha256=str(ledger["prefix_sha256"]), job_count=int(doc["job_count"]),
            job_files=[str(name) for name in doc["job_files"]],
            aggregates={g: dict(doc["aggregates"].get(g, {})) for g in GROUPINGS},
            dep_lines={str(k): int(v) for k, v in doc["deployment_lines"].items()},
            dep_examples={str(k): list(v) for k, v in doc["deployment_job_examples"].items()},
            last_ts=dict(doc["last_activity"]), open_jobs=dict(doc["open_jobs"]),
            unsynced={k: UnsyncedArtifact(str(v[0]), str(v[1])) for k, v in doc["unsynced_artifacts"].items()},
            synced_max={k: LatestSync(str(v[0]), str(v[1])) for k, v in doc["latest_sync"].items()})
        for name in state.job_files:
            if "/" in name or not (path.parent / name).is_file():
                raise ValueError(f"job-state file {name!r} is missing")
        return Checkpoint(str(doc["written_at"]), state, list(doc["deployment_ids"]), str(doc["policy_sha256"]),
                          (state.line_count, state.byte_length, state.prefix_sha256))
    except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError, ValueError, IndexError) as exc:
        raise ValueError(f"unreadable checkpoint ({type(exc).__name__}: {exc})") from None


def job_file_path(audit_dir: Path, name: str) -> Path:
    """A job-state file named in a checkpoint (committed: relative to audit/; pending: absolute)."""
    candidate = Path(name)
    return candidate if candidate.is_absolute() else audit_dir / candidate


def load_jobs(audit_dir: Path, names: Iterable[str], wanted: set[str]) -> dict[str, JobState]:
    """The states of the wanted job ids from the job-state files (a later file overrides an earlier one)."""
    keys = {orjson.dumps(job_id)[1:-1]: job_id for job_id in wanted}
    decode = msgspec.json.Decoder(JobState).decode
    found: dict[str, JobState] = {}
    for name in names:
        with open(job_file_path(audit_dir, name), "rb") as handle:
            for line in handle:
                end = line.find(b'"', 2)  # the id's bytes, when it holds no escape: most lines are not wanted
                if end > 2 and line[end - 1] != 92 and line[2:end] not in keys:
                    continue
                state = decode(line)
                if state.id in wanted:
                    found[state.id] = state
    return found


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
    """The JSON form of a checkpoint (job_files still as this run names them)."""
    return {
        "version": VERSION,
        "written_at": now_ts(),
        "ledger": {"line_count": state.line_count, "byte_length": state.byte_length,
                   "prefix_sha256": state.prefix_sha256},
        "deployment_ids": sorted(deployment_ids),
        "policy_sha256": policy_sha256,
        "job_count": state.job_count,
        "aggregates": {g: state.rounded(g) for g in GROUPINGS},
        "deployment_lines": dict(sorted(state.dep_lines.items())),
        "deployment_job_examples": dict(sorted(state.dep_examples.items())),
        "last_activity": dict(sorted(state.last_ts.items())),
        "open_jobs": dict(sorted(state.open_jobs.items())),
        "unsynced_artifacts": {k: list(v) for k, v in sorted(state.unsynced.items())},
        "latest_sync": {k: list(v) for k, v in sorted(state.synced_max.items())},
        "job_files": list(state.job_files),
    }


def write(path: Path, doc: dict[str, Any], previous: Checkpoint | None = None) -> bool:
    """Commit the checkpoint unless `previous` already attests the same; True when written.

    Pending job-state files move into audit/ under names derived from the prefix digest, then checkpoint.json is
    replaced atomically, then job-state files it no longer names are removed.
    """
    if unchanged(previous, doc):
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    with exclusive_lock(path):  # two audits finishing together must not delete each other's job files
        return _commit(path, doc)


def _commit(path: Path, doc: dict[str, Any]) -> bool:
    audit_dir = path.parent
    tag = doc["ledger"]["prefix_sha256"][:12]
    names: list[str] = []
    for index, name in enumerate(doc["job_files"]):
        source = Path(name)
        if not source.is_absolute():
            names.append(name)
            continue
        final_name = f"jobs-{tag}-{index}.jsonl"
        shutil.move(str(source), audit_dir / final_name)
        names.append(final_name)
    doc = dict(doc, job_files=names)
    fsync_dir(audit_dir)
    small = doc["job_count"] < 5000
    atomic_write_bytes(path, orjson.dumps(doc, option=orjson.OPT_INDENT_2 if small else 0) + b"\n")
    for stale in audit_dir.glob("jobs-*.jsonl"):
        if stale.name not in names:
            with contextlib.suppress(FileNotFoundError):
                stale.unlink()
    return True
