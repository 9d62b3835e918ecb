"""`test_gpu_performs_like_its_class` on simulated hosts (pytester runs of the real checks/health suite): it passes on
a healthy host of each kind, fails on each fault naming the figure, the class's expectation and the likely cause,
records the figures as the deployment's health evidence, and judges a recording offline as it judged it live."""

from __future__ import annotations

from dataclasses import replace

import pytest
from health_world import HealthWorld, run_checks

from gpuharness.sim.host import HostSpec, with_fault

CHECK = "test_gpu_performs_like_its_class"


def measure(world: HealthWorld, **floor: object) -> None:
    with world.registry.update("policy.json") as doc:
        doc["performance_floor"] = {"measure": True, **floor}


def outcome(result, dep: str) -> str:
    lines = [line for line in result.outlines if f"{CHECK}[{dep}]" in line and line.split(" ")[0] in
             ("PASSED", "FAILED", "SKIPPED")]
    assert lines, "\n".join(result.outlines[-40:])
    return lines[-1]


def test_a_healthy_host_is_measured_in_one_more_exec_and_its_figures_become_evidence(pytester, world):
    measure(world)
    world.add("dep_ok")
    result = run_checks(pytester, world)
    line = outcome(result, "dep_ok")
    assert line.startswith("PASSED"), line
    assert world.hosts["dep_ok"].stats == {"ssh_connections": 1, "ssh_execs": 2}  # the probe, the measurement
    deployment = world.deployment("dep_ok")
    assert deployment["status"] == "ready"
    evidence = deployment["health"]["performance"]
    figures = {f["figure"]: f for f in evidence["figures"]}
    # an RTX 4090 of the simulator reaches its class's healthy figures (0.8 of the datasheet's 165.2 TFLOP/s, 0.88
    # of its 1008 GB/s: no published measurement of its own) and 0.96 of a Gen4 x16 host link
    assert (figures["matmul_tflops"]["measured"], figures["matmul_tflops"]["expected"]) == (132.2, 132.2)
    assert figures["matmul_tflops"]["peak"] == 165.2
    assert figures["matmul_tflops"]["timing"] == "cuda-events median of 25 after 5 warm-ups"
    assert (figures["device_copy_gbps"]["measured"], figures["h2d_gbps"]["measured"]) == (887.0, 24.12)
    assert (figures["pcie_width"]["measured"], figures["pcie_gen"]["measured"]) == (16, 4)
    assert evidence["measurement"]["status"] == "measured" and evidence["shortfalls"] == []
    result.stdout.fnmatch_lines(["*dep_ok GPU: GPU 0 PCIe link width (under load) x16 is 1.00 of its class's x16*"])


def test_without_the_policy_asking_the_host_is_judged_on_its_probe_alone(pytester, world):
    world.add("dep_ok")
    line = outcome(run_checks(pytester, world), "dep_ok")
    assert line.startswith("PASSED")
    assert world.hosts["dep_ok"].stats == {"ssh_connections": 1, "ssh_execs": 1}
    figures = world.deployment("dep_ok")["health"]["performance"]
    assert figures["measurement"] is None
    assert "not measured: policy performance_floor.measure is off" in " ".join(figures["notes"])


@pytest.mark.parametrize(("fault", "cause", "text"), [
    ("pcie_degraded", "degraded_link", "GPU 0 PCIe generation (under load) Gen1 is 0.25 of its class's Gen4 "
                                       "(floor 1); likely cause: degraded link"),
    ("pcie_riser", "riser", "GPU 0 PCIe link width (under load) x4 is 0.25 of its class's x16 (floor 1); likely "
                            "cause: riser"),
    ("power_capped", "power_cap", "GPU 0 dense matmul bf16 60.8 TFLOP/s is 0.46 of its class's 132 TFLOP/s (floor "
                                  "0.85); likely cause: power cap (the enforced power limit is 180 W of its default "
                                  "450 W)"),
    ("underperforming", "shared_gpu", "GPU 0 dense matmul bf16 52.9 TFLOP/s is 0.40 of its class's 132 TFLOP/s "
                                      "(floor 0.85); likely cause: shared gpu (before the measurement the GPU was "
                                      "97% busy"),
])
def test_each_fault_fails_the_check_naming_the_figure_the_expectation_and_the_cause(pytester, world, fault, cause,
                                                                                     text):
    measure(world)
    world.add("dep_bad", with_fault(HostSpec(), fault))
    result = run_checks(pytester, world)
    line = outcome(result, "dep_bad")
    assert line.startswith("FAILED") and text in line, line
    deployment = world.deployment("dep_bad")
    assert deployment["status"] == "health-checking" and deployment["health"]["cause"] == cause
    assert deployment["health"]["failed_checks"] == ["gpu_performs_like_its_class"]
    assert deployment["health"]["performance"]["cause"] == cause


def test_a_host_without_torch_is_said_so_and_fails_only_where_the_policy_requires_a_measurement(pytester, world):
    measure(world)
    # a vLLM service whose interpreter has no torch (the smoke test skips there: the service does not load it)
    world.add("dep_notorch", HostSpec(runtime="openai", torch="absent", log_lines=()))
    line = outcome(run_checks(pytester, world), "dep_notorch")
    assert line.startswith("PASSED")
    notes = " ".join(world.deployment("dep_notorch")["health"]["performance"]["notes"])
    assert "not measured: torch is not importable by" in notes and "require_measurement is off" in notes
    assert world.hosts["dep_notorch"].stats["ssh_execs"] == 1  # nothing to measure with: no exec spent

    measure(world, require_measurement=True)
    with world.registry.update("deployments.json") as doc:
        doc["deployments"][0]["status"] = "health-checking"
    line = outcome(run_checks(pytester, world), "dep_notorch")
    assert line.startswith("FAILED") and "the GPU could not be measured: torch is not importable by" in line
    assert world.deployment("dep_notorch")["health"]["cause"] == "no_measurement"


def test_a_policy_that_accepts_half_the_link_width_passes_a_riser(pytester, world):
    measure(world, pcie_width=0.25, throughput=0.2)
    world.add("dep_riser", with_fault(HostSpec(), "pcie_riser"))
    assert outcome(run_checks(pytester, world), "dep_riser").startswith("PASSED")


def test_each_gpu_class_of_the_simulator_performs_like_its_class(pytester, world):
    measure(world)
    for name, short in (("NVIDIA H100 80GB HBM3", "H100"), ("NVIDIA L40S", "L40S"), ("Tesla T4", "T4")):
        world.add(f"dep_{short.lower()}", replace(HostSpec(), gpu=name), gpu=short)
    result = run_checks(pytester, world)
    for dep in ("dep_h100", "dep_l40s", "dep_t4"):
        assert outcome(result, dep).startswith("PASSED"), outcome(result, dep)
    t4 = {f["figure"]: f for f in world.deployment("dep_t4")["health"]["performance"]["figures"]}
    assert t4["matmul_tflops"]["label"] == "dense matmul fp16"  # no bf16 tensor cores: measured in fp16


def test_offline_replay_judges_a_recorded_host_as_it_was_judged_live(pytester, world, tmp_path):
    measure(world)
    world.add("dep_bad", with_fault(HostSpec(), "pcie_degraded"))
    cassettes = tmp_path / "cassettes"
    live = outcome(run_checks(pytester, world, "--cassettes", str(cassettes), mode="record"), "dep_bad")
    world.hosts["dep_bad"].stop()  # offline never reaches the host
    replayed = outcome(run_checks(pytester, world, "--cassettes", str(cassettes), mode="offline"), "dep_bad")
    assert live.startswith("FAILED") and replayed.startswith("FAILED")
    assert live.split("dep_bad: ", 1)[1] == replayed.split("dep_bad: ", 1)[1]
