"""Offline plan verification: one test per step and rule, against the plan's cassette (no network, no credentials);
a step that runs a ComfyUI workflow is judged against the server catalog recorded with its deployment's probe.

    pytest checks/plan --plan plan.json [--registry DIR]
"""

from __future__ import annotations

import pytest

from gpuharness.plans.plan import fingerprint_problem
from gpuharness.pytest_plugin.plan import verify_case


def test_plan_step(plan_case, gh_plan_context, gh_planned_workflows):
    problem = verify_case(plan_case, gh_plan_context, gh_planned_workflows)
    if problem:
        pytest.fail(problem, pytrace=False)


def test_plan_fingerprint_matches_registry_and_recorded_inventory(gh_plan, gh_plan_context):
    problem = fingerprint_problem(gh_plan, gh_plan_context)
    if problem:
        pytest.fail(problem, pytrace=False)
