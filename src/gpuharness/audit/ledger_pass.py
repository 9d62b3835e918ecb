"""One streaming pass over jobs.jsonl: schema, job consistency and secrets per line, job state per id.

Work is split by job, not by bytes: worker k of N owns the jobs whose id hashes (`owner`) to k, so every line
of a job is checked in order by one process and no job table is ever merged. Each worker reads the whole range
but parses only its own lines: per block, numpy finds the line starts and hashes the ids of the lines shaped
`{"id":"<id without quote or backslash>"` (a few id lengths per block), so the lines of other workers cost no
Python step; any other line is parsed by every worker and kept by its id's owner. Each worker scans every N-th
block for secrets, writes its jobs' final states to a part file, and returns small deltas: spend aggregates,
open jobs, unsynced artifacts, per-deployment facts and findings.
"""

from __future__ import annotations

import gc
import hashlib
import multiprocessing
import os
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, final

import orjson

from gpuharness.audit.secrets import find_secrets, line_of
from gpuharness.core import schema
from gpuharness.core.clock import format_ts, parse_ts
from gpuharness.core.ledger import TERMINAL, sequence_problem
from gpuharness.core.line_scanner import compiled

BLOCK = 4 << 20
#: Below this size a ledger is scanned in-process; above it, in one process per CPU.
PARALLEL_MIN_BYTES = 16 << 20
ID_PREFIX = b'{"id":"'
_PREFIX_CODES = tuple(ID_PREFIX)
#: FNV-1a (32 bit) over the id's UTF-8 bytes, then a multiplicative mix whose high bits pick the owner.
_FNV_OFFSET = 2166136261
_FNV_PRIME = 16777619
_MIX = 0x9E3779B1
#: Id lengths tried per block by the vectorised line selection (a ledger's ids mostly share one or two).
_ID_LENGTHS_PER_BLOCK = 4

#: (status, cost_usd, UTC day, provider, gpu, deployment_id) of a job's current line.
JobState = tuple[str, float, str, str, str, str]


@final
@dataclass(frozen=True, slots=True)
class PassContext:
    """What every worker needs to know (picklable)."""

    path: str
    cost_hr: dict[str, float]
    abs_tol: float
    rel_tol: float
    per_job_usd: float | None = None
    max_examples: int = 20


@final
@dataclass(slots=True)
class Prior:
    """What earlier audits established, for an incremental pass (only the jobs the new lines touch)."""

    jobs: dict[str, JobState] = field(default_factory=dict)
    open_jobs: frozenset[str] = frozenset()
    unsynced: frozenset[str] = frozenset()


@final
@dataclass(slots=True)
class PartResult:
    """What one worker found. Line numbers are relative to the scanned range (1 = its first line)."""

    lines: int = 0
    new_jobs: int = 0
    touched: int = 0
    jobs_file: str | None = None
    findings: list[tuple[str, int, str]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    #: spend deltas per grouping and key
    spend: dict[str, dict[str, float]] = field(default_factory=dict)
    #: open (queued/running) jobs at the end, and touched jobs of Prior.open_jobs that are closed now
    opened: dict[str, str] = field(default_factory=dict)
    closed: set[str] = field(default_factory=set)
    #: touched jobs whose current line has an artifact neither synced nor discarded: job -> (deployment, name)
    unsynced: dict[str, tuple[str, str]] = field(default_factory=dict)
    resynced: set[str] = field(default_factory=set)
    #: per deployment: the latest artifact synced_at (canonical) and its job
    synced_max: dict[str, tuple[str, str]] = field(default_factory=dict)
    #: per deployment: ledger lines, a few job ids, latest ts (canonical)
    dep_lines: dict[str, int] = field(default_factory=dict)
    dep_examples: dict[str, list[str]] = field(default_factory=dict)
    last_ts: dict[str, str] = field(default_factory=dict)
    #: (relative line, bytes) of a final line without its newline
    torn: tuple[int, int] | None = None


_parse = datetime.fromisoformat


def _epoch(text: str) -> float:
    return parse_ts(text).timestamp()


def canonical_ts(text: str) -> str:
    """A timestamp as YYYY-MM-DDTHH:MM:SS.mmmZ (UTC), so that string order is time order."""
    if len(text) == 24 and text[-1] == "Z" and text[10] == "T":
        return text
    return format_ts(parse_ts(text))


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


def owner(job_id: str, parts: int) -> int:
    """The worker that owns a job: a hash of its id's UTF-8 bytes (the same one `select_lines` vectorises)."""
    if parts <= 1:
        return 0
    h = _FNV_OFFSET
    for byte in job_id.encode("utf-8"):
        h = ((h ^ byte) * _FNV_PRIME) & 0xFFFFFFFF
    return (((h * _MIX) & 0xFFFFFFFF) >> 16) % parts


def select_lines(head: bytes, cut: int, part: int, parts: int
                 ) -> tuple[int, list[int], list[int], list[int], list[bool]]:
    """The lines of head[:cut] (complete lines): how many, and those worker `part` must look at, in order (index in
    head, start, end, decided). A decided line is one of its jobs by the raw id (`{"id":"` then an id with no quote
    or backslash, so its bytes are the id's UTF-8); an undecided line (any other shape) goes to every worker, which
    parses it and keeps it only if it owns the parsed id."""
    import numpy as np  # only the parallel pass without the scanner needs it (scan_full imports it before the fork)

    data = np.frombuffer(head, dtype=np.uint8, count=cut)
    ends = np.flatnonzero(data == 10)
    count = len(ends)
    if count == 0:
        return 0, [], [], [], []
    starts = np.empty_like(ends)
    starts[0] = 0
    starts[1:] = ends[:-1] + 1
    last = len(data) - 1
    prefixed = np.ones(count, dtype=bool)
    for offset, code in enumerate(_PREFIX_CODES):
        prefixed &= data[np.minimum(starts + offset, last)] == code
    decided = np.zeros(count, dtype=bool)
    mine = np.zeros(count, dtype=bool)
    pending = prefixed.copy()
    for _ in range(_ID_LENGTHS_PER_BLOCK):
        candidates = np.flatnonzero(pending)
        if len(candidates) == 0:
            break
        first = int(starts[candidates[0]])
        quote = head.find(b'"', first + 7, int(ends[candidates[0]]))
        length = quote - first - 7
        if length <= 0:  # an empty or unterminated id: that line stays undecided
            pending[candidates[0]] = False
            continue
        begin = starts[candidates] + 7
        fits = begin + length < ends[candidates]
        columns = data[np.minimum(begin[:, None] + np.arange(length), last)]
        shaped = (fits & (data[np.minimum(begin + length, last)] == 34)
                  & ~((columns == 34) | (columns == 92)).any(axis=1))
        h = np.full(len(candidates), _FNV_OFFSET, dtype=np.uint32)
        for column in range(length):
            h ^= columns[:, column]
            h *= np.uint32(_FNV_PRIME)
        owners = ((h * np.uint32(_MIX)) >> np.uint32(16)) % parts
        chosen = candidates[shaped]
        decided[chosen] = True
        mine[chosen] = owners[shaped] == part
        pending[chosen] = False
        pending[candidates[0]] = False
    wanted = np.flatnonzero(mine | ~decided)
    return count, wanted.tolist(), starts[wanted].tolist(), ends[wanted].tolist(), decided[wanted].tolist()


def fields_of(record: dict[str, Any], strings: dict[str, str]) -> tuple[Any, ...]:
    """The fields of a schema-valid line that the job rules read, as the compiled scanner extracts them (see
    `_Worker.apply`); `strings` keeps one str per distinct status, deployment, provider and GPU."""
    get = record.get
    status: str = record["status"]
    deployment: str = record["deployment_id"]
    started = get("started_at")
    completed = get("completed_at")
    elapsed: float | None = None
    if completed and started:
        try:
            elapsed = (_parse(completed) - _parse(started)).total_seconds()
        except (ValueError, TypeError):
            elapsed = _epoch(canonical_ts(completed)) - _epoch(canonical_ts(started))
    artifacts = get("artifacts")
    latest = ""
    unsynced = None
    for artifact in artifacts or ():
        if artifact.get("discarded") is True:
            continue
        synced = artifact.get("synced_at")
        if not synced:
            unsynced = str(artifact.get("name"))
            continue
        synced = canonical_ts(synced)
        if synced > latest:
            latest = synced
    provider = get("provider")
    gpu = get("gpu")
    return (0, record["id"], strings.setdefault(status, status), strings.setdefault(deployment, deployment),
            record["ts"], started, completed, elapsed, get("duration_s"), get("cost_usd"), bool(get("error")),
            bool(get("correction")), bool(get("reason")),
            provider if provider is None else strings.setdefault(provider, provider),
            gpu if gpu is None else strings.setdefault(gpu, gpu), latest or None, unsynced)


class _Worker:
    """The per-line rules for the jobs of one partition (the hot loop of the audit: keep it lean)."""

    __slots__ = ("ctx", "days", "is_valid", "jobs", "native", "part", "parts", "prior", "result", "strings",
                 "unsynced_now")

    def __init__(self, ctx: PassContext, part: int, parts: int, prior: Prior | None) -> None:
        self.ctx = ctx
        self.part = part
        self.parts = parts
        self.prior = prior
        self.result = PartResult()
        self.jobs: dict[str, JobState] = {}
        self.unsynced_now: dict[str, tuple[str, str]] = {}
        self.days: dict[str, str] = {}
        self.strings: dict[str, str] = {}
        self.is_valid = schema.fast_validator("job").is_valid
        self.native = compiled()

    def note(self, rule: str, lineno: int, message: str) -> None:
        counts = self.result.counts
        seen = counts.get(rule, 0)
        counts[rule] = seen + 1
        if seen < self.ctx.max_examples:
            self.result.findings.append((rule, lineno, message))

    def block(self, head: bytes, cut: int, lineno: int) -> int:
        """Check the lines of head[:cut] (complete lines) this worker owns; `lineno` is the number of the line
        before the first. Returns the number of the last line."""
        if self.native is not None:
            count, entries = self.native.scan_block(head, cut, self.part, self.parts, self.strings)
            self.scanned(entries, lineno)
            return lineno + count
        if self.parts == 1:
            raws = head.split(b"\n")
            raws.pop()  # head[cut:]: empty, or the start of a line the next block reads
            decide = self.decide
            for raw in raws:
                lineno += 1
                decide(lineno, raw, True)
            return lineno
        count, indexes, starts, ends, decided = select_lines(head, cut, self.part, self.parts)
        for index, start, end, known in zip(indexes, starts, ends, decided, strict=True):
            self.decide(lineno + index + 1, head[start:end], known)
        return lineno + count

    def scanned(self, entries: list[Any], before: int) -> None:
        """The lines of a block as the compiled scanner left them (see _linescan.c): the fields of each proven line
        this worker owns, and the raw bytes of each line for the Python checks to decide."""
        apply = self.apply
        for entry in entries:
            if len(entry) == 3:
                self.decide(before + entry[0] + 1, entry[1], entry[2])
            else:
                apply(before + entry[0] + 1, entry)

    def decide(self, lineno: int, raw: bytes, owned: bool) -> None:
        """Check one line in Python: orjson, the job schema, then the job rules. An `owned` line is this worker's
        (a single worker, or an id read from the raw bytes): it keeps the line and reports it if broken. Otherwise
        every worker parses it; its id's owner keeps it, and the worker of its line number reports it if broken."""
        parts = self.parts
        report = owned or lineno % parts == self.part
        try:
            record = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            if report:
                self.not_json(lineno, exc)
            return
        if type(record) is not dict:
            if report:
                self.not_json(lineno, None)
            return
        if not self.is_valid(record):
            if report:
                self.not_valid(lineno, record)
            return
        if owned or owner(record["id"], parts) == self.part:
            self.job(lineno, record)

    def not_json(self, lineno: int, exc: Exception | None) -> None:
        if exc is None:
            self.note("ledger:torn", lineno, "a ledger line must be a JSON object; move it out of jobs.jsonl")
        else:
            self.note("ledger:torn", lineno, f"not valid JSON ({exc}); a torn or merged write in the middle of the "
                      "ledger. Move the fragment out (keep a copy) and re-append the job's line")

    def not_valid(self, lineno: int, record: dict[str, Any]) -> None:
        errors, _ = schema.check("job", record)
        detail = "; ".join(f"{e.json_path}: {e.message}" for e in errors[:3]) or "schema mismatch"
        self.note("ledger:schema", lineno, f"job {record.get('id')!r} does not match the job schema: {detail}. "
                  "Append a correction line with the right fields (never edit the line)")

    def job(self, lineno: int, record: dict[str, Any]) -> None:
        """Check one schema-valid line (see `apply`)."""
        self.apply(lineno, fields_of(record, self.strings))

    def apply(self, lineno: int, entry: tuple[Any, ...]) -> None:
        """The job rules for one line and its job's new state; `entry` holds the line's fields in the order of the
        compiled scanner's tuples: (index, id, status, deployment_id, ts, started_at, completed_at, seconds from
        start to completion, duration_s, cost_usd, has an error, is a correction, has a reason, provider, gpu,
        latest synced_at, name of the last unsynced artifact)."""
        (_, job_id, status, deployment, ts, started, completed, elapsed, duration, cost, has_error, correction,
         has_reason, provider, gpu, synced, unsynced) = entry
        result = self.result
        jobs = self.jobs
        previous = jobs.get(job_id)
        if previous is None and self.prior is not None:
            previous = self.prior.jobs.get(job_id)
        if previous is not None:
            if correction or previous[0] in TERMINAL or previous[5] != deployment:
                problem = sequence_problem({"status": previous[0], "deployment_id": previous[5]},
                                           {"id": job_id, "deployment_id": deployment, "correction": correction,
                                            "reason": has_reason})
                if problem:
                    self.note("job:only-corrections-after-terminal", lineno,
                              f"{problem}. Append a correction line instead")
        elif correction:
            self.note("job:only-corrections-after-terminal", lineno,
                      f"job {job_id}: a correction needs an earlier line of the same job")

        if elapsed is not None:
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
        if status == "failed" and not has_error:
            self.note("job:failed-has-error", lineno,
                      f"job {job_id} failed without an error; append a correction with the error text")

        stamp = completed or started or ts
        key = stamp[:10] if stamp[-1] == "Z" else stamp
        day = self.days.get(key)
        if day is None:
            day = utc_day(stamp)
            self.days[key] = day
        jobs[job_id] = (status, cost or 0.0, day, provider or "?", gpu or "?", deployment)
        if synced is not None and synced > result.synced_max.get(deployment, ("", ""))[0]:
            result.synced_max[deployment] = (synced, job_id)
        if unsynced is not None:
            self.unsynced_now[job_id] = (deployment, unsynced)
        elif job_id in self.unsynced_now:
            del self.unsynced_now[job_id]
        dep_lines = result.dep_lines
        dep_lines[deployment] = dep_lines.get(deployment, 0) + 1
        if deployment not in self.ctx.cost_hr:  # examples only matter for a deployment missing from the registry
            examples = result.dep_examples.setdefault(deployment, [])
            if len(examples) < 3 and job_id not in examples:
                examples.append(job_id)
        canonical = ts if (len(ts) == 24 and ts[-1] == "Z") else canonical_ts(ts)
        if canonical > result.last_ts.get(deployment, ""):
            result.last_ts[deployment] = canonical

    def block_secrets(self, data: bytes, first_lineno: int, end: int | None = None) -> None:
        """Secrets in data[:end] (complete lines), whose first line is number first_lineno."""
        for hit in find_secrets(data, end):
            lineno = first_lineno + line_of(data, hit.offset) - 1
            self.note("secrets:ledger", lineno, f"{hit.kind} {hit.shown}; revoke it at the provider, then move "
                      "the secret out of the ledger (keep only the variable's name)")

    def finish(self, jobs_out: Path | None) -> PartResult:
        """Spend deltas, open/unsynced changes and the per-job ceiling over the touched jobs; write their states."""
        result = self.result
        prior = self.prior
        prior_jobs = prior.jobs if prior is not None else {}
        # sum by (day, provider, gpu, deployment) first: a handful of keys, then spread over the groupings
        combos: dict[tuple[str, ...], float] = {}
        cap = self.ctx.per_job_usd
        open_before = prior.open_jobs if prior is not None else frozenset()
        unsynced_before = prior.unsynced if prior is not None else frozenset()
        unsynced_now = self.unsynced_now
        new_jobs = 0
        for job_id, state in self.jobs.items():
            old = prior_jobs.get(job_id)
            if old is None:
                new_jobs += 1
            elif old[1]:
                key = old[2:]
                combos[key] = combos.get(key, 0.0) - old[1]
            cost = state[1]
            if cost:
                key = state[2:]
                combos[key] = combos.get(key, 0.0) + cost
                if cap is not None and cost > cap + 1e-9:
                    self.note("spend:per-job", 0, f"job {job_id}: billed ${cost:.4f} > per_job_usd ${cap:.2f} "
                              f"(deployment {state[5]}, {state[2]}); find out why it ran so long, append a correction "
                              "if the cost is wrong, or raise per_job_usd on purpose")
            if state[0] not in TERMINAL:
                result.opened[job_id] = state[5]
            elif job_id in open_before:
                result.closed.add(job_id)
            if job_id in unsynced_now:
                result.unsynced[job_id] = unsynced_now[job_id]
            elif job_id in unsynced_before:
                result.resynced.add(job_id)
        result.new_jobs = new_jobs
        spend: dict[str, dict[str, float]] = {}
        for (day, provider, gpu, deployment), amount in combos.items():
            for grouping, group_key in (("day", day), ("month", day[:7]), ("provider", provider), ("gpu", gpu),
                                        ("deployment", deployment), ("day_provider", f"{day}|{provider}")):
                bucket = spend.setdefault(grouping, {})
                bucket[group_key] = bucket.get(group_key, 0.0) + amount
        result.spend = spend
        result.touched = len(self.jobs)
        if jobs_out is not None and self.jobs:
            with open(jobs_out, "wb") as handle:
                dumps = orjson.dumps
                handle.writelines(dumps([job_id, *state]) + b"\n" for job_id, state in self.jobs.items())
            result.jobs_file = str(jobs_out)
        self.jobs = {}
        return result


def scan_part(ctx: PassContext, start: int, end: int, part: int = 0, parts: int = 1, prior: Prior | None = None,
              jobs_out: Path | None = None) -> PartResult:
    """Scan bytes [start, end) of the ledger for the jobs of partition `part` of `parts`."""
    collecting = gc.isenabled()
    gc.disable()  # the pass creates no cycles; generational scans of the growing job table would dominate
    try:
        worker = _Worker(ctx, part, parts, prior)
        lineno = 0
        carry = b""
        block_index = 0
        with open(ctx.path, "rb") as handle:
            # Each block starts at a line start: the partial line at a block's end is read again with the next
            # block (seek back), so no block is ever copied to join or cut it.
            position = start
            handle.seek(start)
            while position < end:
                data = handle.read(min(BLOCK, end - position))
                if not data:
                    break
                cut = data.rfind(b"\n") + 1
                while cut == 0 and position + len(data) < end:  # one line longer than a block
                    more = handle.read(min(BLOCK, end - position - len(data)))
                    if not more:
                        break
                    data += more
                    cut = data.rfind(b"\n") + 1
                if cut == 0:  # the bytes after the last newline: a torn last line
                    carry = data
                    break
                if block_index % parts == part:
                    worker.block_secrets(data, lineno + 1, cut)
                block_index += 1
                lineno = worker.block(data, cut, lineno)
                del data
                position += cut
                handle.seek(position)
        if carry and part == 0:
            worker.block_secrets(carry, lineno + 1)
            worker.result.torn = (lineno + 1, len(carry))
        worker.result.lines = lineno
        return worker.finish(jobs_out)
    finally:
        if collecting:
            gc.enable()


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


def hash_range(path: Path, start: int, end: int, digest: Any) -> None:
    """Feed bytes [start, end) of a file to a hashlib object."""
    with open(path, "rb") as handle:
        handle.seek(start)
        remaining = end - start
        while remaining > 0:
            block = handle.read(min(BLOCK, remaining))
            if not block:
                break
            digest.update(block)
            remaining -= len(block)


def worker_count() -> int:
    """Processes for a large ledger: $GPUHARNESS_AUDIT_PROCS, else the CPUs (at most 8)."""
    explicit = os.environ.get("GPUHARNESS_AUDIT_PROCS")
    if explicit and explicit.isdigit() and int(explicit) > 0:
        return int(explicit)
    return max(1, min(8, os.cpu_count() or 1))


def _part_job(args: tuple[PassContext, int, int, int, int, str]) -> PartResult:
    ctx, start, end, part, parts, out = args
    return scan_part(ctx, start, end, part, parts, None, Path(out))


def scan_full(ctx: PassContext, end: int, out_dir: Path, stem: str) -> tuple[list[PartResult], Any]:
    """Scan [0, end) in one process per partition; hash the complete prefix meanwhile (returns the hashlib state)."""
    path = Path(ctx.path)
    parts = worker_count() if end >= PARALLEL_MIN_BYTES else 1
    complete = complete_length(path, end)
    digest = hashlib.sha256()
    if parts <= 1:
        result = scan_part(ctx, 0, end, 0, 1, None, out_dir / f"{stem}-0.jsonl")
        hash_range(path, 0, complete, digest)
        return [result], digest
    if compiled() is None:
        import numpy  # noqa: F401  (once, before the fork, for select_lines in every worker)

    tasks = [(ctx, 0, end, k, parts, str(out_dir / f"{stem}-{k}.jsonl")) for k in range(parts)]
    context = multiprocessing.get_context("fork")
    with context.Pool(parts) as pool:
        pending = pool.map_async(_part_job, tasks, chunksize=1)
        hash_range(path, 0, complete, digest)
        results = pending.get()
    return results, digest
