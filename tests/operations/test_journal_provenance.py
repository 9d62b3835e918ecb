"""The journal records what froze the target: the source revision the command ran from (git HEAD of its working
directory, when it is a checkout), and each launch attempt as its own entry, written before its call goes out."""

from __future__ import annotations

import subprocess

import pytest

from gpuharness.core.lifecycle import read_journal
from gpuharness.demo.simulated_estate import SimulatedEstate
from gpuharness.operations.provision import ProvisionRequest, provision

PROVISION = ("provision", "--provider", "vast", "--gpu", "RTX 4090", "--image", "comfyui:1", "--cost-hr", "0.40",
             "--idle-minutes", "15", "--id", "dep_rev_01")


def commit_here(directory) -> str:
    def git(*args: str) -> str:
        return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args], cwd=directory,
                              check=True, capture_output=True, text=True).stdout.strip()
    git("init", "-q")
    git("commit", "-q", "--allow-empty", "-m", "the revision that froze the target")
    return git("rev-parse", "HEAD")


def test_every_journal_entry_records_the_source_revision_of_the_working_directory(tmp_path):
    with SimulatedEstate(tmp_path / "lab", say=lambda line: None) as lab:
        head = commit_here(lab.root)
        result = lab.cli(*PROVISION, "--registry", str(lab.registry.root))  # runs in lab.root, the checkout
        assert result.returncode == 0, result.stderr
        entries = list(read_journal(lab.registry.journal_path))
        assert entries and {e["source_revision"] for e in entries} == {head}


def test_outside_a_checkout_the_journal_says_no_revision_rather_than_a_wrong_one(tmp_path):
    with SimulatedEstate(tmp_path / "lab", say=lambda line: None) as lab:
        result = lab.cli(*PROVISION, "--registry", str(lab.registry.root))
        assert result.returncode == 0, result.stderr
        assert {e["source_revision"] for e in read_journal(lab.registry.journal_path)} == {None}


@pytest.mark.parametrize("fault", [{"fault": "rate_limit", "retry_after": 1}, {"fault": "drop_after_commit"}])
def test_each_launch_attempt_is_its_own_journal_entry_before_its_outcome(tmp_path, fault):
    with SimulatedEstate(tmp_path / "lab", say=lambda line: None, sleep=lambda s: None) as lab:
        lab.sim.inject(provider="vast", route="/asks/", count=1, **fault)
        provision(lab.ctx, ProvisionRequest(provider="vast", gpu="RTX 4090", image="comfyui:1", cost_hr=0.4,
                                            idle_minutes=15, deployment_id="dep_try_01"), up_deadline_s=30, poll_s=0.1)
        launch = [e["marker"]["launch"] for e in read_journal(lab.registry.journal_path)
                  if isinstance(e.get("marker"), dict) and "launch" in e["marker"]]
        events = [(m["event"], m["attempt"]) for m in launch]
        assert ("attempt", 1) in events
        if fault["fault"] == "rate_limit":  # refused, waited, tried again: two attempts, two entries
            assert [e for e in events if e[0] == "attempt"] == [("attempt", 1), ("attempt", 2)]
            assert events.index(("refused", 1)) < events.index(("attempt", 2)) < events.index(("created", 2))
        else:  # the answer was lost: settled by listing, one attempt only
            assert [e for e in events if e[0] == "attempt"] == [("attempt", 1)]
            assert events.index(("attempt", 1)) < events.index(("reconciled", 1))
        assert all(m["key"] == "gh-dep_try_01" for m in launch if "key" in m)
        assert lab.sim.stats()["launches"] == 1
