"""Reservations: a job's expected cost, held against per_job_usd, daily_usd and monthly_usd before the job starts.

Each `run` reserves under the lock of `reservations.json` (core.statefile.exclusive_lock, the registry's lock): it
reads what the ledger has spent today and this month, adds every open reservation, and refuses when its own expected
cost would pass a ceiling. Two runs started at once therefore see each other: the second counts the first's
reservation. The reservation is released when the run ends (its ledger lines then carry the cost: they settle it).
A reservation whose run died is void: once its run claim is free (the kernel freed it with the process), or once it
is older than its timeout (the job's deadline for every attempt)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Final, final

from gpuharness.core import claims, schema
from gpuharness.core.clock import format_ts, parse_ts
from gpuharness.core.errors import UserError
from gpuharness.core.policy import Action, Policy
from gpuharness.core.statefile import atomic_write_json, exclusive_lock, read_json

RESERVATIONS: Final = "reservations.json"

#: today's and this month's spend so far (read under the lock, so a job settled meanwhile is counted once)
Spent = Callable[[], tuple[float, float]]


@final
@dataclass(frozen=True, slots=True)
class Expected:
    """What a job is expected to cost and why: the workflow's declared estimate, or deadline × rate."""

    amount_usd: float
    basis: str
    timeout_s: float


def expected_cost(workflow: dict[str, Any], cost_hr: float, deadline_s: float, attempts: int,
                  per_job_usd: float | None) -> Expected:
    """The workflow's `estimated_cost_usd` when it declares one; else the job's deadline × the rate for each attempt
    allowed, capped at per_job_usd (the run cancels a chain of attempts there)."""
    timeout_s = deadline_s * max(attempts, 1)
    declared = workflow.get("estimated_cost_usd")
    if declared is not None:
        return Expected(float(declared), f"workflow {workflow['id']}'s estimated_cost_usd", timeout_s)
    amount = timeout_s * cost_hr / 3600.0
    basis = f"{max(attempts, 1)} attempt(s) × {deadline_s:g} s × ${cost_hr:.3f}/hr"
    if per_job_usd is not None and amount > per_job_usd:
        return Expected(per_job_usd, f"{basis}, capped at per_job_usd", timeout_s)
    return Expected(amount, basis, timeout_s)


def _load(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {"schema_version": 1, "reservations": []}
    document = read_json(path)
    errors, _ = schema.check("reservations", document)
    if errors:
        raise UserError(errors[0].message, path=path, place=errors[0].json_path,
                        hint="remove the file when no `gpuharness run` is working; nothing was run")
    return dict(document)


def _open(root: Path, items: list[dict[str, Any]], now: datetime) -> list[dict[str, Any]]:
    """The reservations still held: not past their timeout, and their run still alive."""
    return [item for item in items if parse_ts(item["expires_at"]) > now
            and not claims.is_free(root, "run", item["deployment_id"])]


def _reserve(root: Path, policy: Policy, spent: Spent, item: dict[str, Any], now: datetime) -> None:
    path = root / RESERVATIONS
    with exclusive_lock(path):
        document = _load(path)
        held = _open(root, document["reservations"], now)
        others = sum(float(r["amount_usd"]) for r in held)
        day, month = spent()
        amount = float(item["amount_usd"])
        decision = policy.evaluate(Action(kind="job", job_cost_usd=amount, spent_today_usd=day + others,
                                          spent_month_usd=month + others))
        if not decision.allowed:
            running = f" (counting ${others:.2f} reserved by {len(held)} job(s) running now)" if held else ""
            raise UserError(f"refused: {decision.reason}{running}; this job reserves ${amount:.2f} "
                            f"({item['basis']})", path=root / "policy.json", place=decision.ceiling,
                            hint="nothing was run")
        document["reservations"] = [*held, item]
        atomic_write_json(path, document)


def _release(root: Path, reservation_id: str, now: datetime) -> None:
    path = root / RESERVATIONS
    with exclusive_lock(path):
        document = _load(path)
        held = [r for r in _open(root, document["reservations"], now) if r["id"] != reservation_id]
        document["reservations"] = held
        atomic_write_json(path, document)


@contextlib.contextmanager
def reserved(root: Path, policy: Policy, spent: Spent, *, deployment_id: str, workflow: str | None,
             expected: Expected, clock: Callable[[], datetime]) -> Iterator[dict[str, Any]]:
    """Hold a job's expected cost while the block runs (the caller holds the deployment's run claim); a UserError
    naming the ceiling, before anything runs, when it does not fit beside what is spent and reserved."""
    now = clock()
    reservation_id = f"{deployment_id}-{os.getpid()}-{format_ts(now)}"
    item: dict[str, Any] = {"id": reservation_id, "deployment_id": deployment_id,
            "workflow": workflow, "amount_usd": round(expected.amount_usd, 6), "basis": expected.basis,
            "created_at": format_ts(now), "expires_at": format_ts(now + timedelta(seconds=expected.timeout_s)),
            "pid": os.getpid()}
    _reserve(root, policy, spent, item, now)
    try:
        yield item
    finally:
        _release(root, reservation_id, clock())
