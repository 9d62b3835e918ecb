"""`kill -9` of a provision between the launch call and its record (real processes, the simulator holding the
committed launch's answer): the deployment has no instance id while an instance carrying its key bills. No verdict
without listing for its key: refresh links or reports it, destroy and `reap --apply` terminate it, provision
resumes it, and a plan cannot be made again over it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from lifecycle_fakes import wait_for

from gpuharness.core.deployment import Deployment
from gpuharness.core.lifecycle import read_journal
from gpuharness.demo.simulated_estate import SimulatedEstate

DEP = "dep_crash_01"
PROVISION = ("provision", "--provider", "vast", "--gpu", "RTX 4090", "--image", "comfyui:1", "--cost-hr", "0.40",
             "--idle-minutes", "15", "--id", DEP)


@pytest.fixture
def lab(tmp_path):
    with SimulatedEstate(tmp_path / "lab", say=lambda line: None) as lab:
        yield lab




def kill_inside_the_launch(lab: SimulatedEstate, *command: str) -> None:
    """Start the command; once the simulator has committed its launch (and holds the answer), kill -9 it."""
    lab.sim.inject(provider="vast", fault="hold_after_commit", latency_ms=60_000)
    before = lab.sim.stats()["launches"]
    process = subprocess.Popen([sys.executable, "-m", "gpuharness", *command, "--registry", str(lab.registry.root)],
                               env=lab.env, cwd=lab.root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(lambda: lab.sim.stats()["launches"] > before, "the launch to be committed")
    os.kill(process.pid, signal.SIGKILL)
    assert process.wait(timeout=30) == -signal.SIGKILL
    lab.sim.faults.clear()


def billing(lab: SimulatedEstate) -> list[str]:
    return [i.id for i in lab.sim.state.instances.values() if i.status != "terminated"]


def crashed(lab: SimulatedEstate) -> Deployment:
    kill_inside_the_launch(lab, *PROVISION)
    deployment = lab.registry.deployment(DEP)
    assert deployment.status == "provisioning" and deployment.instance_id is None
    assert len(billing(lab)) == 1
    return deployment


@pytest.mark.slow
def test_refresh_links_the_instance_a_killed_provision_launched_and_is_not_clean(lab):
    crashed(lab)
    refresh = lab.cli("status", "--refresh", "--json", "--registry", str(lab.registry.root))
    assert refresh.returncode == 1, refresh.stdout + refresh.stderr
    [unresolved] = json.loads(refresh.stdout)["unresolved"]
    assert unresolved["deployment_id"] == DEP and unresolved["linked"] is True
    assert unresolved["instance_id"] == billing(lab)[0]
    assert f"--id {DEP}" in unresolved["resume"]
    assert lab.registry.deployment(DEP).instance_id == billing(lab)[0]
    linked = [e for e in read_journal(lab.registry.journal_path) if (e.get("marker") or {}) == {
        "linked_by_key": f"gh-{DEP}"}]
    assert len(linked) == 1 and linked[0]["target_id"] == billing(lab)[0]
    text = lab.cli("status", "--refresh", "--registry", str(lab.registry.root))
    assert "UNRESOLVED unresolved launch of dep_crash_01" in text.stdout and "clean" not in text.stdout


@pytest.mark.slow
def test_destroy_terminates_what_carries_the_key_of_a_launch_never_recorded(lab):
    crashed(lab)
    destroy = lab.cli("destroy", DEP, "--confirm", DEP, "--registry", str(lab.registry.root))
    assert destroy.returncode == 0, destroy.stderr
    assert billing(lab) == []
    deployment = lab.registry.deployment(DEP)
    assert deployment.status == "destroyed"
    [closing] = [e for e in read_journal(lab.registry.journal_path) if e["to"] == "destroyed"]
    assert closing["marker"]["terminated"] and "verified by listing" in closing["note"]
    refresh = lab.cli("status", "--refresh", "--registry", str(lab.registry.root))
    assert refresh.returncode == 0 and "clean" in refresh.stdout, refresh.stdout


@pytest.mark.slow
def test_reap_apply_after_the_deadline_terminates_it_too(lab):
    kill_inside_the_launch(lab, *PROVISION[:-4], "--deadline", "2020-01-01T00:00:00Z", "--id", DEP)
    assert lab.registry.deployment(DEP).instance_id is None and len(billing(lab)) == 1
    reap = lab.cli("reap", "--apply", "--registry", str(lab.registry.root))
    assert reap.returncode == 0, reap.stdout + reap.stderr
    assert billing(lab) == [] and lab.registry.deployment(DEP).status == "destroyed"


@pytest.mark.slow
def test_provision_again_resumes_the_killed_launch_without_a_second_instance(lab):
    crashed(lab)
    again = lab.cli(*PROVISION, "--registry", str(lab.registry.root))
    assert again.returncode == 0, again.stderr
    assert "resuming dep_crash_01" in again.stderr
    assert lab.sim.stats()["launches"] == 1 and len(billing(lab)) == 1
    assert lab.registry.deployment(DEP).instance_id == billing(lab)[0]


@pytest.mark.slow
def test_a_plan_killed_in_its_launch_cannot_be_made_again_under_a_new_key(lab):
    plan = Path(lab.root) / "plan.json"
    made = lab.cli("plan", "make", "--provider", "vast", "--gpu", "RTX 4090", "--image", "comfyui:1", "--cost-hr",
                   "0.40", "--idle-minutes", "15", "-o", str(plan), "--registry", str(lab.registry.root))
    assert made.returncode == 0, made.stderr
    dep_id = json.loads(plan.read_text())["steps"][0]["target"]["deployment_id"]
    kill_inside_the_launch(lab, "plan", "apply", str(plan), "--yes")
    assert lab.registry.deployment(dep_id).instance_id is None and len(billing(lab)) == 1
    again = lab.cli("plan", "make", "--provider", "vast", "--gpu", "RTX 4090", "--image", "comfyui:1", "--cost-hr",
                    "0.40", "--idle-minutes", "15", "-o", str(plan), "--registry", str(lab.registry.root))
    assert again.returncode == 2, again.stdout + again.stderr
    assert f"the launch of {dep_id} was recorded and never finished" in again.stderr
    assert f"--id {dep_id}" in again.stderr and f"gpuharness destroy {dep_id}" in again.stderr
    resume = lab.cli(*_resume_words(again.stderr), "--registry", str(lab.registry.root))
    assert resume.returncode == 0, resume.stderr
    assert lab.sim.stats()["launches"] == 1 and len(billing(lab)) == 1


def _resume_words(stderr: str) -> list[str]:
    import shlex
    command = stderr.split("resume it with `", 1)[1].split("`", 1)[0]
    return shlex.split(command)[1:]
