"""The audit's spend summary counts billed, used and idle as `spend` does."""

from datetime import UTC, datetime, timedelta

from gpuharness.audit.billed import billed_used_idle, spend_summary
from gpuharness.core.billing import Interval
from gpuharness.core.registry import Registry

START = datetime(2026, 11, 2, 10, 0, tzinfo=UTC)


def test_billed_is_the_intervals_used_the_jobs_and_idle_the_difference():
    intervals = {"dep_pod": [Interval("dep_pod", "vast", "RTX 4090", START, START + timedelta(hours=2), 0.5)],
                 "dep_unused": [Interval("dep_unused", "vast", "RTX 4090", START, START + timedelta(hours=1), 0.4)]}
    book = billed_used_idle(intervals, {"dep_pod": 0.25, "dep_serverless": 0.1})
    assert {d: s.to_json() for d, s in book.items()} == {
        "dep_pod": {"billed": 1.0, "used": 0.25, "idle": 0.75},
        "dep_serverless": {"billed": 0.1, "used": 0.1, "idle": 0.0},  # no interval: it bills its jobs
        "dep_unused": {"billed": 0.4, "used": 0.0, "idle": 0.4}}


def test_a_journal_that_does_not_read_makes_the_summary_say_so(tmp_path):
    registry = Registry(tmp_path / "reg")
    registry.init()
    registry.journal_path.write_text('{"deployment": "dep_a", "to": "ready"}\nnot json\n{"deployment": "dep_a"}\n')
    summary = spend_summary(registry, START, {})
    assert "transitions.jsonl:2:" in summary["unavailable"]
