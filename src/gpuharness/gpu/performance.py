"""Does the GPU perform like its class? Pure judgements: each figure (the PCIe link, host<->device copies, device
memory copies, dense matmul, the power limit) against its class's expectation (gpu_classes) and the policy's
floor (`performance_floor`), with the likely cause of a shortfall: riser, degraded link, power cap, throttling or a
shared GPU."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final, final

from gpuharness.core.policy import PerformanceFloor
from gpuharness.core.secrets import clip
from gpuharness.gpu import classes
from gpuharness.gpu.classes import GpuClass
from gpuharness.gpu.measurement import DeviceFigures, Measurement
from gpuharness.gpu.nvidia_smi import HARMFUL_CLOCK_EVENTS, GpuInfo

#: What to do about each likely cause (one line, shown to users).
CAUSES: Final[Mapping[str, str]] = {
    "riser": "a riser or a slot narrower than the card: host<->device copies run at a fraction of the speed "
             "paid for; replace the instance (or ask the provider for a full-width slot)",
    "degraded_link": "the link trained down, or a hypervisor/IOMMU slows host<->device copies (a bad riser or "
                     "cable, a slot set to an older PCIe generation): replace the instance",
    "power_cap": "the card is power-capped below its default limit: ask the provider to lift the cap, or replace "
                 "the instance",
    "throttling": "the SM clock stays below its maximum under load (heat or power delivery): replace the instance",
    "shared_gpu": "another process uses this GPU (someone else's job, or a GPU shared by the hypervisor): stop it, "
                  "or replace the instance",
    "nvlink_down": "an NVLink between the GPUs is down (a failed link, NVSwitch or fabric manager): what runs across "
                   "them (collectives, tensor parallelism) crawls over PCIe; replace the instance",
    "p2p_off": "peer-to-peer access between the GPUs is off (IOMMU or ACS settings, or a hypervisor that does not pass "
               "it through): copies between GPUs are staged through host memory; ask the provider to enable P2P, or "
               "replace the instance",
    "underperforming": "no visible cause (link, power and clocks look like its class): a slow card or a GPU shared "
                       "through the hypervisor; replace the instance and compare hosts with `gpuharness gpus "
                       "--history`",
}
#: A GPU busier than this before the measurement starts is shared (the service at rest computes nothing; its
#: memory in use says nothing: a loaded model holds memory too).
BUSY_AT_REST_PCT: Final = 10
#: An SM clock under load below this fraction of its maximum is throttled.
CLOCK_FRACTION: Final = 0.8


@final
@dataclass(frozen=True, slots=True)
class Figure:
    """One figure of one GPU against its expectation; `floor` is the policy's fraction, `cause` the likely cause
    when it falls short."""

    gpu: int | None
    key: str  # pcie_width, pcie_gen, h2d_gbps, d2h_gbps, device_copy_gbps, matmul_tflops, power_limit_w
    label: str
    measured: float | None
    expected: float | None
    unit: str
    floor: float
    source: str | None = None
    cause: str | None = None
    why: str = ""
    counts: bool = True  # False: recorded as evidence, not judged (a power limit where throughput was measured)
    peak: float | None = None  # the class's datasheet figure, beside the healthy one it is judged against
    timing: str | None = None  # how the measurement timed it
    pair: tuple[int, int] | None = None  # the GPU pair a peer copy joins (gpu: its source)

    @property
    def ratio(self) -> float | None:
        if self.measured is None or not self.expected:
            return None
        return self.measured / self.expected

    @property
    def short(self) -> bool:
        ratio = self.ratio
        return self.counts and ratio is not None and ratio < self.floor - 1e-9

    def text(self) -> str:
        """"GPU 0 dense matmul bf16 52.1 TFLOP/s is 0.32 of its class's 165 TFLOP/s (floor 0.6)"."""
        head = f"GPU {self.gpu} {self.label} {self.value(self.measured)}"
        if self.expected is None or self.ratio is None:
            return head + " (no expectation for its class)"
        return f"{head} is {self.ratio:.2f} of its class's {self.value(self.expected)} (floor {self.floor:g})"

    def value(self, number: float | None) -> str:
        if number is None:
            return "unknown"
        if self.key == "pcie_width":
            return f"x{number:.0f}"
        if self.key == "pcie_gen":
            return f"Gen{number:.0f}"
        return f"{_fmt(number)}{self.unit}"

    def to_json(self) -> dict[str, Any]:
        return {"gpu": self.gpu, "figure": self.key, "label": self.label, "measured": self.measured,
                "expected": self.expected, "unit": self.unit.strip(), "ratio": _round(self.ratio),
                "floor": self.floor, "short": self.short, "cause": self.cause if self.short else None,
                "source": self.source, "peak": self.peak, "timing": self.timing,
                "pair": list(self.pair) if self.pair is not None else None}


@final
@dataclass(frozen=True, slots=True)
class PerformanceReport:
    """Every figure of every GPU, the notes (what could not be judged, and why), and the failure that decides."""

    figures: tuple[Figure, ...]
    notes: tuple[str, ...] = ()
    failure: tuple[str, str] | None = None  # (cause, message) that fails the check without a figure

    @property
    def shortfalls(self) -> tuple[Figure, ...]:
        return tuple(f for f in self.figures if f.short)

    @property
    def judged(self) -> bool:
        return any(f.counts and f.ratio is not None for f in self.figures) or self.failure is not None

    def to_json(self) -> dict[str, Any]:
        return {"figures": [f.to_json() for f in self.figures], "notes": list(self.notes),
                "failure": list(self.failure) if self.failure else None,
                "shortfalls": [f.key for f in self.shortfalls]}


def _fmt(value: float | None) -> str:
    if value is None:
        return "unknown"
    return f"{value:.0f}" if abs(value) >= 100 else f"{value:.3g}"


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _link_figures(gpu: GpuInfo, known: GpuClass, loaded: GpuInfo | None, floor: PerformanceFloor) -> list[Figure]:
    """The link's width and generation: under load where the measurement read them, else the maximum the card
    negotiated (a link below its maximum at rest is power saving, not a fault)."""
    when = "under load" if loaded is not None and loaded.pcie_width is not None else "negotiated maximum"
    width = loaded.pcie_width if when == "under load" and loaded is not None else gpu.pcie_width_max
    gen = loaded.pcie_gen if when == "under load" and loaded is not None else gpu.pcie_gen_max
    source = known.source("pcie")
    figures = [
        Figure(gpu.index, "pcie_width", f"PCIe link width ({when})", width, known.pcie_width, "",
               floor.pcie_width, source, "riser",
               f"the link is x{width} where the card has x{known.pcie_width}"),
        Figure(gpu.index, "pcie_gen", f"PCIe generation ({when})", gen, known.pcie_gen, "",
               floor.pcie_gen, source, "degraded_link",
               f"the link runs at Gen{gen} where the card is Gen{known.pcie_gen}"
               + (" (the host's slot supports no more)" if when == "negotiated maximum" else "")),
    ]
    return figures


def _power_figure(gpu: GpuInfo, floor: PerformanceFloor, *, measured: bool) -> Figure:
    limit = gpu.enforced_power_limit_w if gpu.enforced_power_limit_w is not None else gpu.power_limit_w
    default = gpu.power_default_limit_w if gpu.power_default_limit_w is not None else gpu.power_max_limit_w
    return Figure(gpu.index, "power_limit_w", "enforced power limit", limit, default, " W", floor.throughput,
                  "the card's own power.default_limit (nvidia-smi)", "power_cap",
                  f"the enforced power limit is {_fmt(limit)} W of its default {_fmt(default)} W",
                  counts=not measured)


def likely_cause(gpu: GpuInfo, known: GpuClass, device: DeviceFigures, *, copy: bool,
                 foreign: bool) -> tuple[str, str]:
    """The likely cause of a figure below its floor, and the fact behind it: for a copy the link first, for
    compute the power limit, the clock under load and other users of the GPU."""
    loaded, at_rest = device.under_load, device.at_rest
    width = loaded.pcie_width if loaded is not None and loaded.pcie_width is not None else gpu.pcie_width
    gen = loaded.pcie_gen if loaded is not None and loaded.pcie_gen is not None else gpu.pcie_gen
    if copy and width is not None and known.pcie_width is not None and width < known.pcie_width:
        return "riser", f"the link is x{width} where the card has x{known.pcie_width}"
    if copy and gen is not None and known.pcie_gen is not None and gen < known.pcie_gen:
        return "degraded_link", f"the link runs at Gen{gen} where the card is Gen{known.pcie_gen}"
    limit = gpu.enforced_power_limit_w if gpu.enforced_power_limit_w is not None else gpu.power_limit_w
    default = gpu.power_default_limit_w
    if not copy and limit is not None and default and limit < 0.9 * default:
        return "power_cap", f"the enforced power limit is {_fmt(limit)} W of its default {_fmt(default)} W"
    clock = loaded.clocks_sm_mhz if loaded is not None else None
    top = (loaded.clocks_max_sm_mhz if loaded is not None else None) or gpu.clocks_max_sm_mhz
    events = sorted(set(loaded.clock_event_names) & (HARMFUL_CLOCK_EVENTS | {"sw_power_cap"})) if loaded else []
    if not copy and clock is not None and top and clock < CLOCK_FRACTION * top:
        reasons = f" ({', '.join(events)})" if events else ""
        return "throttling", f"the SM clock is {clock} of {top} MHz under load{reasons}"
    busy = at_rest.utilization_pct if at_rest is not None else None
    used = at_rest.memory_used_mib if at_rest is not None else None
    if foreign or (busy is not None and busy > BUSY_AT_REST_PCT):
        return "shared_gpu", (f"before the measurement the GPU was {busy}% busy with {used} MiB in use"
                              + ("; compute processes that are not the service's use it" if foreign else ""))
    if copy:
        return "degraded_link", "the link trained fully, yet copies are slow (a hypervisor, an IOMMU, or memory " \
                                "on the other NUMA node)"
    return "underperforming", "link, power limit and clocks look like its class"


def _measured_figures(gpu: GpuInfo, known: GpuClass, device: DeviceFigures, floor: PerformanceFloor,
                      foreign: bool) -> list[Figure]:
    """The measured figures against what a healthy card of the class reaches (the datasheet peak beside it)."""
    link = classes.host_copy_gbps(known)
    copy_expected, copy_source = link if link is not None else (None, None)
    tflops, tflops_source = known.expected_tflops()
    memory, memory_source = known.expected_memory_gbps()
    figures: list[Figure] = []
    rows: Sequence[tuple[str, str, float | None, float | None, str, str | None, bool, float | None]] = (
        ("matmul_tflops", f"dense matmul {device.precision or ''}".strip(), device.matmul_tflops,
         tflops, " TFLOP/s", tflops_source, False, known.dense_tflops),
        ("device_copy_gbps", "device memory copy", device.device_copy_gbps, memory, " GB/s", memory_source, False,
         known.memory_bandwidth_gbps),
        ("h2d_gbps", "host->device copy (pinned)", device.h2d_gbps, copy_expected, " GB/s", copy_source, True, None),
        ("d2h_gbps", "device->host copy (pinned)", device.d2h_gbps, copy_expected, " GB/s", copy_source, True, None),
    )
    for key, label, measured, expected, unit, source, copy, peak in rows:
        if key == "matmul_tflops" and device.precision == "bf16" and not known.bf16:
            expected = None  # no bf16 tensor cores: the class's figure is for fp16
        figure = Figure(gpu.index, key, label, measured, expected, unit, floor.throughput, source, peak=peak,
                        timing=device.timing.get(key))
        if figure.short:
            cause, why = likely_cause(gpu, known, device, copy=copy, foreign=foreign)
            figure = replace(figure, cause=cause, why=why)
        figures.append(figure)
    return figures


def judge(gpus: Sequence[GpuInfo], measurement: Measurement | None, floor: PerformanceFloor, *,
          foreign_processes: bool = False, not_measured: str | None = None) -> PerformanceReport:
    """Every GPU's figures against its class. `measurement` None: not taken (`not_measured` says why); a
    measurement without figures fails only where it broke on the GPU, or where the policy requires one."""
    figures: list[Figure] = []
    notes: list[str] = [not_measured] if not_measured else []
    failure = _measurement_failure(measurement, floor, notes)
    measured = measurement is not None and measurement.measured
    for gpu in gpus:
        known = classes.by_name(gpu.name or "")
        device = measurement.device(gpu.index) if measured and measurement is not None else None
        if known is None:
            notes.append(f"GPU {gpu.index} ({gpu.name}): no expectation: not in the GPU class table")
            continue
        figures += _link_figures(gpu, known, device.under_load if device is not None else None, floor)
        if (device is None or device.under_load is None) and gpu.pcie_width is not None and \
                gpu.pcie_width_max is not None and gpu.pcie_width < gpu.pcie_width_max:
            notes.append(f"GPU {gpu.index}: link x{gpu.pcie_width} of x{gpu.pcie_width_max} at rest (may be power "
                         "saving: judged under load, where measured)")
        if device is not None:
            figures += _measured_figures(gpu, known, device, floor, foreign_processes)
            notes += [f"GPU {gpu.index} {step}: {error}" for step, error in device.errors.items()]
        figures.append(_power_figure(gpu, floor, measured=device is not None and device.matmul_tflops is not None))
        unknown = [f.key for f in figures if f.gpu == gpu.index and f.expected is None]
        if unknown:
            notes.append(f"GPU {gpu.index} ({gpu.name}): no expectation for {', '.join(unknown)} in the class table")
    return PerformanceReport(tuple(figures), tuple(notes), failure)


def _measurement_failure(measurement: Measurement | None, floor: PerformanceFloor,
                         notes: list[str]) -> tuple[str, str] | None:
    if measurement is None or measurement.measured:
        return None
    if measurement.status in ("deadline", "error"):
        return "measurement_failed", (f"the GPU measurement failed: {measurement.reason}; a GPU that hangs or "
                                      "errors under a short matmul is not fit to run jobs: replace the instance")
    if floor.require_measurement:
        return "no_measurement", (f"the GPU could not be measured: {measurement.reason}; policy "
                                  "performance_floor.require_measurement is on: install torch in the service's "
                                  "environment, or turn require_measurement off")
    notes.append(f"not measured: {measurement.reason} (performance_floor.require_measurement is off)")
    return None


def message(report: PerformanceReport) -> tuple[str | None, str]:
    """(cause, one line) of the report: the first shortfall (or failure) names the figure, the expectation and
    the likely cause with its remedy; otherwise what was judged."""
    if report.failure is not None:
        return report.failure
    shortfalls = report.shortfalls
    if shortfalls:
        first = shortfalls[0]
        cause = first.cause or "underperforming"
        others = "; also " + "; ".join(f.text() for f in shortfalls[1:]) if len(shortfalls) > 1 else ""
        return cause, (f"{first.text()}; likely cause: {cause.replace('_', ' ')} ({first.why}): {CAUSES[cause]}"
                       f"{others}")
    judged = [f.text() for f in report.figures if f.counts and f.ratio is not None]
    notes = f" ({'; '.join(report.notes)})" if report.notes else ""
    return None, "; ".join(judged) + notes if judged else "nothing to judge" + notes


def evidence(report: PerformanceReport, measurement: Measurement | None, measured_at: str | None) -> dict[str, Any]:
    """What a deployment's health record keeps of the judgement (`gpu.performance`): every figure with its
    expectation, the measurement's outcome, and when it was taken; `gpuharness gpus --history` reads it."""
    cause, line = message(report)
    return {"measured_at": measured_at, "cause": cause, "message": clip(line, 500), **report.to_json(),
            "measurement": None if measurement is None else {
                "status": measurement.status, "reason": measurement.reason,
                "torch_version": measurement.torch_version, "cuda_version": measurement.cuda_version,
                "elapsed_s": measurement.elapsed_s}}
