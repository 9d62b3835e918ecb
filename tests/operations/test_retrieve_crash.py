"""`kill -9` of `gpuharness retrieve` mid-transfer (a real process; the simulated host's SFTP read never answers):
the deployment is not left `retrieving` for ever. The next retrieve resumes and returns it to where it was; a
refresh returns it too; the artifact stays pending until it is synced."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
from lifecycle_fakes import OUTPUT, ready_with_output, wait_for

from gpuharness.core.ledger import Ledger
from gpuharness.demo.simulated_estate import SimulatedEstate
from gpuharness.operations.retrieve import PARTIAL, partial_name, unsynced

DEP = "dep_fetch_01"




@pytest.fixture
def lab(tmp_path):
    """A ready deployment with one completed job whose 256 KiB output is still on its host."""
    with SimulatedEstate(tmp_path / "lab", say=lambda line: None) as lab:
        ready_with_output(lab, DEP)
        yield lab


def stall_sftp(lab: SimulatedEstate, seconds: float) -> None:
    host = lab.host_of(DEP)
    host.reconfigure(replace(host.spec, sftp_stall_s=seconds))


def kill_mid_transfer(lab: SimulatedEstate, to: Path) -> None:
    stall_sftp(lab, 600.0)
    process = subprocess.Popen([sys.executable, "-m", "gpuharness", "retrieve", DEP, "--to", str(to),
                                "--registry", str(lab.registry.root)], env=lab.env, cwd=lab.root,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(lambda: (to / PARTIAL / partial_name("J-000001", ("out.png",))).exists(), "the transfer to start")
    os.kill(process.pid, signal.SIGKILL)
    assert process.wait(timeout=30) == -signal.SIGKILL
    stall_sftp(lab, 0.0)
    assert lab.registry.deployment(DEP).status == "retrieving"


@pytest.mark.slow
def test_the_next_retrieve_resumes_a_killed_one_and_returns_the_deployment_to_ready(lab, tmp_path):
    to = tmp_path / "outputs"
    kill_mid_transfer(lab, to)
    refused = lab.cli("run", DEP, "--inputs", '{"text": "a cat"}', "--registry", str(lab.registry.root))
    assert refused.returncode == 2 and "retrieving, not ready" in refused.stderr
    again = lab.cli("retrieve", DEP, "--to", str(to), "--registry", str(lab.registry.root))
    assert again.returncode == 0, again.stdout + again.stderr
    assert "resuming" in again.stderr
    assert lab.registry.deployment(DEP).status == "ready"
    on_host = Path(lab.registry.deployment(DEP).workspace) / OUTPUT
    assert (to / "J-000001" / "out.png").read_bytes() == on_host.read_bytes()
    assert unsynced(Ledger(lab.registry.ledger_path), DEP) == {}


@pytest.mark.slow
def test_refresh_returns_a_deployment_a_dead_retrieve_left_retrieving(lab, tmp_path):
    kill_mid_transfer(lab, tmp_path / "outputs")
    refresh = lab.cli("status", "--refresh", "--registry", str(lab.registry.root))
    assert "retrieving -> ready (its retrieve had died)" in refresh.stdout, refresh.stdout + refresh.stderr
    assert lab.registry.deployment(DEP).status == "ready"
    assert list(unsynced(Ledger(lab.registry.ledger_path), DEP)) == ["J-000001"]  # still pending, not lost
    again = lab.cli("status", "--refresh", "--registry", str(lab.registry.root))
    assert again.returncode == 0, again.stdout


@pytest.mark.slow
def test_retrieve_ends_by_its_deadline_when_an_sftp_read_never_answers(lab, tmp_path):
    stall_sftp(lab, 600.0)
    to = tmp_path / "outputs"
    process = subprocess.Popen([sys.executable, "-m", "gpuharness", "retrieve", DEP, "--to", str(to), "--deadline",
                                "4", "--registry", str(lab.registry.root)], env=lab.env, cwd=lab.root,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for(lambda: (to / PARTIAL / partial_name("J-000001", ("out.png",))).exists(), "the transfer to start")
    reading = time.monotonic()  # the stalled read has begun: from here only the deadline can end it
    _, stderr = process.communicate(timeout=120)
    took = time.monotonic() - reading
    assert process.returncode == 2, stderr
    assert "did not finish by its deadline" in stderr and "Traceback" not in stderr
    assert took < 4 + 10, f"took {took:.1f} s after the read began"  # the deadline (and exit), not the 600 s stall
    assert lab.registry.deployment(DEP).status == "ready"
    assert list(unsynced(Ledger(lab.registry.ledger_path), DEP)) == ["J-000001"]
