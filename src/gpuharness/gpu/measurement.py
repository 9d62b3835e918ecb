"""The GPU measurement: a short Python program run by the service's own interpreter (the one the CUDA smoke test
uses), with nothing but that runtime's torch. Per GPU it measures pinned host->device and device->host copies,
a device memory copy and a dense matmul in the workflow's precision, and reads the PCIe link, SM clock and power
again with nvidia-smi while the matmuls run. One exec, under its own deadline; a host without torch or without a
GPU answers in one line why it cannot measure."""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal, final

from gpuharness.core.json_text import loads_outside
from gpuharness.gpu import nvidia_smi
from gpuharness.gpu.nvidia_smi import GpuInfo
from gpuharness.remote import ExecResult, Remote
from gpuharness.remote.lines import lines_of

MEASUREMENT_VERSION: Final = 2
MARK: Final = "@@gpuharness measure"
EXIT_MARK: Final = "@@gpuharness measure-exit"
#: The measurement's own deadline when the policy names none (seconds); importing torch alone can take several.
DEFAULT_DEADLINE_S: Final = 60

#: What the program asks nvidia-smi about one GPU, at rest and under the matmul load (the older drivers' spelling
#: of the clock reasons is the fallback).
LOAD_FIELDS: Final[tuple[str, ...]] = (
    "index", "pci.bus_id", "pcie.link.gen.current", "pcie.link.width.current", "pcie.link.gen.max",
    "pcie.link.width.max", "clocks.sm", "clocks.max.sm", "power.draw", "enforced.power.limit",
    "power.default_limit", "utilization.gpu", "memory.used", "memory.total", "clocks_event_reasons.active",
)

#: Run by the service's interpreter. Every record is one line: MARK then JSON with a "kind". Buffers are far
#: larger than any L2 cache (a copy that fits in L2 reports several times the DRAM bandwidth); pinned buffers are
#: allocated once, up front (pinning on the fly halves the copy rate); a device copy moves its bytes twice (read +
#: write), as the datasheet's bandwidth counts them. Each figure is timed as a careful measurement times it: untimed
#: warm-ups, then each run timed alone with CUDA events, and the median of the runs (a loop timed as a whole reads
#: the sustained, power-managed rate: 683 of 784 TFLOP/s on the real H200, docs/gpu-calibration.md). How each
#: was timed goes beside it ("timing"), with the GPU seconds it took ("gpu_s": at most about 5 per GPU).
PROGRAM: Final = r'''
import json, os, subprocess, sys, threading, time
os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")  # CUDA numbers the GPUs as nvidia-smi does
DEADLINE = float(os.environ.get("GH_MEASURE_S") or 60)
PRECISION = os.environ.get("GH_PRECISION") or ""
FIELDS = os.environ.get("GH_FIELDS", "")
MIB = 1 << 20
#: GPU seconds per GPU: each step's share of the timed runs, and the most the load under nvidia-smi's reading takes
SHARE_S = {"copy": 0.4, "matmul": 1.5, "peer": 0.1}
LOAD_S = 1.5
STARTED = time.monotonic()
phase = ["import torch"]


def say(kind, **fields):
    fields["kind"] = kind
    sys.stdout.write("@@gpuharness measure " + json.dumps(fields, sort_keys=True) + "\n")
    sys.stdout.flush()


def enter(name):
    phase[0] = name
    say("phase", phase=name, at_s=round(time.monotonic() - STARTED, 3))


def watchdog():
    time.sleep(DEADLINE)
    say("deadline", phase=phase[0], after_s=DEADLINE)
    os._exit(3)


threading.Thread(target=watchdog, daemon=True).start()
enter("import torch")
try:
    import torch
except Exception as exc:
    say("absent", error="%s: %s" % (type(exc).__name__, exc))
    sys.exit(0)
versions = {"torch": str(getattr(torch, "__version__", "?")),
            "cuda": str(getattr(getattr(torch, "version", None), "cuda", None))}
enter("cuda init")
if not torch.cuda.is_available():
    say("no_cuda", devices=int(torch.cuda.device_count()), **versions)
    sys.exit(0)
count = torch.cuda.device_count()
say("start", devices=count, deadline_s=DEADLINE, **versions)


def smi(target):
    wanted = FIELDS.split(",")
    for fields in (wanted, [f.replace("clocks_event_reasons", "clocks_throttle_reasons") for f in wanted]):
        try:
            done = subprocess.run(["nvidia-smi", "--query-gpu=" + ",".join(fields), "--format=csv,noheader,nounits",
                                   "-i", str(target)], capture_output=True, text=True, timeout=15)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return {"error": "%s: %s" % (type(exc).__name__, exc)}
        text = (done.stdout + done.stderr).strip()
        if "is not a valid field" in text:
            continue
        cells = [cell.strip() for cell in text.splitlines()[0].split(",")] if text else []
        if done.returncode != 0 or len(cells) != len(fields):
            return {"error": text[:200] or "nvidia-smi exited with status %d" % done.returncode}
        return dict(zip(fields, cells))
    return {"error": "nvidia-smi knows none of the fields"}


def target_of(index, props):
    bus = getattr(props, "pci_bus_id", None)
    if bus is not None:
        return "%08X:%02X:%02X.0" % (getattr(props, "pci_domain_id", 0), bus, getattr(props, "pci_device_id", 0))
    visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    return visible[index] if index < len(visible) else index


def median(values):
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def timed(result, key, work, warmups, runs, share):
    """Seconds of one run of `work`: the median of up to `runs` runs, each timed alone with CUDA events, after
    `warmups` untimed ones; fewer runs (never under 3) where they would pass `share` seconds of GPU time. How it was
    timed goes beside the figure."""
    for _ in range(warmups):
        work()
    torch.cuda.synchronize()
    times = []
    while len(times) < runs and (len(times) < 3 or sum(times) < share):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        work()
        end.record()
        end.synchronize()
        times.append(max(start.elapsed_time(end) / 1000.0, 1e-9))
    seconds = median(times)
    result["gpu_s"] += sum(times) + warmups * seconds
    result["timing"][key] = "cuda-events median of %d after %d warm-ups" % (len(times), warmups)
    return seconds


def copies(result, device, free):
    size = min(256 * MIB, free // 8)
    enter("host-to-device copy")
    try:
        host = torch.empty(size, dtype=torch.uint8, pin_memory=True)
        on_device = torch.empty(size, dtype=torch.uint8, device=device)
        result["h2d_gbps"] = round(size / timed(result, "h2d_gbps", lambda: on_device.copy_(host, non_blocking=True),
                                                2, 10, SHARE_S["copy"]) / 1e9, 2)
        enter("device-to-host copy")
        result["d2h_gbps"] = round(size / timed(result, "d2h_gbps", lambda: host.copy_(on_device, non_blocking=True),
                                                2, 10, SHARE_S["copy"]) / 1e9, 2)
        del host, on_device
    except Exception as exc:
        result["errors"]["host_copy"] = "%s: %s" % (type(exc).__name__, str(exc).splitlines()[0][:200])
    size = min(512 * MIB, free // 6)
    enter("device memory copy")
    try:
        source = torch.empty(size, dtype=torch.uint8, device=device)
        target = torch.empty(size, dtype=torch.uint8, device=device)
        result["device_copy_gbps"] = round(2 * size / timed(result, "device_copy_gbps", lambda: target.copy_(source),
                                                            3, 20, SHARE_S["copy"]) / 1e9, 1)
        del source, target
    except Exception as exc:
        result["errors"]["device_copy"] = "%s: %s" % (type(exc).__name__, str(exc).splitlines()[0][:200])
    torch.cuda.empty_cache()


def under_load(result, device, target, work):
    """nvidia-smi's reading while `work` keeps the GPU busy (not timed for a figure): at least 0.3 s of load, at
    most LOAD_S, in chunks of about 20 ms so that the GPU never queues more than that."""
    reading = {}
    reader = threading.Thread(target=lambda: reading.update(smi(target)), daemon=True)
    began = time.monotonic()
    reader.start()
    while time.monotonic() - began < 0.3 or (reader.is_alive() and time.monotonic() - began < LOAD_S):
        work()
        torch.cuda.synchronize(device)
    result["gpu_s"] += time.monotonic() - began
    reader.join(15)
    return reading if not reader.is_alive() else {"error": "nvidia-smi did not answer"}


def matmul(result, device, free, target):
    if PRECISION in ("fp16", "bf16"):
        name = PRECISION
    else:  # bf16 tensor cores from Ampere (8.x) on; is_bf16_supported() also says yes where it is only emulated
        name = "bf16" if torch.cuda.get_device_properties(device).major >= 8 else "fp16"
    dtype = torch.bfloat16 if name == "bf16" else torch.float16
    n = 8192 if free > 2048 * MIB else 4096
    result.update(precision=name, matmul_size=n)
    enter("matmul")
    try:
        a = torch.randn(n, n, device=device, dtype=dtype)
        b = torch.randn(n, n, device=device, dtype=dtype)
        c = torch.empty(n, n, device=device, dtype=dtype)
        seconds = timed(result, "matmul_tflops", lambda: torch.matmul(a, b, out=c), 5, 25, SHARE_S["matmul"])
        result["matmul_tflops"] = round(2.0 * n ** 3 / seconds / 1e12, 1)
        chunk = max(1, min(64, int(0.02 / seconds)))
        result["under_load"] = under_load(result, device, target,
                                          lambda: [torch.matmul(a, b, out=c) for _ in range(chunk)])
        del a, b, c
    except Exception as exc:
        result["errors"]["matmul"] = "%s: %s" % (type(exc).__name__, str(exc).splitlines()[0][:200])
    torch.cuda.empty_cache()


def peers(count):
    """A copy between every pair of GPUs, one way (the lower index to the higher; torch copies on the source
    device's stream), with whether peer access is on: over NVLink or PCIe peer-to-peer where it is, staged through
    the host where it is not."""
    for src in range(count):
        for dst in range(src + 1, count):
            enter("peer copy %d->%d" % (src, dst))
            record = {"src": src, "dst": dst, "timing": {}, "gpu_s": 0.0, "errors": {}}
            try:
                record["access"] = bool(torch.cuda.can_device_access_peer(src, dst))
                torch.cuda.set_device(src)
                free = min(torch.cuda.mem_get_info(src)[0], torch.cuda.mem_get_info(dst)[0])
                size = min(128 * MIB, free // 8)
                a = torch.empty(size, dtype=torch.uint8, device=torch.device("cuda", src))
                b = torch.empty(size, dtype=torch.uint8, device=torch.device("cuda", dst))
                record["gbps"] = round(size / timed(record, "gbps", lambda: b.copy_(a, non_blocking=True), 2, 10,
                                                    SHARE_S["peer"]) / 1e9, 2)
                del a, b
            except Exception as exc:
                record["errors"]["peer_copy"] = "%s: %s" % (type(exc).__name__, str(exc).splitlines()[0][:200])
            record["gpu_s"] = round(record["gpu_s"], 3)
            say("peer", **record)


for index in range(count):
    enter("device %d" % index)
    device = torch.device("cuda", index)
    torch.cuda.set_device(device)
    props = torch.cuda.get_device_properties(index)
    free, total = torch.cuda.mem_get_info(device)
    target = target_of(index, props)
    result = {"cuda_index": index, "name": props.name, "free_mib": free // MIB, "total_mib": total // MIB,
              "errors": {}, "at_rest": smi(target), "timing": {}, "gpu_s": 0.0}
    copies(result, device, free)
    matmul(result, device, free, target)
    result["gpu_s"] = round(result["gpu_s"], 3)
    say("device", **result)
peers(count)
say("done", elapsed_s=round(time.monotonic() - STARTED, 2))
'''

@final
@dataclass(frozen=True, slots=True)
class PeerFigures:
    """A copy from GPU `src` to GPU `dst` (CUDA's numbers, nvidia-smi's where CUDA_DEVICE_ORDER is PCI_BUS_ID, as the
    program sets it): whether peer access is on, the rate one way, how it was timed."""

    src: int
    dst: int
    access: bool | None = None
    gbps: float | None = None
    timing: str | None = None
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"src": self.src, "dst": self.dst, "access": self.access, "gbps": self.gbps, "timing": self.timing,
                "error": self.error}


MeasurementStatus = Literal["measured", "absent", "no_cuda", "no_interpreter", "deadline", "error"]


@final
@dataclass(frozen=True, slots=True)
class DeviceFigures:
    """What was measured on one GPU; a figure is None where its step failed (`errors` says why)."""

    cuda_index: int
    name: str | None = None
    index: int | None = None  # nvidia-smi's index, where nvidia-smi answered
    precision: str | None = None
    h2d_gbps: float | None = None
    d2h_gbps: float | None = None
    device_copy_gbps: float | None = None
    matmul_tflops: float | None = None
    matmul_size: int | None = None
    free_mib: int | None = None
    total_mib: int | None = None
    at_rest: GpuInfo | None = None
    under_load: GpuInfo | None = None
    errors: Mapping[str, str] = field(default_factory=dict)
    timing: Mapping[str, str] = field(default_factory=dict)  # figure -> how it was timed (v2 on)
    gpu_s: float | None = None  # the GPU time the measurement of this GPU took

    def to_json(self) -> dict[str, Any]:
        return {"cuda_index": self.cuda_index, "name": self.name, "index": self.index, "precision": self.precision,
                "timing": dict(self.timing), "gpu_s": self.gpu_s,
                "h2d_gbps": self.h2d_gbps, "d2h_gbps": self.d2h_gbps, "device_copy_gbps": self.device_copy_gbps,
                "matmul_tflops": self.matmul_tflops, "matmul_size": self.matmul_size, "free_mib": self.free_mib,
                "total_mib": self.total_mib, "errors": dict(self.errors),
                "at_rest": _reading(self.at_rest), "under_load": _reading(self.under_load)}


@final
@dataclass(frozen=True, slots=True)
class Measurement:
    """The measurement's outcome: `measured` with figures per GPU, or why there are none, in one line."""

    status: MeasurementStatus
    reason: str
    devices: tuple[DeviceFigures, ...] = ()
    torch_version: str | None = None
    cuda_version: str | None = None
    elapsed_s: float | None = None
    phase: str | None = None  # the last step the program entered (where a deadline cut it)
    peers: tuple[PeerFigures, ...] = ()  # every GPU pair, where there are several

    @property
    def measured(self) -> bool:
        return self.status == "measured"

    def device(self, index: int | None) -> DeviceFigures | None:
        """The figures of the GPU nvidia-smi numbers `index` (by CUDA's number where nvidia-smi did not say)."""
        for device in self.devices:
            if (device.index if device.index is not None else device.cuda_index) == index:
                return device
        return None

    def to_json(self) -> dict[str, Any]:
        return {"status": self.status, "reason": self.reason, "torch_version": self.torch_version,
                "cuda_version": self.cuda_version, "elapsed_s": self.elapsed_s, "phase": self.phase,
                "devices": [d.to_json() for d in self.devices], "peers": [p.to_json() for p in self.peers]}


def _reading(gpu: GpuInfo | None) -> dict[str, Any] | None:
    if gpu is None:
        return None
    keep = ("index", "pcie_gen", "pcie_width", "pcie_gen_max", "pcie_width_max", "clocks_sm_mhz",
            "clocks_max_sm_mhz", "power_draw_w", "enforced_power_limit_w", "power_default_limit_w",
            "utilization_pct", "memory_used_mib", "memory_total_mib", "clock_event_names")
    data = gpu.to_json()
    return {key: data[key] for key in keep}


def build_script(interpreter: str | None, *, deadline_s: int = DEFAULT_DEADLINE_S,
                 precision: str | None = None) -> str:
    """The measurement's one exec: the program run by `interpreter` under `timeout` (its own watchdog says where
    the deadline caught it; timeout kills it a few seconds later if even that cannot run). Parameters travel as
    quoted shell variables, never interpolated into code."""
    q = shlex.quote
    settings = {"GH_PY": interpreter or "", "GH_MEASURE_S": int(deadline_s), "GH_PRECISION": precision or "",
                "GH_FIELDS": ",".join(LOAD_FIELDS), "GH_PROGRAM": PROGRAM}
    return "\n".join((
        "#!/bin/sh",
        f"# gpuharness measurement v{MEASUREMENT_VERSION}: one exec",
        "LC_ALL=C; export LC_ALL",
        *(f"{name}={q(str(value))}" for name, value in settings.items()),
        "export GH_MEASURE_S GH_PRECISION GH_FIELDS",
        f'if [ -z "$GH_PY" ] || [ ! -x "$GH_PY" ]; then echo \'{MARK} {{"kind": "no_interpreter"}}\'; '
        f'echo "{EXIT_MARK} 127"; exit 0; fi',
        'if command -v timeout >/dev/null 2>&1; then TO="timeout -k 2 $((GH_MEASURE_S + 3))"; else TO=""; fi',
        '$TO "$GH_PY" -c "$GH_PROGRAM" </dev/null',
        f'echo "{EXIT_MARK} $?"',
    )) + "\n"


def run(remote: Remote, interpreter: str | None, *, deadline_s: int = DEFAULT_DEADLINE_S,
        precision: str | None = None) -> tuple[ExecResult, Measurement]:
    """Measure in one exec on `remote` and parse what came back."""
    result = remote.exec(build_script(interpreter, deadline_s=deadline_s, precision=precision),
                         deadline_s=deadline_s + 15)
    return result, parse(result.stdout, result.stderr, result.exit_status, interpreter=interpreter)


def _records(stdout: str) -> tuple[list[dict[str, Any]], int | None]:
    records: list[dict[str, Any]] = []
    exit_code: int | None = None
    for line in lines_of(stdout):
        if line.startswith(EXIT_MARK + " "):
            match = re.match(r"-?\d+", line[len(EXIT_MARK) + 1:].strip())
            exit_code = int(match.group()) if match else None
        elif line.startswith(MARK + " "):
            try:
                record = loads_outside(line[len(MARK) + 1:], what="a measurement record")
            except ValueError:
                continue
            if isinstance(record, dict):
                records.append(record)
    return records, exit_code


def _gpu(values: Any) -> GpuInfo | None:
    if not isinstance(values, dict) or "error" in values:
        return None
    return nvidia_smi.gpu_from_values({str(k): str(v) for k, v in values.items()})


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None


def _device(record: Mapping[str, Any]) -> DeviceFigures:
    at_rest, under_load = _gpu(record.get("at_rest")), _gpu(record.get("under_load"))
    errors = {str(k): str(v) for k, v in (record.get("errors") or {}).items()}
    timing = record.get("timing")
    for name in ("at_rest", "under_load"):
        reading = record.get(name)
        if isinstance(reading, dict) and "error" in reading:
            errors[name] = str(reading["error"])
    index = next((g.index for g in (under_load, at_rest) if g is not None and g.index is not None), None)
    return DeviceFigures(
        cuda_index=_int(record.get("cuda_index")) or 0, name=record.get("name"), index=index,
        precision=record.get("precision"), h2d_gbps=_float(record.get("h2d_gbps")),
        d2h_gbps=_float(record.get("d2h_gbps")), device_copy_gbps=_float(record.get("device_copy_gbps")),
        matmul_tflops=_float(record.get("matmul_tflops")), matmul_size=_int(record.get("matmul_size")),
        free_mib=_int(record.get("free_mib")), total_mib=_int(record.get("total_mib")), at_rest=at_rest,
        under_load=under_load, errors=errors, gpu_s=_float(record.get("gpu_s")),
        timing={str(k): str(v) for k, v in timing.items()} if isinstance(timing, dict) else {})


def _peer(record: Mapping[str, Any]) -> PeerFigures:
    timing, errors = record.get("timing"), record.get("errors")
    access = record.get("access")
    return PeerFigures(src=_int(record.get("src")) or 0, dst=_int(record.get("dst")) or 0,
                       access=access if isinstance(access, bool) else None, gbps=_float(record.get("gbps")),
                       timing=str(timing["gbps"]) if isinstance(timing, dict) and "gbps" in timing else None,
                       error=str(errors["peer_copy"]) if isinstance(errors, dict) and "peer_copy" in errors else None)


def parse(stdout: str, stderr: str = "", exit_status: int | None = 0, *,
          interpreter: str | None = None) -> Measurement:
    """The measurement's transcript as a Measurement; every way it can end without figures has its reason."""
    records, exit_code = _records(stdout)
    kinds = {str(r.get("kind")): r for r in records}
    phases = [str(r["phase"]) for r in records if r.get("kind") == "phase" and "phase" in r]
    devices = tuple(_device(r) for r in records if r.get("kind") == "device")
    start = kinds.get("start") or kinds.get("no_cuda") or {}
    versions: dict[str, Any] = {"torch_version": start.get("torch"), "cuda_version": start.get("cuda"),
                                "phase": phases[-1] if phases else None}
    who = interpreter or "the service's interpreter"
    if "no_interpreter" in kinds:
        return Measurement("no_interpreter", f"no interpreter to measure with ({interpreter or 'none found'}): the "
                           "service's python was not found or is not executable", **versions)
    if "absent" in kinds:
        return Measurement("absent", f"torch is not importable by {who}: {kinds['absent'].get('error')}",
                           **versions)
    if "no_cuda" in kinds:
        return Measurement("no_cuda", f"torch {start.get('torch')} (CUDA {start.get('cuda')}) in {who} sees no GPU: "
                           "torch.cuda.is_available() is False", **versions)
    if "deadline" in kinds or exit_code in (124, 137) or exit_status is None:
        after = kinds.get("deadline", {}).get("after_s")
        return Measurement("deadline", f"the measurement ran past its deadline{f' of {after:g} s' if after else ''} "
                           f"in step {versions['phase'] or 'start'!r}; the GPU or its driver hangs, or the host is "
                           "overloaded", devices, **versions)
    if "done" in kinds:
        pairs = tuple(_peer(r) for r in records if r.get("kind") == "peer")
        return Measurement("measured", f"{len(devices)} GPU(s) measured" + (f", {len(pairs)} pair(s)" if pairs else ""),
                           devices, elapsed_s=_float(kinds["done"].get("elapsed_s")), peers=pairs, **versions)
    last = next((line.strip() for line in reversed(lines_of(stderr)) if line.strip()), None)
    return Measurement("error", f"the measurement stopped in step {versions['phase'] or 'start'!r} (exit "
                       f"{exit_code if exit_code is not None else exit_status}): {last or 'no output'}", devices,
                       **versions)
