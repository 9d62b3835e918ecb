"""Each pair's peer copy and each GPU's NVLinks against the class (gpu.peers), with the cause named: the judgement
alone, over figures as the measurement and the probe give them (the simulator's pod covers the whole path in
tests/health/test_gpu_pod_checks.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpuharness.core.policy import PerformanceFloor
from gpuharness.gpu import peers
from gpuharness.gpu.measurement import DeviceFigures, Measurement, PeerFigures
from gpuharness.gpu.nvidia_smi import GpuInfo
from gpuharness.gpu.performance import judge, message
from gpuharness.gpu.topology import NvLinkState

FLOOR = PerformanceFloor()
RTX4090 = GpuInfo(index=0, name="NVIDIA GeForce RTX 4090", pcie_gen=4, pcie_gen_max=4, pcie_width=16,
                  pcie_width_max=16, enforced_power_limit_w=450.0, power_default_limit_w=450.0)
H100 = GpuInfo(index=0, name="NVIDIA H100 80GB HBM3", pcie_gen=5, pcie_gen_max=5, pcie_width=16, pcie_width_max=16)


def pod(card: GpuInfo, gbps: float, *, second: GpuInfo | None = None, access: bool = True) -> tuple:
    gpus = [card, second or replace(card, index=1)]
    devices = tuple(DeviceFigures(cuda_index=g.index or 0, index=g.index, under_load=g) for g in gpus)
    return gpus, Measurement("measured", "2 GPU(s) measured", devices, peers=(PeerFigures(0, 1, access, gbps),))


def verdict(gpus: list[GpuInfo], measurement: Measurement | None, links: peers.Links | None = None):
    report = peers.with_links(judge(gpus, measurement, FLOOR), gpus, measurement, links or peers.Links(), FLOOR)
    return message(report), report


@pytest.mark.parametrize(("second", "cause", "fact"), [
    (replace(RTX4090, index=1, pcie_width=4), "riser", "GPU 1's link is x4 where the card has x16"),
    (replace(RTX4090, index=1, pcie_gen=2), "degraded_link", "GPU 1's link runs at Gen2 where the card is Gen4"),
    (replace(RTX4090, index=1, enforced_power_limit_w=200.0), "power_cap",
     "GPU 1's enforced power limit is 200 W of its default 450 W"),
    (replace(RTX4090, index=1), "underperforming", "look like their class"),
])
def test_a_slow_pcie_pair_names_the_pair_and_the_gpu_behind_it(second, cause, fact):
    _, report = verdict(*pod(RTX4090, 6.0, second=second))
    pair = next(f for f in report.figures if f.key == "peer_copy_gbps")
    assert pair.text() == "GPU 0 -> GPU 1 peer copy (PCIe) 6 GB/s is 0.24 of its class's 25.1 GB/s (floor 0.85)"
    assert (pair.pair, pair.cause) == ((0, 1), cause) and fact in pair.why


def test_peer_access_off_is_named_before_the_links():
    (cause, text), _ = verdict(*pod(RTX4090, 8.0, access=False))
    assert cause == "p2p_off" and "peer access is off between GPU 0 and GPU 1" in text


def test_a_healthy_nvlink_pair_passes_and_a_pair_of_a_class_without_a_peer_figure_is_noted_not_judged():
    (cause, _), report = verdict(*pod(H100, 372.2))
    assert cause is None and [f.ratio for f in report.figures if f.key == "peer_copy_gbps"] == [pytest.approx(0.99,
                                                                                                              abs=0.01)]
    pcie_h100 = replace(H100, name="NVIDIA H100 PCIe")
    (cause, _), report = verdict(*pod(pcie_h100, 30.0))
    pair = next(f for f in report.figures if f.key == "peer_copy_gbps")
    assert cause is None and pair.expected is None and not pair.short


def test_without_a_measurement_inactive_nvlinks_fail_naming_the_gpu():
    gpus = [H100, replace(H100, index=1)]
    links = peers.Links(nvlink={0: NvLinkState(0, 18, 18, 26.562), 1: NvLinkState(1, 17, 18, 26.562)})
    (cause, text), _ = verdict(gpus, None, links)
    assert cause == "nvlink_down"
    assert text.startswith("GPU 1 active NVLinks 17 is 0.94 of its class's 18 (floor 1); likely cause: nvlink down "
                           "(1 of its 18 NVLinks are inactive (nvidia-smi nvlink --status))")
