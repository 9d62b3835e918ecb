"""Does the GPU perform like its class? The judgement (gpu.performance) over real nvidia-smi facts and published
measurements, each with its source: the figure, the expectation from the class table and the likely cause."""

from __future__ import annotations

from dataclasses import replace

import pytest
from checkout import ROOT

from gpuharness.core.policy import PerformanceFloor
from gpuharness.gpu import classes
from gpuharness.gpu.classes import GPU_CLASSES, HOST_LINKS
from gpuharness.gpu.measurement import DeviceFigures, Measurement
from gpuharness.gpu.nvidia_smi import GpuInfo, parse_output
from gpuharness.gpu.performance import judge, message

SMI = ROOT / "fixtures" / "nvidia-smi"
FLOOR = PerformanceFloor()


def capture(name: str) -> GpuInfo:
    return parse_output((SMI / name).read_text()).gpus[0]


H100_AT_REST = capture("csv-header-units-h100-590.48.01-idle.txt")
H100_UNDER_LOAD = capture("csv-header-units-h100-590.48.01-load.txt")
#: github.com/NVIDIA/k8s-test-infra qx-t4.xml (AWS g4dn.xlarge, `nvidia-smi -q -x`): a T4 at x8 of x16 at rest
T4_AWS = GpuInfo(index=0, name="Tesla T4", memory_total_mib=15360, pcie_gen=3, pcie_gen_max=3, pcie_width=8,
                 pcie_width_max=16, power_limit_w=70.0, enforced_power_limit_w=70.0, power_default_limit_w=70.0,
                 power_max_limit_w=70.0)
#: github.com/stackhpc/ansible-slurm-appliance/pull/975 (`nvidia-smi -q -d power`): current limit 500 W, requested,
#: default and max 700 W (a 700 W card: an H100 SXM's limits, see the H100 capture)
POWER_CAPPED = replace(H100_AT_REST, power_limit_w=700.0, enforced_power_limit_w=500.0, power_default_limit_w=700.0,
                       power_max_limit_w=700.0)


def measured(device: DeviceFigures) -> Measurement:
    return Measurement("measured", "1 GPU(s) measured", (device,), "2.7.1+cu128", "12.8", 6.2)


def h100(**figures: object) -> DeviceFigures:
    """An H100 SXM as published: bf16 matmul 797.51 TFLOP/s at 8192^2 (github.com/zzc0721/torch-performance-test-data
    issue 79), a device copy of 2959.19 GB/s (github.com/NVIDIA/cuda-samples/issues/392), D2H 52.8 GB/s both ways
    (github.com/NVIDIA/nvbandwidth/issues/24; its H2D of 35.2 is 0.68 of a healthy Gen5 host's 52: short at 0.85);
    nvidia-smi at rest and under gpu-burn from the real captures."""
    base = DeviceFigures(cuda_index=0, name="NVIDIA H100 80GB HBM3", index=0, precision="bf16", h2d_gbps=52.8,
                         d2h_gbps=52.8, device_copy_gbps=2959.19, matmul_tflops=797.51, matmul_size=8192,
                         at_rest=H100_AT_REST, under_load=H100_UNDER_LOAD)
    return replace(base, **figures)  # type: ignore[arg-type]


def test_every_figure_of_the_class_table_cites_its_source():
    for gpu in GPU_CLASSES:
        for figure, value in (("pcie", gpu.pcie_gen), ("memory_bandwidth", gpu.memory_bandwidth_gbps),
                              ("dense_tflops", gpu.dense_tflops)):
            assert value is None or gpu.source(figure), f"{gpu.short}: {figure} has no source"
        for expected, source in (gpu.expected_tflops(), gpu.expected_memory_gbps()):
            assert expected is None or source, f"{gpu.short}: a healthy figure has no source"
    for link in HOST_LINKS.values():
        assert link.source.startswith("github.com/")


def test_a_class_without_a_published_width_has_no_host_copy_expectation():
    h100_pcie = classes.by_name("NVIDIA H100 PCIe")
    assert h100_pcie is not None and h100_pcie.pcie_width is None
    assert classes.host_copy_gbps(h100_pcie) is None


def test_an_h100_measured_as_published_performs_like_its_class():
    report = judge([H100_AT_REST], measured(h100()), FLOOR)
    assert report.shortfalls == ()
    cause, text = message(report)
    assert cause is None
    assert "GPU 0 dense matmul bf16 798 TFLOP/s is 1.00 of its class's 794 TFLOP/s (floor 0.85)" in text
    assert "host->device copy (pinned) 52.8 GB/s is 1.02 of its class's 52 GB/s" in text
    assert "PCIe link width (under load) x16 is 1.00 of its class's x16" in text


def test_a_shortfall_of_a_fifth_fails_and_a_healthy_card_passes_with_margin():
    report = judge([H100_AT_REST], measured(h100(matmul_tflops=0.8 * 794.5)), FLOOR)
    assert [f.key for f in report.shortfalls] == ["matmul_tflops"]
    matmul = next(f for f in judge([H100_AT_REST], measured(h100()), FLOOR).figures if f.key == "matmul_tflops")
    assert matmul.ratio is not None and matmul.ratio - FLOOR.throughput >= 0.1
    assert (matmul.expected, matmul.peak) == (794.5, 989)


def test_a_link_below_its_maximum_at_rest_is_not_failed_without_a_reading_under_load():
    report = judge([T4_AWS], None, FLOOR, not_measured="policy performance_floor.measure is off")
    assert report.shortfalls == ()
    assert any("link x8 of x16 at rest" in note for note in report.notes)
    assert "PCIe link width (negotiated maximum) x16" in message(report)[1]


def test_a_link_of_x4_under_load_is_a_riser():
    # club-3090's nvidia-smi report of a 3090: "x4 lanes negotiated (GPU max x16, Gen up to 4)"
    # (github.com/noonghunna/club-3090/issues/707), read here as the measurement's reading under load
    at_rest = GpuInfo(index=0, name="NVIDIA GeForce RTX 3090", pcie_gen=4, pcie_gen_max=4, pcie_width=4,
                      pcie_width_max=16)
    loaded = replace(at_rest, clocks_sm_mhz=1695, clocks_max_sm_mhz=2100)
    device = DeviceFigures(cuda_index=0, index=0, precision="bf16", under_load=loaded, at_rest=at_rest)
    cause, text = message(judge([at_rest], measured(device), FLOOR))
    assert cause == "riser"
    assert text.startswith("GPU 0 PCIe link width (under load) x4 is 0.25 of its class's x16 (floor 1); likely "
                           "cause: riser (the link is x4 where the card has x16)")


def test_a_link_trained_down_under_load_is_a_degraded_link_and_slows_the_copies():
    loaded = replace(H100_UNDER_LOAD, pcie_gen=1)
    report = judge([H100_AT_REST], measured(h100(under_load=loaded, h2d_gbps=3.9, d2h_gbps=4.1)), FLOOR)
    assert [f.key for f in report.shortfalls] == ["pcie_gen", "h2d_gbps", "d2h_gbps"]
    assert {f.cause for f in report.shortfalls} == {"degraded_link"}
    assert message(report)[1].startswith("GPU 0 PCIe generation (under load) Gen1 is 0.20 of its class's Gen5")


def test_copies_from_the_wrong_numa_node_on_a_full_link_are_a_degraded_link():
    # gearshifft PR #82: Gen3 x16 bandwidthTest 3.78 / 2.54 GB/s from the wrong NUMA node (12.15 / 12.89 on the
    # right one): the link itself is fine
    t4 = replace(T4_AWS, pcie_width=16)
    device = DeviceFigures(cuda_index=0, index=0, h2d_gbps=3.78, d2h_gbps=2.54, under_load=t4, at_rest=t4)
    report = judge([t4], measured(device), FLOOR)
    cause, text = message(report)
    assert cause == "degraded_link" and "copies are slow (a hypervisor, an IOMMU, or memory on the other NUMA" in text
    assert text.startswith("GPU 0 host->device copy (pinned) 3.78 GB/s is 0.31 of its class's 12.2 GB/s")


def test_a_power_cap_is_named_as_the_cause_of_a_slow_matmul():
    device = h100(matmul_tflops=395.0, at_rest=POWER_CAPPED)
    cause, text = message(judge([POWER_CAPPED], measured(device), FLOOR))
    assert cause == "power_cap"
    assert "dense matmul bf16 395 TFLOP/s is 0.50 of its class's 794 TFLOP/s (floor 0.85); likely cause: power cap " \
           "(the enforced power limit is 500 W of its default 700 W)" in text


def test_without_a_measurement_the_power_limit_is_judged_against_the_cards_default():
    assert message(judge([POWER_CAPPED], None, PerformanceFloor(throughput=0.7)))[0] is None  # 500 / 700 = 0.71
    cause, text = message(judge([POWER_CAPPED], None, FLOOR))
    assert cause == "power_cap" and "enforced power limit 500 W is 0.71 of its class's 700 W (floor 0.85)" in text


def test_with_a_measurement_a_power_cap_alone_does_not_fail():
    # the copies at the D2H figure, so that only the power limit is below 0.8
    device = h100(at_rest=POWER_CAPPED, h2d_gbps=52.8)
    report = judge([POWER_CAPPED], measured(device), PerformanceFloor(throughput=0.8))
    assert report.shortfalls == ()


def test_a_clock_held_low_under_load_is_throttling():
    loaded = replace(H100_UNDER_LOAD, clocks_sm_mhz=990, clock_event_reasons=0x40)
    cause, text = message(judge([H100_AT_REST], measured(h100(under_load=loaded, matmul_tflops=420.0)), FLOOR))
    assert cause == "throttling"
    assert "the SM clock is 990 of 1980 MHz under load (hw_thermal_slowdown)" in text


def test_a_gpu_busy_before_the_measurement_is_shared():
    at_rest = replace(H100_AT_REST, utilization_pct=97, memory_used_mib=40960)
    cause, text = message(judge([H100_AT_REST], measured(h100(at_rest=at_rest, matmul_tflops=300.0)), FLOOR))
    assert cause == "shared_gpu" and "97% busy with 40960 MiB in use" in text


def test_a_foreign_compute_process_makes_a_slow_gpu_shared():
    report = judge([H100_AT_REST], measured(h100(matmul_tflops=300.0)), FLOOR, foreign_processes=True)
    assert message(report)[0] == "shared_gpu"


def test_a_slow_gpu_with_nothing_visibly_wrong_is_underperforming():
    cause, text = message(judge([H100_AT_REST], measured(h100(device_copy_gbps=1100.0)), FLOOR))
    assert cause == "underperforming"
    assert "device memory copy 1100 GB/s is 0.37 of its class's 2959 GB/s" in text


def test_a_bf16_matmul_on_a_card_without_bf16_tensor_cores_has_no_expectation():
    device = DeviceFigures(cuda_index=0, index=0, precision="bf16", matmul_tflops=4.4, under_load=T4_AWS)
    report = judge([T4_AWS], measured(device), FLOOR)
    matmul = next(f for f in report.figures if f.key == "matmul_tflops")
    assert matmul.expected is None and not matmul.short


def test_a_gpu_outside_the_class_table_is_not_judged_and_says_so():
    report = judge([capture("csv-header-units-rtx4080s-595.71.05-idle.txt")], None, FLOOR)
    assert not report.judged
    assert report.notes == ("GPU 0 (NVIDIA GeForce RTX 4080 SUPER): no expectation: not in the GPU class table",)


@pytest.mark.parametrize(("status", "required", "cause"), [
    ("absent", False, None), ("absent", True, "no_measurement"), ("no_interpreter", True, "no_measurement"),
    ("deadline", False, "measurement_failed"), ("error", False, "measurement_failed"),
])
def test_a_measurement_without_figures_fails_only_where_the_gpu_broke_or_the_policy_requires_one(
        status, required, cause):
    measurement = Measurement(status, "torch is not importable by /venv/bin/python: ModuleNotFoundError")
    report = judge([H100_AT_REST], measurement, PerformanceFloor(require_measurement=required))
    assert message(report)[0] == cause
    if cause is None:
        assert any(note.startswith("not measured: torch is not importable") for note in report.notes)


def test_the_floor_comes_from_the_policy_with_defaults():
    assert PerformanceFloor.from_policy({}) == PerformanceFloor(0.85, 1.0, 1.0, False, False)
    policy = {"performance_floor": {"throughput": 0.75, "pcie_width": 0.5, "measure": True}}
    assert PerformanceFloor.from_policy(policy) == PerformanceFloor(0.75, 0.5, 1.0, True, False)
    half = judge([T4_AWS], measured(DeviceFigures(cuda_index=0, index=0, under_load=T4_AWS)),
                 PerformanceFloor.from_policy(policy))
    assert half.shortfalls == ()  # x8 of x16 is 0.5: accepted by a policy that accepts half the width


def test_the_report_is_evidence_json():
    data = judge([H100_AT_REST], measured(h100(matmul_tflops=395.0)), FLOOR).to_json()
    matmul = next(f for f in data["figures"] if f["figure"] == "matmul_tflops")
    assert matmul == {"gpu": 0, "figure": "matmul_tflops", "label": "dense matmul bf16", "measured": 395.0,
                      "expected": 794.5, "unit": "TFLOP/s", "ratio": 0.497, "floor": 0.85, "short": True,
                      "cause": "underperforming", "source": GPU_CLASSES[7].source("healthy_tflops"), "peak": 989,
                      "timing": None, "pair": None}
    assert data["shortfalls"] == ["matmul_tflops"]
