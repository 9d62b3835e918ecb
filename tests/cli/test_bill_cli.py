"""`gpuharness bill` against the simulator, and the issue's done-when: a pod that ran without jobs is billed by
`spend` within 15% of what the simulated provider accrued; `bill --json` shows the provider's figure; the audit
compares the two from the recorded bill."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuharness.cli import main
from gpuharness.core.registry import Registry
from gpuharness.demo.simulated_estate import SimulatedEstate

DEPLOYMENT = "dep_idle"
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimulatedEstate]:
    """A RunPod pod provisioned, left without jobs for two seconds, then destroyed."""
    with SimulatedEstate(tmp_path_factory.mktemp("bill") / "lab", say=lambda line: None, ready_delay_s=0.0) as lab:
        made = lab.cli("provision", "--provider", "runpod", "--gpu", "NVIDIA GeForce RTX 4090", "--image",
                       "comfyui:1", "--runtime", "comfyui", "--idle-minutes", "15", "--id", DEPLOYMENT, "--json")
        assert made.returncode == 0, made.stderr
        time.sleep(2.0)
        gone = lab.cli("destroy", DEPLOYMENT, "--confirm", DEPLOYMENT)
        assert gone.returncode == 0, gone.stderr
        yield lab


def accrued(lab: SimulatedEstate) -> float:
    """What the simulated provider accrued for the pod: its own bill."""
    return sum(instance.accrued_usd for instance in lab.sim.state.accruals("runpod"))


def test_done_when_spend_bills_an_idle_pod_within_15_percent_of_what_the_provider_accrued(lab):
    spend = json.loads(lab.cli("spend", "--json").stdout)
    assert accrued(lab) > 0 and spend["used_total"] == 0
    assert abs(spend["total"] - accrued(lab)) <= 0.15 * accrued(lab), (spend["total"], accrued(lab))


def test_done_when_bill_json_shows_the_providers_figure_beside_ours(lab):
    done = lab.cli("bill", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["providers"] == ["vast", "runpod"] and report["differences"] == 0
    [line] = report["lines"]
    assert line["deployment"] == DEPLOYMENT and line["provider"] == "runpod"
    assert line["provider_usd"] == pytest.approx(accrued(lab), abs=1e-6)
    assert line["ours_usd"] == pytest.approx(accrued(lab), rel=0.15) and not line["over_tolerance"]
    assert report["totals"]["provider_usd"] == line["provider_usd"]
    assert set(report) >= {"since", "until", "source", "skipped", "tolerance", "lines", "totals", "differences"}


def test_bill_prints_a_table_of_days_and_says_every_day_is_within_tolerance(lab):
    done = lab.cli("bill", "--provider", "runpod", "--since", time.strftime("%Y-%m-%d", time.gmtime()))
    assert done.returncode == 0, done.stderr
    assert f"  {DEPLOYMENT}  " in done.stdout and "from runpod (live)" in done.stdout
    assert done.stdout.rstrip().endswith("every day within cost_tolerance")


def test_done_when_the_audit_compares_the_recorded_bill_with_our_intervals(lab):
    cassettes = lab.root / "audit-cassettes"
    recorded = lab.cli("bill", "--gpu-mode", "record", "--cassette", str(cassettes / "http" / "bill.yaml"))
    assert recorded.returncode == 0, recorded.stderr
    audit = lab.cli("check", "audit", "--registry", str(lab.registry.root), "--cassettes", str(cassettes),
                    "-k", "providers_bill", "-p", "no:cacheprovider", "-q")
    assert "1 passed" in audit.stdout, audit.stdout[-2000:]


def test_a_difference_beyond_tolerance_is_shown_and_exits_1(lab, tmp_path):
    tape = tmp_path / "bill.yaml"
    assert lab.cli("bill", "--gpu-mode", "record", "--cassette", str(tape)).returncode == 0
    copy = Registry(tmp_path / "registry")
    shutil.copytree(lab.registry.root, copy.root)
    with copy.update("deployments.json") as doc:
        doc["deployments"][0]["cost_hr"] = 0.23  # a third of what the pod billed
    with copy.update("policy.json") as doc:
        doc["cost_tolerance"] = {"abs_usd": 0.0, "rel": 0.05}
    done = lab.cli("bill", "--gpu-mode", "offline", "--cassette", str(tape), "--registry", str(copy.root))
    assert done.returncode == 1, done.stderr
    assert f"difference: {DEPLOYMENT} on " in done.stdout and "the provider billed $0.000" in done.stdout
    assert "1 difference(s) beyond cost_tolerance" in done.stdout


@pytest.fixture
def bare(tmp_path: Path) -> Registry:
    """A registry with a Massed Compute and an owned-servers provider: neither publishes a bill."""
    registry = Registry(tmp_path / "reg")
    registry.init()
    with registry.update("providers.json") as doc:
        doc["providers"] = [{"name": "massed", "kind": "massed", "credential_env": "MASSED_KEY"},
                            {"name": "rack", "kind": "owned"}]
    return registry


@pytest.mark.parametrize("name", ["massed", "rack"])
def test_bill_for_a_provider_without_billing_records_is_one_line_exit_2(capsys, bare, name):
    assert main(["bill", "--provider", name, "--registry", str(bare.root)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "publishes no billing records" in err and f"providers.json:{name}" in err


@pytest.mark.parametrize("since", ["yesterday", "2026-13-01", "2999-01-01"])
def test_a_bad_since_is_one_line_exit_2(capsys, bare, since):
    assert main(["bill", "--since", since, "--registry", str(bare.root)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--since" in err


def test_without_a_provider_that_bills_there_is_nothing_to_compare(capsys, bare):
    assert main(["bill", "--registry", str(bare.root)]) == 0
    out = capsys.readouterr().out
    assert "(nothing billed in the window)" in out
    assert "not read: massed: kind massed publishes no billing records" in out
