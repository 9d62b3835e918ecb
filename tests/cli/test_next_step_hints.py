"""Every hint names a command that does what it says: the live health run after configure, a reap that
terminates orphans, a host-key remedy that is not cut off, `spend --explain` against the jq one-liner it
replaces, and the cassette recorder."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from checkout import ROOT
from lifecycle_fakes import make_world

from gpuharness.cli import main
from gpuharness.core.errors import UserError
from gpuharness.core.job_line import JobLine
from gpuharness.core.lifecycle import read_journal
from gpuharness.core.registry import Registry
from gpuharness.core.spend import ONE_LINER, explain_one_liner
from gpuharness.operations.install import configure, install
from gpuharness.operations.provision import ProvisionRequest, provision
from gpuharness.operations.run import run_job
from gpuharness.operations.seams import cli_context
from gpuharness.providers import cassette
from gpuharness.sim.host import SimHost
from gpuharness.sim.server import Simulator

DEMO_LEDGER = ROOT / "fixtures" / "demo" / ".pi" / "gpu" / "jobs.jsonl"
LIVE_RUN = "pytest checks/health --gpu-mode live --deployment {}"


# --- the health run after configure


def test_configure_and_a_refused_run_name_the_live_health_run(tmp_path):
    world = make_world(tmp_path)
    dep = provision(world.ctx, ProvisionRequest(provider="vast", gpu="RTX 4090", image="comfyui:1", cost_hr=0.5,
                                                model="minimax-h3", workflow="h3-text-to-video", idle_minutes=15),
                    poll_s=5).deployment.id
    install(world.ctx, dep)
    configure(world.ctx, dep)
    assert list(read_journal(world.registry.journal_path))[-1]["next_action"] == LIVE_RUN.format(dep)
    with pytest.raises(UserError) as info:
        run_job(world.ctx, dep, inputs={"prompt": "a cat"})
    assert LIVE_RUN.format(dep) in info.value.line()


def test_no_hint_in_the_product_names_an_offline_health_run_as_the_next_step():
    offline = re.compile(r"checks/health --deployment")
    found = [f"{p.relative_to(ROOT)}:{n}" for p in (ROOT / "src" / "gpuharness").rglob("*.py")
             for n, line in enumerate(p.read_text().splitlines(), 1) if offline.search(line)]
    assert found == [], "an offline health run changes nothing: name --gpu-mode live"


# --- orphans: the hint names a command that terminates them


@pytest.fixture
def estate(seeded_simulator):
    return seeded_simulator


def _live(sim: Simulator) -> set[str]:
    with sim.state.lock:
        return {i.id for i in sim.state.instances.values() if i.live}


def test_the_orphan_hint_names_a_reap_that_lists_then_terminates_orphans(estate, capsys):
    sim, registry = estate
    claimed = {d.instance_id for d in registry.deployments()}
    leaked = sim.create_instances("vast", 2, name_prefix="gh-leak-")
    stranger = sim.create_instances("vast", 1, name_prefix="not-ours-")  # no key prefix: never ours to touch
    assert main(["status", "--refresh", "--registry", str(registry.root)]) == 1
    hints = set(re.findall(r"terminate it \(`(gpuharness [^`]+)`\)", capsys.readouterr().out))
    assert hints == {"gpuharness reap --orphans --apply"}
    argv = [*shlex.split(hints.pop())[1:], "--registry", str(registry.root)]

    dry = [a for a in argv if a != "--apply"]
    assert main([*dry, "--json"]) == 1
    listed = json.loads(capsys.readouterr().out)
    assert sorted(o["instance_id"] for o in listed) == sorted(leaked)
    assert {o["outcome"] for o in listed} == {"listed"}
    assert set(leaked) <= _live(sim)  # a dry run terminates nothing

    assert main(argv) == 0
    captured = capsys.readouterr()
    assert "terminating 2 orphan instance(s)" in captured.err and "is lost" in captured.err  # said first
    assert captured.out.count("terminated, verified by listing") == 2
    live = _live(sim)
    assert not set(leaked) & live
    assert claimed | set(stranger) <= live
    assert main(["status", "--refresh", "--registry", str(registry.root)]) == 0
    assert main([*dry]) == 0
    assert "no orphans" in capsys.readouterr().out


# --- the host-key error keeps its remedy


def test_an_unknown_host_key_error_ends_with_the_command_that_pins_it(tmp_path):
    registry = Registry(tmp_path / "registry")
    registry.init()
    empty = tmp_path / "a very long directory name to push the remedy past any cut" / "known_hosts"
    empty.parent.mkdir()
    empty.touch()
    with SimHost(root=tmp_path / "host") as host:
        with registry.update("deployments.json") as document:
            document["deployments"] = [{
                "id": "dep_pin", "provider": "owned", "status": "provisioning", "cost_hr": 0.0,
                "created_at": "2026-11-02T10:00:00Z", "shutdown_rule": {"idle_minutes": 15},
                "ssh": {"host": host.ssh_host, "port": host.ssh_port, "user": "root",
                        "key_file": str(host.client_key_path), "known_hosts": str(empty)}}]
        with pytest.raises(UserError) as info:
            install(cli_context(registry), "dep_pin")
    line = info.value.line()
    pin = f"ssh-keyscan -p {host.ssh_port} 127.0.0.1 >> {shlex.quote(str(empty))}"
    assert pin in line, line
    assert "trust on first use" in line
    assert pin in registry.deployment("dep_pin").to_json()["error"]


# --- spend against the one-liner it replaces


def _one_liner(ledger: Path) -> float:
    """The seeds' jq one-liner itself where jq is installed, else its reading: every completed line's cost_usd."""
    jq = shutil.which("jq")
    if jq is not None:
        program = ONE_LINER.split("'")[1]
        return float(subprocess.run([jq, "-s", program, str(ledger)], capture_output=True, text=True,
                                    check=True).stdout)
    lines = [json.loads(x) for x in ledger.read_text().splitlines()]
    return sum(x.get("cost_usd") or 0 for x in lines if x.get("status") == "completed")


def test_spend_explain_accounts_for_the_one_liners_difference_line_by_line(capsys):
    registry = DEMO_LEDGER.parent
    assert main(["spend", "--registry", str(registry), "--explain", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    explained = payload["explain"]
    assert explained["spend_usd"] == pytest.approx(payload["used_total"])
    assert explained["one_liner_usd"] == pytest.approx(_one_liner(DEMO_LEDGER))
    assert explained["spend_usd"] != pytest.approx(explained["one_liner_usd"])  # the demo ledger shows both causes
    skipped, again = explained["billed_not_completed"], explained["counted_again"]
    assert skipped and again
    plus = sum(j["billed_usd"] for j in skipped)
    minus = sum(j["one_liner_usd"] - (j["billed_usd"] if j["status"] == "completed" else 0) for j in again)
    assert explained["difference_usd"] == pytest.approx(plus - minus)
    lines = DEMO_LEDGER.read_text().splitlines()
    for job in skipped + again:  # every line number named is a line of that job, as it says
        assert json.loads(lines[job["current_line"] - 1])["id"] == job["job"]
        assert all(json.loads(lines[n - 1])["status"] == "completed" for n in job["completed_lines"])
    assert all(j["status"] != "completed" for j in skipped)
    assert all(len(j["completed_lines"]) > (j["status"] == "completed") for j in again)

    assert main(["spend", "--registry", str(registry), "--explain"]) == 0
    text = capsys.readouterr().out
    assert f"${_one_liner(DEMO_LEDGER):,.4f}" in text
    assert f"{len(skipped)} job(s) billed but not completed" in text
    assert f"{len(again)} job(s) whose completed line was followed by a correction" in text


def test_spend_explain_of_a_ledger_that_agrees_shows_no_difference():
    base = {"deployment_id": "dep_a", "ts": "2026-11-01T00:00:00Z"}
    lines = [(1, JobLine(id="J-1", status="running", cost_usd=None, **base)),
             (2, JobLine(id="J-1", status="completed", cost_usd=0.5, **base))]
    explanation = explain_one_liner(lines)
    assert (explanation.spend, explanation.one_liner, explanation.jobs) == (0.5, 0.5, [])


# --- the cassette recorder the hint names


@pytest.mark.slow
def test_the_missing_cassette_hint_names_a_module_that_records(tmp_path):
    with pytest.raises(UserError) as info:
        cassette.read_metadata(tmp_path / "absent.yaml")
    command = re.search(r"`(python -m [\w.]+)`", info.value.line())
    assert command is not None, info.value.line()
    module = command.group(1).split()[-1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUHARNESS_")}
    result = subprocess.run([sys.executable, "-m", module, "--root", str(tmp_path)], env=env, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    recorded = sorted((tmp_path / "cassettes" / "http").glob("*.yaml"))
    assert recorded, result.stdout
    assert {cassette.read_metadata(p).get("recorded_against") for p in recorded} == {cassette.SIMULATOR}
