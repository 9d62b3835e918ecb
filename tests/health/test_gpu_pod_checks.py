"""An 8x H100 SXM pod of the simulator (issue 21 items 4-5): the probe reads `nvidia-smi topo -m` and `nvlink
--status` in its one exec, the measurement covers every GPU and every pair's peer copy, and
`test_gpu_performs_like_its_class` passes the healthy pod and fails each fault between GPUs naming the pair (or the
GPU) and the likely cause: one GPU's NVLinks down, peer access off, one GPU on a degraded PCIe link."""

from __future__ import annotations

import pytest
from health_world import HealthWorld, run_checks

from gpuharness.sim.host import POD_8X_H100, with_fault

CHECK = "test_gpu_performs_like_its_class"


def judged(pytester, world: HealthWorld, fault: str | None) -> tuple[str, dict]:
    with world.registry.update("policy.json") as doc:
        doc["performance_floor"] = {"measure": True}
    world.add("dep_pod", with_fault(POD_8X_H100, fault) if fault else POD_8X_H100, gpu="H100 SXM", gpu_count=8)
    result = run_checks(pytester, world)
    lines = [line for line in result.outlines if f"{CHECK}[dep_pod]" in line and line.split(" ")[0] in
             ("PASSED", "FAILED")]
    assert lines, "\n".join(result.outlines[-40:])
    return lines[-1], world.deployment("dep_pod")["health"]["performance"]


def test_a_healthy_pod_is_measured_on_every_gpu_and_every_pair(pytester, world):
    line, evidence = judged(pytester, world, None)
    assert line.startswith("PASSED"), line
    pairs = [f for f in evidence["figures"] if f["figure"] == "peer_copy_gbps"]
    assert len(pairs) == 28 and {tuple(f["pair"]) for f in pairs} == {(a, b) for a in range(8) for b in range(a + 1, 8)}
    assert all(f["expected"] == 376 and f["ratio"] >= 0.85 and f["label"].endswith("(NVLink)") for f in pairs)
    matmuls = [f for f in evidence["figures"] if f["figure"] == "matmul_tflops"]
    assert [f["gpu"] for f in matmuls] == list(range(8))
    nvlinks = [f for f in evidence["figures"] if f["figure"] == "nvlinks"]
    assert [(f["gpu"], f["measured"], f["expected"]) for f in nvlinks] == [(i, 18, 18) for i in range(8)]


@pytest.mark.parametrize(("fault", "cause", "text"), [
    ("nvlink_down", "nvlink_down", "GPU 0 -> GPU 3 peer copy (NVLink) 49.9 GB/s is 0.13 of its class's 376 GB/s "
                                   "(floor 0.85); likely cause: nvlink down (GPU 3 has 0 of 18 NVLinks active; topo -m "
                                   "joins GPU 0 and GPU 3 by NODE, not NVLink)"),
    ("p2p_disabled", "p2p_off", "GPU 0 -> GPU 1 peer copy (NVLink) 34.9 GB/s is 0.09 of its class's 376 GB/s (floor "
                                "0.85); likely cause: p2p off (peer access is off between GPU 0 and GPU 1"),
    ("pcie_degraded_one_gpu", "degraded_link", "GPU 5 PCIe generation (under load) Gen1 is 0.20 of its class's Gen5 "
                                               "(floor 1); likely cause: degraded link"),
])
def test_each_fault_between_gpus_fails_naming_the_pair_or_the_gpu_and_the_cause(pytester, world, fault, cause, text):
    line, evidence = judged(pytester, world, fault)
    assert line.startswith("FAILED") and text in line, line
    assert evidence["cause"] == cause
    if fault == "pcie_degraded_one_gpu":
        short = {(f["gpu"], f["figure"]) for f in evidence["figures"] if f["short"]}
        assert short == {(5, "pcie_gen"), (5, "h2d_gbps"), (5, "d2h_gbps")}
