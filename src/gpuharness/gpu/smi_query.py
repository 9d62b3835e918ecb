"""Parse `nvidia-smi -q` (the indented "NVSMI LOG" text), `nvidia-smi -q -x` (its XML twin) and `nvidia-smi -L`
(one line per GPU: index, name, UUID) into an SmiReport.

Both are read into one flat map per GPU, a path of section names to a value (`FB Memory Usage/Total` in the text,
`fb_memory_usage/total` in the XML), and each path is turned into the `--query-gpu` field it matches, so a GPU
read from `-q` has the same fields as one read from the probe's CSV (`nvidia_smi.gpu_from_values`).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Mapping
from typing import Final

from gpuharness.gpu.nvidia_smi import CLOCK_EVENT_BITS, GpuInfo, SmiReport, gpu_from_values
from gpuharness.remote.lines import lines_of

#: `-q` text paths (lower case) of each `--query-gpu` field.
TEXT_PATHS: Final[Mapping[str, str]] = {
    "name": "product name", "uuid": "gpu uuid", "pci.bus_id": "pci/bus id",
    "memory.total": "fb memory usage/total", "memory.used": "fb memory usage/used",
    "temperature.gpu": "temperature/gpu current temp", "utilization.gpu": "utilization/gpu",
    "power.draw": "gpu power readings/instantaneous power draw",
    "power.limit": "gpu power readings/requested power limit",
    "enforced.power.limit": "gpu power readings/current power limit",
    "power.default_limit": "gpu power readings/default power limit",
    "power.max_limit": "gpu power readings/max power limit",
    "pcie.link.gen.current": "pci/gpu link info/pcie generation/current",
    "pcie.link.gen.max": "pci/gpu link info/pcie generation/max",
    "pcie.link.width.current": "pci/gpu link info/link width/current",
    "pcie.link.width.max": "pci/gpu link info/link width/max",
    "clocks.sm": "clocks/sm", "clocks.max.sm": "max clocks/sm",
}
#: `-q -x` element paths of each `--query-gpu` field.
XML_PATHS: Final[Mapping[str, str]] = {
    "name": "product_name", "uuid": "uuid", "pci.bus_id": "pci/pci_bus_id",
    "memory.total": "fb_memory_usage/total", "memory.used": "fb_memory_usage/used",
    "temperature.gpu": "temperature/gpu_temp", "utilization.gpu": "utilization/gpu_util",
    "power.draw": "gpu_power_readings/instant_power_draw",
    "power.limit": "gpu_power_readings/requested_power_limit",
    "enforced.power.limit": "gpu_power_readings/current_power_limit",
    "power.default_limit": "gpu_power_readings/default_power_limit",
    "power.max_limit": "gpu_power_readings/max_power_limit",
    "pcie.link.gen.current": "pci/pci_gpu_link_info/pcie_gen/current_link_gen",
    "pcie.link.gen.max": "pci/pci_gpu_link_info/pcie_gen/max_link_gen",
    "pcie.link.width.current": "pci/pci_gpu_link_info/link_widths/current_link_width",
    "pcie.link.width.max": "pci/pci_gpu_link_info/link_widths/max_link_width",
    "clocks.sm": "clocks/sm_clock", "clocks.max.sm": "max_clocks/sm_clock",
}
#: Older drivers print the power section as "Power Readings" and the draw as "Power Draw".
_TEXT_ALIASES: Final[Mapping[str, str]] = {
    "power readings/": "gpu power readings/",
    "gpu power readings/power draw": "gpu power readings/instantaneous power draw",
    "gpu power readings/power limit": "gpu power readings/requested power limit",
    "gpu power readings/enforced power limit": "gpu power readings/current power limit",
}
_REASON_WORDS: Final[Mapping[str, str]] = {
    "idle": "gpu_idle", "applications clocks setting": "applications_clocks_setting",
    "sw power cap": "sw_power_cap", "hw slowdown": "hw_slowdown", "sync boost": "sync_boost",
    "sw thermal slowdown": "sw_thermal_slowdown", "hw thermal slowdown": "hw_thermal_slowdown",
    "hw power brake slowdown": "hw_power_brake_slowdown", "display clock setting": "display_clock_setting",
    "display clocks setting": "display_clock_setting", "gpu idle": "gpu_idle",
}
_BIT_OF: Final[Mapping[str, int]] = {name: bit for bit, name in CLOCK_EVENT_BITS.items()}
_GPU_LINE = re.compile(r"^GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s*$")
_LIST_LINE = re.compile(r"^GPU (\d+): (.+?) \(UUID: (GPU-[0-9A-Fa-f-]+)\)\s*$")
_KEY_VALUE = re.compile(r"^(\s*)([^:]+?)\s*(?::\s*(.*?))?\s*$")


def is_query(text: str) -> bool:
    """Whether `text` is `nvidia-smi -q`, `-q -x` or `-L` output."""
    head = text[:4096]
    return "NVSMI LOG" in head or "<nvidia_smi_log" in head or bool(_LIST_LINE.match(head.lstrip().split("\n")[0]))


def parse_query(text: str) -> SmiReport:
    """Parse `nvidia-smi -q`, `-q -x` or `-L` output (see the module docstring)."""
    if "<nvidia_smi_log" in text[:4096]:
        return parse_query_xml(text)
    if "NVSMI LOG" not in text[:4096]:
        return parse_list(text)
    return parse_query_text(text)


def parse_list(text: str) -> SmiReport:
    """`nvidia-smi -L`: a `GPU N: name (UUID: ...)` line per GPU (MIG device lines under it are not GPUs)."""
    gpus = tuple(gpu_from_values({"index": m.group(1), "name": m.group(2), "uuid": m.group(3)})
                 for m in map(_LIST_LINE.match, lines_of(text)) if m)
    return SmiReport(layout="list", gpus=gpus, fields=("index", "name", "uuid"))


def parse_query_text(text: str) -> SmiReport:
    top: dict[str, str] = {}
    gpus: list[dict[str, str]] = []
    stack: list[tuple[int, str]] = []
    for line in lines_of(text):
        if gpu := _GPU_LINE.match(line):
            gpus.append({"pci/bus id": gpu.group(1)})
            stack = []
            continue
        match = _KEY_VALUE.match(line)
        if not match or not match.group(2).strip() or line.lstrip().startswith("="):
            continue
        depth, key, value = len(match.group(1)), match.group(2).strip().lower(), match.group(3)
        stack = [(d, k) for d, k in stack if d < depth]
        path = "/".join([k for _, k in stack] + [key])
        if value is None:
            stack.append((depth, key))
        else:
            (gpus[-1] if gpus else top)[_alias(path)] = value
    driver, cuda = top.get("driver version"), top.get("cuda version")
    infos = tuple(_gpu(flat, TEXT_PATHS, "clocks event reasons/", driver, index) for index, flat in enumerate(gpus))
    return SmiReport(layout="query", gpus=infos, driver_version=driver, cuda_version=cuda,
                     fields=tuple(TEXT_PATHS))


def parse_query_xml(text: str) -> SmiReport:
    if "<!ENTITY" in text:  # nvidia-smi never declares entities: refuse expansion attacks outright
        raise ValueError("nvidia-smi -q -x output declares XML entities, which nvidia-smi never does")
    root = ET.fromstring(text)
    driver, cuda = root.findtext("driver_version"), root.findtext("cuda_version")
    gpus = tuple(_gpu(dict(_flatten(gpu, "")), XML_PATHS, "clocks_event_reasons/", driver, index)
                 for index, gpu in enumerate(root.findall("gpu")))
    return SmiReport(layout="query", gpus=gpus, driver_version=driver, cuda_version=cuda, fields=tuple(XML_PATHS))


def _flatten(element: ET.Element, prefix: str) -> Iterator[tuple[str, str]]:
    for child in element:
        path = f"{prefix}{child.tag}"
        if len(child):
            yield from _flatten(child, path + "/")
        else:
            yield path, (child.text or "").strip()


def _alias(path: str) -> str:
    for old, new in _TEXT_ALIASES.items():  # the section's old name first, then its fields' old names
        if old.endswith("/") and path.startswith(old):
            path = new + path[len(old):]
        elif path == old:
            path = new
    return path


def _gpu(flat: Mapping[str, str], paths: Mapping[str, str], reasons: str, driver: str | None,
         index: int) -> GpuInfo:
    """One GPU; its index is its place in the output (nvidia-smi lists GPUs in index order; the minor number is the
    /dev/nvidiaN node, which need not match)."""
    values = {field: flat[path].removesuffix("x") if "width" in field else flat[path]
              for field, path in paths.items() if path in flat}
    values["index"] = str(index)
    if driver:
        values["driver_version"] = driver
    mask = _reason_mask(flat, reasons)
    if mask is not None:
        values["clocks_event_reasons.active"] = f"0x{mask:016x}"
    ecc = _ecc_uncorrected(flat)
    if ecc is not None:
        values["ecc.errors.uncorrected.volatile.total"] = str(ecc)
    return gpu_from_values(values)


def _reason_mask(flat: Mapping[str, str], prefix: str) -> int | None:
    mask, seen = 0, False
    for path, value in flat.items():
        if not path.startswith(prefix):
            continue
        word = path.rsplit("/", 1)[-1].removeprefix("clocks_event_reason_").replace("_", " ")
        name = _REASON_WORDS.get(word)
        if name is not None:
            seen = True
            mask |= _BIT_OF[name] if value.strip().lower() == "active" else 0
    return mask if seen else None


def _ecc_uncorrected(flat: Mapping[str, str]) -> int | None:
    """The volatile uncorrected ECC count: the DRAM and SRAM uncorrectable counters (Hopper+), or the older
    double-bit total."""
    counts = [value for path, value in flat.items()
              if re.search(r"ecc.errors/volatile/(?:.*uncorrectable|double.bit/total)", path)]
    numbers = [int(value) for value in counts if value.strip().isdigit()]
    return sum(numbers) if numbers else None
