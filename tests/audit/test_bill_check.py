"""checks/audit/test_bill.py (pytester): the providers' recorded bill against the registry's billed intervals; a
difference fails naming the deployment and the amount."""

from __future__ import annotations

import json
import time
from pathlib import Path
from secrets import token_hex

import pytest
from checkout import ROOT

from gpuharness.cli import main
from gpuharness.core.clock import format_ts, utcnow
from gpuharness.core.registry import Registry
from gpuharness.sim import Simulator

CHECK = ROOT / "checks" / "audit" / "test_bill.py"
KEY = "gh-test-bill-" + token_hex(16)  # made per run: no key is committed


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A registry whose RunPod pod and Vast instance ran about three seconds and were destroyed, and the bill recorded
    for it (cassettes/http/bill.yaml beside it). Returns the world's root."""
    root = tmp_path_factory.mktemp("bill-world")
    with pytest.MonkeyPatch.context() as patch, Simulator(ready_delay_s=0.0) as sim:
        patch.setenv("BILL_KEY", KEY)
        registry = Registry(root / "registry")
        registry.init()
        with registry.update("providers.json") as doc:
            doc["providers"] = [{"name": kind, "kind": kind, "credential_env": "BILL_KEY", "api_base": sim.url(kind)}
                                for kind in ("runpod", "vast", "massed")]
        with registry.update("policy.json") as doc:
            doc["cost_tolerance"] = {"abs_usd": 0.0, "rel": 0.05}
        started = format_ts(utcnow())
        ids = {kind: sim.create_instances(kind, 1, name_prefix=f"gh-{kind}-")[0] for kind in ("runpod", "vast")}
        time.sleep(3.0)  # long beside the calls around it: ours and theirs within 5%
        for kind, instance_id in ids.items():
            instance = sim.state.get(kind, instance_id)
            assert instance is not None
            sim.state.terminate(instance)
        ended = format_ts(utcnow())
        with registry.update("deployments.json") as doc:
            doc["deployments"] = [{"id": f"dep-{kind}", "provider": kind, "instance_id": instance_id,
                                   "gpu": "RTX 4090", "status": "destroyed", "created_at": started,
                                   "destroyed_at": ended, "cost_hr": sim.state.instances[(kind, instance_id)].cost_hr,
                                   "shutdown_rule": {"idle_minutes": 15}} for kind, instance_id in ids.items()]
        tape = root / "cassettes" / "http" / "bill.yaml"
        assert main(["bill", "--gpu-mode", "record", "--cassette", str(tape), "--registry", str(registry.root)]) == 0
    assert KEY not in tape.read_text() and "REDACTED" in tape.read_text()
    return root


@pytest.fixture
def world(recorded: Path, tmp_path: Path) -> Path:
    """A copy of the recorded world a test may edit."""
    for path in recorded.rglob("*"):
        if path.is_file():
            target = tmp_path / path.relative_to(recorded)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(path.read_bytes())
    return tmp_path


def _edit(world: Path, change) -> None:
    path = world / "registry" / "deployments.json"
    document = json.loads(path.read_text())
    change(document["deployments"])
    path.write_text(json.dumps(document))


def _run(pytester, world: Path):
    return pytester.runpytest(str(CHECK), "--registry", str(world / "registry"), "--cassettes",
                              str(world / "cassettes"), "-p", "no:cacheprovider", "-q",
                              "-p", "no:gpuharness.pytest_plugin.audit")


def test_a_bill_matching_the_billed_intervals_passes(pytester, world):
    _run(pytester, world).assert_outcomes(passed=1)


def test_a_deployment_billed_more_than_its_intervals_fails_naming_it_and_the_amount(pytester, world):
    def cheaper(deployments):
        deployments[0]["cost_hr"] = round(deployments[0]["cost_hr"] / 3, 4)  # the registry says a third

    _edit(world, cheaper)
    result = _run(pytester, world)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*1 difference(s) with the providers' bill (cassette:*bill.yaml*",
                                 "dep-runpod on 20*: the provider billed $0.000*, our intervals $0.000*: a difference "
                                 "of $+0.000* beyond cost_tolerance ($0 + 5%)",
                                 "*find what billed outside the journal*"])


def test_an_instance_billed_in_no_deployment_fails_naming_the_instance(pytester, world):
    _edit(world, lambda deployments: deployments.pop(1))
    result = _run(pytester, world)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["vast:* (in no deployment) on 20*: the provider billed $0.000*, our intervals "
                                 "$0.0000*"])


def test_no_recorded_bill_skips_with_how_to_record_one(pytester, world):
    (world / "cassettes" / "http" / "bill.yaml").unlink()
    result = pytester.runpytest(str(CHECK), "--registry", str(world / "registry"), "--cassettes",
                                str(world / "cassettes"), "-p", "no:cacheprovider", "-q", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*no recorded bill at *bill.yaml; record one with `gpuharness bill --gpu-mode "
                                 "record*"])
