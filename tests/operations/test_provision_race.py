"""N provisions at once, as real concurrent processes against the simulator: one reservation under the
deployments.json lock (reuse, policy and the new entry together) gives exactly the policy's number of instances,
and one key is launched by one process at most."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from gpuharness.demo.simulated_estate import SimulatedEstate

BASE = ("provision", "--provider", "vast", "--gpu", "RTX 4090", "--image", "comfyui:1", "--cost-hr", "0.40",
        "--idle-minutes", "15", "--up-deadline", "60")


@pytest.fixture
def lab(tmp_path):
    with SimulatedEstate(tmp_path / "lab", say=lambda line: None) as lab:
        yield lab


def at_once(lab: SimulatedEstate, commands: list[tuple[str, ...]]) -> list[subprocess.CompletedProcess[str]]:
    """Start every command as a `gpuharness` process, all waiting on one pipe, then release them together."""
    read_end, write_end = os.pipe()
    # each child imports the command line first, then waits at the gate: released together, they race
    gate = ("import os, sys; from gpuharness.cli import main; import gpuharness.operations.seams, "
            "gpuharness.operations.provision; os.read(int(sys.argv[1]), 1); sys.exit(main(sys.argv[2:]))")
    processes = [subprocess.Popen([sys.executable, "-c", gate, str(read_end), *command,
                                   "--registry", str(lab.registry.root)],
                                  env=lab.env, cwd=lab.root, pass_fds=(read_end,), text=True,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE) for command in commands]
    os.write(write_end, b"x" * len(processes))
    os.close(write_end)
    os.close(read_end)
    done = []
    for process in processes:
        out, err = process.communicate(timeout=300)
        done.append(subprocess.CompletedProcess(process.args, process.returncode, out, err))
    return done


def live_instances(lab: SimulatedEstate) -> list[str]:
    return [i.id for i in lab.sim.state.instances.values() if i.status != "terminated"]


def set_policy(lab: SimulatedEstate, **ceilings: float) -> None:
    with lab.registry.update("policy.json") as document:
        document.update(max_cost_hr=100.0, daily_usd=1000.0, **ceilings)


@pytest.mark.slow
@pytest.mark.parametrize("n", [2, 5, 20])
def test_n_identical_provisions_at_once_launch_exactly_the_policys_one_instance(lab, n):
    set_policy(lab, max_concurrent_deployments=1)
    results = at_once(lab, [BASE] * n)
    assert [r.returncode for r in results] == [0] * n, [r.stderr[-400:] for r in results if r.returncode]
    assert lab.sim.stats()["launches"] == 1 and len(live_instances(lab)) == 1
    [deployment] = lab.registry.deployments()
    assert deployment.instance_id == live_instances(lab)[0]
    assert sum("reusing live deployment" in r.stderr for r in results) == n - 1


@pytest.mark.slow
@pytest.mark.parametrize("n", [2, 5, 20])
def test_n_provisions_of_distinct_deployments_at_once_stop_at_max_concurrent_deployments(lab, n):
    ceiling = 3
    set_policy(lab, max_concurrent_deployments=ceiling)
    results = at_once(lab, [(*BASE, "--id", f"dep_race_{k:02d}") for k in range(n)])
    launched = [r for r in results if r.returncode == 0]
    refused = [r for r in results if r.returncode != 0]
    assert len(launched) == min(n, ceiling), [r.stderr[-400:] for r in refused]
    assert all(r.returncode == 2 and "max_concurrent_deployments" in r.stderr for r in refused)
    assert lab.sim.stats()["launches"] == min(n, ceiling) == len(live_instances(lab))
    assert len(lab.registry.deployments()) == min(n, ceiling)


@pytest.mark.slow
@pytest.mark.parametrize("n", [2, 5, 20])
def test_n_provisions_of_one_id_at_once_launch_one_instance_for_its_key(lab, n):
    set_policy(lab, max_concurrent_deployments=4)
    results = at_once(lab, [(*BASE, "--id", "dep_same")] * n)
    assert [r.returncode for r in results] == [0] * n, [r.stderr[-400:] for r in results if r.returncode]
    assert lab.sim.stats()["launches"] == 1 and len(live_instances(lab)) == 1
    keys = [i.name for i in lab.sim.state.instances.values()]
    assert keys.count("gh-dep_same") == 1
    refresh = lab.cli("status", "--refresh", "--registry", str(lab.registry.root))
    assert refresh.returncode == 0 and "clean" in refresh.stdout, refresh.stdout + refresh.stderr
