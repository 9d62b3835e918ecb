"""`gpuharness status [--refresh]` and `gpuharness plan make|apply` against the simulator."""

from __future__ import annotations

import json
import subprocess

import httpx
import pytest

from gpuharness.cli import main
from gpuharness.core.journal import read_journal
from gpuharness.providers import cassette
from gpuharness.sim.server import Simulator


@pytest.fixture
def world(seeded_simulator):
    return seeded_simulator


def _gets_by_id(sim: Simulator) -> int:
    return sum(n for route, n in sim.stats()["requests"].items() if route.startswith("GET") and "{" in route)


def test_status_without_refresh_prints_the_registry_view_and_calls_nobody(world, capsys):
    sim, registry = world
    before = sim.stats()["requests"]
    assert main(["status", "--registry", str(registry.root)]) == 0
    out = capsys.readouterr().out
    assert "dep-runpod-1" in out and "ready" in out
    assert sim.stats()["requests"] == before


def test_status_refresh_lists_each_provider_once_and_reports_clean(world, capsys):
    sim, registry = world
    before = sim.stats()["requests"]
    assert main(["status", "--refresh", "--registry", str(registry.root)]) == 0
    after = sim.stats()["requests"]
    assert {k: after[k] - before.get(k, 0) for k in after if after[k] != before.get(k, 0)} == {
        "GET /massed/api/v1/instance": 1, "GET /runpod/v2/pods": 1, "GET /vast/api/v1/instances/": 1}
    assert _gets_by_id(sim) == 0
    assert "clean: no orphans, no vanished deployments" in capsys.readouterr().out
    assert len(registry.items("machines.json")) == 4


def test_status_refresh_flags_orphans_and_vanished_and_exits_1(world, capsys):
    sim, registry = world
    httpx.post(sim.base_url + "/_sim/instances", json={"provider": "vast", "count": 1, "name_prefix": "gh-leak-"})
    with registry.update("deployments.json") as document:
        document["deployments"].append({**document["deployments"][0], "id": "dep-gone", "instance_id": "gone0000",
                                        "idempotency_key": None})
    assert main(["status", "--refresh", "--json", "--registry", str(registry.root)]) == 1
    payload = json.loads(capsys.readouterr().out)
    assert [o["key"] for o in payload["orphans"]] == ["gh-leak-00004"]
    assert [v["deployment_id"] for v in payload["vanished"]] == ["dep-gone"]
    assert payload["transitions"] == ["dep-gone ready -> error (vanished)"]
    assert registry.deployment("dep-gone").status == "error"


def test_status_refresh_records_then_replays_offline_without_the_simulator(world, tmp_path, capsys):
    sim, registry = world
    path = tmp_path / "inv.yaml"
    assert main(["status", "--refresh", "--gpu-mode", "record", "--cassette", str(path),
                 "--registry", str(registry.root)]) == 0
    assert cassette.read_metadata(path)["registry"] == "registry"
    sim.stop()
    assert main(["status", "--refresh", "--gpu-mode", "offline", "--cassette", str(path), "--json",
                 "--registry", str(registry.root)]) == 0
    out = capsys.readouterr().out
    payload = json.loads(out[out.index("{"):])
    assert payload["source"] == f"cassette:{path}"
    assert payload["instances"] == {"runpod": 2, "vast": 1, "massed": 1}
    assert payload["orphans"] == [] and payload["vanished"] == []


def test_plan_make_then_apply_from_the_command_line(world, tmp_path, capsys):
    sim, registry = world
    plan_path = tmp_path / "plan.json"
    assert main(["plan", "make", "--registry", str(registry.root), "--provider", "runpod", "--gpu",
                 "NVIDIA GeForce RTX 4090", "--image", "runpod/pytorch:2.4.0", "--cost-hr", "0.69",
                 "--idle-minutes", "20", "-o", str(plan_path)]) == 0
    plan = json.loads(plan_path.read_text())
    assert (tmp_path / plan["cassette"]).exists()
    assert sim.stats()["launches"] == 0  # rehearsal ran against a mirror, never the provider
    capsys.readouterr()
    assert main(["plan", "apply", str(plan_path), "--yes", "--registry", str(registry.root)]) == 0
    assert sim.stats()["launches"] == 1
    assert main(["plan", "apply", str(plan_path), "--yes", "--registry", str(registry.root)]) == 2
    assert "stale plan" in capsys.readouterr().err


def test_plan_make_takes_the_cheapest_offer_as_expected_burn(world, tmp_path):
    _, registry = world
    assert main(["plan", "make", "--registry", str(registry.root), "--provider", "runpod", "--gpu",
                 "NVIDIA GeForce RTX 4090", "--image", "runpod/pytorch:2.4.0", "--idle-minutes", "20",
                 "-o", str(tmp_path / "p.json")]) == 0
    step = json.loads((tmp_path / "p.json").read_text())["steps"][0]
    assert step["expected_cost_hr"] == 0.69  # the simulator's secure price of an RTX 4090


def test_plan_make_for_a_gpu_nobody_offers_is_a_one_line_error(world, tmp_path, capsys):
    _, registry = world
    assert main(["plan", "make", "--registry", str(registry.root), "--provider", "runpod", "--gpu", "Voodoo 5",
                 "--image", "i", "-o", str(tmp_path / "p.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no offer of 'Voodoo 5' at runpod" in err
    assert not (tmp_path / "p.json").exists()


def test_status_refresh_with_a_refused_key_is_a_one_line_error(world, capsys):
    sim, registry = world
    sim.api_keys["runpod"] = "another-key-entirely-000000"
    assert main(["status", "--refresh", "--registry", str(registry.root)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "runpod: auth" in err
    assert cassette.TEST_SECRET_ENV in err or "key" in err.lower()
    assert "gh-test-" not in err


def test_plan_make_offline_from_a_recorded_inventory_needs_no_provider(world, tmp_path):
    sim, registry = world
    inventory_path = tmp_path / "inv.yaml"
    assert main(["status", "--refresh", "--gpu-mode", "record", "--cassette", str(inventory_path),
                 "--registry", str(registry.root)]) == 0
    sim.stop()
    assert main(["plan", "make", "--gpu-mode", "offline", "--inventory", str(inventory_path), "--registry",
                 str(registry.root), "--terminate", "dep-massed-1", "-o", str(tmp_path / "teardown.json")]) == 0
    plan = json.loads((tmp_path / "teardown.json").read_text())
    assert [s["action"] for s in plan["steps"]] == ["retrieve", "terminate"]
    assert plan["steps"][1]["calls"][0]["path"] == "/massed/api/v1/instance/terminate"


def test_one_current_inventory_lists_live_records_and_replays_the_same_instances(world, tmp_path):
    from gpuharness.providers.inventory import current

    sim, registry = world
    path = tmp_path / "inventory.yaml"
    live = current(registry, cassette.Mode.LIVE, path)
    recorded = current(registry, cassette.Mode.RECORD, path)
    sim.stop()  # offline: nothing answers but the cassette
    replayed = current(registry, cassette.Mode.OFFLINE, path)

    def ids(found):
        return {p: sorted(i.id for i in items) for p, items in found.instances.items()}

    assert ids(live) == ids(recorded) == ids(replayed) and sum(map(len, ids(live).values())) == 4
    assert live.source == "live" and replayed.source == f"cassette:{path}"


LAUNCH = ["--provider", "runpod", "--gpu", "NVIDIA GeForce RTX 4090", "--image", "runpod/pytorch:2.4.0",
          "--cost-hr", "0.69", "--idle-minutes", "20"]


def _git(cwd, *argv: str) -> str:
    return subprocess.run(["git", *argv], cwd=cwd, check=True, capture_output=True, text=True).stdout


def test_plan_make_o_plan_json_leaves_tracked_cassettes_alone(world, tmp_path, monkeypatch, capsys):
    """Held-out: `plan make -o plan.json` in a checkout rewrote the tracked cassettes/http/plan.yaml."""
    _, registry = world
    project = tmp_path / "project"
    (project / "cassettes" / "http").mkdir(parents=True)
    tracked = project / "cassettes" / "http" / "plan.yaml"
    tracked.write_text("the project's own cassette\n")
    _git(project, "init", "-q")
    _git(project, "add", ".")
    _git(project, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "tracked")
    monkeypatch.chdir(project)
    assert main(["plan", "make", "--registry", str(registry.root), *LAUNCH, "-o", "plan.json"]) == 0
    assert _git(project, "status", "--porcelain", "--", "cassettes") == ""
    assert tracked.read_text() == "the project's own cassette\n"
    rehearsal = registry.root / "plans" / "plan.yaml"
    assert rehearsal.is_file()
    plan = json.loads((project / "plan.json").read_text())
    assert (project / plan["cassette"]).resolve() == rehearsal.resolve()
    assert str(rehearsal) in capsys.readouterr().out


def test_plan_make_without_o_writes_under_the_registrys_plans(world, tmp_path, monkeypatch, capsys):
    _, registry = world
    monkeypatch.chdir(tmp_path)
    assert main(["plan", "make", "--registry", str(registry.root), *LAUNCH]) == 0
    plans = registry.root / "plans"
    (made,) = plans.glob("*.json")
    assert (plans / f"{made.stem}.yaml").is_file()
    assert (made.parent / json.loads(made.read_text())["cassette"]).is_file()
    assert str(made) in capsys.readouterr().out
    assert not (tmp_path / "cassettes").exists()


def test_held_out_a_provider_raising_a_running_instance_to_9_an_hour_fails_refresh(world, capsys):
    # held-out: the provider raised a live instance to $9/hr; `status --refresh` updated machines.json, said "clean"
    sim, registry = world
    with registry.update("policy.json") as doc:
        doc["max_cost_hr"] = 5.0
    dep = registry.deployment("dep-runpod-1")
    [raised] = [i for i in sim.state.instances.values() if i.id == dep.instance_id]
    previous = dep.cost_hr
    raised.cost_hr = 9.0
    assert main(["status", "--refresh", "--registry", str(registry.root)]) == 1
    out = capsys.readouterr().out
    assert "clean:" not in out
    assert "OVER CEILING rate change on dep-runpod-1" in out and "$9.000/hr" in out
    [entry] = [e for e in read_journal(registry.journal_path)
               if isinstance(e.get("marker"), dict) and e["marker"].get("event") == "rate-change"]
    assert entry["deployment"] == "dep-runpod-1" and entry["from"] == entry["to"]
    assert entry["marker"] == {"event": "rate-change", "cost_hr": 9.0, "previous_cost_hr": previous}
    assert registry.deployment("dep-runpod-1").cost_hr == 9.0
    assert main(["status", "--registry", str(registry.root)]) == 0
    assert "rate $9.000/hr" in capsys.readouterr().out


def test_a_rate_change_within_the_ceiling_is_journaled_and_refresh_stays_clean(world, capsys):
    sim, registry = world
    dep = registry.deployment("dep-runpod-1")
    [raised] = [i for i in sim.state.instances.values() if i.id == dep.instance_id]
    raised.cost_hr = round(dep.cost_hr + 0.01, 4)
    assert main(["status", "--refresh", "--json", "--registry", str(registry.root)]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert [(r["deployment_id"], r["exceeds_max_cost_hr"]) for r in payload["rate_changes"]] == [
        ("dep-runpod-1", False)]
