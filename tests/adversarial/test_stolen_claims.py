"""A claim that can't be stolen: removing or replacing a launch claim's file under a provision whose launch is in
flight never lets a second provision launch a second instance with the same key, and two registries that share a
claim directory never see each other's claims. Real `gpuharness` processes against the simulator, held at their
step by its latency fault; real forked holders."""

from __future__ import annotations

import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gpuharness.core import claims
from gpuharness.core.registry import Registry
from gpuharness.demo.simulated_estate import SimulatedEstate

DEP = "dep_claim_01"
PROVISION = ("provision", "--provider", "vast", "--gpu", "RTX 4090", "--image", "comfyui:1", "--cost-hr", "0.40",
             "--idle-minutes", "15", "--id", DEP, "--up-deadline", "60")
LAUNCH = "/asks/"
#: how long the first provision's launch call is held in flight
HOLD_MS = 8_000
FORK = multiprocessing.get_context("fork")


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[SimulatedEstate]:
    with SimulatedEstate(tmp_path / "lab", say=lambda line: None) as made:
        yield made


def wait_for(condition: Callable[[], object], timeout_s: float = 60.0) -> None:
    ends = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < ends, "the condition never held"
        time.sleep(0.05)


def gpuharness(lab: SimulatedEstate, root: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "gpuharness", *args, "--registry", str(root)]


def launches(lab: SimulatedEstate) -> int:
    return int(lab.sim.stats()["launches"])


@pytest.mark.parametrize("tamper", ["deleted", "replaced"])
def test_a_launch_claim_removed_under_a_launch_in_flight_never_gives_a_second_instance(lab, tamper):
    root = lab.registry.root
    lab.sim.inject(provider="vast", count=1, fault="latency", latency_ms=HOLD_MS, route=LAUNCH)
    first = subprocess.Popen(gpuharness(lab, root, *PROVISION), env=lab.env, cwd=lab.root, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: lab.sim.stats()["faults_fired"].get("latency"))  # its launch call is in flight
        path = claims.claim_path(root, "launch", DEP)
        assert claims.holder(root, "launch", DEP) == first.pid
        path.unlink()
        if tamper == "replaced":
            path.write_bytes(b"")
        second = subprocess.run(gpuharness(lab, root, *PROVISION), env=lab.env, cwd=lab.root, text=True,
                                capture_output=True, timeout=180)
        _, err = first.communicate(timeout=180)
    finally:
        if first.poll() is None:
            first.kill()
    said = (f"first (exit {first.returncode}):\n{err[-1500:]}\n"
            f"second (exit {second.returncode}):\n{second.stderr[-1500:]}")
    keys = [i.name for i in lab.sim.state.instances.values()]
    assert launches(lab) == 1 and keys.count(f"gh-{DEP}") == 1, said
    assert first.returncode == 0, said
    assert second.returncode == 2 and "Traceback" not in second.stderr, said
    assert second.stderr.splitlines()[-1].startswith("gpuharness: error: ") and "launch" in second.stderr, said


def hold(root: str, ready_fd: int) -> None:
    claim = claims.take(Path(root), "launch", DEP)
    assert claim is not None
    os.write(ready_fd, b"x")
    signal.pause()


def test_two_registries_sharing_a_claim_directory_do_not_see_each_others_claims(lab, tmp_path):
    mine = lab.registry
    other = Registry(tmp_path / "other")
    other.init()
    for name in ("providers.json", "policy.json"):
        shutil.copy(mine.path(name), other.path(name))
    (mine.root / claims.LOCKS_DIR).mkdir(exist_ok=True)
    (other.root / claims.LOCKS_DIR).symlink_to(mine.root / claims.LOCKS_DIR, target_is_directory=True)
    read_end, write_end = os.pipe()
    holder = FORK.Process(target=hold, args=(str(mine.root), write_end), daemon=True)
    holder.start()
    try:
        os.read(read_end, 1)
        assert claims.holder(mine.root, "launch", DEP) == holder.pid
        assert claims.holder(other.root, "launch", DEP) is None, "the other registry sees this one's claim"
        done = subprocess.run(gpuharness(lab, other.root, *PROVISION), env=lab.env, cwd=lab.root, text=True,
                              capture_output=True, timeout=180)
        assert done.returncode == 0, done.stderr[-1500:]
        assert claims.holder(mine.root, "launch", DEP) == holder.pid, "its own claim is still held"
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.join(timeout=30)
