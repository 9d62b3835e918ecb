"""Offline plan verification: one test per step and rule, against the plan's cassette (no network, no credentials).

    pytest checks/plan --plan plan.json [--registry DIR]
"""

from __future__ import annotations

import pytest

from gpuharness.pytest_plugin.plan import fingerprint_problem, verify_case


def test_plan_step(plan_case, gh_plan_context):
    problem = verify_case(plan_case, gh_plan_context)
    if problem:
        pytest.fail(problem, pytrace=False)


def test_plan_fingerprint_matches_registry_and_recorded_inventory(gh_plan, gh_plan_context):
    problem = fingerprint_problem(gh_plan, gh_plan_context)
    if problem:
        pytest.fail(problem, pytrace=False)
