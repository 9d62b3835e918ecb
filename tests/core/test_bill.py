"""core.bill: the provider's charges against our billed intervals, per deployment and UTC day."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuharness.core.bill import BillLine, Charge, compare
from gpuharness.core.billing import Interval
from gpuharness.core.clock import parse_ts
from gpuharness.core.deployment import Deployment

T0 = parse_ts("2026-12-01T23:00:00Z")
POD = Deployment(id="dep-a", provider="runpod", status="destroyed", cost_hr=1.0, created_at="2026-12-01T23:00:00Z",
                 instance_id="pod-a")
TOLERANCE = (0.01, 0.05)


def interval(hours: float, start=T0, rate: float = 1.0) -> Interval:
    return Interval("dep-a", "runpod", "RTX 4090", start, start + timedelta(hours=hours), rate)


def test_an_interval_across_midnight_is_compared_day_by_day():
    charges = [Charge("runpod", "pod-a", "2026-12-01", 1.0), Charge("runpod", "pod-a", "2026-12-02", 1.0)]
    lines = compare(charges, {"dep-a": [interval(2.0)]}, [POD], ["runpod"])
    assert [(x.deployment, x.day, x.ours, x.theirs) for x in lines] == [("dep-a", "2026-12-01", 1.0, 1.0),
                                                                       ("dep-a", "2026-12-02", 1.0, 1.0)]
    assert not any(x.over(TOLERANCE) for x in lines)


def test_a_charge_for_an_instance_in_no_deployment_is_a_line_of_its_own():
    (line,) = compare([Charge("runpod", "pod-x", "2026-12-01", 0.5)], {}, [POD], ["runpod"])
    assert line.deployment == "" and line.subject() == "runpod:pod-x (in no deployment)"
    assert line.over(TOLERANCE) and "the provider billed $0.5000, our intervals $0.0000" in line.message(TOLERANCE)


def test_other_providers_and_days_before_since_are_left_out():
    charges = [Charge("vast", "pod-a", "2026-12-02", 9.0), Charge("runpod", "pod-a", "2026-11-30", 9.0)]
    lines = compare(charges, {"dep-a": [interval(2.0)]}, [POD], ["runpod"], since="2026-12-02")
    assert [(x.day, x.ours, x.theirs) for x in lines] == [("2026-12-02", 1.0, 0.0)]


def test_what_billed_after_the_bill_was_read_is_not_held_against_it():
    """A bill replayed later (offline): the interval runs on past the moment it was read."""
    charges = [Charge("runpod", "pod-a", "2026-12-01", 0.5)]
    lines = compare(charges, {"dep-a": [interval(30.0)]}, [POD], ["runpod"], until=T0 + timedelta(minutes=30))
    assert [(x.day, x.ours, x.theirs) for x in lines] == [("2026-12-01", 0.5, 0.5)]


@pytest.mark.parametrize(("theirs", "over"), [(1.05, False), (1.0526, False), (1.06, True), (0.95, False),
                                              (0.94, True)])
def test_the_tolerance_is_abs_usd_plus_rel_of_the_larger_figure(theirs, over):
    line = BillLine("dep-a", "runpod", "pod-a", "2026-12-01", 1.0, theirs)
    assert line.over((0.0, 0.05)) is over


amounts = st.floats(min_value=0, max_value=50, allow_nan=False)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.floats(min_value=0, max_value=72), st.floats(min_value=0, max_value=10)), max_size=4),
       st.lists(st.tuples(st.sampled_from(["pod-a", "pod-b"]), st.integers(0, 3), amounts), max_size=6))
def test_compare_keeps_every_dollar_on_one_side_or_the_other(segments, charges):
    intervals = {"dep-a": [interval(hours, T0 + timedelta(hours=3 * n), rate)
                           for n, (hours, rate) in enumerate(segments)]}
    bill = [Charge("runpod", pod, f"2026-12-0{1 + day}", amount) for pod, day, amount in charges]
    lines = compare(bill, intervals, [POD], ["runpod"])
    assert sum(x.ours for x in lines) == pytest.approx(sum(i.cost for i in intervals["dep-a"]), abs=1e-6)
    assert sum(x.theirs for x in lines) == pytest.approx(sum(c.amount_usd for c in bill), abs=1e-6)
    assert len({(x.deployment, x.instance_id, x.day) for x in lines}) == len(lines)
