"""checks/plan (pytester): each kind of bad plan fails offline with a message naming the step and the rule."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from secrets import token_hex

import pytest
from checkout import ROOT

from gpuharness.plans.recorded_world import World, layout, record
from gpuharness.providers import cassette

CHECKS = ROOT / "checks" / "plan"


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> World:
    """A world born in the simulator and recorded; the simulator is gone before any check runs."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(cassette.TEST_SECRET_ENV, "gh-test-" + token_hex(20))
        built = layout(tmp_path_factory.mktemp("world"))
        record(built)
    return built


def _plan(world: World) -> dict:
    return json.loads(world.plan.read_text())


def _run(pytester, world: World, plan: dict | str | None = None, *extra: str):
    path = pytester.path / "plan.json"
    if plan is None:
        shutil.copy(world.plan, path)
    else:
        path.write_text(plan if isinstance(plan, str) else json.dumps(plan))
    doc = json.loads(path.read_text()) if plan is None or not isinstance(plan, str) else None
    if doc is not None and "cassette" in doc:
        doc["cassette"] = str(world.plan_cassette)
        path.write_text(json.dumps(doc))
    return pytester.runpytest(str(CHECKS), "--plan", str(path), "--registry", str(world.registry),
                              "-p", "no:cacheprovider", "-q", *extra)


def _step(plan: dict, step_id: str) -> dict:
    return next(s for s in plan["steps"] if s["id"] == step_id)


def test_the_recorded_plan_passes_every_rule_offline(pytester, world):
    result = _run(pytester, world)
    result.assert_outcomes(passed=19)


def _terminate_an_absent_instance(plan: dict) -> None:
    step = _step(plan, "s3")
    step["target"]["instance_id"] = step["confirm"] = "nosuchpod00000"


def _launch_with_a_taken_key(plan: dict) -> None:
    _step(plan, "s1")["target"]["idempotency_key"] = "gh-runpod-00000"


def _launch_over_the_hourly_ceiling(plan: dict) -> None:
    _step(plan, "s1")["expected_cost_hr"] = 9.5


def _launch_outspending_the_day(plan: dict) -> None:
    _step(plan, "s1")["stop_condition"] = {"max_hours": 100}


def _launch_without_a_stop_condition(plan: dict) -> None:
    _step(plan, "s1")["stop_condition"] = None


def _terminate_without_a_retrieve(plan: dict) -> None:
    plan["steps"] = [s for s in plan["steps"] if s["id"] != "s2"]


def _terminate_confirming_part_of_the_id(plan: dict) -> None:
    step = _step(plan, "s5")
    step["confirm"] = step["confirm"][:4]


def _unbounded_retries(plan: dict) -> None:
    _step(plan, "s1")["max_retries"] = 5
    _step(plan, "s3")["max_retries"] = 1


def _a_call_absent_from_the_cassette(plan: dict) -> None:
    step = _step(plan, "s1")
    step["spec"]["image"] = step["calls"][0]["body"]["image"] = "evil/miner:latest"


def _a_step_edited_after_rehearsal(plan: dict) -> None:
    _step(plan, "s1")["spec"]["image"] = "evil/miner:latest"


def _an_unknown_action(plan: dict) -> None:
    _step(plan, "s5")["action"] = "nuke"


#: a bad plan (the recorded one, edited) -> the lines its failing check prints, naming the step and the rule
BAD_PLANS = [
    pytest.param(_terminate_an_absent_instance, [
        "*step s3 (terminate nosuchpod00000): rule target: instance 'nosuchpod00000' does not exist at runpod in the "
        "recorded inventory*"], id="terminate-of-an-instance-absent-from-the-inventory-fails-rule-target"),
    pytest.param(_launch_with_a_taken_key, [
        "*step s1 (launch gh-runpod-00000): rule no-duplicate: instance * at runpod already carries key "
        "'gh-runpod-00000'*"], id="launch-reusing-the-key-of-an-existing-instance-fails-rule-no-duplicate"),
    pytest.param(_launch_over_the_hourly_ceiling, [
        "*step s1 (launch *): rule budget: live burn would be $*/hr * > max_cost_hr $10.00/hr*"],
        id="launch-over-the-hourly-ceiling-fails-rule-budget"),
    pytest.param(_launch_outspending_the_day, [
        "*step s1 (launch *): rule budget: projected spend $69.00 * > daily_usd $50.00*"],
        id="launch-whose-stop-condition-outspends-the-day-fails-rule-budget"),
    pytest.param(_launch_without_a_stop_condition, [
        "*step s1 (launch *): rule stop-condition: a paid resource without a stop condition*"],
        id="launch-without-a-stop-condition-fails-rule-stop-condition"),
    pytest.param(_terminate_without_a_retrieve, [
        "*step s3 (terminate *): rule sync-before-terminate: no earlier retrieve step syncs the artifacts of "
        "deployment dep-runpod-2*"], id="terminate-without-an-earlier-retrieve-fails-rule-sync-before-terminate"),
    pytest.param(_terminate_confirming_part_of_the_id, [
        "*step s5 (terminate *): rule sync-before-terminate: confirm must equal the exact instance id*"],
        id="terminate-whose-confirm-is-not-the-exact-id-fails-rule-sync-before-terminate"),
    pytest.param(_unbounded_retries, [
        "*step s1 (launch *): rule bounded-retries: max_retries 5 allows 6 attempts > retry.max_launch_attempts 2*",
        "*step s3 (terminate *): rule bounded-retries: a terminate is never retried blind*"],
        id="unbounded-retries-fail-rule-bounded-retries"),
    pytest.param(_a_call_absent_from_the_cassette, [
        "*step s1 (launch *): rule replay: call 1: no recorded interaction for POST /runpod/v2/pods (no_match); "
        "closest recorded: POST /runpod/v2/pods (body differs)*"],
        id="a-call-absent-from-the-cassette-fails-rule-replay"),
    pytest.param(_a_step_edited_after_rehearsal, [
        "*step s1 (launch *): rule replay: the recorded calls do not carry 'evil/miner:latest' of this step*"],
        id="a-step-edited-after-rehearsal-fails-rule-replay"),
    pytest.param(_an_unknown_action, ["*plan.json:$.steps[[]4[]].action: 'nuke' is not one of*"],
                 id="an-unreadable-plan-fails-naming-the-file-and-the-place"),
]


@pytest.mark.parametrize(("edit", "lines"), BAD_PLANS)
def test_a_bad_plan_fails_offline_naming_the_step_and_the_rule(pytester, world, edit, lines):
    plan = _plan(world)
    edit(plan)
    result = _run(pytester, world, plan)
    result.stdout.fnmatch_lines(lines)
    assert result.ret == 1  # a check failed, not merely printed


def test_a_registry_changed_since_the_plan_fails_the_fingerprint(pytester, world, tmp_path):
    registry = tmp_path / "registry"
    shutil.copytree(world.registry, registry)
    deployments = json.loads((registry / "deployments.json").read_text())
    deployments["deployments"][0]["status"] = "destroyed"
    (registry / "deployments.json").write_text(json.dumps(deployments))
    stale = World(registry, world.inventory, world.plan, world.plan_cassette)
    result = _run(pytester, stale)
    result.stdout.fnmatch_lines(["*plan fingerprint sha256:* does not match the registry and recorded inventory*"
                                 "the plan is stale*"])
    assert result.ret == 1  # a check failed, not merely printed



def test_a_missing_cassette_fails_clearly(pytester, world, tmp_path):
    plan = _plan(world)
    path = pytester.path / "plan.json"
    plan["cassette"] = str(tmp_path / "gone.yaml")
    path.write_text(json.dumps(plan))
    result = pytester.runpytest(str(CHECKS), "--plan", str(path), "--registry", str(world.registry),
                                "-p", "no:cacheprovider", "-q")
    result.stdout.fnmatch_lines(["*gone.yaml: the plan's cassette is missing*"])
    assert result.ret == 1


def test_without_a_plan_the_checks_skip_with_the_reason(pytester):
    result = pytester.runpytest(str(CHECKS), "-p", "no:cacheprovider", "-q", "-rs")
    result.stdout.fnmatch_lines(["*no plan to verify: pass --plan FILE*"])
    result.assert_outcomes(skipped=2)


def _world_running_a_workflow(world: World, tmp_path: Path, workflow_id: str, *, catalog: bool = True):
    """The recorded world whose dep-runpod-1 serves ComfyUI, with a plan step running its workflow and, where
    `catalog`, the server catalog recorded with its probe transcript (as `checks/health --gpu-mode record` keeps it)."""
    from health_world import WITH_AUDIO, WORKFLOW

    from gpuharness.probe import server_catalog, transcripts
    from gpuharness.sim.comfyui import recorded_catalog

    registry = tmp_path / "registry"
    shutil.copytree(world.registry, registry)
    deployments = json.loads((registry / "deployments.json").read_text())
    deployments["deployments"][0].update(runtime="comfyui", workflow=workflow_id)
    (registry / "deployments.json").write_text(json.dumps(deployments))
    (registry / "workflows.json").write_text(json.dumps({"schema_version": 1, "workflows": [WORKFLOW, WITH_AUDIO]}))
    cassettes = tmp_path / "cassettes"
    if catalog:
        served = recorded_catalog().with_model_files({"checkpoints": ["sdxl.safetensors"]})
        observation = server_catalog.store(served.document, transcripts.catalog_dir(cassettes), lambda text: text,
                                           below=cassettes)
        transcript = transcripts.transcript_path(cassettes, "dep-runpod-1")
        transcript.write_text(json.dumps({"deployment": "dep-runpod-1", "stdout": "", "stderr": "", "exit_status": 0,
                                          **server_catalog.transcript_entry(observation, transcript)}))
    plan = _plan(world)
    plan["steps"].append({"id": "s9", "action": "run", "provider": "runpod",
                          "target": {"deployment_id": "dep-runpod-1"}, "max_retries": 0})
    return World(registry, world.inventory, world.plan, world.plan_cassette), plan, cassettes


def test_a_planned_workflow_the_recorded_catalog_refuses_fails_rule_workflow(pytester, world, tmp_path):
    running, plan, cassettes = _world_running_a_workflow(world, tmp_path, "sdxl-with-audio")
    result = _run(pytester, running, plan, "--cassettes", str(cassettes))
    result.stdout.fnmatch_lines(["*step s9 (run dep-runpod-1): rule workflow: dep-runpod-1's server would refuse "
                                 "workflow sdxl-with-audio v1 (custom_node_missing; judged by the catalog recorded "
                                 "*): node 10 (EmptyLatentAudio): the server has no node class EmptyLatentAudio*"])
    assert result.ret == 1  # a check failed, not merely printed


def test_a_planned_workflow_the_recorded_catalog_accepts_passes(pytester, world, tmp_path):
    running, plan, cassettes = _world_running_a_workflow(world, tmp_path, "sdxl-basic")
    _run(pytester, running, plan, "--cassettes", str(cassettes)).assert_outcomes(passed=22)


def test_a_planned_workflow_without_a_recorded_catalog_skips_saying_how_to_record_one(pytester, world, tmp_path):
    running, plan, cassettes = _world_running_a_workflow(world, tmp_path, "sdxl-with-audio", catalog=False)
    result = _run(pytester, running, plan, "--cassettes", str(cassettes), "-rs")
    result.assert_outcomes(passed=21, skipped=1)
    result.stdout.fnmatch_lines(["*workflow sdxl-with-audio not judged: no server catalog recorded for dep-runpod-1 "
                                 "*pytest checks/health --gpu-mode record --deployment dep-runpod-1*"])
