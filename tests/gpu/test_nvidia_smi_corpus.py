"""Held-out style accuracy of `gpus` (nvidia_smi.parse_output): nvidia-smi outputs in the shapes seen in public
issues and NVIDIA's --help-query-gpu, for arbitrary --query-gpu field lists, with and without header and units,
[N/A], memory as `total` only, and the default table. Each sample names its source; "format per" marks output
assembled from a cited command and the documented format rather than copied. Prints the accuracy; asserts >= 95%."""

from __future__ import annotations

from typing import Any, NamedTuple

from gpuharness.gpu.nvidia_smi import SmiParseError, parse_output


class Sample(NamedTuple):
    source: str
    text: str
    expected: dict[str, Any]  # gpus, names, memory_total_mib, error, and single-GPU fields
    fields: tuple[str, ...] | None = None


V100_TABLE = """\
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 580.126.09             Driver Version: 580.126.09     CUDA Version: 13.0     |
+-----------------------------------------+------------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |
|                                         |                        |               MIG M. |
|=========================================+========================+======================|
|   0  Tesla V100-SXM2-16GB           Off |   00000000:03:00.0 Off |                    0 |
| N/A   40C    P0             41W /  300W |       5MiB /  16384MiB |      0%      Default |
|                                         |                        |                  N/A |
+-----------------------------------------+------------------------+----------------------+
|   1  Tesla V100-SXM2-16GB           Off |   00000000:06:00.0 Off |                    0 |
| N/A   41C    P0             40W /  300W |       5MiB /  16384MiB |      0%      Default |
|                                         |                        |                  N/A |
+-----------------------------------------+------------------------+----------------------+
"""
GTX1070_TABLE = """\
+-----------------------------------------------------------------------------+
| NVIDIA-SMI 396.24                 Driver Version: 396.24                    |
|-------------------------------+----------------------+----------------------+
| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |
| Fan  Temp  Perf  Pwr:Usage/Cap|         Memory-Usage | GPU-Util  Compute M. |
|===============================+======================+======================|
|   0  GeForce GTX 1070    Off  | 00000000:24:00.0  On |                  N/A |
|  0%   43C    P0    40W / 210W |   1917MiB /  8114MiB |      0%      Default |
+-------------------------------+----------------------+----------------------+
"""
I3_FIELDS = ("memory.total", "memory.free", "memory.used", "temperature.gpu", "fan.speed", "utilization.gpu",
             "utilization.memory")

SAMPLES: tuple[Sample, ...] = (
    Sample("https://github.com/enkore/i3pystatus/pull/776 (csv,noheader,nounits; [N/A])",
           "2004, 2004, 0, 44, [N/A], 0, 0\n", {"gpus": 1, "memory_total_mib": [2004], "temperature_c": 44}, I3_FIELDS),
    Sample("https://github.com/enkore/i3pystatus/pull/776 (older driver: [Not Supported])",
           "2004, 2004, 0, 44, [Not Supported], 0, 0\n", {"gpus": 1, "memory_total_mib": [2004]}, I3_FIELDS),
    Sample("https://github.com/TheTumultuousUnicornOfDarkness/CPU-X/issues/132 (one field, noheader)",
           "32\n", {"gpus": 1, "temperature_c": 32}, ("temperature.gpu",)),
    Sample("https://github.com/Scionero/MaxContextFinder/issues/6 (580 table, 2x V100)", V100_TABLE,
           {"gpus": 2, "names": ["Tesla V100-SXM2-16GB"] * 2, "memory_total_mib": [16384, 16384]}),
    Sample("https://github.com/CFSworks/nvml_fix/issues/11 (396 table)", GTX1070_TABLE,
           {"gpus": 1, "names": ["GeForce GTX 1070"], "memory_total_mib": [8114]}),
    Sample("format per https://github.com/sosreport/sos/pull/2750 (its --query-gpu list, --format=csv)",
           "name, pci.bus_id, vbios_version, temperature.gpu, utilization.gpu [%], memory.total [MiB], "
           "memory.free [MiB], memory.used [MiB]\nTesla T4, 00000000:00:1E.0, 90.04.38.00.03, 33, 0 %, 15360 MiB, "
           "15101 MiB, 259 MiB\n", {"gpus": 1, "names": ["Tesla T4"], "memory_total_mib": [15360]}),
    Sample("format per https://github.com/Ricks-Lab/gpu-utils/issues/83 (--help-query-gpu: clocks, pstate)",
           "clocks.sm [MHz], clocks.mem [MHz], pstate\n1410 MHz, 1593 MHz, P0\n1410 MHz, 1593 MHz, P0\n",
           {"gpus": 2}),
    Sample("format per https://github.com/paradoxxxzero/gnome-shell-system-monitor-applet/pull/544 (memory.total "
           "only, with header)", "memory.total [MiB]\n81920 MiB\n81920 MiB\n",
           {"gpus": 2, "memory_total_mib": [81920, 81920]}),
    Sample("format per https://github.com/wilmerwang/GPUSitter/pull/4 (index,memory.free,memory.total; noheader)",
           "0, 23850 MiB, 24576 MiB\n1, 24564 MiB, 24576 MiB\n", {"gpus": 2, "memory_total_mib": [24576, 24576]}),
    Sample("format per https://github.com/wilmerwang/GPUSitter/pull/4 (same query, --format=csv with header)",
           "index, memory.free [MiB], memory.total [MiB]\n0, 23850 MiB, 24576 MiB\n",
           {"gpus": 1, "memory_total_mib": [24576]}),
    Sample("format per https://github.com/netdata/netdata/issues/10362 (name, uuid, driver, memory; noheader)",
           "NVIDIA A100-SXM4-80GB, GPU-5f1c3c6e-2f1a-4d0e-9a3b-1c2d3e4f5a6b, 550.54.15, 81920 MiB\n",
           {"gpus": 1, "names": ["NVIDIA A100-SXM4-80GB"], "memory_total_mib": [81920], "driver": "550.54.15"}),
    Sample("format per https://github.com/netdata/netdata/issues/10362 (Windows: CRLF, 2-part driver version)",
           "name, driver_version, memory.total [MiB]\r\nNVIDIA GeForce RTX 4090, 551.61, 24564 MiB\r\n",
           {"gpus": 1, "names": ["NVIDIA GeForce RTX 4090"], "memory_total_mib": [24564], "driver": "551.61"}),
    Sample("format per NVIDIA DGX Spark (unified memory: the memory fields print [N/A])",
           "name, memory.total [MiB], memory.free [MiB], memory.used [MiB], temperature.gpu, power.draw [W]\n"
           "NVIDIA GB10, [N/A], [N/A], [N/A], 39, 3.74 W\n",
           {"gpus": 1, "names": ["NVIDIA GB10"], "memory_total_mib": [None], "temperature_c": 39}),
    Sample("https://github.com/NVIDIA/nvidia-docker/issues/954 class (no GPU visible)", "No devices were found\n",
           {"error": "no_devices_found"}),
    Sample("nvidia-smi on a pre-r525 driver asked for clocks_event_reasons (see nvidia_smi.PROBE_FIELD_SETS)",
           'Field "clocks_event_reasons.active" is not a valid field to query.\n', {"error": "query_field_invalid"}),
    Sample("https://github.com/enkore/i3pystatus/pull/776 without the field list: asks for the fields",
           "2004, 2004, 0, 44, [N/A], 0, 0\n", {"asks_for_fields": True}),
)


def _judge(sample: Sample) -> str | None:
    """None when the parse says what the sample expects, else what differs."""
    try:
        report = parse_output(sample.text, sample.fields)
    except SmiParseError:
        return None if sample.expected.get("asks_for_fields") else "SmiParseError"
    want = sample.expected
    got = {"gpus": len(report.gpus), "error": report.error, "names": [g.name for g in report.gpus],
           "memory_total_mib": [g.memory_total_mib for g in report.gpus], "driver": report.driver_version,
           "temperature_c": report.gpus[0].temperature_c if report.gpus else None}
    if want.get("asks_for_fields"):
        return "parsed without the fields"
    if report.error != want.get("error"):
        return f"error {report.error}"
    wrong = [f"{key}={got[key]!r}" for key in want if key != "error" and got[key] != want[key]]
    return ", ".join(wrong) or None


def test_gpus_accuracy_on_public_formats_is_at_least_95_percent():
    misses = [(s.source, miss) for s in SAMPLES if (miss := _judge(s)) is not None]
    accuracy = 1 - len(misses) / len(SAMPLES)
    print(f"gpus: {len(SAMPLES) - len(misses)}/{len(SAMPLES)} = {accuracy:.1%}; misses: {misses}")
    assert accuracy >= 0.95, misses


def test_every_sample_names_its_source():
    assert len(SAMPLES) >= 15 and all(s.source for s in SAMPLES)
