"""Every remote operation ends by its phase deadline, however the peer behaves: a provider answering one byte
every half second (httpx's timeout is per read, so it never fires) does not hold `status --refresh` past its
deadline (real process, the simulator's drip fault on loopback)."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from lifecycle_fakes import wait_for

from gpuharness.demo.simulated_estate import SimulatedEstate

DEADLINE_S = 4.0
#: what the process may take beyond its deadline to print its line and exit, on a loaded 2-core machine
EXIT_S = 10.0


@pytest.fixture
def lab(tmp_path):
    with SimulatedEstate(tmp_path / "lab", say=lambda line: None) as lab:
        yield lab


@pytest.mark.slow
def test_status_refresh_ends_by_its_deadline_while_a_provider_drips_its_answer(lab):
    # the list's answer (~200 bytes at 0.5 s each) would take minutes: only the deadline can end it sooner
    lab.sim.inject(provider="vast", fault="drip", latency_ms=500, count=-1)
    process = subprocess.Popen([sys.executable, "-m", "gpuharness", "status", "--refresh", "--deadline",
                                f"{DEADLINE_S:g}", "--registry", str(lab.registry.root)], env=lab.env, cwd=lab.root,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for(lambda: lab.sim.stats()["faults_fired"].get("drip", 0) >= 1, "the first dripping answer")
    dripping = time.monotonic()  # the phase began before this: what is left of it is at most the deadline
    stdout, stderr = process.communicate(timeout=DEADLINE_S + 120)
    took = time.monotonic() - dripping
    assert process.returncode == 2, stdout + stderr
    assert "deadline" in stderr and "Traceback" not in stderr
    assert len(stderr.strip().splitlines()) == 1
    assert took < DEADLINE_S + EXIT_S, f"took {took:.1f} s after the drip began"


