"""`gpuharness gpus --history`: the figures recorded in deployments' health evidence, compared per GPU class and
provider, so that a bad host stands out (a real subprocess over a real registry)."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace

from gpuharness.core.policy import PerformanceFloor
from gpuharness.gpu import peers
from gpuharness.gpu.measurement import DeviceFigures, Measurement, PeerFigures
from gpuharness.gpu.nvidia_smi import GpuInfo
from gpuharness.gpu.performance import evidence, judge

RTX4090 = GpuInfo(index=0, name="NVIDIA GeForce RTX 4090", pcie_gen=4, pcie_gen_max=4, pcie_width=16,
                  pcie_width_max=16, enforced_power_limit_w=450.0, power_default_limit_w=450.0)


def performance(matmul: float, width: int = 16) -> dict:
    """The evidence the ready gate records, from the real judgement (matmul in bf16 TFLOP/s)."""
    loaded = replace(RTX4090, pcie_width=width)
    device = DeviceFigures(cuda_index=0, index=0, precision="bf16", matmul_tflops=matmul, device_copy_gbps=900.0,
                           h2d_gbps=24.0 * width / 16, d2h_gbps=25.0 * width / 16, under_load=loaded)
    measurement = Measurement("measured", "1 GPU(s) measured", (device,))
    return evidence(judge([RTX4090], measurement, PerformanceFloor()), measurement, "2026-11-02T09:10:00Z")


def gpuharness(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpuharness", *args], capture_output=True, text=True, timeout=120,
                          check=False)


def test_a_slow_host_stands_out_among_deployments_of_its_class_and_provider(registry, deployment_item):
    with registry.update("deployments.json") as doc:
        doc["deployments"] = [
            deployment_item("dep_a", "ready", health={"status": "passed", "performance": performance(160.1)}),
            deployment_item("dep_b", "destroyed", health={"status": "passed", "performance": performance(158.4)}),
            deployment_item("dep_c", "health-checking", health={"status": "failed", "performance":
                                                                performance(52.0, width=4)}),
            deployment_item("dep_d", "ready"),  # never measured
            deployment_item("dep_e", "ready", provider="runpod", health={"performance": performance(150.0)}),
        ]
    done = gpuharness("gpus", "--history", "--registry", str(registry.root))
    assert done.returncode == 0, done.stderr
    assert "RTX 4090 at runpod: 1 measured, 0 not" in done.stdout
    assert "RTX 4090 at vast: 3 measured, 1 not" in done.stdout
    assert "dep_c stands out: matmul TFLOP/s 52 is 0.33 of the median of its peers (159.25)" in done.stdout
    assert "dep_c stands out: link width 4 is 0.25 of the median of its peers (16)" in done.stdout
    assert "not measured: dep_d" in done.stdout
    assert "dep_a stands out" not in done.stdout and "dep_e stands out" not in done.stdout

    payload = json.loads(gpuharness("gpus", "--history", "--provider", "vast", "--gpu", "rtx 4090", "--json",
                                    "--registry", str(registry.root)).stdout)
    (group,) = payload["groups"]
    assert (group["gpu"], group["provider"], group["medians"]["matmul_tflops"]) == (
        "NVIDIA GeForce RTX 4090", "vast", 158.4)
    slow = next(h for h in group["hosts"] if h["deployment"] == "dep_c")
    assert slow["shortfalls"] == ["pcie_width", "matmul_tflops", "h2d_gbps", "d2h_gbps"]


def test_history_needs_a_registry_and_refuses_nvidia_smi_input(tmp_path):
    done = gpuharness("gpus", "--history", "--registry", str(tmp_path / "nowhere"))
    assert done.returncode == 2 and "no registry directory here" in done.stderr
    done = gpuharness("gpus", "--history", "--from", "x.txt", "--registry", str(tmp_path))
    assert done.returncode == 2 and "--history reads the registry, not nvidia-smi output" in done.stderr
    done = gpuharness("gpus", "--provider", "vast", "--from", "-")
    assert done.returncode == 2 and "--gpu and --provider select deployments of --history" in done.stderr


def pod_performance(slow_gpu: int) -> dict:
    """The evidence of an 8x H100 SXM pod whose GPU `slow_gpu` reaches its peers at PCIe speed only."""
    gpus = [GpuInfo(index=i, name="NVIDIA H100 80GB HBM3", pcie_gen=5, pcie_gen_max=5, pcie_width=16,
                    pcie_width_max=16) for i in range(8)]
    devices = tuple(DeviceFigures(cuda_index=i, index=i, precision="bf16", matmul_tflops=790.0, under_load=gpus[i])
                    for i in range(8))
    pairs = tuple(PeerFigures(a, b, True, 49.9 if slow_gpu in (a, b) else 372.2) for a in range(8)
                  for b in range(a + 1, 8))
    measurement = Measurement("measured", "8 GPU(s) measured", devices, peers=pairs)
    report = peers.with_links(judge(gpus, measurement, PerformanceFloor()), gpus, measurement, peers.Links(),
                              PerformanceFloor())
    return evidence(report, measurement, "2026-12-05T08:00:00Z")


def test_a_pods_gpus_are_compared_one_by_one_and_the_one_off_the_nvlinks_stands_out(registry, deployment_item):
    with registry.update("deployments.json") as doc:
        doc["deployments"] = [deployment_item("dep_pod", "health-checking", gpu="H100 SXM", health={
            "status": "failed", "performance": pod_performance(slow_gpu=3)})]
    done = gpuharness("gpus", "--history", "--registry", str(registry.root))
    assert done.returncode == 0, done.stderr
    assert "H100 SXM at vast: 8 measured, 0 not" in done.stdout
    assert "dep_pod GPU 3 stands out: peer GB/s 49.9 is 0.13 of the median of its peers (372.2)" in done.stdout
    assert done.stdout.count("stands out") == 1
