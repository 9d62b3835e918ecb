"""The full ledger pass on two cores: a forked child checks the second part of the ledger while this process checks
the first, and the two parts are joined into the result one pass would have made.

A job's lines may fall on both sides of the cut. The child leaves the sequence rule of each job's first line in its
part to the join (its `Openings`: the rule needs the job's state at the end of the first part), and the parent hands
each such job to the child's part (whose state for it is the later one) before it finishes its own: spend, open
jobs, unsynced artifacts and the per-job ceiling then count every job once, from its last line. Findings keep the
order and the example cap of one pass (tests/audit/test_ledger_split.py holds the join to a single pass).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, final

import msgspec

from gpuharness.audit import rules
from gpuharness.audit.ledger_pass import (
    NO_SYNC,
    LatestSync,
    LedgerPass,
    LineFinding,
    LoweredCost,
    Openings,
    PassContext,
    PassResult,
    TornTail,
    UnsyncedArtifact,
    collection_paused,
    lowered_cost,
    past_line,
    sequence_finding,
)
from gpuharness.core import regular_file
from gpuharness.core.rules import Rule

#: Below this many bytes one process checks the whole ledger (a fork and a join cost more than they save).
SPLIT_MIN_BYTES: Final = 16 << 20
#: The job-state files of the two parts, in the pending directory of the audit.
HEAD_JOBS: Final = "jobs-full-0.jsonl"
TAIL_JOBS: Final = "jobs-full-1.jsonl"


@final
class WireFinding(msgspec.Struct, array_like=True, frozen=True, gc=False):
    """A finding of the child's part, its rule by id."""

    rule: str
    lineno: int
    message: str


@final
class TailReport(msgspec.Struct, gc=False):
    """What the child sends back: its part's result (line numbers relative to its first line) and its openings."""

    lines: int
    new_jobs: int
    touched: int
    jobs_files: list[str]
    findings: list[WireFinding]
    counts: dict[str, int]
    spend: dict[str, dict[str, float]]
    opened: dict[str, str]
    unsynced: dict[str, UnsyncedArtifact]
    synced_max: dict[str, LatestSync]
    dep_lines: dict[str, int]
    dep_examples: dict[str, list[str]]
    last_ts: dict[str, str]
    torn: TornTail | None
    openings: Openings
    lowered: list[LoweredCost] = msgspec.field(default_factory=list)

    @classmethod
    def of(cls, result: PassResult, openings: Openings) -> TailReport:
        return cls(result.lines, result.new_jobs, result.touched, result.jobs_files,
                   [WireFinding(f.rule.id, f.lineno, f.message) for f in result.findings],
                   {rule.id: count for rule, count in result.counts.items()}, result.spend, result.opened,
                   result.unsynced, result.synced_max, result.dep_lines, result.dep_examples, result.last_ts,
                   result.torn, openings, result.lowered)

    def result(self) -> PassResult:
        """The child's part as a PassResult (its line numbers still relative to its first line)."""
        table = rules.AUDIT_RULES
        return PassResult(
            lines=self.lines, new_jobs=self.new_jobs, touched=self.touched, jobs_files=self.jobs_files,
            findings=[LineFinding(table[f.rule], f.lineno, f.message) for f in self.findings],
            counts={table[rule_id]: count for rule_id, count in self.counts.items()}, spend=self.spend,
            opened=self.opened, unsynced=self.unsynced, synced_max=self.synced_max, dep_lines=self.dep_lines,
            dep_examples=self.dep_examples, last_ts=self.last_ts, torn=self.torn,
            lowered=[LoweredCost(*item) for item in self.lowered])


def cut_point(path: str, size: int) -> int:
    """Where the second part starts: the first line start at or after the middle (0: do not split)."""
    if size < SPLIT_MIN_BYTES:
        return 0
    with regular_file.open_stream(Path(path)) as handle:
        cut = past_line(handle, size // 2, size)  # block by block: a line over its cap is never held whole
    return cut if cut < size else 0


def check_tail(ctx: PassContext, cut: int, size: int, jobs_dir: Path) -> TailReport:
    """Check bytes [cut, size): the child's part (or this process's, when no child could do it)."""
    with collection_paused():
        tail = LedgerPass(ctx, None, tail=True)
        tail.read_range(cut, size)
        openings = tail.openings or Openings()
        return TailReport.of(tail.finish(jobs_dir / TAIL_JOBS), openings)


@final
@dataclass(slots=True)
class TailChild:
    """A forked child checking the second part; `report()` waits for it (None: it failed, and the parent checks
    that part itself)."""

    pid: int
    reader: int
    chunks: list[bytes] = field(default_factory=list)

    @classmethod
    def start(cls, ctx: PassContext, cut: int, size: int, jobs_dir: Path) -> TailChild | None:
        """Fork the child, unless other threads run in this process (a forked child would inherit their locks held)
        or the platform cannot fork."""
        return cls.fork(lambda: check_tail(ctx, cut, size, jobs_dir))

    @classmethod
    def fork(cls, work: Callable[[], TailReport | None]) -> TailChild | None:
        """A child that sends what `work` returns (None: it exits 3, and `report()` is None), or None when no child
        may be forked (other threads run in this process, or the platform cannot fork)."""
        if not hasattr(os, "fork") or not single_threaded():
            return None
        reader, writer = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: work, send, and leave without running the parent's exit handlers
            code = 1
            try:
                os.close(reader)
                report = work()
                if report is None:
                    code = 3
                else:
                    payload = msgspec.msgpack.encode(report)
                    with os.fdopen(writer, "wb") as pipe:
                        pipe.write(payload)
                    code = 0
            finally:
                os._exit(code)
        os.close(writer)
        return cls(pid, reader)

    def report(self) -> TailReport | None:
        with os.fdopen(self.reader, "rb") as pipe:
            payload = pipe.read()
        _, status = os.waitpid(self.pid, 0)
        if not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0:
            return None
        try:
            return msgspec.msgpack.decode(payload, type=TailReport)
        except msgspec.DecodeError:
            return None

    def stop(self) -> None:
        """End a child whose report is no longer wanted (the parent's part failed)."""
        with contextlib.suppress(OSError):
            os.kill(self.pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.close(self.reader)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)


def single_threaded() -> bool:
    """Whether this process runs one thread: the kernel's count where there is one (native threads too, such as a
    hash's worker pool), else the threading module's."""
    try:
        with open("/proc/self/status", "rb") as status:
            for line in status:
                if line.startswith(b"Threads:"):
                    return int(line.split()[1]) == 1
    except (OSError, ValueError, IndexError):
        pass
    return threading.active_count() == 1


def scan_split(ctx: PassContext, size: int, cut: int, child: TailChild | None, jobs_dir: Path) -> PassResult:
    """The full pass over bytes [0, size), cut at `cut`: the second part checked by `child` (else here, after the
    first), then joined."""
    try:
        with collection_paused():
            head = LedgerPass(ctx, None)
            head.read_range(0, cut)
            report = child.report() if child is not None else None
            child = None
            if report is None:
                report = check_tail(ctx, cut, size, jobs_dir)
            deferred, lowered = hand_over(head, report.openings)
            joined = join(head.finish(jobs_dir / HEAD_JOBS), report.result(), deferred, ctx.max_examples)
            joined.lowered = sorted([*joined.lowered, *lowered])
            return joined
    finally:
        if child is not None:
            child.stop()


def hand_over(head: LedgerPass, openings: Openings) -> tuple[list[LineFinding], list[LoweredCost]]:
    """Judge the first line in the second part of each job against its state at the end of the first part (line
    numbers made absolute), and leave the jobs seen in both parts to the second. Returns the findings and the
    corrections among those lines that lowered a job's cost."""
    offset = head.result.lines
    jobs = head.jobs  # `finish` reads the jobs left here only
    found: list[LineFinding] = []
    lowered: list[LoweredCost] = []
    names = openings.deployments
    for lineno, job_id, deployment, flags in zip(openings.lines, openings.job_ids, openings.deployment_of,
                                                 openings.flags, strict=True):
        previous = jobs.pop(job_id, None)
        if previous is None and not flags & 1:
            continue
        problem = sequence_finding(previous, job_id, names[deployment], bool(flags & 1), bool(flags & 2))
        if problem:
            found.append(LineFinding(rules.JOB_SEQUENCE, offset + lineno, problem))
        if previous is not None and flags & 1:
            item, finding = lowered_cost(offset + lineno, job_id, previous.cost_usd, *openings.corrections[lineno])
            lowered.extend([item] if item is not None else [])
            found.extend([finding] if finding is not None else [])
    return found, lowered


def join(head: PassResult, tail: PassResult, deferred: list[LineFinding], max_examples: int) -> PassResult:
    """One result from the two parts' (the second's line numbers still relative to its first line)."""
    offset = head.lines
    joined = PassResult(lines=head.lines + tail.lines, new_jobs=head.new_jobs + tail.new_jobs,
                        touched=head.touched + tail.touched, jobs_files=[*head.jobs_files, *tail.jobs_files],
                        opened={**head.opened, **tail.opened}, closed=head.closed | tail.closed,
                        unsynced={**head.unsynced, **tail.unsynced}, resynced=head.resynced | tail.resynced)
    later = [LineFinding(f.rule, offset + f.lineno if f.lineno else 0, f.message) for f in tail.findings]
    joined.findings, joined.counts = join_findings(head, later, deferred, tail.counts, max_examples)
    for grouping, amounts in (*head.spend.items(), *tail.spend.items()):
        bucket = joined.spend.setdefault(grouping, {})
        for key, amount in amounts.items():
            bucket[key] = bucket.get(key, 0.0) + amount
    for part in (head, tail):
        for deployment, latest in part.synced_max.items():
            if latest.synced_at > joined.synced_max.get(deployment, NO_SYNC).synced_at:
                joined.synced_max[deployment] = latest
        for deployment, count in part.dep_lines.items():
            joined.dep_lines[deployment] = joined.dep_lines.get(deployment, 0) + count
        for deployment, job_ids in part.dep_examples.items():
            examples = joined.dep_examples.setdefault(deployment, [])
            examples.extend(job_id for job_id in job_ids if job_id not in examples)
            del examples[3:]
        for deployment, ts in part.last_ts.items():
            if ts > joined.last_ts.get(deployment, ""):
                joined.last_ts[deployment] = ts
    if tail.torn is not None:
        joined.torn = TornTail(offset + tail.torn.lineno, tail.torn.length)
    joined.lowered = [*head.lowered, *(item._replace(lineno=offset + item.lineno) for item in tail.lowered)]
    return joined


def join_findings(head: PassResult, later: list[LineFinding], deferred: list[LineFinding],
                  tail_counts: dict[Rule, int], max_examples: int
                  ) -> tuple[list[LineFinding], dict[Rule, int]]:
    """Each rule's findings in the order one pass notes them (by line, see `LedgerPass.note`; those of the ledger as
    a whole, line 0, by message, after the rest), at most `max_examples` of each, with the counts of both parts and
    the deferred."""
    counts = dict(head.counts)
    for rule, count in tail_counts.items():
        counts[rule] = counts.get(rule, 0) + count
    for finding in deferred:
        counts[finding.rule] = counts.get(finding.rule, 0) + 1
    ordered = sorted([*head.findings, *later, *deferred],
                     key=lambda f: (f.lineno == 0, f.lineno, f.message if f.lineno == 0 else ""))
    kept: list[LineFinding] = []
    shown: dict[Rule, int] = {}
    for finding in ordered:
        seen = shown.get(finding.rule, 0)
        if seen < max_examples:
            shown[finding.rule] = seen + 1
            kept.append(finding)
    return kept, counts
