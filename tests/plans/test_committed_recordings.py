"""The committed recordings (cassettes/http/, fixtures/plan/) replay with today's adapters: a change to what an
adapter sends must come with `python -m gpuharness.plans.recorded_world`, or these fail."""

from __future__ import annotations

from checkout import ROOT


def test_the_committed_plan_replays_offline_with_todays_adapters(pytester):
    result = pytester.runpytest(str(ROOT / "checks" / "plan"), "--plan", str(ROOT / "fixtures/plan/plan.json"),
                                "--registry", str(ROOT / "fixtures/plan/registry"), "-p", "no:cacheprovider", "-q")
    result.assert_outcomes(passed=19)


def test_the_committed_inventory_replays_offline_with_todays_adapters(pytester):
    result = pytester.runpytest(str(ROOT / "checks" / "audit" / "test_inventory.py"), "--registry",
                                str(ROOT / "fixtures/plan/registry"), "--cassettes", str(ROOT / "cassettes"),
                                "-p", "no:cacheprovider", "-q")
    result.assert_outcomes(passed=2)
