"""Does a pod's GPUs talk to each other like their class? Each GPU's NVLinks (`nvidia-smi nvlink --status`) and each
pair's peer copy (the measurement) against the class's NVLink or PCIe peer expectation (gpu.classes
`peer_copy_gbps`), with the likely cause of a shortfall, naming the pair: an NVLink down, peer access off, a narrow
or trained-down link, a power cap."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import final

from gpuharness.core.policy import PerformanceFloor
from gpuharness.gpu import classes, topology
from gpuharness.gpu.classes import GpuClass
from gpuharness.gpu.measurement import Measurement, PeerFigures
from gpuharness.gpu.nvidia_smi import GpuInfo
from gpuharness.gpu.performance import Figure, PerformanceReport
from gpuharness.gpu.topology import NvLinkState, Topology


@final
@dataclass(frozen=True, slots=True)
class Links:
    """How the probe saw the GPUs joined (None / empty: a probe before v6, or nvidia-smi could not say)."""

    topology: Topology | None = None
    nvlink: Mapping[int, NvLinkState] = field(default_factory=dict)


def links_of(sections: Mapping[str, Sequence[str]]) -> Links:
    """The links in a probe's `topology` and `nvlink` sections."""
    return Links(topology.parse_topology("\n".join(sections.get("topology", []))),
                 topology.parse_nvlink_status("\n".join(sections.get("nvlink", []))))


def _nvlink_figure(gpu: GpuInfo, known: GpuClass, links: Links, *, pairs_measured: bool) -> Figure | None:
    state = links.nvlink.get(gpu.index) if gpu.index is not None else None
    if known.nvlinks is None or state is None:
        return None
    return Figure(gpu.index, "nvlinks", "active NVLinks", state.active, known.nvlinks, "", 1.0, known.source("nvlinks"),
                  "nvlink_down", f"{state.inactive} of its {state.total} NVLinks are inactive (nvidia-smi nvlink "
                  "--status)", counts=not pairs_measured)


def _loaded(measurement: Measurement, gpu: GpuInfo) -> GpuInfo:
    device = measurement.device(gpu.index)
    return device.under_load if device is not None and device.under_load is not None else gpu


def pair_cause(peer: PeerFigures, ends: tuple[GpuInfo, GpuInfo], known: GpuClass, links: Links) -> tuple[str, str]:
    """The likely cause of a slow peer copy, and the fact behind it: the NVLinks first, then peer access, then
    either GPU's link and power limit."""
    pair = f"GPU {peer.src} and GPU {peer.dst}"
    joined = links.topology.between(peer.src, peer.dst) if links.topology is not None else None
    if known.nvlinks:
        down = [s for s in (links.nvlink.get(peer.src), links.nvlink.get(peer.dst)) if s is not None and s.inactive]
        if down or (joined is not None and not joined.startswith("NV")):
            facts = [f"GPU {s.gpu} has {s.active} of {s.total} NVLinks active" for s in down]
            facts += [f"topo -m joins {pair} by {joined}, not NVLink"] if joined and not joined.startswith("NV") else []
            return "nvlink_down", "; ".join(facts)
    if peer.access is False:
        return "p2p_off", f"peer access is off between {pair} (torch.cuda.can_device_access_peer)"
    for end in ends:
        loaded = end.pcie_width, end.pcie_gen
        if loaded[0] is not None and known.pcie_width is not None and loaded[0] < known.pcie_width:
            return "riser", f"GPU {end.index}'s link is x{loaded[0]} where the card has x{known.pcie_width}"
        if loaded[1] is not None and known.pcie_gen is not None and loaded[1] < known.pcie_gen:
            return "degraded_link", (f"GPU {end.index}'s link runs at Gen{loaded[1]} where the card is "
                                     f"Gen{known.pcie_gen}")
        limit, default = end.enforced_power_limit_w, end.power_default_limit_w
        if limit is not None and default and limit < 0.9 * default:
            return "power_cap", f"GPU {end.index}'s enforced power limit is {limit:g} W of its default {default:g} W"
    return "underperforming", f"links, peer access, link widths and power limits of {pair} look like their class"


def _pair_figure(peer: PeerFigures, gpus: Mapping[int, GpuInfo], links: Links, measurement: Measurement,
                 floor: PerformanceFloor) -> Figure | None:
    a, b = gpus.get(peer.src), gpus.get(peer.dst)
    known = classes.by_name(a.name or "") if a is not None else None
    expectation = classes.peer_copy_gbps(known) if known is not None else None
    if a is None or b is None or known is None:
        return None
    expected, source, over = expectation if expectation is not None else (None, None, "peer")
    figure = Figure(peer.src, "peer_copy_gbps", f"-> GPU {peer.dst} peer copy ({over})", peer.gbps, expected, " GB/s",
                    floor.throughput, source, timing=peer.timing, pair=(peer.src, peer.dst))
    if not figure.short:
        return figure
    cause, why = pair_cause(peer, (_loaded(measurement, a), _loaded(measurement, b)), known, links)
    return replace(figure, cause=cause, why=why)


def with_links(report: PerformanceReport, gpus: Sequence[GpuInfo], measurement: Measurement | None, links: Links,
               floor: PerformanceFloor) -> PerformanceReport:
    """The report with each GPU's NVLinks and each measured pair's peer copy judged (the NVLinks alone decide where
    no pair was measured; where pairs were, the pairs decide and name the cause)."""
    pairs = measurement.peers if measurement is not None and measurement.measured else ()
    by_index = {g.index: g for g in gpus if g.index is not None}
    figures: list[Figure] = []
    for gpu in gpus:
        known = classes.by_name(gpu.name or "")
        nvlink = _nvlink_figure(gpu, known, links, pairs_measured=bool(pairs)) if known is not None else None
        figures += [nvlink] if nvlink is not None else []
    notes = [f"GPU {p.src} -> GPU {p.dst} peer copy: {p.error}" for p in pairs if p.error]
    if measurement is not None:
        figures += [f for p in pairs if (f := _pair_figure(p, by_index, links, measurement, floor)) is not None]
    return replace(report, figures=report.figures + tuple(figures), notes=report.notes + tuple(notes))
