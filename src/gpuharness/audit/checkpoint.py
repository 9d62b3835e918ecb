"""The audit checkpoint `<registry>/audit/checkpoint.json`: what a passing audit proved about the ledger.

It holds the line count, byte length and digest of the audited prefix (BLAKE3; a checkpoint written with sha256,
version 2, still verifies), the known deployment ids, the running
spend aggregates, the open jobs and unsynced artifacts, and names the job-state files (`audit/jobs-*.jsonl`,
one JSON array per job: id, status, cost_usd, day, provider, gpu, deployment; a later file overrides an
earlier one), so the next audit can prove the prefix unchanged and validate only the lines appended since.
"""

from __future__ import annotations

import contextlib
import hashlib
import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, final

import blake3
import msgspec
import orjson

from gpuharness.audit import anchor
from gpuharness.audit.ledger_pass import JobState, LatestSync, LoweredCost, PassResult, UnsyncedArtifact
from gpuharness.core import regular_file
from gpuharness.core.clock import now_ts
from gpuharness.core.errors import UserError
from gpuharness.core.json_text import deep_message, too_deep
from gpuharness.core.statefile import atomic_write_bytes, exclusive_lock, fsync_dir

VERSION = 3
#: Versions that load: 2 names the digest `prefix_sha256` (always sha256); 3 names its hash.
READABLE_VERSIONS = (2, 3)
FILE_NAME = "checkpoint.json"
#: The hashes a prefix digest may be taken with; a full pass takes PREFIX_HASH, an incremental one keeps the
#: checkpoint's.
PREFIX_HASHES: dict[str, Callable[[], Any]] = {
    "blake3": lambda: blake3.blake3(max_threads=blake3.blake3.AUTO),
    "sha256": hashlib.sha256,
}
PREFIX_HASH = "blake3"
#: `row` is the jobs' cost per (UTC day, provider, GPU, deployment) (core.spend.row_name): what billed spend needs.
ROW = "row"
GROUPINGS = ("day", "month", "provider", "gpu", "deployment", "day_provider", ROW)
#: Past this many job-state files the next audit re-baselines with a full pass (which writes fresh ones).
MAX_JOB_FILES = 32


@final
@dataclass(slots=True)
class LedgerState:
    """The ledger as audited so far: size, digest, spend aggregates and the few per-job facts kept in memory."""

    line_count: int = 0
    byte_length: int = 0
    prefix_hash: str = PREFIX_HASH
    prefix_digest: str = ""
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
    #: every correction that lowered a job's cost (absolute line numbers), for the report
    lowered: list[LoweredCost] = field(default_factory=list)

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
        self.job_files.extend(part.jobs_files)
        self.lowered.extend(item._replace(lineno=self.line_count + item.lineno) for item in part.lowered)

    @property
    def ledger_deployments(self) -> set[str]:
        return set(self.dep_lines)

    def rounded(self, grouping: str) -> dict[str, float]:
        """An aggregate with float noise removed, sorted by key."""
        return {k: round(v, 6) for k, v in sorted(self.aggregates.get(grouping, {}).items())}


class Attestation(NamedTuple):
    """What a checkpoint attests about the ledger: its first `line_count` lines, `byte_length` bytes, hash to
    `prefix_digest` with `prefix_hash`."""

    line_count: int
    byte_length: int
    prefix_hash: str
    prefix_digest: str


@final
@dataclass(slots=True)
class Checkpoint:
    """A loaded checkpoint."""

    written_at: str
    state: LedgerState
    deployment_ids: list[str]
    policy_sha256: str
    #: the ledger prefix as written; `state` moves on as new lines are audited
    attested: Attestation
    #: which anchor vouches for it (GPUHARNESS_CHECKPOINT_KEY's HMAC, or none) and whether it holds
    anchored: anchor.Verdict = anchor.NO_ANCHOR


def checkpoint_path(registry_root: Path) -> Path:
    """Where the checkpoint of a registry lives."""
    return registry_root / "audit" / FILE_NAME


def policy_digest(policy: dict[str, Any]) -> str:
    """A stable digest of the policy, to know whether ceilings changed since a checkpoint."""
    return hashlib.sha256(orjson.dumps(policy, option=orjson.OPT_SORT_KEYS)).hexdigest()


def load(path: Path) -> Checkpoint | None:
    """The checkpoint at path, None when there is none; ValueError when it is unreadable."""
    try:
        raw = regular_file.read_bytes(path, regular_file.CHECKPOINT, what="the audit's checkpoint", follow=False)
    except FileNotFoundError:
        return None
    except UserError as exc:  # a FIFO, a link or a device in its place, or over its cap
        raise ValueError(f"unreadable checkpoint ({exc.what})") from None
    try:
        if too_deep(raw):
            raise ValueError(deep_message())
        doc = orjson.loads(raw)
        if doc.get("version") not in READABLE_VERSIONS:
            raise ValueError(f"version {doc.get('version')!r}, expected one of {READABLE_VERSIONS}")
        ledger = doc["ledger"]
        if doc["version"] == 2:
            hash_name, digest = "sha256", str(ledger["prefix_sha256"])
        else:
            hash_name, digest = str(ledger["prefix_hash"]), str(ledger["prefix_digest"])
        if hash_name not in PREFIX_HASHES:
            raise ValueError(f"prefix hash {hash_name!r}, expected one of {', '.join(PREFIX_HASHES)}")
        state = LedgerState(
            line_count=int(ledger["line_count"]), byte_length=int(ledger["byte_length"]),
            prefix_hash=hash_name, prefix_digest=digest, job_count=int(doc["job_count"]),
            job_files=[str(name) for name in doc["job_files"]],
            aggregates={g: dict(doc["aggregates"][g]) for g in GROUPINGS if g in doc["aggregates"]},
            dep_lines={str(k): int(v) for k, v in doc["deployment_lines"].items()},
            dep_examples={str(k): list(v) for k, v in doc["deployment_job_examples"].items()},
            last_ts=dict(doc["last_activity"]), open_jobs=dict(doc["open_jobs"]),
            unsynced={k: UnsyncedArtifact(str(v[0]), str(v[1])) for k, v in doc["unsynced_artifacts"].items()},
            synced_max={k: LatestSync(str(v[0]), str(v[1])) for k, v in doc["latest_sync"].items()},
            lowered=[LoweredCost(int(v[0]), str(v[1]), float(v[2]), float(v[3]), str(v[4]), str(v[5]))
                     for v in doc.get("lowered_costs", [])])
        for name in state.job_files:
            if "/" in name or not (path.parent / name).is_file():
                raise ValueError(f"job-state file {name!r} is missing")
        return Checkpoint(str(doc["written_at"]), state, list(doc["deployment_ids"]), str(doc["policy_sha256"]),
                          Attestation(state.line_count, state.byte_length, hash_name, digest), anchor.verify(doc))
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
        path = job_file_path(audit_dir, name)
        with regular_file.open_stream(path, follow=False) as handle:
            for line in regular_file.lines(handle, path, what="job-state line"):
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
    ledger = doc["ledger"]
    written = Attestation(ledger["line_count"], ledger["byte_length"], ledger["prefix_hash"], ledger["prefix_digest"])
    return bool(written == previous.attested
                and doc["deployment_ids"] == sorted(previous.deployment_ids)
                and doc["policy_sha256"] == previous.policy_sha256)


def document(state: LedgerState, deployment_ids: list[str], policy_sha256: str) -> dict[str, Any]:
    """The JSON form of a checkpoint (job_files still as this run names them)."""
    return {
        "version": VERSION,
        "written_at": now_ts(),
        "ledger": {"line_count": state.line_count, "byte_length": state.byte_length,
                   "prefix_hash": state.prefix_hash, "prefix_digest": state.prefix_digest},
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
        **({"lowered_costs": [list(item) for item in state.lowered]} if state.lowered else {}),
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
    tag = doc["ledger"]["prefix_digest"][:12]
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
    doc = anchor.signed(doc)
    atomic_write_bytes(path, orjson.dumps(doc, option=orjson.OPT_INDENT_2 if small else 0) + b"\n")
    for stale in audit_dir.glob("jobs-*.jsonl"):
        if stale.name not in names:
            with contextlib.suppress(FileNotFoundError):
                stale.unlink()
    return True
