"""A retry shares the job's budget: the retried job carries retry_of (the first attempt's id), and per_job_usd
covers every attempt of the chain, so a retry never gets a fresh ceiling."""

from __future__ import annotations

from lifecycle_fakes import FakeExecutor
from test_run import FLAKY, lines, ready_world

from gpuharness.operations.run import run_job


def chain_cost(records: list[dict], first: str) -> float:
    current: dict[str, dict] = {}
    for record in records:
        current[record["id"]] = record
    return sum(float(r.get("cost_usd") or 0) for r in current.values() if first in (r["id"], r.get("retry_of")))


def test_a_retry_carries_retry_of_and_the_first_attempts_cost_counts_against_per_job_usd(tmp_path):
    # $0.50/hr, 60 s polls: the first attempt fails after 60 s ($0.0083); alone, a retry would also cost $0.0083
    world, dep_id = ready_world(tmp_path, policy={"per_job_usd": 0.012})
    world.executor = FakeExecutor(world.host, fail_logs=[FLAKY], clock=world.clock)
    result = run_job(world.ctx, dep_id, inputs={}, poll_s=60)
    records = lines(world)
    retried = [r for r in records if r["id"] == "J-000002"]
    assert retried and all(r["retry_of"] == "J-000001" for r in retried)
    assert "retry_of" not in records[0]
    assert result.status == "cancelled" and "earlier attempts of J-000001" in records[-1]["error"]
    assert chain_cost(records, "J-000001") <= 0.012


def test_no_retry_once_the_first_attempt_spent_the_whole_budget(tmp_path):
    # the first attempt fails after 60 s at $0.50/hr: $0.008333, exactly the ceiling: nothing is left for a retry
    world, dep_id = ready_world(tmp_path, policy={"per_job_usd": 0.008333})
    world.executor = FakeExecutor(world.host, fail_logs=[FLAKY], clock=world.clock)
    result = run_job(world.ctx, dep_id, inputs={}, poll_s=60)
    assert result.status == "failed" and result.attempts == 1
    assert any("not retried" in line and "a retry shares the job's budget" in line for line in world.said)
    assert len(world.executor.jobs) == 1
