"""Specifications of the keep-alive versus destroy arithmetic (the gpu-ops runbook's numbers)."""

from __future__ import annotations

import pytest

from gpuharness.core.economics import keep_alive


def test_runbook_4090_startup_costs_about_fifteen_cents() -> None:
    for startup in (10, 12, 15):
        result = keep_alive(cost_hr=0.70, gap_minutes=5, startup_minutes=startup)
        assert 0.11 <= result.startup_cost <= 0.18
    assert keep_alive(cost_hr=0.70, gap_minutes=5, startup_minutes=12).startup_cost == pytest.approx(0.14)


@pytest.mark.parametrize(("gap", "decision"), [(5, "keep-alive"), (10, "keep-alive"), (13, "destroy"),
                                               (30, "destroy")])
def test_runbook_4090_keep_alive_unless_the_gap_exceeds_about_ten_to_fifteen_minutes(gap: float,
                                                                                    decision: str) -> None:
    result = keep_alive(cost_hr=0.70, gap_minutes=gap, startup_minutes=12)
    assert result.decision == decision
    assert result.gap_cost == pytest.approx(gap / 60 * 0.70, abs=1e-6)  # rounded to 6 places
    assert result.breakeven_gap_minutes == 12


def test_h100_at_three_dollars_an_hour_makes_idle_gaps_expensive() -> None:
    result = keep_alive(cost_hr=3.0, gap_minutes=30, startup_minutes=12)
    assert result.decision == "destroy"
    assert result.gap_cost == pytest.approx(1.50)
    assert result.startup_cost == pytest.approx(0.60)


def test_restart_cost_and_total_runtime_follow_the_formulas() -> None:
    result = keep_alive(cost_hr=0.70, gap_minutes=20, startup_minutes=12, jobs=5, avg_job_minutes=3.2)
    assert result.total_runtime_minutes == pytest.approx(16.0)  # N × avg_job_time
    assert result.restart_cost == pytest.approx(4 * 0.14)  # (N − 1) × startup_cost


def test_a_single_job_never_restarts() -> None:
    assert keep_alive(cost_hr=2.0, gap_minutes=1, startup_minutes=10, jobs=1).restart_cost == 0


def test_a_gap_equal_to_the_startup_time_destroys() -> None:
    assert keep_alive(cost_hr=0.70, gap_minutes=12, startup_minutes=12).decision == "destroy"


def test_explain_shows_the_arithmetic_and_the_decision() -> None:
    text = keep_alive(cost_hr=0.70, gap_minutes=5, startup_minutes=12).explain()
    assert "startup_cost  = startup_minutes/60 × cost_hr = 12/60 × $0.7 = $0.1400" in text
    assert "gap_cost      = gap_minutes/60 × cost_hr = 5/60 × $0.7 = $0.0583" in text
    assert "decision: keep-alive" in text


def test_interruptible_advice_depends_on_retryability() -> None:
    assert "pays here" in keep_alive(cost_hr=1, gap_minutes=1, startup_minutes=1, retryable=True).interruptible_advice
    assert "only pays" in keep_alive(cost_hr=1, gap_minutes=1, startup_minutes=1).interruptible_advice


@pytest.mark.parametrize("bad", [dict(cost_hr=-1.0), dict(gap_minutes=-1.0), dict(startup_minutes=-1.0),
                                 dict(jobs=0)])
def test_negative_inputs_are_refused(bad: dict) -> None:
    args = dict(cost_hr=1.0, gap_minutes=1.0, startup_minutes=1.0, jobs=2) | bad
    with pytest.raises(ValueError):
        keep_alive(**args)


def test_to_json_has_every_number() -> None:
    payload = keep_alive(cost_hr=0.70, gap_minutes=5, startup_minutes=12).to_json()
    assert payload["decision"] == "keep-alive"
    assert {"gap_cost", "startup_cost", "restart_cost", "total_runtime_minutes", "breakeven_gap_minutes"} <= set(
        payload)
