"""Every remote operation ends by its phase deadline, however the peer behaves: a provider answering one byte
every half second (httpx's timeout is per read, so it never fires) does not hold `status --refresh` past its
deadline (real process, the simulator's drip fault on loopback)."""

from __future__ import annotations

import time

import pytest

from gpuharness.demo.simulated_estate import SimulatedEstate

DEADLINE_S = 4.0
#: what the process may take beyond its deadline: interpreter start-up and imports on a loaded 2-core machine
START_UP_S = 20.0


@pytest.fixture
def lab(tmp_path):
    with SimulatedEstate(tmp_path / "lab", say=lambda line: None) as lab:
        yield lab


@pytest.mark.slow
def test_status_refresh_ends_by_its_deadline_while_a_provider_drips_its_answer(lab):
    # the list's answer (~200 bytes at 0.5 s each) would take minutes: only the deadline can end it sooner
    lab.sim.inject(provider="vast", fault="drip", latency_ms=500, count=-1)
    started = time.monotonic()
    result = lab.cli("status", "--refresh", "--deadline", f"{DEADLINE_S:g}", "--registry", str(lab.registry.root),
                     timeout_s=DEADLINE_S + START_UP_S + 60)
    took = time.monotonic() - started
    assert result.returncode == 2, result.stdout + result.stderr
    assert "deadline" in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert took < DEADLINE_S + START_UP_S, f"took {took:.1f} s"
    assert lab.sim.stats()["faults_fired"].get("drip", 0) >= 1
