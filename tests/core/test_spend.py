"""Specifications of spend: the current line of each job is what it cost, grouped by UTC day and more."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuharness.core.job_line import JobLine
from gpuharness.core.spend import GROUPINGS, job_costs, spend_by, today_and_month


def typed(records: list[dict]) -> list[JobLine]:
    """The ledger lines as spend reads them."""
    return [JobLine.from_record(record) for record in records]


@pytest.fixture
def records(job_line) -> list[dict]:
    return [
        job_line("J-1", "queued", cost_usd=None),
        job_line("J-1", "completed", cost_usd=1.00, completed_at="2026-11-01T10:00:00Z"),
        job_line("J-2", "completed", cost_usd=2.00, completed_at="2026-11-01T23:00:00Z", provider="runpod",
                 gpu="H100", deployment_id="dep_h"),
        job_line("J-3", "completed", cost_usd=0.50, completed_at="2026-11-02T01:00:00Z"),
        job_line("J-4", "failed", cost_usd=0.25, completed_at="2026-12-01T00:30:00Z"),
        job_line("J-5", "running", cost_usd=None),
    ]


@pytest.mark.parametrize(("by", "expected"), [
    ("day", {"2026-11-01": 3.00, "2026-11-02": 0.50, "2026-12-01": 0.25}),
    ("month", {"2026-11": 3.50, "2026-12": 0.25}),
    ("provider", {"runpod": 2.00, "vast": 1.75}),
    ("gpu", {"H100": 2.00, "RTX 4090": 1.75}),
    ("deployment", {"dep_a": 1.75, "dep_h": 2.00}),
    ("total", {"total": 3.75}),
])
def test_spend_by_each_grouping(records: list[dict], by: str, expected: dict) -> None:
    assert spend_by(typed(records), by) == pytest.approx(expected)


def test_every_grouping_is_tested() -> None:
    assert set(GROUPINGS) == {"day", "month", "provider", "gpu", "deployment", "total"}


def test_a_correction_replaces_the_earlier_line(records: list[dict], job_line) -> None:
    records.append(job_line("J-2", "completed", cost_usd=0.40, completed_at="2026-11-01T23:00:00Z",
                            provider="runpod", gpu="H100", deployment_id="dep_h", correction=True,
                            reason="provider refunded the failed minutes"))
    assert spend_by(typed(records), "total") == {"total": pytest.approx(2.15)}
    assert job_costs(records)["J-2"]["cost_usd"] == 0.40


def test_only_the_last_line_of_a_job_counts_not_the_sum(job_line) -> None:
    lines = [job_line("J-1", "running", cost_usd=0.10), job_line("J-1", "completed", cost_usd=0.30)]
    assert spend_by(typed(lines), "total") == {"total": pytest.approx(0.30)}


def test_days_are_utc_days_whatever_offset_was_written(job_line) -> None:
    late_evening_in_new_york = job_line("J-1", cost_usd=1.0, completed_at="2026-11-30T23:30:00-05:00")
    assert spend_by(typed([late_evening_in_new_york]), "day") == {"2026-12-01": 1.0}
    assert spend_by(typed([late_evening_in_new_york]), "month") == {"2026-12": 1.0}


def test_day_falls_back_to_started_at_then_ts(job_line) -> None:
    running = job_line("J-1", "running", cost_usd=0.2, started_at="2026-11-03T05:00:00Z")
    stamped = job_line("J-2", "queued", cost_usd=0.1, started_at=None, ts="2026-11-04T05:00:00Z")
    assert spend_by(typed([running, stamped]), "day") == {"2026-11-03": 0.2, "2026-11-04": 0.1}


def test_unknown_grouping_is_refused(records: list[dict]) -> None:
    with pytest.raises(ValueError, match="unknown grouping"):
        spend_by(typed(records), "week")


def test_today_and_month_at_a_given_moment(records: list[dict]) -> None:
    assert today_and_month(typed(records), now="2026-11-01T23:59:00Z") == (pytest.approx(3.00), pytest.approx(3.50))
    assert today_and_month(typed(records), now="2026-12-01T12:00:00Z") == (pytest.approx(0.25), pytest.approx(0.25))
    assert today_and_month(typed(records), now="2027-01-01T00:00:00Z") == (0.0, 0.0)


money = st.decimals(min_value=0, max_value=50, places=4).map(float)
lines = st.lists(st.fixed_dictionaries({
    "id": st.sampled_from(["J-1", "J-2", "J-3", "J-4"]),
    "deployment_id": st.sampled_from(["dep_a", "dep_b"]),
    "provider": st.sampled_from(["vast", "runpod", "massed"]),
    "gpu": st.sampled_from(["RTX 4090", "H100"]),
    "status": st.sampled_from(["queued", "running", "completed", "failed"]),
    "completed_at": st.sampled_from(["2026-10-31T23:59:59Z", "2026-11-01T00:00:00Z", "2026-11-01T08:00:00+09:00"]),
    "cost_usd": money,
    "ts": st.just("2026-11-01T00:00:01Z"),
}), max_size=12)


@given(lines)
def test_every_grouping_partitions_the_total_of_last_lines(records: list[dict]) -> None:
    last = {r["id"]: r["cost_usd"] for r in records}  # the last line of each job is what it cost
    total = sum(last.values())
    for by in GROUPINGS:
        assert sum(spend_by(typed(records), by).values()) == pytest.approx(total, abs=1e-5)
