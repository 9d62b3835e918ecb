"""checks/audit/test_inventory.py (pytester): orphans and vanished deployments fail with actionable messages."""

from __future__ import annotations

import json
from secrets import token_hex

import pytest
from checkout import ROOT

from gpuharness.plans.recorded_world import World, layout, record
from gpuharness.providers import cassette

CHECK = ROOT / "checks" / "audit" / "test_inventory.py"


@pytest.fixture
def world(tmp_path, monkeypatch) -> World:
    monkeypatch.setenv(cassette.TEST_SECRET_ENV, "gh-test-" + "cd34" * 10)
    built = layout(tmp_path / "world")
    record(built)
    return built


def _edit(world: World, change) -> None:
    path = world.registry / "deployments.json"
    document = json.loads(path.read_text())
    change(document["deployments"])
    path.write_text(json.dumps(document))


def _run(pytester, world: World, *extra: str):
    return pytester.runpytest(str(CHECK), "--registry", str(world.registry),
                              "--cassettes", str(world.inventory.parent.parent), "-p", "no:cacheprovider",
                              "-q", "-p", "no:gpuharness.pytest_plugin.audit", *extra)


def test_recorded_inventory_matching_the_registry_passes(pytester, world):
    _run(pytester, world).assert_outcomes(passed=2)


def test_instance_no_deployment_claims_fails_as_orphan(pytester, world):
    _edit(world, lambda deps: deps.pop(0))
    result = _run(pytester, world)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*1 orphan instance(s) per cassette:*",
                                 "orphan runpod/* (key gh-runpod-00000, running, $0.69/hr): no deployment in the "
                                 "registry claims it; terminate it (`gpuharness reap --orphans --apply`) or "
                                 "register it*"])


def test_destroyed_deployment_whose_instance_still_runs_fails_as_orphan(pytester, world):
    def destroy(deps):
        deps[1]["status"] = "destroyed"
        deps[1]["destroyed_at"] = "2026-11-30T20:30:00Z"

    _edit(world, destroy)
    result = _run(pytester, world)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*deployment dep-runpod-2 is destroyed in the registry but the instance is still "
                                 "running*"])


def test_live_deployment_the_provider_no_longer_lists_fails_as_vanished(pytester, world):
    _edit(world, lambda deps: deps.append({**deps[0], "id": "dep-ghost", "instance_id": "ghost0000000000",
                                           "idempotency_key": None}))
    result = _run(pytester, world)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*vanished deployment dep-ghost: the registry says ready but runpod no longer "
                                 "lists it (instance ghost0000000000); check its artifacts, then mark it destroyed*"])


def test_inventory_recorded_for_another_registry_is_not_used(pytester, world, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    for item in world.registry.iterdir():
        if item.is_file():
            (other / item.name).write_bytes(item.read_bytes())
    result = pytester.runpytest(str(CHECK), "--registry", str(other), "--cassettes",
                                str(world.inventory.parent.parent), "-p", "no:cacheprovider", "-q", "-rs")
    result.assert_outcomes(skipped=2)
    result.stdout.fnmatch_lines(["*was recorded for the registry*pass --cassettes DIR holding this registry's "
                                 "inventory*"])


def test_live_mode_lists_the_providers_and_record_mode_writes_the_inventory(pytester, tmp_path, monkeypatch):
    import httpx

    from gpuharness.core.registry import Registry
    from gpuharness.plans.recorded_world import seed
    from gpuharness.sim.server import Simulator

    monkeypatch.setenv(cassette.TEST_SECRET_ENV, "gh-test-" + token_hex(20))
    with Simulator(ready_delay_s=0.0) as sim:
        registry = Registry(tmp_path / "registry")
        seed(sim, registry)
        httpx.post(sim.base_url + "/_sim/instances", json={"provider": "runpod", "count": 1, "name_prefix": "gh-x-"})
        live = pytester.runpytest(str(CHECK), "--registry", str(registry.root), "--gpu-mode", "live",
                                  "-p", "no:cacheprovider", "-q")
        live.assert_outcomes(passed=1, failed=1)
        live.stdout.fnmatch_lines(["*1 orphan instance(s) per live at *", "orphan runpod/* (key gh-x-00004*"])
        recorded = pytester.runpytest(str(CHECK), "--registry", str(registry.root), "--gpu-mode", "record",
                                      "--cassettes", str(tmp_path / "cassettes"), "-p", "no:cacheprovider", "-q")
        recorded.assert_outcomes(passed=1, failed=1)
    offline = pytester.runpytest(str(CHECK), "--registry", str(registry.root), "--cassettes",
                                 str(tmp_path / "cassettes"), "-p", "no:cacheprovider", "-q")
    offline.assert_outcomes(passed=1, failed=1)
    offline.stdout.fnmatch_lines(["*1 orphan instance(s) per cassette:*inventory.yaml at *"])


def test_a_provider_missing_from_the_recorded_inventory_fails_clearly(pytester, world):
    path = world.registry / "providers.json"
    document = json.loads(path.read_text())
    document["providers"].append({"name": "vast-eu", "kind": "vast", "credential_env": "VAST_EU_KEY"})
    path.write_text(json.dumps(document))
    result = _run(pytester, world)
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(["*inventory.yaml: no recorded inventory for provider(s) vast-eu of providers.json*"])
