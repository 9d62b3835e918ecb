"""Parse nvidia-smi output: the probe's CSV query, the default table (old and new layouts) and its error outputs.

nvidia-smi fails a whole ``--query-gpu`` when the driver does not know one field, so the probe tries
``PROBE_FIELDS``, then the older and newer drivers' spellings (``PROBE_FIELD_SETS``, run by
``probe_shell_snippet``). ``parse_probe_csv`` reads that section and turns error outputs into ``SmiReport.error``
classes; ``parse_output`` reads any other output (table, CSV with or without header and units, or an error).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, final

from gpuharness.core.errors import GpuharnessError
from gpuharness.core.secrets import clip
from gpuharness.remote.lines import lines_of

#: The probe's query before the performance fields (transcripts recorded by probe v1 and v2).
PROBE_FIELDS_V1: Final[tuple[str, ...]] = (
    "index", "name", "uuid", "driver_version", "memory.total", "memory.used", "temperature.gpu",
    "utilization.gpu", "ecc.errors.uncorrected.volatile.total", "clocks_event_reasons.active",
    "clocks_throttle_reasons.active", "pcie.link.gen.current", "pcie.link.width.current",
)
#: What the card's performance is judged by: the link it negotiated, its power limits and its SM clock.
PERFORMANCE_FIELDS: Final[tuple[str, ...]] = (
    "pcie.link.gen.max", "pcie.link.width.max", "power.limit", "enforced.power.limit", "power.default_limit",
    "power.max_limit", "clocks.sm", "clocks.max.sm",
)
PROBE_FIELDS: Final[tuple[str, ...]] = PROBE_FIELDS_V1 + PERFORMANCE_FIELDS
#: The most lines the probe's query section is read for: a row per GPU (a host has at most a few dozen) and an
#: error line or two. More is output nvidia-smi does not print; it is refused before it is parsed.
MAX_ROWS: Final = 256
#: For drivers that predate the `clocks_event_reasons` spelling (before ~r525).
PROBE_FIELDS_LEGACY: Final[tuple[str, ...]] = tuple(f for f in PROBE_FIELDS if f != "clocks_event_reasons.active")
#: For drivers that have dropped the deprecated `clocks_throttle_reasons` spelling.
PROBE_FIELDS_MODERN: Final[tuple[str, ...]] = tuple(f for f in PROBE_FIELDS if f != "clocks_throttle_reasons.active")
#: The probe tries these in turn while the driver refuses a field; a driver that knows none of the performance
#: fields still gives every other fact (the performance check then says what it could not read).
PROBE_FIELDS_V1_LEGACY: Final[tuple[str, ...]] = tuple(f for f in PROBE_FIELDS_V1 if f != "clocks_event_reasons.active")
PROBE_FIELD_SETS: Final[tuple[tuple[str, ...], ...]] = (
    PROBE_FIELDS, PROBE_FIELDS_LEGACY, PROBE_FIELDS_MODERN, PROBE_FIELDS_V1, PROBE_FIELDS_V1_LEGACY)
#: The common 9-field query, index to ecc.errors.uncorrected.volatile.total (the fields as `nvidia-smi
#: --help-query-gpu` names them; recognised in headerless CSV by its column count).
BASIC_FIELDS: Final[tuple[str, ...]] = PROBE_FIELDS[:9]

ErrorClass = Literal[
    "driver_not_loaded", "driver_library_mismatch", "no_devices_found", "device_handle_unknown_error",
    "gpu_lost", "gpu_requires_reset", "gpu_access_blocked", "nvml_unknown_error", "insufficient_permissions",
    "nvml_library_missing",
    "query_field_invalid", "nvidia_smi_crashed", "nvidia_smi_timeout", "nvidia_smi_missing",
]

#: What to do about each error class (one line, shown to users).
ERROR_REMEDIES: Final[Mapping[str, str]] = {
    "driver_not_loaded": "the NVIDIA kernel driver is not loaded: the host/image is broken; replace the instance",
    "driver_library_mismatch": "user-space NVML differs from the loaded kernel driver (driver upgraded without "
                               "reboot or wrong container libs): reboot the host or replace the instance",
    "no_devices_found": "no GPU visible (container started without --gpus / device plugin): replace the instance",
    "device_handle_unknown_error": "a GPU does not answer NVML: faulty GPU; replace the instance",
    "gpu_lost": "a GPU fell off the bus (Xid 79): replace the instance",
    "gpu_requires_reset": "a GPU reports it requires a reset (after an Xid error): replace the instance",
    "gpu_access_blocked": "the OS/hypervisor blocks GPU access: replace the instance",
    "nvml_unknown_error": "NVML lost the devices (container cgroup device access lost): restart the container",
    "insufficient_permissions": "no permission on /dev/nvidia*: fix the container's device access",
    "nvml_library_missing": "libnvidia-ml.so is missing: the NVIDIA container toolkit did not mount the driver",
    "query_field_invalid": "this driver does not know a queried field: retry with the fallback field set",
    "nvidia_smi_crashed": "nvidia-smi crashed or printed unexpected output: treat the GPU as unhealthy",
    "nvidia_smi_timeout": "nvidia-smi hung past its deadline: treat the GPU as unhealthy",
    "nvidia_smi_missing": "no nvidia-smi on this host: no NVIDIA driver installed, or not a GPU host",
}

# Order matters: the more specific patterns first.
_ERROR_PATTERNS: Final[tuple[tuple[str, re.Pattern[str]], ...]] = (
    ("query_field_invalid", re.compile(r'Field "([^"]+)" is not a valid field to query')),
    ("driver_library_mismatch", re.compile(r"Driver/library version mismatch", re.I)),
    ("gpu_access_blocked", re.compile(r"GPU access blocked by the operating system", re.I)),
    ("gpu_lost", re.compile(r"GPU is lost|fallen off the bus", re.I)),
    ("device_handle_unknown_error",
     re.compile(r"Unable to (?:determine|detect) the device handle for (?:GPU|gpu)\s*[0-9A-Fa-f:.]*\s*:"
                r"\s*Unknown Error", re.I)),
    ("driver_not_loaded", re.compile(
        r"couldn't communicate with the NVIDIA driver|nvml error: driver not loaded|NVIDIA driver is not loaded"
        r"|Failed to initialize NVML: Driver Not Loaded", re.I)),
    ("no_devices_found", re.compile(r"^\s*No devices were found", re.I)),
    ("nvml_library_missing", re.compile(r"couldn't find libnvidia-ml\.so|libnvidia-ml\.so[.0-9]*: cannot open", re.I)),
    ("insufficient_permissions", re.compile(r"Insufficient Permissions", re.I)),
    ("nvml_unknown_error", re.compile(r"Failed to initialize NVML: Unknown Error", re.I)),
    ("nvidia_smi_crashed", re.compile(r"Segmentation fault|core dumped|Aborted \(core|Bus error|Illegal instruction",
                                      re.I)),
    ("nvidia_smi_missing", re.compile(r"nvidia-smi: (?:command )?not found|nvidia-smi: No such file", re.I)),
)

#: NVML clock event (formerly "throttle") reason bits, as printed by `clocks_event_reasons.active`.
CLOCK_EVENT_BITS: Final[Mapping[int, str]] = {
    0x1: "gpu_idle", 0x2: "applications_clocks_setting", 0x4: "sw_power_cap", 0x8: "hw_slowdown",
    0x10: "sync_boost", 0x20: "sw_thermal_slowdown", 0x40: "hw_thermal_slowdown", 0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
#: Reasons that mean the GPU is being slowed down by hardware, heat or power (a health failure).
HARMFUL_CLOCK_EVENTS: Final[frozenset[str]] = frozenset(
    {"hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown"})

_UNAVAILABLE = re.compile(r"^\[?(N/A|Not Supported|Unknown Error|Insufficient Permissions|GPU requires reset"
                          r"|GPU is lost|Unknown|ERR!)\]?$", re.I)
_NUMBER = re.compile(r"^(-?\d+(?:\.\d+)?)\s*(MiB|GiB|KiB|%|W|C|MHz)?$")
# R610+ renamed the header fields: "KMD Version" (driver) and "CUDA UMD Version".
_HEADER = re.compile(r"NVIDIA-SMI\s+(\S+)\s+(?:Driver|KMD) Version:\s*(\S+)"
                     r"(?:\s+CUDA (?:UMD )?Version:\s*([0-9.]+|N/A))?")
_CUDA = re.compile(r"CUDA (?:UMD )?Version\s*:\s*([0-9]+\.[0-9]+)")


@final
@dataclass(frozen=True, slots=True)
class GpuInfo:
    """One GPU as nvidia-smi reported it; None where the field was absent, [N/A] or [Not Supported]."""

    index: int | None
    name: str | None
    uuid: str | None = None
    driver_version: str | None = None
    memory_total_mib: int | None = None
    memory_used_mib: int | None = None
    temperature_c: int | None = None
    utilization_pct: int | None = None
    power_draw_w: float | None = None
    power_limit_w: float | None = None
    ecc_uncorrected: int | None = None
    clock_event_reasons: int | None = None
    pcie_gen: int | None = None
    pcie_width: int | None = None
    pcie_gen_max: int | None = None
    pcie_width_max: int | None = None
    enforced_power_limit_w: float | None = None
    power_default_limit_w: float | None = None
    power_max_limit_w: float | None = None
    clocks_sm_mhz: int | None = None
    clocks_max_sm_mhz: int | None = None
    bus_id: str | None = None
    raw: Mapping[str, str] = field(default_factory=dict)
    #: Readings the table printed as ERR! (e.g. "power", "fan"): sometimes transient, always worth a look.
    faults: tuple[str, ...] = ()

    @property
    def clock_event_names(self) -> tuple[str, ...]:
        """The active clock event reasons by name (empty when none or unknown)."""
        return decode_clock_events(self.clock_event_reasons)

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index, "name": self.name, "uuid": self.uuid, "driver_version": self.driver_version,
            "memory_total_mib": self.memory_total_mib, "memory_used_mib": self.memory_used_mib,
            "temperature_c": self.temperature_c, "utilization_pct": self.utilization_pct,
            "power_draw_w": self.power_draw_w, "power_limit_w": self.power_limit_w,
            "ecc_uncorrected": self.ecc_uncorrected, "clock_event_reasons": self.clock_event_reasons,
            "clock_event_names": list(self.clock_event_names), "pcie_gen": self.pcie_gen,
            "pcie_width": self.pcie_width, "pcie_gen_max": self.pcie_gen_max, "pcie_width_max": self.pcie_width_max,
            "enforced_power_limit_w": self.enforced_power_limit_w, "power_default_limit_w": self.power_default_limit_w,
            "power_max_limit_w": self.power_max_limit_w, "clocks_sm_mhz": self.clocks_sm_mhz,
            "clocks_max_sm_mhz": self.clocks_max_sm_mhz, "bus_id": self.bus_id, "faults": list(self.faults),
            "raw": dict(self.raw),
        }


@final
@dataclass(frozen=True, slots=True)
class SmiReport:
    """The parse of one nvidia-smi output. `error` is an error class (see ERROR_REMEDIES) or None."""

    layout: Literal["csv", "table", "query", "list", "none"]
    gpus: tuple[GpuInfo, ...] = ()
    driver_version: str | None = None
    cuda_version: str | None = None
    error: str | None = None
    error_line: str | None = None
    invalid_field: str | None = None
    fields: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.error is None and bool(self.gpus)

    @property
    def remedy(self) -> str | None:
        return ERROR_REMEDIES.get(self.error) if self.error else None

    def to_json(self) -> dict[str, Any]:
        return {
            "layout": self.layout, "ok": self.ok, "error": self.error, "error_line": self.error_line,
            "remedy": self.remedy, "invalid_field": self.invalid_field, "driver_version": self.driver_version,
            "cuda_version": self.cuda_version, "gpu_count": len(self.gpus),
            "gpus": [g.to_json() for g in self.gpus], "fields": list(self.fields),
        }


class SmiParseError(GpuharnessError, ValueError):
    """The text is CSV-shaped but cannot be mapped to fields (headerless with an unknown column count)."""


def decode_clock_events(mask: int | None) -> tuple[str, ...]:
    """Names of the set bits of a clock event reasons mask."""
    if not mask:
        return ()
    return tuple(name for bit, name in CLOCK_EVENT_BITS.items() if mask & bit)


def classify_error(text: str) -> tuple[str, str, str | None] | None:
    """The first known error in nvidia-smi output: (class, line, invalid field or None), or None."""
    for line in lines_of(text):
        stripped = line.strip()
        if not stripped:
            continue
        for error_class, pattern in _ERROR_PATTERNS:
            match = pattern.search(stripped)
            if match:
                invalid = match.group(1) if error_class == "query_field_invalid" else None
                return error_class, stripped, invalid
    return None


def cuda_version_from_header(text: str) -> str | None:
    """The `CUDA Version` the driver supports, from the plain nvidia-smi header (None when absent)."""
    match = _CUDA.search(text)
    return match.group(1) if match else None


def probe_command(fields: Sequence[str] = PROBE_FIELDS) -> str:
    """The nvidia-smi command line for a field set (CSV, no header, no units)."""
    return f"nvidia-smi --query-gpu={','.join(fields)} --format=csv,noheader,nounits"


def probe_shell_snippet(deadline_s: int = 15) -> str:
    """A POSIX sh fragment: try each PROBE_FIELD_SETS query under a deadline until one is accepted.

    Output: ``# query: <fields>`` then nvidia-smi's stdout+stderr, then ``# exit: <status>`` (124 = deadline,
    127 = no nvidia-smi). Only an unknown-field failure moves on to the next field set.
    """
    sets = " ".join(",".join(s) for s in PROBE_FIELD_SETS)
    return (
        # GNU coreutils and current busybox take `-k`; a timeout(1) that does not is used without it.
        "if timeout -k 1 5 true >/dev/null 2>&1; then _smi_t=\"timeout -k 2 " + str(int(deadline_s)) + "\";"
        " elif timeout 5 true >/dev/null 2>&1; then _smi_t=\"timeout " + str(int(deadline_s)) + "\";"
        " else _smi_t=\"\"; fi\n"
        "if ! command -v nvidia-smi >/dev/null 2>&1; then echo '# query: none'; echo 'nvidia-smi: not found';"
        " echo '# exit: 127'; else\n"
        f"for _smi_q in {sets}; do\n"
        "  _smi_out=$($_smi_t nvidia-smi --query-gpu=\"$_smi_q\" --format=csv,noheader,nounits 2>&1); _smi_rc=$?\n"
        "  case \"$_smi_out\" in *'is not a valid field to query'*) continue;; esac\n"
        "  break\n"
        "done\n"
        "printf '# query: %s\\n%s\\n# exit: %s\\n' \"$_smi_q\" \"$_smi_out\" \"$_smi_rc\"\n"
        "fi\n"
    )


def parse_probe_csv(text: str, fields: Sequence[str] | None = None) -> SmiReport:
    """Parse the probe's nvidia-smi section (headerless, unitless CSV; see the module docstring). The probe's own
    lines are read by their place, `# query:` first and `# exit:` last: nvidia-smi's output between them cannot
    declare either."""
    body = lines_of(text)
    exit_status: int | None = None
    if body and body[0].startswith("# query:"):
        declared = body.pop(0).split(":", 1)[1].strip()
        if fields is None and declared and declared != "none":
            fields = tuple(declared.split(","))
    if body and body[-1].startswith("# exit:"):
        code = body.pop().split(":", 1)[1].strip()
        exit_status = int(code) if code.lstrip("-").isdigit() else None
    if len(body) > MAX_ROWS:
        return SmiReport(layout="none", error="nvidia_smi_crashed",
                         error_line=f"nvidia-smi printed {len(body)} lines, more than the {MAX_ROWS} a host's GPUs do")
    content = "\n".join(body)
    if exit_status in (124, 137):  # timeout(1): TERM after the deadline (124), KILL after the grace (137)
        return SmiReport(layout="none", error="nvidia_smi_timeout", error_line="nvidia-smi exceeded its deadline")
    if exit_status == 127:
        return SmiReport(layout="none", error="nvidia_smi_missing", error_line="nvidia-smi: not found")
    if fields is None:  # no `# query:` line: the probe query (of any version) with as many columns as the rows
        widths = {len(_split_csv(row)) for row in body if "," in row and not _ERROR_LINE_ANY.search(row)}
        fields = _KNOWN_QUERIES.get(widths.pop(), PROBE_FIELDS) if len(widths) == 1 else PROBE_FIELDS
    chosen = tuple(fields)
    report = _parse_csv(content, chosen, has_header=False)
    if report.error is None and exit_status not in (None, 0):
        return _with_error(report, "nvidia_smi_crashed", f"nvidia-smi exited with status {exit_status}")
    if report.error is None and not report.gpus:
        return _with_error(report, "nvidia_smi_crashed", "nvidia-smi printed no GPU lines")
    return report


def parse_output(text: str, fields: Sequence[str] | None = None, *, guess: bool = True) -> SmiReport:
    """Auto-detect and parse nvidia-smi output: default table, CSV (header or not, units or not), or an error.
    With `guess` false, a headerless CSV without `fields` is refused (SmiParseError) rather than named by shape."""
    if _HEADER.search(text) or re.search(r"^\|\s+GPU\s+Name", text, re.M):
        return parse_table(text)
    if any(line.startswith("# query:") for line in lines_of(text)):
        return parse_probe_csv(text, fields)
    rows = [line for line in lines_of(text) if line.strip()]
    header = bool(rows) and _looks_like_header(rows[0])
    if fields is None and not header:
        error = classify_error(text)
        csv_rows = [r for r in rows if "," in r and not _ERROR_LINE_ANY.search(r)]
        if not csv_rows and rows and all(_one_value(r) for r in rows):
            csv_rows = rows  # a one-field query (--query-gpu=memory.total): one value per GPU, no comma
        if not csv_rows:
            if error:
                return _error_report(error)
            what = "nvidia-smi printed nothing" if not rows else f"unexpected output: {clip(rows[0].strip(), 200)}"
            return SmiReport(layout="none", error="nvidia_smi_crashed", error_line=what)
        if not guess:
            raise SmiParseError("headerless CSV names no fields; its columns are not guessed")
        fields = infer_fields([_split_csv(r) for r in csv_rows])
    return _parse_csv(text, tuple(fields) if fields is not None else (), has_header=header)


def parse_csv(text: str, fields: Sequence[str] | None = None) -> SmiReport:
    """Parse `--format=csv` output; the header names the fields, else `fields`, else a known column count."""
    rows = [line for line in lines_of(text) if line.strip()]
    header = bool(rows) and _looks_like_header(rows[0])
    if fields is None and not header:
        data = [r for r in rows if not _ERROR_LINE_ANY.search(r)]
        fields = _fields_for_columns(len(_split_csv(data[0]))) if data else PROBE_FIELDS
    return _parse_csv(text, tuple(fields) if fields is not None else (), has_header=header)


def parse_table(text: str) -> SmiReport:
    """Parse the default `nvidia-smi` table (470-era and 525+/550/580 layouts)."""
    header = _HEADER.search(text)
    driver = header.group(2) if header else None
    cuda = header.group(3) if header and header.group(3) and header.group(3) != "N/A" else None
    lines = lines_of(text)
    gpus: list[GpuInfo] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if re.match(r"^\|\s*(?:Processes|MIG devices)", line):
            break
        cells = _cells(line)
        first = _TABLE_ROW1.match(cells[0]) if len(cells) >= 3 else None
        if first and i + 1 < len(lines):
            second = _cells(lines[i + 1])
            gpus.append(_table_gpu(first, cells, second, driver))
            i += 2
            continue
        i += 1
    error = classify_error(text)
    report = SmiReport(layout="table", gpus=tuple(gpus), driver_version=driver, cuda_version=cuda)
    if error:
        return _with_error(report, error[0], error[1], error[2])
    if not gpus:
        what = "no GPU rows after the header" if header else "no nvidia-smi header or GPU rows"
        return _with_error(report, "nvidia_smi_crashed", f"unexpected output: {what}")
    return report


def run_local(*, timeout_s: float = 20.0, executable: str = "nvidia-smi") -> SmiReport:
    """Run the local nvidia-smi (plain table, plus the probe CSV when it works) and parse it, with a deadline."""
    path = shutil.which(executable)
    if path is None:
        return SmiReport(layout="none", error="nvidia_smi_missing", error_line=f"{executable}: not found on PATH")
    try:
        table = subprocess.run([path], capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        return SmiReport(layout="none", error="nvidia_smi_timeout", error_line=f"{executable} ran past {timeout_s}s")
    report = parse_output(table.stdout + table.stderr)
    if report.error is None and table.returncode != 0:
        return _with_error(report, "nvidia_smi_crashed", f"{executable} exited with status {table.returncode}")
    if report.error is not None:
        return report
    for fields in PROBE_FIELD_SETS:
        try:
            query = subprocess.run([path, f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"],
                                   capture_output=True, text=True, timeout=timeout_s, check=False)
        except subprocess.TimeoutExpired:
            return _with_error(report, "nvidia_smi_timeout", f"{executable} --query-gpu ran past {timeout_s}s")
        detailed = parse_probe_csv(query.stdout + query.stderr, fields)
        if detailed.error == "query_field_invalid":
            continue
        if detailed.error is not None:
            return detailed
        return SmiReport(layout="csv", gpus=detailed.gpus, driver_version=report.driver_version,
                         cuda_version=report.cuda_version, fields=tuple(fields))
    return report


# --- internals -------------------------------------------------------------------------------------------

_ERROR_LINE_ANY = re.compile("|".join(f"(?:{p.pattern})" for _, p in _ERROR_PATTERNS), re.I)
_FIELD_NAME = re.compile(r"^[a-z][a-z0-9_]*(?:\.[a-z0-9_]+)*(?: \[[^\]]+\])?$")
_INT = re.compile(r"^\d+$")
_BRAND = re.compile(r"NVIDIA|GeForce|Tesla|Quadro|TITAN|Titan|RTX|GTX|GRID|\b[ABHLTVPK]\d{1,4}\b|Graphics Device")
_PRODUCT = re.compile(r"^(?:NVIDIA|Tesla|Quadro|GeForce|TITAN|GRID) [\w -]+$")
#: Column shapes (checked in order); "%" "W" and "MiB" are resolved to names by _memory_names.
_SHAPES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("uuid", re.compile(r"^(?:GPU|MIG)-[0-9a-fA-F-]{8,}$")),
    ("pci.bus_id", re.compile(r"^[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]$")),
    ("driver_version?", re.compile(r"^[3-9]\d{2}\.\d{2,3}(?:\.\d{1,3})?$")),
    ("MiB", re.compile(r"^\d+ MiB$")),
    ("%", re.compile(r"^\d+ %$")),
    ("W", re.compile(r"^\d+(?:\.\d+)? W$")),
    ("clocks_event_reasons.active", re.compile(r"^0x[0-9A-Fa-f]+$")),
    ("pstate", re.compile(r"^P\d{1,2}$")),
)
#: Headerless CSV recognised by its column count: the probe's queries (current and v1) and the 9-field one.
_KNOWN_QUERIES: Final[Mapping[int, tuple[str, ...]]] = {
    len(PROBE_FIELDS): PROBE_FIELDS, len(PROBE_FIELDS_LEGACY): PROBE_FIELDS_LEGACY,
    len(PROBE_FIELDS_V1): PROBE_FIELDS_V1, len(PROBE_FIELDS_V1_LEGACY): PROBE_FIELDS_V1_LEGACY,
    len(BASIC_FIELDS): BASIC_FIELDS}
_TABLE_ROW1 = re.compile(r"^\s*(\d+)\s+(.*?)\s+(On|Off|N/A|WDDM|TCC)\s*$")
_ATTR: Final[Mapping[str, str]] = {
    "index": "index", "name": "name", "gpu_name": "name", "uuid": "uuid", "gpu_uuid": "uuid",
    "driver_version": "driver_version", "memory.total": "memory_total_mib", "memory.used": "memory_used_mib",
    "temperature.gpu": "temperature_c", "utilization.gpu": "utilization_pct", "power.draw": "power_draw_w",
    "power.limit": "power_limit_w", "ecc.errors.uncorrected.volatile.total": "ecc_uncorrected",
    "clocks_event_reasons.active": "clock_event_reasons", "clocks_throttle_reasons.active": "clock_event_reasons",
    "pcie.link.gen.current": "pcie_gen", "pcie.link.width.current": "pcie_width", "pci.bus_id": "bus_id",
    "pcie.link.gen.max": "pcie_gen_max", "pcie.link.width.max": "pcie_width_max",
    "enforced.power.limit": "enforced_power_limit_w", "power.default_limit": "power_default_limit_w",
    "power.max_limit": "power_max_limit_w",
    # nvidia-smi accepts clocks.sm and prints it back as clocks.current.sm in a CSV header; the power names
    # under the "gpu" prefix and gpucurrent spellings are newer names --help-query-gpu lists beside the old (590+)
    "clocks.sm": "clocks_sm_mhz", "clocks.current.sm": "clocks_sm_mhz", "clocks.max.sm": "clocks_max_sm_mhz",
    "gpu.power.requested_limit": "power_limit_w", "gpu.power.current_limit": "enforced_power_limit_w",
    "gpu.power.default_limit": "power_default_limit_w", "gpu.power.max_limit": "power_max_limit_w",
    "pcie.link.gen.gpucurrent": "pcie_gen",
}
_INT_ATTRS = frozenset({"index", "memory_total_mib", "memory_used_mib", "temperature_c", "utilization_pct",
                        "ecc_uncorrected", "pcie_gen", "pcie_width", "pcie_gen_max", "pcie_width_max",
                        "clocks_sm_mhz", "clocks_max_sm_mhz"})
_FLOAT_ATTRS = frozenset({"power_draw_w", "power_limit_w", "enforced_power_limit_w", "power_default_limit_w",
                          "power_max_limit_w"})


def _split_csv(line: str) -> list[str]:
    # nvidia-smi separates with ", " and never quotes; GPU names contain no commas.
    return [cell.strip() for cell in line.split(",")]


def _looks_like_header(line: str) -> bool:
    """nvidia-smi's CSV header: field names (`memory.total [MiB]`), never values (which are numbers, names,
    N/A, Enabled, P0...)."""
    cells = _split_csv(line)
    if any(_strip_unit(c) in _ATTR or c.startswith(("memory.", "temperature.", "utilization.")) for c in cells):
        return True
    return bool(cells) and all(_FIELD_NAME.match(c) for c in cells)


def _one_value(row: str) -> bool:
    value = row.strip()
    return bool(_UNAVAILABLE.match(value) or _NUMBER.match(value) or _PRODUCT.match(value)
                or any(pattern.match(value) for _, pattern in _SHAPES))


def infer_fields(rows: Sequence[Sequence[str]]) -> tuple[str, ...]:
    """Field names for headerless CSV rows: a known query when the column count and the values fit one, else each
    column named by the shape of its values (uuid, bus id, name, driver, MiB, %, W, ...); a column whose values
    say nothing certain is `column<N>` (kept raw)."""
    width = len(rows[0]) if rows else 0
    rows = [r for r in rows if len(r) == width]
    known = _KNOWN_QUERIES
    if width in known and all(_BRAND.search(r[1]) and _INT.match(r[0]) for r in rows):
        return known[width]
    columns = [[r[i] for r in rows] for i in range(width)]
    names = _memory_names([_shape(i, column, columns) for i, column in enumerate(columns)], columns)
    if all(n.startswith("column") or n == "index" for n in names):
        raise SmiParseError(f"headerless CSV with {width} columns of bare values matches no known query; name "
                            "the fields (the --query-gpu list)")
    return names


def _shape(index: int, values: list[str], columns: list[list[str]]) -> str:
    present = [v for v in values if _value(v) is not None]
    if not present:
        return f"column{index + 1}"
    for name, pattern in _SHAPES:
        if all(pattern.match(v) for v in present):
            if name == "driver_version?":
                after_name = index > 0 and all(_BRAND.search(v) for v in columns[index - 1])
                return "driver_version" if after_name or present[0].count(".") == 2 else f"column{index + 1}"
            return name
    if all(_BRAND.search(v) for v in present):
        return "name"
    if index == 0 and all(_INT.match(v) and int(v) == row for row, v in enumerate(values)):
        return "index"
    return f"column{index + 1}"


def _memory_names(names: list[str], columns: list[list[str]]) -> tuple[str, ...]:
    """Units make the names unique: the first % column is utilization.gpu, the first W power.draw; of the MiB
    columns the largest is memory.total (a bare number names nothing: with no units, give the fields)."""
    result = list(names)
    for unit, ordered in (("%", ("utilization.gpu", "utilization.memory")), ("W", ("power.draw", "power.limit"))):
        slots = [i for i, n in enumerate(result) if n == unit]
        for rank, i in enumerate(slots):
            result[i] = ordered[rank] if rank < len(ordered) else f"column{i + 1}"
    memory = [i for i, n in enumerate(result) if n == "MiB"]
    for i in memory:
        result[i] = f"column{i + 1}"
    if memory:
        total = max(memory, key=lambda i: sum(int(_number(v) or 0) for v in columns[i]))
        result[total] = "memory.total"
    seen: set[str] = set()
    for i, name in enumerate(result):  # a shape seen twice names only its first column
        if name in seen:
            result[i] = f"column{i + 1}"
        seen.add(result[i])
    return tuple(result)


def _strip_unit(name: str) -> str:
    return re.sub(r"\s*\[[^\]]*\]$", "", name.strip())


def _fields_for_columns(count: int) -> tuple[str, ...]:
    if count not in _KNOWN_QUERIES:
        raise SmiParseError(f"headerless CSV with {count} columns matches no known query; name the fields "
                            f"(known: {', '.join(str(n) for n in sorted(_KNOWN_QUERIES))} columns)")
    return _KNOWN_QUERIES[count]


def _value(text: str) -> str | None:
    stripped = text.strip()
    if not stripped or _UNAVAILABLE.match(stripped):
        return None
    return stripped


def _number(text: str | None) -> float | None:
    if text is None:
        return None
    match = _NUMBER.match(text.strip())
    if not match:
        return None
    value = float(match.group(1))
    unit = match.group(2)
    if unit == "GiB":
        value *= 1024
    elif unit == "KiB":
        value /= 1024
    return value


def _mask(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return int(text, 16) if text.lower().startswith("0x") else int(text)
    except ValueError:
        return None


def gpu_from_values(values: Mapping[str, str]) -> GpuInfo:
    """One GPU from its field values by --query-gpu name (units and [N/A] as nvidia-smi prints them)."""
    attrs: dict[str, Any] = {"index": None, "name": None}
    for name, raw in values.items():
        attr = _ATTR.get(name)
        if attr is None:
            continue
        value = _value(raw)
        if attr in _INT_ATTRS:
            number = _number(value)
            converted: Any = int(number) if number is not None else None
        elif attr in _FLOAT_ATTRS:
            converted = _number(value)
        elif attr == "clock_event_reasons":
            converted = _mask(value)
        else:
            converted = value
        if attrs.get(attr) is None:  # both clock-reason spellings map here: the first known value wins
            attrs[attr] = converted
    return GpuInfo(raw=dict(values), **attrs)


def _parse_csv(text: str, fields: tuple[str, ...], *, has_header: bool) -> SmiReport:
    rows = [line for line in lines_of(text) if line.strip()]
    error = classify_error(text)
    if has_header and rows:
        fields = tuple(_strip_unit(c) for c in _split_csv(rows[0]))
        rows = rows[1:]
    gpus: list[GpuInfo] = []
    unexpected: str | None = None
    for row in rows:
        if _ERROR_LINE_ANY.search(row):
            continue
        cells = _split_csv(row)
        if len(cells) != len(fields):
            unexpected = unexpected or row.strip()
            continue
        gpus.append(gpu_from_values(dict(zip(fields, cells, strict=True))))
    drivers = {g.driver_version for g in gpus if g.driver_version}
    report = SmiReport(layout="csv", gpus=tuple(gpus), driver_version=next(iter(drivers)) if len(drivers) == 1 else
                       (sorted(drivers)[0] if drivers else None), fields=fields)
    if error:
        return _with_error(report, error[0], error[1], error[2])
    for gpu in gpus:
        for name, raw in gpu.raw.items():
            value = raw.strip().strip("[]").lower()
            if value in ("gpu requires reset", "gpu is lost"):
                error_class = "gpu_lost" if value == "gpu is lost" else "gpu_requires_reset"
                return _with_error(report, error_class, f"GPU {gpu.index} ({gpu.name}): {name} = {raw.strip()}")
    if unexpected is not None:
        return _with_error(report, "nvidia_smi_crashed", f"unexpected output: {clip(unexpected, 200)}")
    return report


def _cells(line: str) -> list[str]:
    if not line.startswith("|"):
        return [line]
    return [c for c in line.strip().strip("|").split("|")]


def _table_gpu(first: re.Match[str], cells: Sequence[str], second: Sequence[str], driver: str | None) -> GpuInfo:
    raw = {"row1": "|".join(cells), "row2": "|".join(second)}
    bus = cells[1].split()[0] if cells[1].split() else None
    ecc = _value(cells[2].strip())
    temperature = utilization = None
    power_draw = power_limit = None
    used = total = None
    faults: list[str] = []
    if len(second) >= 3:
        stats = second[0]
        head = stats.rsplit("/", 1)[0].split()  # fan, temp, perf, power draw ("N/A" has a slash of its own)
        faults = [name for name, token in zip(("fan", "temperature", "perf", "power"), head, strict=False)
                  if "ERR!" in token]
        if "/" in stats and "ERR!" in stats.rsplit("/", 1)[1]:
            faults.append("power_cap")
        temp_match = re.search(r"(\d+)C\b", stats)
        temperature = int(temp_match.group(1)) if temp_match else None
        power_match = re.search(r"(\S+)\s*/\s*(\S+)\s*$", stats)
        if power_match:
            power_draw = _number(_value(power_match.group(1)))
            power_limit = _number(_value(power_match.group(2)))
        mem_match = re.search(r"(\d+)\s*MiB\s*/\s*(\d+)\s*MiB", second[1])
        if mem_match:
            used, total = int(mem_match.group(1)), int(mem_match.group(2))
        util_match = re.search(r"(\d+)%", second[2])
        utilization = int(util_match.group(1)) if util_match else None
    return GpuInfo(
        index=int(first.group(1)), name=first.group(2).strip(), driver_version=driver,
        memory_total_mib=total, memory_used_mib=used, temperature_c=temperature, utilization_pct=utilization,
        power_draw_w=power_draw, power_limit_w=power_limit,
        ecc_uncorrected=int(ecc) if ecc is not None and ecc.isdigit() else None, bus_id=bus, raw=raw,
        faults=tuple(faults))


def _with_error(report: SmiReport, error: str, line: str, invalid: str | None = None) -> SmiReport:
    return SmiReport(layout=report.layout, gpus=report.gpus, driver_version=report.driver_version,
                     cuda_version=report.cuda_version, error=error, error_line=line, invalid_field=invalid,
                     fields=report.fields)


def _error_report(error: tuple[str, str, str | None]) -> SmiReport:
    return SmiReport(layout="none", error=error[0], error_line=error[1], invalid_field=error[2])


def error_classes() -> Iterable[str]:
    """Every error class this module can report."""
    return ERROR_REMEDIES.keys()
