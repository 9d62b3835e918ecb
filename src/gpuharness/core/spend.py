"""Spend: billed (the deployments' billed intervals), used (each job's current line) and idle (the difference)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, final

import orjson

from gpuharness.core.billing import Interval
from gpuharness.core.clock import format_ts, now_ts, parse_ts
from gpuharness.core.job_line import JobLine

GROUPINGS = ("day", "month", "provider", "gpu", "deployment", "total")
SPEND_LABEL = "spend (each job's current line, every status)"
ONE_LINER_LABEL = "the one-liner (every line whose status is completed)"
#: The seeds' ledger reading, which `spend` replaces: it sums every line whose status is completed.
ONE_LINER = "jq -s 'map(select(.status==\"completed\")) | map(.cost_usd // 0) | add' .pi/gpu/jobs.jsonl"


def job_costs(records: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The current record of each job as written, unknown fields included (what `ledger show` prints; spend reads
    JobLines: current_lines)."""
    current: dict[str, dict[str, Any]] = {}
    for record in records:
        current[record["id"]] = record
    return current


def current_lines(lines: Iterable[JobLine]) -> dict[str, JobLine]:
    """The current line of each job (corrections replace earlier lines)."""
    return {line.id: line for line in lines}


def _line_day(line: JobLine) -> str:
    stamp = line.completed_at or line.started_at or line.ts
    if stamp.endswith(("Z", "z")) or len(stamp) < 11:
        return stamp[:10]
    try:
        return format_ts(parse_ts(stamp))[:10]
    except ValueError:
        return stamp[:10]


#: A row of the spend book: (UTC day, provider, gpu, deployment).
RowKey = tuple[str, str, str, str]


@final
@dataclass(slots=True)
class Spent:
    """Billed and used dollars of one group; idle is billed minus used."""

    billed: float = 0.0
    used: float = 0.0

    @property
    def idle(self) -> float:
        return self.billed - self.used

    def add(self, other: Spent) -> None:
        self.billed += other.billed
        self.used += other.used

    def to_json(self) -> dict[str, float]:
        return {"billed": round(self.billed, 6), "used": round(self.used, 6), "idle": round(self.idle, 6)}


def row_name(key: RowKey) -> str:
    """A row's key as one string (the audit checkpoint's `row` aggregate): a JSON array."""
    return orjson.dumps(list(key)).decode()


def row_of(name: str) -> RowKey:
    """The row key back from row_name's string."""
    day, provider, gpu, deployment = (str(part) for part in orjson.loads(name))
    return day, provider, gpu, deployment


def used_rows(lines: Iterable[JobLine]) -> dict[RowKey, float]:
    """The jobs' cost (each job's current line) per UTC day, provider, GPU and deployment, as written."""
    used: dict[RowKey, float] = defaultdict(float)
    for line in current_lines(lines).values():
        cost = line.cost_usd or 0.0
        if cost:
            used[(_line_day(line), line.provider or "?", line.gpu or "?", line.deployment_id)] += cost
    return dict(used)


def bill(used: Mapping[RowKey, float], intervals: Mapping[str, list[Interval]]) -> dict[RowKey, Spent]:
    """Billed and used per UTC day, provider, GPU and deployment. A deployment with billed intervals bills them
    (its jobs are used time inside them, placed at its provider and GPU); one without (serverless, or unknown to
    deployments.json) bills its jobs."""
    book: dict[RowKey, Spent] = defaultdict(Spent)
    placed = {dep: (found[0].provider, found[0].gpu) for dep, found in intervals.items() if found}
    for dep, found in intervals.items():
        for interval in found:
            for day, cost in interval.by_day():
                book[(day, interval.provider, interval.gpu, dep)].billed += cost
    for (day, provider, gpu, dep), cost in used.items():
        provider, gpu = placed.get(dep) or (provider, gpu)
        row = book[(day, provider, gpu, dep)]
        row.used += cost
        if dep not in intervals:
            row.billed += cost
    return dict(book)


def spend_book(lines: Iterable[JobLine], intervals: Mapping[str, list[Interval]]) -> dict[RowKey, Spent]:
    """Billed and used per UTC day, provider, GPU and deployment, from the ledger's lines (see bill)."""
    return bill(used_rows(lines), intervals)


_GROUP_INDEX = {"day": 0, "provider": 1, "gpu": 2, "deployment": 3}


def group_book(book: dict[RowKey, Spent], by: str) -> dict[str, Spent]:
    """The book summed per group (day and month are UTC)."""
    if by not in GROUPINGS:
        raise ValueError(f"unknown grouping {by!r}; use one of {', '.join(GROUPINGS)}")
    out: dict[str, Spent] = defaultdict(Spent)
    for key, spent in book.items():
        group = "total" if by == "total" else key[0][:7] if by == "month" else key[_GROUP_INDEX[by]]
        out[group].add(spent)
    return dict(sorted(out.items()))


def billed_today_and_month(book: dict[RowKey, Spent], now: str) -> tuple[float, float]:
    """Billed spend of the UTC day and month of `now`."""
    day = sum(s.billed for key, s in book.items() if key[0] == now[:10])
    month = sum(s.billed for key, s in book.items() if key[0][:7] == now[:7])
    return day, month


def _line_key(line: JobLine, by: str) -> str:
    if by in ("day", "month"):
        return _line_day(line)[:10 if by == "day" else 7]
    if by == "provider":
        return line.provider or "?"
    if by == "gpu":
        return line.gpu or "?"
    return line.deployment_id if by == "deployment" else "total"


def spend_by(lines: Iterable[JobLine], by: str) -> dict[str, float]:
    """The jobs' cost (each job's current line) per group (day and month are UTC, from completed_at)."""
    if by not in GROUPINGS:
        raise ValueError(f"unknown grouping {by!r}; use one of {', '.join(GROUPINGS)}")
    totals: dict[str, float] = defaultdict(float)
    for line in current_lines(lines).values():
        if line.cost_usd:
            totals[_line_key(line, by)] += line.cost_usd
    return {k: round(v, 6) for k, v in sorted(totals.items())}


def today_and_month(lines: Iterable[JobLine], now: str | None = None) -> tuple[float, float]:
    """The jobs' cost of the current UTC day and month."""
    stamp = now or now_ts()
    day, month = stamp[:10], stamp[:7]
    spent_day = spent_month = 0.0
    for line in current_lines(lines).values():
        cost = line.cost_usd or 0.0
        key = _line_day(line)
        if key == day:
            spent_day += cost
        if key[:7] == month:
            spent_month += cost
    return spent_day, spent_month


@final
@dataclass(frozen=True, slots=True)
class JobDifference:
    """One job on which `spend` and the one-liner disagree: what each counts, and the ledger lines behind it."""

    job_id: str
    status: str  # of its current line
    billed: float  # what spend counts: the current line's cost_usd
    counted: float  # what the one-liner counts: the sum over its completed lines
    completed_lines: tuple[int, ...]
    current_line: int

    @property
    def again(self) -> float:
        """Cost of the completed lines that are not the current one (the one-liner counts them again)."""
        return self.counted - (self.billed if self.status == "completed" else 0.0)

    def to_json(self) -> dict[str, Any]:
        return {"job": self.job_id, "status": self.status, "billed_usd": round(self.billed, 6),
                "one_liner_usd": round(self.counted, 6), "completed_lines": list(self.completed_lines),
                "current_line": self.current_line}


@final
@dataclass(slots=True)
class OneLinerExplanation:
    """Why `spend` (each job's current line, whatever its status) and the one-liner differ: jobs billed but not
    completed (the one-liner skips them) and completed lines superseded by a correction (it counts them again)."""

    spend: float = 0.0
    one_liner: float = 0.0
    jobs: list[JobDifference] = field(default_factory=list)

    @property
    def not_completed(self) -> list[JobDifference]:
        return [j for j in self.jobs if j.status != "completed" and j.billed]

    @property
    def counted_again(self) -> list[JobDifference]:
        return [j for j in self.jobs if j.again]

    def to_json(self) -> dict[str, Any]:
        return {"spend_usd": round(self.spend, 6), "one_liner_usd": round(self.one_liner, 6),
                "difference_usd": round(self.spend - self.one_liner, 6), "one_liner": ONE_LINER,
                "billed_not_completed": [j.to_json() for j in self.not_completed],
                "counted_again": [j.to_json() for j in self.counted_again]}

    def lines(self) -> list[str]:
        """The difference category by category, job by job, with the ledger lines it comes from."""
        skipped, again = self.not_completed, self.counted_again
        out = [f"{SPEND_LABEL:<54}{_usd(self.spend)}", f"{ONE_LINER_LABEL:<54}{_usd(self.one_liner)}",
               f"{'difference':<54}{_usd(self.spend - self.one_liner, signed=True)}"]
        out.append(f"{_usd(sum(j.billed for j in skipped), signed=True)}  {len(skipped)} job(s) billed but not "
                   "completed: the one-liner skips them (a failed job bills its GPU time)")
        out += [f"    {j.job_id:<14} {j.status:<11} ${j.billed:,.4f}  line {j.current_line}" for j in skipped]
        out.append(f"{_usd(-sum(j.again for j in again), signed=True)}  {len(again)} job(s) whose completed line was "
                   "followed by a correction: the one-liner counts the superseded line(s) again")
        out += [f"    {j.job_id:<14} ${j.again:,.4f} counted again  completed lines "
                f"{', '.join(map(str, j.completed_lines))}; current line {j.current_line}" for j in again]
        return out


def _usd(value: float, signed: bool = False) -> str:
    """$1.2345 (-$1.2345), or signed: +$1.2345."""
    text = f"${abs(value):,.4f}"
    return "-" + text if value < 0 else ("+" if signed else "") + text


def explain_one_liner(numbered: Iterable[tuple[int, JobLine]]) -> OneLinerExplanation:
    """Compare spend with the one-liner over (line number, line) pairs of the whole ledger."""
    current: dict[str, tuple[int, JobLine]] = {}
    completed: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for lineno, line in numbered:
        current[line.id] = (lineno, line)
        if line.status == "completed":
            completed[line.id].append((lineno, line.cost_usd or 0.0))
    explanation = OneLinerExplanation()
    for job_id, (lineno, line) in current.items():
        billed = line.cost_usd or 0.0
        counted = sum(cost for _, cost in completed.get(job_id, []))
        explanation.spend += billed
        explanation.one_liner += counted
        difference = JobDifference(job_id, line.status, billed, counted,
                                   tuple(n for n, _ in completed.get(job_id, [])), lineno)
        if difference.again or (difference.status != "completed" and billed):
            explanation.jobs.append(difference)
    return explanation
