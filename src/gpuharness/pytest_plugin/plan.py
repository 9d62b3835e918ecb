"""checks/plan: one test per plan step and rule, verified offline against the plan's cassette; a step that runs a
ComfyUI workflow also has it judged against the server catalog recorded with its deployment's probe transcript."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, final

import pytest

from gpuharness.core.errors import UserError
from gpuharness.core.registry import Registry
from gpuharness.pytest_plugin import cassette_dir, registry_root

if TYPE_CHECKING:  # the plan machinery (inventory, cassettes, catalogs) is imported only when a plan is checked
    from gpuharness.plans.plan import PlanContext
    from gpuharness.plans.workflows import PlannedWorkflows
    from gpuharness.providers import inventory as inventory_mod


@final
@dataclass(frozen=True, slots=True)
class PlanCase:
    """One (step, rule) pair of the plan under test, or the reason the plan could not be read."""

    step: dict[str, Any] | None = None
    rule: str | None = None
    error: str | None = None


def plan_path(config: pytest.Config) -> Path | None:
    """--plan FILE, relative to the invocation directory; None when not given."""
    name = config.getoption("--plan")
    if not name:
        return None
    path = Path(name)
    return path if path.is_absolute() else Path(config.invocation_params.dir) / path


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """One test per (step, rule) the rule can judge, with a readable id: s3-terminate-<id>::sync-before-terminate."""
    if "plan_case" not in metafunc.fixturenames:
        return
    path = plan_path(metafunc.config)
    if path is None:
        metafunc.parametrize("plan_case", [pytest.param(PlanCase(), id="no-plan", marks=pytest.mark.skip(
            reason="no plan to verify: pass --plan FILE"))])
        return
    from gpuharness.plans.plan import APPLIES, RULES, load_plan, step_label
    from gpuharness.plans.workflows import WORKFLOW_RULE, planned_workflow

    try:
        plan = load_plan(path)
    except UserError as exc:
        metafunc.parametrize("plan_case", [pytest.param(PlanCase(error=exc.line()), id="plan-file")])
        return
    registry = Registry(registry_root(metafunc.config))
    cases = [pytest.param(PlanCase(step, rule), id=f"{step_label(step)}::{rule}")
             for step in plan["steps"] for rule in RULES if step["action"] in APPLIES[rule]]
    cases += [pytest.param(PlanCase(step, WORKFLOW_RULE), id=f"{step_label(step)}::{WORKFLOW_RULE}")
              for step in plan["steps"] if planned_workflow(step, registry)[0]]
    metafunc.parametrize("plan_case", cases)


@pytest.fixture(scope="session")
def gh_plan_file(pytestconfig: pytest.Config) -> Path:
    """The plan file under verification (skips without --plan)."""
    path = plan_path(pytestconfig)
    if path is None:
        pytest.skip("no plan to verify: pass --plan FILE")
    return path


@pytest.fixture(scope="session")
def gh_plan(gh_plan_file: Path) -> dict[str, Any]:
    """The plan, schema-checked."""
    from gpuharness.plans.plan import load_plan

    try:
        return load_plan(gh_plan_file)
    except UserError as exc:
        pytest.fail(exc.line(), pytrace=False)


@pytest.fixture(scope="session")
def gh_provider_factory() -> inventory_mod.ProviderFactory:
    """Builds one provider adapter from a providers.json entry (override in a conftest to substitute fakes)."""
    from gpuharness.providers import inventory as inventory_mod

    return inventory_mod.adapter_factory(offline=True)


@pytest.fixture(scope="session")
def gh_plan_cassette(pytestconfig: pytest.Config, gh_plan: dict[str, Any], gh_plan_file: Path) -> Path:
    """The plan's cassette: its `cassette` field, else <cassettes>/http/<plan name>.yaml."""
    from gpuharness.plans.plan import cassette_of

    path = cassette_of(gh_plan, gh_plan_file) or cassette_dir(pytestconfig) / "http" / f"{gh_plan_file.stem}.yaml"
    if not path.exists():
        pytest.fail(f"{path}: the plan's cassette is missing; make the plan again with `gpuharness plan make` "
                    "(it rehearses the plan against the simulator and records the calls)", pytrace=False)
    return path


@pytest.fixture(scope="session")
def gh_plan_context(gh_plan: dict[str, Any], gh_plan_cassette: Path, gh_registry: Registry,
                    gh_provider_factory: inventory_mod.ProviderFactory) -> PlanContext:
    """The recorded inventory (replayed in mode none), the registry view, policy, spend and the replay results."""
    from gpuharness.core.ledger import Ledger
    from gpuharness.core.policy import Policy
    from gpuharness.core.spend import today_and_month
    from gpuharness.plans.plan import PlanContext
    from gpuharness.plans.replay import replay_calls
    from gpuharness.providers import inventory as inventory_mod

    try:
        recorded = inventory_mod.recorded_inventory(gh_plan_cassette, gh_registry.providers(), gh_provider_factory)
        today, month = today_and_month(Ledger(gh_registry.ledger_path).lines())
        replay = replay_calls(gh_plan["steps"], gh_plan_cassette)
        return PlanContext(gh_plan, recorded, gh_registry.deployments(), Policy(gh_registry.policy_document()),
                           today, month, replay=replay)
    except UserError as exc:
        pytest.fail(exc.line(), pytrace=False)


@pytest.fixture(scope="session")
def gh_planned_workflows(gh_registry: Registry, gh_cassettes: Path) -> PlannedWorkflows:
    """Where the plan's workflows are judged from."""
    from gpuharness.plans.workflows import PlannedWorkflows

    return PlannedWorkflows(gh_registry, gh_cassettes)


def verify_case(case: PlanCase, ctx: PlanContext, workflows: PlannedWorkflows | None = None) -> str | None:
    """The problem of one (step, rule) case, or None (a workflow without a recorded catalog skips, saying so)."""
    if case.error:
        return case.error
    assert case.step is not None and case.rule is not None
    from gpuharness.plans.plan import check, target_text
    from gpuharness.plans.workflows import WORKFLOW_RULE, judge_planned_workflow

    if case.rule != WORKFLOW_RULE:
        return check(case.step, case.rule, ctx)
    assert workflows is not None, "a workflow case needs gh_planned_workflows"
    judgement = judge_planned_workflow(case.step, workflows)
    if judgement.unjudged:
        pytest.skip(judgement.unjudged)
    step = case.step
    return (f"step {step['id']} ({step['action']} {target_text(step)}): rule workflow: {judgement.problem}"
            if judgement.problem else None)

