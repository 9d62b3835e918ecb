"""One streaming pass over jobs.jsonl: schema, job consistency and secrets per line, then each job's state.

Each line is decoded straight into a `JobLine` (msgspec), the lines of a slice of the ledger in one call when they
allow it (`core.job_line.decode_block`); a line the Struct refuses is settled by orjson and the job schema
(`core.job_line.settle`). One loop checks each line's timestamps and applies the job rules, reading the line's
fields by name and the job's previous state; the pass ends with spend deltas, open jobs, unsynced artifacts,
per-deployment facts and findings, which `checkpoint.LedgerState.absorb` folds into the ledger's running state.
A full pass of a big ledger runs on two processes (`audit.ledger_split`).
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, BinaryIO, Final, NamedTuple, final

import msgspec

from gpuharness.audit import rules
from gpuharness.core import regular_file, schema
from gpuharness.core.clock import format_ts, parse_ts
from gpuharness.core.errors import UserError
from gpuharness.core.job_line import (
    DECODE_ERRORS,
    HOURS,
    MINUTES,
    TAILS,
    JobLine,
    Refusal,
    artifact_times_valid,
    decode_block,
    decode_job_line,
    settle,
)
from gpuharness.core.ledger import TERMINAL, Ledger, line_digest, sequence_problem
from gpuharness.core.policy import exceeds
from gpuharness.core.regular_file import JSONL_LINE, size_words
from gpuharness.core.rules import Rule
from gpuharness.core.secrets import Credential, find_secrets, line_of
from gpuharness.core.spend import row_name

BLOCK = 4 << 20
#: Bytes of ledger decoded per call (see LedgerPass.read_block).
SLICE = 48 << 10


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


class LoweredCost(NamedTuple):
    """A correction that lowered a job's cost: its line (relative to the scanned range until merged), the job, the
    cost before and after, and the reason and digest it carries ("" when none)."""

    lineno: int
    job_id: str
    before_usd: float
    after_usd: float
    reason: str
    digest: str


def lowered_cost(lineno: int, job_id: str, before: float, after: float, reason: str,
                 digest: str) -> tuple[LoweredCost | None, LineFinding | None]:
    """The lowered cost a correction records (None when it does not lower the job's cost), and the finding when it
    lacks its reason or the digest of the line it corrects."""
    if not exceeds(before, after):
        return None, None
    lowered = LoweredCost(lineno, job_id, before, after, reason, digest)
    missing = [name for name, value in (("a reason", reason), ("the digest of the line it corrects", digest))
               if not value]
    if not missing:
        return lowered, None
    return lowered, LineFinding(rules.JOB_LOWERED, lineno, (
        f"job {job_id}: a correction lowers cost_usd from ${before:.4f} to ${after:.4f} without "
        f"{' or '.join(missing)}; find out who wrote it, and append a correction that carries both (`gpuharness "
        "ledger append` names the digest it needs)"))


def digest_findings(path: Path, lowered: Sequence[LoweredCost]) -> list[LineFinding]:
    """The lowered costs (absolute line numbers) whose digest is not the one of the line they correct: the job's line
    before theirs. Reads the ledger up to the last of them (only when there are any: they are rare)."""
    wanted = {item.lineno: item for item in lowered if item.digest}
    if not wanted:
        return []
    jobs = {item.job_id for item in wanted.values()}
    last: dict[str, tuple[int, bytes]] = {}
    found: list[LineFinding] = []
    for entry in Ledger(path).scan():
        item = wanted.get(entry.lineno)
        if item is not None:
            before = last.get(item.job_id)
            if before is None or line_digest(before[1]) != item.digest:
                where = f"line {before[0]}'s is {line_digest(before[1])}" if before else "no earlier line"
                found.append(LineFinding(rules.JOB_LOWERED, item.lineno, (
                    f"job {item.job_id}: a correction lowers cost_usd to ${item.after_usd:.4f} with digest "
                    f"{item.digest}, not the one of the line it corrects ({where}); the corrected line was "
                    "rewritten, or the correction names another line")))
            if entry.lineno >= max(wanted):
                break
        if entry.record is not None and entry.record.get("id") in jobs:
            last[str(entry.record["id"])] = (entry.lineno, entry.raw)
    return found


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
    #: the latest time a line may carry (canonical): now plus the clock skew allowed (core.clock.FUTURE_SKEW)
    future_after: str = "9999-12-31T23:59:59.999Z"

    @property
    def future_day(self) -> str:
        """The day before future_after's: a date written with an offset may lag its UTC date by up to a day."""
        return format_ts(parse_ts(self.future_after) - timedelta(days=1))[:10]


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
    #: the job-state files written (one per process that checked a part of the range)
    jobs_files: list[str] = field(default_factory=list)
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
    #: corrections that lowered a job's cost
    lowered: list[LoweredCost] = field(default_factory=list)


#: What a deployment without a synced artifact compares as.
NO_SYNC: Final = LatestSync("", "")


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


@final
class Openings(msgspec.Struct, gc=False):
    """The first line of each job in a range that does not start the ledger: the sequence rule for it waits for the
    job's state at the end of the range before it (`audit.ledger_split.hand_over`). Kept as columns (a few hundred
    thousand of them travel between processes): line numbers, job ids, deployments (indexes into `deployments`) and
    flags (bit 0: a correction, bit 1: with a reason)."""

    lines: list[int] = msgspec.field(default_factory=list)
    job_ids: list[str] = msgspec.field(default_factory=list)
    deployment_of: list[int] = msgspec.field(default_factory=list)
    deployments: list[str] = msgspec.field(default_factory=list)
    flags: bytearray = msgspec.field(default_factory=bytearray)
    #: the corrections among them, by line: the cost, reason and digest they carry (for the lowered-cost rule)
    corrections: dict[int, tuple[float, str, str]] = msgspec.field(default_factory=dict)

    def add(self, lineno: int, job_id: str, deployment: str, correction: bool, reason: bool) -> None:
        deployments = self.deployments
        try:
            index = deployments.index(deployment)
        except ValueError:  # a deployment first seen here: a handful per ledger
            index = len(deployments)
            deployments.append(deployment)
        self.lines.append(lineno)
        self.job_ids.append(job_id)
        self.deployment_of.append(index)
        self.flags.append(correction | reason << 1)


class DeploymentFacts:
    """What the lines of a range say about one deployment: how many they are, the latest ts (canonical) and, for
    a deployment missing from the registry, the first few job ids (its finding's examples)."""

    __slots__ = ("examples", "last_ts", "lines")

    def __init__(self, unknown: bool) -> None:
        self.lines = 0
        self.last_ts = ""
        self.examples: list[str] | None = [] if unknown else None


class RawLines:
    """The raw lines of data[start:end] by line number (the first is number `first`), split only when one is needed
    (a line to settle)."""

    __slots__ = ("_lines", "data", "end", "first", "start")

    def __init__(self, data: bytes, start: int, end: int, first: int, lines: list[bytes] | None = None) -> None:
        self.data, self.start, self.end, self.first = data, start, end, first
        self._lines = lines

    def __getitem__(self, lineno: int) -> bytes:
        if self._lines is None:
            self._lines = self.data[self.start:self.end].split(b"\n")
        return self._lines[lineno - self.first]


def sequence_finding(previous: JobState | None, job_id: str, deployment: str, correction: bool,
                     reason: bool) -> str | None:
    """Why a job's line may not follow its previous state (None: the line is its first), as a finding's message."""
    if previous is None:
        return f"job {job_id}: a correction needs an earlier line of the same job" if correction else None
    problem = sequence_problem({"status": previous.status, "deployment_id": previous.deployment_id},
                               {"id": job_id, "deployment_id": deployment, "correction": correction, "reason": reason})
    return f"{problem}. Append a correction line instead" if problem else None


class LedgerPass:
    """The job rules over a range of the ledger, and each touched job's state.

    A range that does not start the ledger (`tail`) leaves the sequence rule of each job's first line in it to the
    range before it: it records an opening (`Openings`) instead.
    """

    __slots__ = ("ctx", "days", "facts", "jobs", "openings", "prior", "prior_jobs", "result", "strings",
                 "unsynced_now")

    def __init__(self, ctx: PassContext, prior: Prior | None, *, tail: bool = False) -> None:
        self.ctx = ctx
        self.prior = prior
        self.prior_jobs: dict[str, JobState] = prior.jobs if prior is not None else {}
        self.result = PassResult()
        self.jobs: dict[str, JobState] = {}
        self.unsynced_now: dict[str, UnsyncedArtifact] = {}
        #: UTC day per timestamp head; one str per distinct deployment, provider and GPU (msgspec shares statuses)
        self.days: dict[str, str] = {}
        self.strings: dict[str, str] = {}
        self.openings: Openings | None = Openings() if tail else None
        self.facts: dict[str, DeploymentFacts] = {}

    def note(self, rule: Rule, lineno: int, message: str) -> None:
        """A finding at a line, kept as an example while its rule has fewer than max_examples. Each rule's findings
        are noted in line order, those of the ledger as a whole (line 0) last, by message."""
        counts = self.result.counts
        seen = counts.get(rule, 0)
        counts[rule] = seen + 1
        if seen < self.ctx.max_examples:
            self.result.findings.append(LineFinding(rule, lineno, message))

    def read_block(self, data: bytes, lineno: int, end: int) -> int:
        """Check the lines of data[:end] (complete lines); `lineno` is the number of the line before the first.
        Returns the number of the last line.

        The lines are decoded a slice of about SLICE bytes at a time, in one call when the slice allows it
        (`core.job_line.decode_block`), else line by line: one call per slice saves a call per line, and a slice's
        lines stay in the CPU's cache while the rules read them (a whole block's would not).
        """
        position = 0
        while position < end:
            cut = data.rfind(b"\n", position, min(position + SLICE, end)) + 1 or data.index(b"\n", position) + 1
            count = data.count(b"\n", position, cut)
            lines = decode_block(data, position, cut, count)
            if lines is not None:
                lineno = self.follow_lines(lines, lineno, RawLines(data, position, cut, lineno + 1))
            else:
                lineno = self.read_lines(data, position, cut, lineno)
            position = cut
        return lineno

    def read_lines(self, data: bytes, start: int, end: int, lineno: int) -> int:
        """Check the lines of data[start:end] one by one."""
        raws = data[start:end].split(b"\n")
        raws.pop()  # after the last newline: nothing
        decode = decode_job_line
        lines: list[JobLine | None] = []
        append = lines.append
        for raw in raws:
            try:
                append(decode(raw))
            except DECODE_ERRORS:
                append(None)
        return self.follow_lines(lines, lineno, RawLines(data, start, end, lineno + 1, raws))

    def follow_lines(self, lines: Sequence[JobLine | None], lineno: int, raws: RawLines) -> int:
        """The job rules for each line (None: one the Struct refused, settled by the schema), then its job's new
        state and its deployment's facts. Returns the number of the last line."""
        hours, minutes, tails, from_iso = HOURS, MINUTES, TAILS, datetime.fromisoformat
        jobs, jobs_get, unsynced_now = self.jobs, self.jobs.get, self.unsynced_now
        prior_get = self.prior_jobs.get if self.prior_jobs else None
        intern, days_get = self.strings.setdefault, self.days.get
        cost_hr, abs_tol, rel_tol = self.ctx.cost_hr, self.ctx.abs_tol, self.ctx.rel_tol
        rate_of = cost_hr.get
        facts_get = self.facts.get
        future, future_day = self.ctx.future_after, self.ctx.future_day
        for line in lines:
            lineno += 1
            # every timestamp valid (the common case inline: pieces seen valid before), else the schema decides
            if line is None or not (
                    (ts := line.ts)[:13] in hours and ts[13:19] in minutes and ts[19:] in tails
                    and ((started := line.started_at) is None or started == ts or (
                        started[:13] in hours and started[13:19] in minutes and started[19:] in tails))
                    and ((completed := line.completed_at) is None or (
                        completed[:13] in hours and completed[13:19] in minutes and completed[19:] in tails))
                    and (not (artifacts := line.artifacts) or artifact_times_valid(artifacts))):
                line = self.checked(lineno, line, raws)
                if line is None:
                    continue
                ts, started, completed, artifacts = line.ts, line.started_at, line.completed_at, line.artifacts
            job_id = line.id
            previous = jobs_get(job_id)
            if previous is None and prior_get is not None:
                previous = prior_get(job_id)
            deployment, provider, gpu = line.deployment_id, line.provider or "?", line.gpu or "?"
            if previous is None:
                deployment, provider, gpu = intern(deployment, deployment), intern(provider, provider), intern(gpu, gpu)
                if line.correction or self.openings is not None:
                    self.first_line(lineno, line, deployment)
            else:
                if previous.deployment_id == deployment:
                    deployment = previous.deployment_id
                    if line.correction or previous.status in TERMINAL:
                        self.check_sequence(lineno, line, previous, deployment)
                else:
                    deployment = intern(deployment, deployment)
                    self.check_sequence(lineno, line, previous, deployment)
                provider = previous.provider if previous.provider == provider else intern(provider, provider)
                gpu = previous.gpu if previous.gpu == gpu else intern(gpu, gpu)
            status, duration, cost = line.status, line.duration_s, line.cost_usd
            if completed and started:
                try:
                    elapsed = (from_iso(completed) - from_iso(started)).total_seconds()
                except (ValueError, TypeError):
                    elapsed = seconds_between(started, completed)
                if elapsed < 0 or (duration is not None and abs(duration - elapsed) > 1.0
                                   and abs(duration - elapsed) > 0.01 * elapsed):
                    self.check_times(lineno, job_id, started, completed, duration)
            elif status == "completed":
                self.missing_times(lineno, job_id, started, completed)
            if duration is not None and cost is not None and (rate := rate_of(deployment)) is not None:
                expected = duration * rate / 3600.0
                if abs(cost - expected) > abs_tol + rel_tol * expected:
                    self.check_cost(lineno, job_id, deployment, duration, cost)
            if status == "failed" and not line.error:
                self.note(rules.JOB_FAILED_ERROR, lineno,
                          f"job {job_id} failed without an error; append a correction with the error text")
            stamp = completed or started or ts
            day = days_get(stamp[:10] if stamp[-1] == "Z" else stamp) or self.day_of(stamp)
            jobs[job_id] = JobState(job_id, status, cost or 0.0, day, provider, gpu, deployment)
            if artifacts:
                self.artifacts(line, deployment)
            elif job_id in unsynced_now:
                del unsynced_now[job_id]
            facts = facts_get(deployment) or self.new_facts(deployment)
            facts.lines += 1
            if facts.examples is not None and len(facts.examples) < 3 and job_id not in facts.examples:
                facts.examples.append(job_id)
            if len(ts) != 24 or ts[-1] != "Z":
                ts = canonical_ts(ts)
            if ts > future or (completed and completed[:10] >= future_day and canonical_ts(completed) > future):
                self.future_time(lineno, job_id, ts, completed)
            if ts > facts.last_ts:
                facts.last_ts = ts
        return lineno

    def future_time(self, lineno: int, job_id: str, ts: str, completed: str | None) -> None:
        """A line whose ts or completed_at lies beyond now plus the clock skew allowed."""
        name, value = ("ts", ts) if ts > self.ctx.future_after else ("completed_at", completed)
        self.note(rules.LEDGER_FUTURE, lineno,
                  f"job {job_id}: {name} {value} lies after {self.ctx.future_after} (now plus the clock skew "
                  "allowed): a wrong clock or a forged line; find out which, and append a correction with the real "
                  "time")

    def checked(self, lineno: int, line: JobLine | None, raws: RawLines) -> JobLine | None:
        """A line the fast checks did not clear: the Struct's line when its timestamps are valid, else the schema's
        verdict (None: refused, and the finding noted)."""
        if line is not None and line.times_valid():
            return line
        return self.settle_line(lineno, raws[lineno])

    def first_line(self, lineno: int, line: JobLine, deployment: str) -> None:
        """The first line of a job in this range: an opening in a tail range, else a correction is refused."""
        if self.openings is not None:
            self.openings.add(lineno, line.id, deployment, line.correction, bool(line.reason))
            if line.correction:
                self.openings.corrections[lineno] = (line.cost_usd or 0.0, line.reason or "", line.digest or "")
        elif line.correction:
            self.note(rules.JOB_SEQUENCE, lineno, sequence_finding(None, line.id, deployment, True, False) or "")

    def day_of(self, stamp: str) -> str:
        """The UTC day of a timestamp, remembered by its date (Z) or by the whole timestamp (an offset)."""
        day = self.days[stamp[:10] if stamp[-1] == "Z" else stamp] = utc_day(stamp)
        return day

    def new_facts(self, deployment: str) -> DeploymentFacts:
        facts = self.facts[deployment] = DeploymentFacts(deployment not in self.ctx.cost_hr)
        return facts

    def settle_line(self, lineno: int, raw: bytes) -> JobLine | None:
        """A line the Struct refused: the job schema decides, and explains a refusal (then None)."""
        verdict = settle(raw)
        if isinstance(verdict, JobLine):
            return verdict
        if verdict.record is not None:
            self.not_valid(lineno, verdict)
        elif verdict.problem.startswith("not valid JSON"):
            self.note(rules.LEDGER_TORN, lineno, f"{verdict.problem}; a torn or merged write in the middle of the "
                      "ledger. Move the fragment out (keep a copy) and re-append the job's line")
        else:  # not an object, or nested deeper than core.json_text allows
            self.note(rules.LEDGER_TORN, lineno, f"{verdict.problem}; move it out of jobs.jsonl")
        return None

    def not_valid(self, lineno: int, refusal: Refusal) -> None:
        record = refusal.record or {}
        errors, _ = schema.check("job", record)
        detail = "; ".join(f"{e.json_path}: {e.message}" for e in errors[:3]) or refusal.problem
        self.note(rules.LEDGER_SCHEMA, lineno, f"job {record.get('id')!r} does not match the job schema: {detail}. "
                  "Append a correction line with the right fields (never edit the line)")

    def check_sequence(self, lineno: int, line: JobLine, previous: JobState, deployment: str) -> None:
        problem = sequence_finding(previous, line.id, deployment, line.correction, bool(line.reason))
        if problem:
            self.note(rules.JOB_SEQUENCE, lineno, problem)
        if line.correction:
            self.check_lowered(lineno, line, previous.cost_usd)

    def check_lowered(self, lineno: int, line: JobLine, before: float) -> None:
        """A correction that lowers the job's cost is listed, and found wanting without its reason and digest."""
        lowered, finding = lowered_cost(lineno, line.id, before, line.cost_usd or 0.0, line.reason or "",
                                        line.digest or "")
        if lowered is not None:
            self.result.lowered.append(lowered)
        if finding is not None:
            self.note(finding.rule, finding.lineno, finding.message)

    def missing_times(self, lineno: int, job_id: str, started: str | None, completed: str | None) -> None:
        missing = " and ".join(n for n, v in (("started_at", started), ("completed_at", completed)) if not v)
        self.note(rules.JOB_TIMES, lineno,
                  f"job {job_id} is completed but has no {missing}; append a correction with both times")

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
        if latest and latest > result.synced_max.get(deployment, NO_SYNC).synced_at:
            result.synced_max[deployment] = LatestSync(latest, line.id)
        if unsynced is not None:
            self.unsynced_now[line.id] = UnsyncedArtifact(deployment, unsynced)
        elif line.id in self.unsynced_now:
            del self.unsynced_now[line.id]

    def read_range(self, start: int, end: int) -> None:
        """Check the lines of bytes [start, end) of the ledger; a last line without its newline is a torn tail."""
        lineno = 0
        carry = b""
        with regular_file.open_stream(Path(self.ctx.path)) as handle:
            # Each block starts at a line start: the partial line at a block's end is read again with the next
            # block (seek back), so no block is ever copied to join or cut it.
            position = start
            handle.seek(start)
            while position < end:
                data = handle.read(min(BLOCK, end - position))
                if not data:
                    break
                cut = data.rfind(b"\n") + 1
                while cut == 0 and position + len(data) < end and len(data) <= JSONL_LINE:  # a line over a block
                    more = handle.read(min(BLOCK, end - position - len(data)))
                    if not more:
                        break
                    data += more
                    cut = data.rfind(b"\n") + 1
                if cut == 0 and len(data) > JSONL_LINE:  # a line over its cap: noted, never held whole
                    lineno += 1
                    self.note(rules.LEDGER_SCHEMA, lineno, f"a ledger line over the {size_words(JSONL_LINE)} cap "
                              "of one line (no writer of the harness makes one); move it out of jobs.jsonl (keep "
                              "a copy) and re-append the job's line")
                    position = past_line(handle, position + len(data), end)
                    handle.seek(position)
                    continue
                if cut == 0:  # the bytes after the last newline: a torn last line
                    carry = data
                    break
                self.block_secrets(data, lineno + 1, cut)
                lineno = self.read_block(data, lineno, cut)
                del data
                position += cut
                handle.seek(position)
        if carry:
            self.block_secrets(carry, lineno + 1)
            self.result.torn = TornTail(lineno + 1, len(carry))
        self.result.lines = lineno

    def block_secrets(self, data: bytes, first_lineno: int, end: int | None = None) -> None:
        """Secrets in data[:end] (complete lines), whose first line is number first_lineno, noted by line (a
        line's pattern hits, then its credential values): whatever the blocks, a rule's findings are in line order."""
        found = [(first_lineno + line_of(data, hit.offset) - 1, hit) for hit in find_secrets(data, end,
                                                                                               self.ctx.credentials)]
        for lineno, hit in sorted(found, key=lambda pair: pair[0]):
            self.note(rules.SECRETS_LEDGER, lineno, f"{hit.kind} {hit.shown}; revoke it at the provider, then move "
                      "the secret out of the ledger (keep only the variable's name)")

    def finish(self, jobs_out: Path | None) -> PassResult:
        """Spend deltas, open/unsynced changes and the per-job ceiling over the touched jobs; write their states."""
        result = self.result
        prior = self.prior
        prior_get = self.prior_jobs.get if self.prior_jobs else None
        # sum by (day, provider, gpu, deployment) first: a handful of keys, then spread over the groupings
        combos: dict[tuple[str, str, str, str], float] = {}
        cap = self.ctx.per_job_usd
        over: list[JobState] = []
        open_before = prior.open_jobs if prior is not None else frozenset()
        unsynced_before = prior.unsynced if prior is not None else frozenset()
        unsynced_now = self.unsynced_now
        new_jobs = 0
        for job_id, state in self.jobs.items():
            old = prior_get(job_id) if prior_get is not None else None
            if old is None:
                new_jobs += 1
            elif old.cost_usd:
                key = (old.day, old.provider, old.gpu, old.deployment_id)
                combos[key] = combos.get(key, 0.0) - old.cost_usd
            cost = state.cost_usd
            if cost:
                key = (state.day, state.provider, state.gpu, state.deployment_id)
                combos[key] = combos.get(key, 0.0) + cost
                if exceeds(cost, cap):
                    over.append(state)
            if state.status not in TERMINAL:
                result.opened[job_id] = state.deployment_id
            elif job_id in open_before:
                result.closed.add(job_id)
            if job_id in unsynced_now:
                result.unsynced[job_id] = unsynced_now[job_id]
            elif job_id in unsynced_before:
                result.resynced.add(job_id)
        result.new_jobs = new_jobs
        for deployment, facts in self.facts.items():
            result.dep_lines[deployment] = facts.lines
            result.last_ts[deployment] = facts.last_ts
            if facts.examples is not None:
                result.dep_examples[deployment] = facts.examples
        self.over_cap(over)
        result.spend = spread(combos)
        result.touched = len(self.jobs)
        if jobs_out is not None and self.jobs:
            with open(jobs_out, "wb") as handle:
                handle.write(msgspec.json.Encoder().encode_lines(list(self.jobs.values())))
            result.jobs_files.append(str(jobs_out))
        self.jobs = {}
        return result

    def over_cap(self, over: list[JobState]) -> None:
        """The jobs billed above per_job_usd, in the order of their messages (by job id): an order that does not
        depend on how the ledger was split between processes."""
        cap = self.ctx.per_job_usd
        if cap is None:  # no ceiling: nothing is over it
            return
        for message in sorted(
                f"job {state.id}: billed ${state.cost_usd:.4f} > per_job_usd ${cap:.2f} (deployment "
                f"{state.deployment_id}, {state.day}); find out why it ran so long, append a correction if the cost "
                "is wrong, or raise per_job_usd on purpose" for state in over):
            self.note(rules.SPEND_PER_JOB, 0, message)


def spread(combos: dict[tuple[str, str, str, str], float]) -> dict[str, dict[str, float]]:
    """Spend by (day, provider, gpu, deployment) spread over the groupings of the checkpoint."""
    spend: dict[str, dict[str, float]] = {}
    for (day, provider, gpu, deployment), amount in combos.items():
        for grouping, group_key in (("day", day), ("month", day[:7]), ("provider", provider), ("gpu", gpu),
                                    ("deployment", deployment), ("day_provider", f"{day}|{provider}"),
                                    ("row", row_name((day, provider, gpu, deployment)))):
            bucket = spend.setdefault(grouping, {})
            bucket[group_key] = bucket.get(group_key, 0.0) + amount
    return spend


def scan(ctx: PassContext, start: int, end: int, prior: Prior | None = None,
         jobs_out: Path | None = None) -> PassResult:
    """Check bytes [start, end) of the ledger."""
    with collection_paused():
        ledger = LedgerPass(ctx, prior)
        ledger.read_range(start, end)
        return ledger.finish(jobs_out)


@contextlib.contextmanager
def collection_paused() -> Iterator[None]:
    """The garbage collector paused: the pass creates no cycles, and generational scans of the growing job table
    would dominate it."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def past_line(handle: BinaryIO, position: int, end: int) -> int:
    """Where the line that runs through `position` ends (just past its newline, or `end`), read block by block."""
    handle.seek(position)
    while position < end:
        block = handle.read(min(BLOCK, end - position))
        if not block:
            return position
        found = block.find(b"\n")
        if found >= 0:
            return position + found + 1
        position += len(block)
    return end


def readable_size(path: Path, note: Callable[[Rule, str], None]) -> int | None:
    """The ledger's size in bytes, or None (noted under ledger:schema) when a FIFO, a device or a directory stands in
    its place: there is nothing to stream."""
    try:
        return regular_file.size_of(path) or 0
    except UserError as exc:
        note(rules.LEDGER_SCHEMA, f"{exc.what}; {exc.hint}")
        return None


def complete_length(path: Path, size: int) -> int:
    """The byte length of the complete lines (everything up to the last newline)."""
    if size == 0:
        return 0
    with regular_file.open_stream(path) as handle:
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
    with regular_file.open_stream(path) as handle:
        handle.seek(start)
        remaining = end - start
        while remaining > 0:
            block = handle.read(min(BLOCK, remaining))
            if not block:
                break
            digest.update(block)
            remaining -= len(block)
