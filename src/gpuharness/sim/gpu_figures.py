"""What a simulated GPU performs: figures a healthy card of its class reaches (from the class table and the
fractions public measurements reach), and what nvidia-smi shows of its link, power and clocks at rest and under
load, with the faults a rented card has: a link trained down, a riser, a power cap, a slow or shared GPU."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Final, final

from gpuharness.gpu import classes
from gpuharness.gpu.classes import HOST_LINKS
from gpuharness.sim.catalog import DEFAULT_GPU

#: A healthy simulated card reaches its class's healthy matmul and device-copy figures (gpu.classes `expected_*`:
#: published or real measurements, or the datasheet by a sourced factor), and pinned copies 0.96 of the host-link
#: figure (its class's own, where one was measured).
HEALTHY_HOST_COPY: Final = 0.96
#: Per-lane PCIe throughput (GB/s) by generation, as the PCIe specifications give it (2.5, 5, 8, 16, 32 GT/s with
#: their encodings): how a link trained down to an older generation slows host<->device copies.
LANE_GBPS: Final = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938}
#: SM clocks of real captures (github.com/utkuozdemir/nvidia_gpu_exporter internal/captures): at rest 210 MHz on a
#: GeForce card (RTX 4080 SUPER, P8) and 345 MHz on a data-center card (H100, H200); the maximum is the class's
#: (`sm_max_mhz`), else that of the H100 and H200 captures. A GeForce card also idles its link at Gen1 (same RTX 4080
#: SUPER capture).
DEFAULT_MAX_SM_MHZ: Final = 1980


@final
@dataclass(frozen=True, slots=True)
class GpuBehaviour:
    """How a simulated card departs from a healthy one of its class."""

    link_gen_under_load: int | None = None  # None: the class's generation (trained down: 1)
    link_width_under_load: int | None = None  # None: the class's width (on a riser: 4)
    power_limit_fraction: float = 1.0  # enforced power limit / default (power-capped: 0.4)
    busy_at_rest_pct: int = 0  # another tenant's work before ours starts (a shared GPU: 97)
    speed: float = 1.0  # compute and memory speed against a healthy card (slow or shared: 0.4)
    only_gpu: int | None = None  # the link faults above hit this GPU of the pod alone (None: every GPU)
    nvlink_down: tuple[int, ...] = ()  # GPUs whose NVLinks are all inactive (their pairs fall back to PCIe)
    p2p_off: bool = False  # peer access off between every pair (copies staged through the host)


def on_gpu(behaviour: GpuBehaviour, index: int) -> GpuBehaviour:
    """How GPU `index` of the pod departs from a healthy card: the link faults only where they hit it."""
    if behaviour.only_gpu is None or behaviour.only_gpu == index:
        return behaviour
    return replace(behaviour, link_gen_under_load=None, link_width_under_load=None)


@final
@dataclass(frozen=True, slots=True)
class SimFigures:
    """What the simulated card's torch reaches, and what its nvidia-smi prints of link, power and clocks."""

    matmul_tflops: float
    device_copy_gbps: float
    h2d_gbps: float
    d2h_gbps: float
    link_gen_max: int
    link_width_max: int
    link_gen_at_rest: int
    link_gen_under_load: int
    link_width_under_load: int
    power_default_w: float
    power_enforced_w: float
    power_max_w: float
    sm_max_mhz: int
    sm_at_rest_mhz: int
    sm_under_load_mhz: int
    busy_at_rest_pct: int


def figures(gpu: str, behaviour: GpuBehaviour = GpuBehaviour()) -> SimFigures:
    """The figures of a simulated `gpu` (an nvidia-smi name; an unknown one behaves as the catalog's default card,
    and a figure its class lacks is the default card's)."""
    known = classes.by_name(gpu) or DEFAULT_GPU
    fallback = DEFAULT_GPU
    tflops = known.expected_tflops()[0] or fallback.expected_tflops()[0]
    memory_gbps = known.expected_memory_gbps()[0] or fallback.expected_memory_gbps()[0]
    assert fallback.power_w is not None and tflops is not None and memory_gbps is not None
    gen, width = known.pcie_gen or 4, known.pcie_width or 16
    gen_load = behaviour.link_gen_under_load or gen
    width_load = behaviour.link_width_under_load or width
    measured_link = classes.host_copy_gbps(known)
    link = measured_link[0] if measured_link is not None else HOST_LINKS.get(gen, HOST_LINKS[4]).copy_gbps * width / 16
    link_share = LANE_GBPS[gen_load] / LANE_GBPS[gen] * width_load / width
    cap = behaviour.power_limit_fraction
    # a power cap lowers the SM clock about in proportion; memory-bound copies suffer less than compute
    compute = behaviour.speed * min(1.0, 0.1 + 0.9 * cap)
    memory = behaviour.speed * min(1.0, 0.5 + 0.5 * cap)
    sm_max = known.sm_max_mhz or DEFAULT_MAX_SM_MHZ
    power = float(known.power_w or fallback.power_w)
    return SimFigures(
        matmul_tflops=round(tflops * compute, 1),
        device_copy_gbps=round(memory_gbps * memory, 1),
        h2d_gbps=round(link * HEALTHY_HOST_COPY * link_share, 2),
        d2h_gbps=round(link * HEALTHY_HOST_COPY * link_share, 2),
        link_gen_max=gen, link_width_max=width, link_gen_at_rest=gen if known.ecc else 1,
        link_gen_under_load=gen_load, link_width_under_load=width_load, power_default_w=power,
        power_enforced_w=round(power * cap, 2), power_max_w=power, sm_max_mhz=sm_max,
        sm_at_rest_mhz=345 if known.ecc else 210, sm_under_load_mhz=int(sm_max * min(1.0, 0.15 + cap)),
        busy_at_rest_pct=behaviour.busy_at_rest_pct)


def smi_values(sim: SimFigures, *, under_load: bool) -> dict[str, str]:
    """The performance fields as `nvidia-smi --format=csv,noheader,nounits` prints them, at rest or under load."""
    return {
        "pcie.link.gen.current": str(sim.link_gen_under_load if under_load else sim.link_gen_at_rest),
        "pcie.link.width.current": str(sim.link_width_under_load if under_load else sim.link_width_max),
        "pcie.link.gen.max": str(sim.link_gen_max), "pcie.link.width.max": str(sim.link_width_max),
        "power.limit": f"{sim.power_default_w:.2f}", "enforced.power.limit": f"{sim.power_enforced_w:.2f}",
        "power.default_limit": f"{sim.power_default_w:.2f}", "power.max_limit": f"{sim.power_max_w:.2f}",
        "clocks.sm": str(sim.sm_under_load_mhz if under_load else sim.sm_at_rest_mhz),
        "clocks.max.sm": str(sim.sm_max_mhz),
        "power.draw": f"{(sim.power_enforced_w * 0.95 if under_load else sim.power_default_w * 0.08):.2f}",
        "utilization.gpu": str(100 if under_load else sim.busy_at_rest_pct),
    }


def torch_files(*, gpu: str, devices: int, total_mib: int, used_mib: int, smoke_error: float, sim: SimFigures,
                busy_dir: Path, per_device: list[SimFigures] | None = None,
                peers: dict[str, dict[str, object]] | None = None) -> dict[str, str]:
    """The torch stand-in (sim/torch_package.py) for a virtual environment's site-packages, configured as this
    card: path in site-packages -> text. What the smoke test and the measurement meet there."""
    known = classes.by_name(gpu)
    config = {"torch": "2.7.1+cu128", "cuda": "12.8", "devices": devices, "name": gpu, "total_mib": total_mib,
              "used_mib": used_mib, "smoke_error": smoke_error, "bf16": known.bf16 if known is not None else True,
              "busy_dir": str(busy_dir), "figures": asdict(sim),
              "per_device": [asdict(card) for card in per_device or ()], "peers": peers or {}}
    return {"torch/__init__.py": (Path(__file__).parent / "torch_package.py").read_text(),
            "torch/_gpuharness_sim.json": json.dumps(config, indent=1) + "\n"}
