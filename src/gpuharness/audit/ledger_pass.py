"""One streaming pass over jobs.jsonl: schema, job consistency and secrets per line, then each job's state.

Each line is decoded straight into a `JobLine` (msgspec); a line the Struct refuses is settled by orjson and the job
schema (`core.job_line.settle`). The job rules read the line's fields by name and the job's previous state, and the
pass ends with spend deltas, open jobs, unsynced artifacts, per-deployment facts and findings, which
`checkpoint.LedgerState.absorb` folds into the ledger's running state.
"""

from __future__ import annotations

import gc
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple, final

import msgspec

from gpuharness.audit import rules
from gpuharness.core import schema
from gpuharness.core.clock import format_ts, parse_ts
from gpuharness.core.job_line import DECODE_ERRORS, JobLine, Refusal, decode_job_line, settle
from gpuharness.core.ledger import TERMINAL, sequence_problem
from gpuharness.core.rules import Rule
from gpuharness.core.secrets import Credential, find_secrets, line_of

BLOCK = 4 << 20


@final
class JobState(msgspec.Struct, array_like=True, frozen=True, gc=False):
    """A job as its current line left it: what spend, open jobs and the rules for its next line read. Stored in
    the checkpoint's job-state files as a JSON array in field order."""

    id: str
    status: str
    cost_usd: float
    day: str
    provider: str
    gpu: str
    deployment_id: str


class UnsyncedArtifact(NamedTuple):
    """The last artifact of a job's current line that was neither synced nor discarded."""

    deployment_id: str
    name: str


class TornTail(NamedTuple):
    """A last line without its newline (a writer died mid-write): its number in the scanned range and its length."""

    lineno: int
    length: int


class LatestSync(NamedTuple):
    """The latest artifact sync of a deployment (canonical time) and its job."""

    synced_at: str
    job_id: str


@final
@dataclass(frozen=True, slots=True)
class LineFinding:
    """A finding of the pass at a line (relative to the scanned range; 0: the ledger as a whole)."""

    rule: Rule
    lineno: int
    message: str


@final
@dataclass(frozen=True, slots=True)
class PassContext:
    """What the rules need from the registry: each deployment's rate and the policy's tolerances and ceiling."""

    path: str
    cost_hr: dict[str, float]
    abs_tol: float
    rel_tol: float
    per_job_usd: float | None = None
    max_examples: int = 20
    #: the configured credentials (providers' credential_env) whose values must not be in the ledger
    credentials: tuple[Credential, ...] = ()


@final
@dataclass(slots=True)
class Prior:
    """What earlier audits established, for an incremental pass (only the jobs the new lines touch)."""

    jobs: dict[str, JobState] = field(default_factory=dict)
    open_jobs: frozenset[str] = frozenset()
    unsynced: frozenset[str] = frozenset()


@final
@dataclass(slots=True)
class PassResult:
    """What a pass found. Line numbers are relative to the scanned range (1 = its first line)."""

    lines: int = 0
    new_jobs: int = 0
    touched: int = 0
    jobs_file: str | None = None
    findings: list[LineFinding] = field(default_factory=list)
    counts: dict[Rule, int] = field(default_factory=dict)
    #: spend deltas per grouping and key
    spend: dict[str, dict[str, float]] = field(default_factory=dict)
    #: open (queued/running) jobs at the end, and touched jobs of Prior.open_jobs that are closed now
    opened: dict[str, str] = field(default_factory=dict)
    closed: set[str] = field(default_factory=set)
    #: touched jobs whose current line has an artifact neither synced nor discarded
    unsynced: dict[str, UnsyncedArtifact] = field(default_factory=dict)
    resynced: set[str] = field(default_factory=set)
    synced_max: dict[str, LatestSync] = field(default_factory=dict)
    #: per deployment: ledger lines, a few job ids, latest ts (canonical)
    dep_lines: dict[str, int] = field(default_factory=dict)
    dep_examples: dict[str, list[str]] = field(default_factory=dict)
    last_ts: dict[str, str] = field(default_factory=dict)
    #: a final line without its newline
    torn: TornTail | None = None


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


def seconds_between(started: str, completed: str) -> float:
    """completed − started in seconds (leap seconds read as the next second's start, as `parse_ts` does)."""
    try:
        return (datetime.fromisoformat(completed) - datetime.fromisoformat(started)).total_seconds()
    except (ValueError, TypeError):
        return parse_ts(canonical_ts(completed)).timestamp() - parse_ts(canonical_ts(started)).timestamp()


class LedgerPass:
    """The job rules over a range of the ledger, and each touched job's state."""

    __slots__ = ("ctx", "days", "jobs", "prior", "prior_jobs", "result", "strings", "unsynced_now")

    def __init__(self, ctx: PassContext, prior: Prior | None) -> None:
        self.ctx = ctx
        self.prior = prior
        self.prior_jobs: dict[str, JobState] = prior.jobs if prior is not None else {}
        self.result = PassResult()
        self.jobs: dict[str, JobState] = {}
        self.unsynced_now: dict[str, UnsyncedArtifact] = {}
        #: UTC day per timestamp head; one str per distinct deployment, provider and GPU (msgspec shares statuses)
        self.days: dict[str, str] = {}
        self.strings: dict[str, str] = {}

    def note(self, rule: Rule, lineno: int, message: str) -> None:
        counts = self.result.counts
        seen = counts.get(rule, 0)
        counts[rule] = seen + 1
        if seen < self.ctx.max_examples:
            self.result.findings.append(LineFinding(rule, lineno, message))

    def read_block(self, data: bytes, lineno: int) -> int:
        """Check the complete lines of `data` (all but the bytes after its last newline); `lineno` is the number
        of the line before the first. Returns the number of the last line."""
        raws = data.split(b"\n")
        raws.pop()  # what follows the last newline: empty, or the start of a line the next block reads
        decode = decode_job_line
        follow = self.follow
        for raw in raws:
            lineno += 1
            try:
                line = decode(raw)
            except DECODE_ERRORS:
                self.settle_line(lineno, raw)
                continue
            if line.times_valid():
                follow(lineno, line)
            else:
                self.settle_line(lineno, raw)
        return lineno

    def settle_line(self, lineno: int, raw: bytes) -> None:
        """A line the Struct refused: the job schema decides, and explains a refusal."""
        verdict = settle(raw)
        if isinstance(verdict, JobLine):
            self.follow(lineno, verdict)
        elif verdict.record is not None:
            self.not_valid(lineno, verdict)
        elif verdict.problem.startswith("not valid JSON"):
            self.note(rules.LEDGER_TORN, lineno, f"{verdict.problem}; a torn or merged write in the middle of the "
                      "ledger. Move the fragment out (keep a copy) and re-append the job's line")
        else:
            self.note(rules.LEDGER_TORN, lineno, "a ledger line must be a JSON object; move it out of jobs.jsonl")

    def not_valid(self, lineno: int, refusal: Refusal) -> None:
        record = refusal.record or {}
        errors, _ = schema.check("job", record)
        detail = "; ".join(f"{e.json_path}: {e.message}" for e in errors[:3]) or refusal.problem
        self.note(rules.LEDGER_SCHEMA, lineno, f"job {record.get('id')!r} does not match the job schema: {detail}. "
                  "Append a correction line with the right fields (never edit the line)")

    def follow(self, lineno: int, line: JobLine) -> None:
        """The job rules for one schema-valid line, then its job's new state and its deployment's facts."""
        job_id, status, ts = line.id, line.status, line.ts
        previous = self.jobs.get(job_id) or self.prior_jobs.get(job_id)
        deployment = line.deployment_id
        if previous is not None and previous.deployment_id == deployment:
            deployment = previous.deployment_id  # the job's interned str
        else:
            deployment = self.strings.setdefault(deployment, deployment)
        if previous is not None:
            if line.correction or previous.status in TERMINAL or previous.deployment_id != deployment:
                self.check_sequence(lineno, line, previous, deployment)
        elif line.correction:
            self.note(rules.JOB_SEQUENCE, lineno,
                      f"job {job_id}: a correction needs an earlier line of the same job")
        started, completed, duration, cost = line.started_at, line.completed_at, line.duration_s, line.cost_usd
        if completed and started:
            self.check_times(lineno, job_id, started, completed, duration)
        elif status == "completed":
            missing = " and ".join(n for n, v in (("started_at", started), ("completed_at", completed)) if not v)
            self.note(rules.JOB_TIMES, lineno,
                      f"job {job_id} is completed but has no {missing}; append a correction with both times")
        if duration is not None and cost is not None:
            self.check_cost(lineno, job_id, deployment, duration, cost)
        if status == "failed" and not line.error:
            self.note(rules.JOB_FAILED_ERROR, lineno,
                      f"job {job_id} failed without an error; append a correction with the error text")

        stamp = completed or started or ts
        key = stamp[:10] if stamp[-1] == "Z" else stamp
        day = self.days.get(key)
        if day is None:
            day = self.days[key] = utc_day(stamp)
        provider, gpu = line.provider or "?", line.gpu or "?"
        if previous is None or previous.provider != provider or previous.gpu != gpu:
            strings = self.strings
            provider, gpu = strings.setdefault(provider, provider), strings.setdefault(gpu, gpu)
        else:
            provider, gpu = previous.provider, previous.gpu
        self.jobs[job_id] = JobState(job_id, status, cost or 0.0, day, provider, gpu, deployment)
        if line.artifacts:
            self.artifacts(line, deployment)
        elif job_id in self.unsynced_now:
            del self.unsynced_now[job_id]
        result = self.result
        dep_lines = result.dep_lines
        dep_lines[deployment] = dep_lines.get(deployment, 0) + 1
        if deployment not in self.ctx.cost_hr:  # examples only matter for a deployment missing from the registry
            examples = result.dep_examples.setdefault(deployment, [])
            if len(examples) < 3 and job_id not in examples:
                examples.append(job_id)
        canonical = ts if (len(ts) == 24 and ts[-1] == "Z") else canonical_ts(ts)
        if canonical > result.last_ts.get(deployment, ""):
            result.last_ts[deployment] = canonical

    def check_sequence(self, lineno: int, line: JobLine, previous: JobState, deployment: str) -> None:
        problem = sequence_problem({"status": previous.status, "deployment_id": previous.deployment_id},
                                   {"id": line.id, "deployment_id": deployment, "correction": line.correction,
                                    "reason": bool(line.reason)})
        if problem:
            self.note(rules.JOB_SEQUENCE, lineno, f"{problem}. Append a correction line instead")

    def check_times(self, lineno: int, job_id: str, started: str, completed: str, duration: float | None) -> None:
        elapsed = seconds_between(started, completed)
        if elapsed < 0:
            self.note(rules.JOB_TIMES, lineno,
                      f"job {job_id}: completed_at {completed} is {-elapsed:.1f} s before started_at {started}; "
                      "append a correction with the real times")
        elif duration is not None and abs(duration - elapsed) > max(1.0, 0.01 * elapsed):
            self.note(rules.JOB_DURATION, lineno,
                      f"job {job_id}: duration_s {duration:g} but completed_at − started_at = {elapsed:.1f} s; "
                      "append a correction with the measured duration")

    def check_cost(self, lineno: int, job_id: str, deployment: str, duration: float, cost: float) -> None:
        ctx = self.ctx
        rate = ctx.cost_hr.get(deployment)
        if rate is None:
            return
        expected = duration * rate / 3600.0
        if abs(cost - expected) > ctx.abs_tol + ctx.rel_tol * expected:
            self.note(rules.JOB_COST, lineno,
                      f"job {job_id}: cost_usd {cost:.6f} but duration_s {duration:g} × cost_hr {rate:g} / 3600 = "
                      f"{expected:.6f} (tolerance ${ctx.abs_tol:g} + {ctx.rel_tol:.0%}); fix the rate in "
                      "deployments.json or append a correction")

    def artifacts(self, line: JobLine, deployment: str) -> None:
        """The latest sync of the line's artifacts, and the last one neither synced nor discarded."""
        latest = ""
        unsynced: str | None = None
        for artifact in line.artifacts:
            if artifact.discarded:
                continue
            synced = artifact.synced_at
            if not synced:
                unsynced = artifact.name
                continue
            synced = canonical_ts(synced)
            if synced > latest:
                latest = synced
        result = self.result
        if latest and latest > result.synced_max.get(deployment, LatestSync("", "")).synced_at:
            result.synced_max[deployment] = LatestSync(latest, line.id)
        if unsynced is not None:
            self.unsynced_now[line.id] = UnsyncedArtifact(deployment, unsynced)
        elif line.id in self.unsynced_now:
            del self.unsynced_now[line.id]

    def block_secrets(self, data: bytes, first_lineno: int, end: int | None = None) -> None:
        """Secrets in data[:end] (complete lines), whose first line is number first_lineno."""
        for hit in find_secrets(data, end, self.ctx.credentials):
            lineno = first_lineno + line_of(data, hit.offset) - 1
            self.note(rules.SECRETS_LEDGER, lineno, f"{hit.kind} {hit.shown}; revoke it at the provider, then move "
                      "the secret out of the ledger (keep only the variable's name)")

    def finish(self, jobs_out: Path | None) -> PassResult:
        """Spend deltas, open/unsynced changes and the per-job ceiling over the touched jobs; write their states."""
        result = self.result
        prior = self.prior
        prior_jobs = self.prior_jobs
        # sum by (day, provider, gpu, deployment) first: a handful of keys, then spread over the groupings
        combos: dict[tuple[str, str, str, str], float] = {}
        cap = self.ctx.per_job_usd
        open_before = prior.open_jobs if prior is not None else frozenset()
        unsynced_before = prior.unsynced if prior is not None else frozenset()
        unsynced_now = self.unsynced_now
        new_jobs = 0
        for job_id, state in self.jobs.items():
            old = prior_jobs.get(job_id)
            if old is None:
                new_jobs += 1
            elif old.cost_usd:
                key = (old.day, old.provider, old.gpu, old.deployment_id)
                combos[key] = combos.get(key, 0.0) - old.cost_usd
            cost = state.cost_usd
            if cost:
                key = (state.day, state.provider, state.gpu, state.deployment_id)
                combos[key] = combos.get(key, 0.0) + cost
                if cap is not None and cost > cap + 1e-9:
                    self.note(rules.SPEND_PER_JOB, 0, f"job {job_id}: billed ${cost:.4f} > per_job_usd ${cap:.2f} "
                              f"(deployment {state.deployment_id}, {state.day}); find out why it ran so long, append a "
                              "correction if the cost is wrong, or raise per_job_usd on purpose")
            if state.status not in TERMINAL:
                result.opened[job_id] = state.deployment_id
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
            encode = msgspec.json.Encoder().encode
            with open(jobs_out, "wb") as handle:
                handle.writelines(encode(state) + b"\n" for state in self.jobs.values())
            result.jobs_file = str(jobs_out)
        self.jobs = {}
        return result


def scan(ctx: PassContext, start: int, end: int, prior: Prior | None = None,
         jobs_out: Path | None = None) -> PassResult:
    """Check bytes [start, end) of the ledger."""
    collecting = gc.isenabled()
    gc.disable()  # the pass creates no cycles; generational scans of the growing job table would dominate
    try:
        ledger = LedgerPass(ctx, prior)
        lineno = 0
        carry = b""
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
                ledger.block_secrets(data, lineno + 1, cut)
                lineno = ledger.read_block(data, lineno)
                del data
                position += cut
                handle.seek(position)
        if carry:
            ledger.block_secrets(carry, lineno + 1)
            ledger.result.torn = TornTail(lineno + 1, len(carry))
        ledger.result.lines = lineno
        return ledger.finish(jobs_out)
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
    """Feed bytes [start, end) of a file to a hash object (hashlib's interface)."""
    if start >= end:
        return
    with open(path, "rb") as handle:
        handle.seek(start)
        remaining = end - start
        while remaining > 0:
            block = handle.read(min(BLOCK, remaining))
            if not block:
                break
            digest.update(block)
            remaining -= len(block)
