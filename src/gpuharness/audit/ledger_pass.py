"""One streaming pass over jobs.jsonl: schema, job consistency and secrets per line, job state per id.

The file is cut at line boundaries into byte ranges that worker processes scan in parallel; each range
yields a ChunkResult, and `merge` folds them in file order (cross-range sequence checks happen there).
"""

from __future__ import annotations

import gc
import hashlib
import multiprocessing
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, final

import orjson

from gpuharness import schema
from gpuharness.audit.secrets import find_secrets, line_of
from gpuharness.clock import format_ts
from gpuharness.ledger import TERMINAL, sequence_problem

BLOCK = 4 << 20
#: Below this size a ledger is scanned in-process; above it, in one process per CPU.
PARALLEL_MIN_BYTES = 16 << 20

#: (status, cost_usd, UTC day, provider, gpu, deployment_id, artifacts) of a job's current line.
#: artifacts: None (none listed), "!name" (an artifact neither synced nor discarded) or the latest synced_at
#: in canonical form (see canonical_ts).
JobState = tuple[str, float, str, str, str, str, Any]

RULES = ("ledger:schema", "ledger:torn", "job:completed-after-started", "job:duration-agrees",
         "job:cost-matches-rate", "job:failed-has-error", "job:only-corrections-after-terminal", "secrets:ledger")


@final
@dataclass(frozen=True, slots=True)
class PassContext:
    """What every range scan needs to know (picklable)."""

    path: str
    cost_hr: dict[str, float]
    abs_tol: float
    rel_tol: float
    max_examples: int = 20


@final
@dataclass(slots=True)
class ChunkResult:
    """What one byte range holds. Line numbers are relative to the range (1 = its first line)."""

    lines: int = 0
    jobs: dict[str, JobState] = field(default_factory=dict)
    #: jobs whose first line in this range could not be checked against an unknown earlier state
    firsts: dict[str, tuple[int, dict[str, Any]]] = field(default_factory=dict)
    findings: list[tuple[str, int, str]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    deployments: set[str] = field(default_factory=set)
    last_activity: dict[str, float] = field(default_factory=dict)
    #: (relative line, bytes) of a final line without its newline
    torn: tuple[int, int] | None = None


_parse = datetime.fromisoformat


def _epoch(text: str) -> float:
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def _epoch_lenient(text: str) -> float:
    """RFC 3339 also allows a lowercase t/z and naive-looking forms; normalize before parsing."""
    return _epoch(text.upper().replace(" ", "T"))


def utc_day(stamp: str) -> str:
    """The UTC day (YYYY-MM-DD) of an RFC 3339 timestamp."""
    if stamp.endswith(("Z", "z")) or len(stamp) < 11:
        return stamp[:10]
    try:
        moment = datetime.fromisoformat(stamp)
    except ValueError:
        return stamp[:10]
    if moment.tzinfo is None:
        return stamp[:10]
    return moment.astimezone(UTC).strftime("%Y-%m-%d")


def canonical_ts(text: str) -> str:
    """A timestamp as YYYY-MM-DDTHH:MM:SS.mmmZ (UTC), so that string order is time order."""
    if len(text) == 24 and text[-1] == "Z" and text[10] == "T":
        return text
    return format_ts(datetime.fromisoformat(text.upper().replace(" ", "T")))


def _artifacts_state(artifacts: list[dict[str, Any]]) -> str | None:
    latest = ""
    for artifact in artifacts:
        if artifact.get("discarded") is True:
            continue
        synced = artifact.get("synced_at")
        if not synced:
            return "!" + str(artifact.get("name"))
        synced = canonical_ts(synced)
        if synced > latest:
            latest = synced
    return latest or None


class _Scanner:
    """The per-line rules, applied to one range (the hot loop of the audit: keep it lean)."""

    __slots__ = ("ctx", "days", "initial", "is_valid", "known_start", "last_ts", "result", "strings")

    def __init__(self, ctx: PassContext, initial: dict[str, JobState] | None, known_start: bool) -> None:
        self.ctx = ctx
        self.initial = initial
        self.known_start = known_start
        self.result = ChunkResult()
        self.days: dict[str, str] = {}
        self.strings: dict[str, str] = {}
        #: per deployment, the latest canonical (YYYY-MM-DDTHH:MM:SS.mmmZ) ts string; others are parsed
        self.last_ts: dict[str, str] = {}
        self.is_valid = schema.fast_validator("job").is_valid

    def note(self, rule: str, lineno: int, message: str) -> None:
        counts = self.result.counts
        seen = counts.get(rule, 0)
        counts[rule] = seen + 1
        if seen < self.ctx.max_examples:
            self.result.findings.append((rule, lineno, message))

    def lines(self, raws: list[bytes], lineno: int) -> int:
        """Check each line; `lineno` is the number of the line before the first. Returns the last number."""
        loads = orjson.loads
        decode_error = orjson.JSONDecodeError
        is_valid = self.is_valid
        job = self.job
        for raw in raws:
            lineno += 1
            try:
                record = loads(raw)
            except decode_error as exc:
                self.note("ledger:torn", lineno, f"not valid JSON ({exc}); a torn or merged write in the middle "
                          "of the ledger. Move the fragment out (keep a copy) and re-append the job's line")
                continue
            if type(record) is not dict:
                self.note("ledger:torn", lineno, "a ledger line must be a JSON object; move it out of jobs.jsonl")
                continue
            if not is_valid(record):
                errors, _ = schema.check("job", record)
                detail = "; ".join(f"{e.json_path}: {e.message}" for e in errors[:3]) or "schema mismatch"
                self.note("ledger:schema", lineno, f"job {record.get('id')!r} does not match the job schema: "
                          f"{detail}. Append a correction line with the right fields (never edit the line)")
                continue
            job(lineno, record)
        return lineno

    def job(self, lineno: int, record: dict[str, Any]) -> None:
        result = self.result
        jobs = result.jobs
        get = record.get
        strings = self.strings
        job_id: str = record["id"]
        status: str = record["status"]
        status = strings.setdefault(status, status)
        deployment: str = record["deployment_id"]
        deployment = strings.setdefault(deployment, deployment)
        previous = jobs.get(job_id)
        if previous is None and self.initial is not None:
            previous = self.initial.get(job_id)
        correction = get("correction")
        if previous is not None:
            if correction or previous[0] in TERMINAL or previous[5] != deployment:
                problem = sequence_problem({"status": previous[0], "deployment_id": previous[5]}, record)
                if problem:
                    self.note("job:only-corrections-after-terminal", lineno,
                              f"{problem}. Append a correction line instead")
        elif self.known_start:
            if correction:
                self.note("job:only-corrections-after-terminal", lineno,
                          f"job {job_id}: a correction needs an earlier line of the same job")
        elif job_id not in result.firsts:
            result.firsts[job_id] = (lineno, {"id": job_id, "status": status, "deployment_id": deployment,
                                              "correction": correction, "reason": get("reason")})

        started = get("started_at")
        completed = get("completed_at")
        duration = get("duration_s")
        if completed and started:
            try:
                elapsed = (_parse(completed) - _parse(started)).total_seconds()
            except (ValueError, TypeError):
                elapsed = _epoch_lenient(completed) - _epoch_lenient(started)
            if elapsed < 0:
                self.note("job:completed-after-started", lineno,
                          f"job {job_id}: completed_at {completed} is {-elapsed:.1f} s before started_at {started}; "
                          "append a correction with the real times")
            elif duration is not None and abs(duration - elapsed) > max(1.0, 0.01 * elapsed):
                self.note("job:duration-agrees", lineno,
                          f"job {job_id}: duration_s {duration:g} but completed_at − started_at = {elapsed:.1f} s; "
                          "append a correction with the measured duration")
        elif status == "completed":
            missing = " and ".join(n for n, v in (("started_at", started), ("completed_at", completed)) if not v)
            self.note("job:completed-after-started", lineno,
                      f"job {job_id} is completed but has no {missing}; append a correction with both times")
        cost = get("cost_usd")
        if duration is not None and cost is not None:
            ctx = self.ctx
            rate = ctx.cost_hr.get(deployment)
            if rate is not None:
                expected = duration * rate / 3600.0
                if abs(cost - expected) > ctx.abs_tol + ctx.rel_tol * expected:
                    self.note("job:cost-matches-rate", lineno,
                              f"job {job_id}: cost_usd {cost:.6f} but duration_s {duration:g} × cost_hr "
                              f"{rate:g} / 3600 = {expected:.6f} (tolerance ${ctx.abs_tol:g} + "
                              f"{ctx.rel_tol:.0%}); fix the rate in deployments.json or append a correction")
        if status == "failed" and not get("error"):
            self.note("job:failed-has-error", lineno,
                      f"job {job_id} failed without an error; append a correction with the error text")

        ts: str = record["ts"]
        stamp = completed or started or ts
        key = stamp[:10] if stamp[-1] == "Z" else stamp
        day = self.days.get(key)
        if day is None:
            day = utc_day(stamp)
            self.days[key] = day
        artifacts = get("artifacts")
        provider = get("provider") or "?"
        gpu = get("gpu") or "?"
        jobs[job_id] = (status, float(cost or 0.0), day, strings.setdefault(provider, provider),
                        strings.setdefault(gpu, gpu), deployment, _artifacts_state(artifacts) if artifacts else None)
        if len(ts) == 24 and ts[-1] == "Z":
            if ts > self.last_ts.get(deployment, ""):
                self.last_ts[deployment] = ts
        else:
            moment = _epoch(ts)
            if moment > result.last_activity.get(deployment, 0.0):
                result.last_activity[deployment] = moment

    def finish(self) -> None:
        """Fold the canonical last-ts strings into last_activity."""
        activity = self.result.last_activity
        for deployment, ts in self.last_ts.items():
            moment = _epoch(ts)
            if moment > activity.get(deployment, 0.0):
                activity[deployment] = moment
        self.result.deployments = set(activity) | set(self.last_ts)

    def block_secrets(self, data: bytes, first_lineno: int) -> None:
        for hit in find_secrets(data):
            lineno = first_lineno + line_of(data, hit.offset) - 1
            self.note("secrets:ledger", lineno, f"{hit.kind} {hit.shown}; revoke it at the provider, then move "
                      "the secret out of the ledger (keep only the variable's name)")


def scan_range(ctx: PassContext, start: int, end: int, initial: dict[str, JobState] | None = None,
               known_start: bool = True) -> ChunkResult:
    """Scan bytes [start, end) of the ledger; `end` is a line boundary or the end of the file."""
    collecting = gc.isenabled()
    gc.disable()  # the pass creates no cycles; generational scans of the growing job table would dominate
    try:
        return _scan_range(ctx, start, end, initial, known_start)
    finally:
        if collecting:
            gc.enable()


def _scan_range(ctx: PassContext, start: int, end: int, initial: dict[str, JobState] | None,
                known_start: bool) -> ChunkResult:
    scanner = _Scanner(ctx, initial, known_start)
    result = scanner.result
    lineno = 0
    remaining = end - start
    carry = b""
    with open(ctx.path, "rb") as handle:
        handle.seek(start)
        while remaining > 0:
            block = handle.read(min(BLOCK, remaining))
            if not block:
                break
            remaining -= len(block)
            data = carry + block if carry else block
            cut = data.rfind(b"\n") + 1
            head, carry = data[:cut], data[cut:]
            scanner.block_secrets(head, lineno + 1)
            lines = head.split(b"\n")
            lines.pop()
            del head, data
            lineno = scanner.lines(lines, lineno)
            del lines
    if carry:
        scanner.block_secrets(carry, lineno + 1)
        result.torn = (lineno + 1, len(carry))
    scanner.finish()
    result.lines = lineno
    return result


def line_boundaries(path: Path, size: int, parts: int) -> list[int]:
    """Cut [0, size) into up to `parts` ranges that end just after a newline."""
    cuts = [0]
    with open(path, "rb") as handle:
        for k in range(1, parts):
            target = size * k // parts
            if target <= cuts[-1]:
                continue
            handle.seek(target)
            rest = handle.readline()
            cut = target + len(rest)
            if rest.endswith(b"\n") and cut < size and cut > cuts[-1]:
                cuts.append(cut)
    cuts.append(size)
    return cuts


def complete_length(path: Path, size: int) -> int:
    """The byte length of the complete lines (everything up to the last newline)."""
    if size == 0:
        return 0
    with open(path, "rb") as handle:
        position = size
        while position > 0:
            start = max(0, position - 65536)
            handle.seek(start)
            chunk = handle.read(position - start)
            found = chunk.rfind(b"\n")
            if found >= 0:
                return start + found + 1
            position = start
    return 0


def prefix_sha256(path: Path, length: int) -> str:
    """sha256 of the first `length` bytes of a file."""
    digest = hashlib.sha256()
    remaining = length
    with open(path, "rb") as handle:
        while remaining > 0:
            block = handle.read(min(BLOCK, remaining))
            if not block:
                break
            digest.update(block)
            remaining -= len(block)
    return digest.hexdigest()


def worker_count() -> int:
    """Processes for a large ledger: $GPUHARNESS_AUDIT_PROCS, else the CPUs (at most 8)."""
    explicit = os.environ.get("GPUHARNESS_AUDIT_PROCS")
    if explicit and explicit.isdigit() and int(explicit) > 0:
        return int(explicit)
    return max(1, min(8, os.cpu_count() or 1))


def _scan_job(args: tuple[PassContext, int, int, bool]) -> ChunkResult:
    ctx, start, end, known = args
    return scan_range(ctx, start, end, None, known)


def scan_parallel(ctx: PassContext, start: int, end: int, *,
                  with_digest: bool) -> tuple[list[ChunkResult], str | None]:
    """Scan [start, end) in parallel ranges (start must be 0); also hash the complete prefix meanwhile."""
    path = Path(ctx.path)
    parts = worker_count() if end - start >= PARALLEL_MIN_BYTES else 1
    complete = complete_length(path, end)
    if parts <= 1:
        results = [scan_range(ctx, start, end, None, True)]
        return results, prefix_sha256(path, complete) if with_digest else None
    cuts = line_boundaries(path, end, parts)
    jobs = [(ctx, cuts[k], cuts[k + 1], k == 0) for k in range(len(cuts) - 1)]
    context = multiprocessing.get_context("fork")
    with context.Pool(len(jobs)) as pool:
        pending = pool.map_async(_scan_job, jobs, chunksize=1)
        digest = prefix_sha256(path, complete) if with_digest else None
        results = pending.get()
    return results, digest


def contributions(state: JobState) -> Iterable[tuple[str, str]]:
    """The spend groups a job's billed cost counts toward: (grouping, key)."""
    _, _, day, provider, gpu, deployment, _ = state
    return (("day", day), ("month", day[:7]), ("provider", provider), ("gpu", gpu),
            ("deployment", deployment), ("day_provider", f"{day}|{provider}"))
