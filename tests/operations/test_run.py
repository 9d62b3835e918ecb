"""run: requires ready; running then terminal ledger lines; per-job ceiling; classified failures, one retry."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
from lifecycle_fakes import FakeExecutor, make_world, mark_ready, pin_clock
from test_provision import request

from gpuharness.core.errors import UserError
from gpuharness.core.ledger import Ledger
from gpuharness.core.lifecycle import read_journal
from gpuharness.operations.provision import provision
from gpuharness.operations.run import run_job, spend_line

OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
       "23.57 GiB of which 1.23 GiB is free.")
FLAKY = "ConnectionResetError: [Errno 104] Connection reset by peer"


#: a time whose next hours stay in one UTC day and month, for tests that read today's spend after a long job
MORNING = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)


def ready_world(tmp_path, monkeypatch=None, **kwargs):
    world = make_world(tmp_path, **kwargs)
    if monkeypatch is not None:
        pin_clock(world, monkeypatch, MORNING)
    dep_id = provision(world.ctx, request()).deployment.id
    from gpuharness.core.lifecycle import transition
    transition(world.registry, dep_id, "health-checking")
    mark_ready(world.registry, dep_id)
    return world, dep_id


def lines(world):
    return [e.record for e in Ledger(world.registry.ledger_path).scan()]


def test_run_refuses_a_deployment_that_is_not_ready(tmp_path):
    world = make_world(tmp_path)
    dep_id = provision(world.ctx, request()).deployment.id
    with pytest.raises(UserError, match="not ready") as info:
        run_job(world.ctx, dep_id, inputs={"prompt": "a cat"})
    assert f"next: `gpuharness install {dep_id}`" in info.value.line()  # its next step, not a health run yet
    assert lines(world) == []


def test_run_appends_running_then_completed_with_duration_cost_and_artifacts(tmp_path):
    world, dep_id = ready_world(tmp_path)
    result = run_job(world.ctx, dep_id, inputs={"prompt": "a cat"}, poll_s=60)
    first, last = lines(world)
    assert first["status"] == "running" and first["id"] == result.job_id == "J-000001"
    assert last["status"] == "completed"
    assert last["duration_s"] == 60.0
    assert last["cost_usd"] == round(60 / 3600 * 0.5, 6)
    assert last["artifacts"][0]["name"] == "out.png" and last["artifacts"][0]["synced_at"] is None
    assert last["inputs"] == {"prompt": "a cat"} and last["workflow_version"] == 1
    assert world.registry.deployment(dep_id).status == "ready"
    tos = [j["to"] for j in read_journal(world.registry.journal_path)]
    assert tos[-2:] == ["running", "ready"]


def test_run_cancels_a_job_whose_running_cost_would_exceed_per_job_usd(tmp_path):
    world, dep_id = ready_world(tmp_path, policy={"per_job_usd": 0.05})
    world.executor = FakeExecutor(world.host, never_finishes=True)
    result = run_job(world.ctx, dep_id, inputs={}, poll_s=60)
    assert result.status == "cancelled"
    last = lines(world)[-1]
    assert last["status"] == "cancelled" and "per_job_usd" in last["error"]
    assert last["cost_usd"] <= 0.05
    assert world.executor.cancelled == ["p-J-000001"]
    assert world.registry.deployment(dep_id).status == "ready"


def test_run_never_retries_a_cuda_oom(tmp_path):
    world, dep_id = ready_world(tmp_path)
    world.executor = FakeExecutor(world.host, fail_logs=[OOM])
    result = run_job(world.ctx, dep_id, inputs={}, poll_s=1)
    assert result.status == "failed" and result.attempts == 1
    assert result.failure is not None and result.failure.cause == "cuda_oom"
    last = lines(world)[-1]
    assert last["cause"] == "cuda_oom" and "lowvram" in last["error"]
    assert len(world.executor.jobs) == 1
    assert world.registry.deployment(dep_id).status == "ready"


def test_run_retries_once_when_the_cause_allows_then_succeeds(tmp_path):
    world, dep_id = ready_world(tmp_path)
    world.executor = FakeExecutor(world.host, fail_logs=[FLAKY])
    result = run_job(world.ctx, dep_id, inputs={}, poll_s=1)
    assert result.status == "completed" and result.attempts == 2
    statuses = [(r["id"], r["status"], r.get("attempt")) for r in lines(world)]
    assert statuses == [("J-000001", "running", 1), ("J-000001", "failed", 1),
                        ("J-000002", "running", 2), ("J-000002", "completed", 2)]


def test_run_second_failure_marks_the_deployment_error(tmp_path):
    world, dep_id = ready_world(tmp_path)
    world.executor = FakeExecutor(world.host, fail_logs=[FLAKY, FLAKY])
    result = run_job(world.ctx, dep_id, inputs={}, poll_s=1)
    assert result.status == "failed" and result.attempts == 2
    dep = world.registry.deployment(dep_id)
    assert dep.status == "error" and "two failed jobs" in dep.error


def test_spend_line_shows_spend_against_the_ceilings(tmp_path, monkeypatch):
    world, dep_id = ready_world(tmp_path, monkeypatch, policy={"daily_usd": 20.0, "per_job_usd": 2.0})
    run_job(world.ctx, dep_id, inputs={}, poll_s=3600)
    text = spend_line(world.ctx)  # billed: the pod's uptime at its rate, more than the $0.50 job alone
    found = re.search(r"today \$(\d+\.\d{4}) of daily_usd \$20\.00", text)
    assert found and 0.50 < float(found.group(1)) < 0.60, text
    assert "per_job_usd $2.00" in text


def test_run_refuses_when_the_daily_ceiling_is_already_spent(tmp_path, monkeypatch):
    world, dep_id = ready_world(tmp_path, monkeypatch, policy={"daily_usd": 0.1})
    with world.registry.update("workflows.json") as document:  # reserved: it fits, then spends $0.50
        for workflow in document["workflows"]:
            workflow["estimated_cost_usd"] = 0.01
    run_job(world.ctx, dep_id, inputs={}, poll_s=3600)
    with pytest.raises(UserError, match="daily_usd"):
        run_job(world.ctx, dep_id, inputs={}, poll_s=1)


def test_run_reports_progress_of_a_long_job(tmp_path):
    world, dep_id = ready_world(tmp_path)
    world.executor = FakeExecutor(world.host, polls=5)
    run_job(world.ctx, dep_id, inputs={}, poll_s=20)
    progress = [line for line in world.said if "so far" in line]
    assert progress and progress[0].startswith("J-000001: running 40 s, $0.0056 so far (marker 3)")


def test_run_never_retries_after_losing_contact_with_the_runtime(tmp_path):
    world, dep_id = ready_world(tmp_path)

    class Unreachable(FakeExecutor):
        def poll(self, handle):
            raise ConnectionError("connection refused")

    world.executor = Unreachable(world.host)
    result = run_job(world.ctx, dep_id, inputs={}, poll_s=1)
    assert result.status == "failed" and result.attempts == 1
    assert "may still be running" in lines(world)[-1]["error"]


def test_run_does_not_blind_retry_an_unknown_cause(tmp_path):
    """Issue 20 item 7: `unknown` is retried once only when the log shows a cause known to be transient."""
    world, dep_id = ready_world(tmp_path)
    world.executor = FakeExecutor(world.host, fail_logs=["ValueError: the scheduler got an odd tensor"])
    result = run_job(world.ctx, dep_id, inputs={}, poll_s=1)
    assert result.status == "failed" and result.attempts == 1
    assert result.failure is not None and result.failure.cause == "unknown" and not result.failure.retryable
    assert any("not retried" in line for line in world.said)
    assert world.registry.deployment(dep_id).status == "ready"


@pytest.mark.parametrize(("log", "cause", "retried"), [
    (FLAKY, "unknown", True),
    ("POST /v1/completions answered HTTP 503: Service Unavailable", "unknown", True),
    ("RuntimeError: CUDA error: an illegal memory access was encountered", "unknown", True),
    ("POST /v1/completions answered HTTP 400: max_tokens must be at least 1", "bad_input", False),
    ("job timed out after 600 s", "unknown", False),
    ("job failed without a log", "unknown", False),
])
def test_only_a_transient_unknown_is_retryable(log, cause, retried):
    from gpuharness.operations.failure import classify
    failure = classify(log)
    assert (failure.cause, failure.retryable) == (cause, retried), failure
