"""The link, power and clock fields the performance check reads, parsed from real nvidia-smi outputs.

Each fixture is a verbatim `--query-gpu=... --format=csv` capture (header with units, one GPU row) from
github.com/utkuozdemir/nvidia_gpu_exporter internal/captures (see fixtures/nvidia-smi/SOURCES.md): four GPUs,
each idle and under load. The headerless, unit-less form the probe asks for is the same values with the units
dropped, as `--format=csv,noheader,nounits` prints them."""

from __future__ import annotations

import pytest
from checkout import ROOT

from gpuharness.gpu.nvidia_smi import (
    PERFORMANCE_FIELDS,
    PROBE_FIELDS,
    PROBE_FIELDS_V1,
    GpuInfo,
    parse_output,
    parse_probe_csv,
)

SMI = ROOT / "fixtures" / "nvidia-smi"

# file -> (name, gen, gen max, width, width max, power limit, enforced, default, max limit, SM MHz, SM max MHz)
CAPTURES = {
    "csv-header-units-rtx4080s-595.71.05-idle.txt":
        ("NVIDIA GeForce RTX 4080 SUPER", 1, 4, 16, 16, 320.0, 320.0, 320.0, 400.0, 210, 3165),
    "csv-header-units-rtx4080s-595.71.05-load.txt":
        ("NVIDIA GeForce RTX 4080 SUPER", 4, 4, 16, 16, 320.0, 320.0, 320.0, 400.0, 2805, 3165),
    "csv-header-units-h200-590.48.01-idle.txt": ("NVIDIA H200", 5, 5, 16, 16, 700.0, 700.0, 700.0, 700.0, 345, 1980),
    "csv-header-units-h200-590.48.01-load.txt": ("NVIDIA H200", 5, 5, 16, 16, 700.0, 700.0, 700.0, 700.0, 1980, 1980),
    "csv-header-units-h100-590.48.01-idle.txt":
        ("NVIDIA H100 80GB HBM3", 5, 5, 16, 16, 700.0, 700.0, 700.0, 700.0, 345, 1980),
    "csv-header-units-h100-590.48.01-load.txt":
        ("NVIDIA H100 80GB HBM3", 5, 5, 16, 16, 700.0, 700.0, 700.0, 700.0, 1980, 1980),
    "csv-header-units-l40s-595.80-idle.txt": ("NVIDIA L40S", 4, 4, 16, 16, 350.0, 350.0, 350.0, 350.0, 2520, 2520),
    "csv-header-units-l40s-595.80-load.txt": ("NVIDIA L40S", 4, 4, 16, 16, 350.0, 350.0, 350.0, 350.0, 2520, 2520),
}


def facts(gpu: GpuInfo) -> tuple[object, ...]:
    return (gpu.name, gpu.pcie_gen, gpu.pcie_gen_max, gpu.pcie_width, gpu.pcie_width_max, gpu.power_limit_w,
            gpu.enforced_power_limit_w, gpu.power_default_limit_w, gpu.power_max_limit_w, gpu.clocks_sm_mhz,
            gpu.clocks_max_sm_mhz)


def probe_form(name: str) -> str:
    """The capture's values for the probe's fields, as `--format=csv,noheader,nounits` prints them."""
    header, row = (SMI / name).read_text().splitlines()[:2]
    names = [cell.split(" [")[0] for cell in header.split(", ")]
    values = dict(zip(names, row.split(", "), strict=True))
    values["clocks.sm"] = values["clocks.current.sm"]  # printed back under its canonical name
    fields = [f for f in PROBE_FIELDS + PERFORMANCE_FIELDS if f in values]
    cells = [values[f].removesuffix(" W").removesuffix(" MHz").removesuffix(" MiB").removesuffix(" %")
             for f in fields]
    return f"# query: {','.join(fields)}\n{', '.join(cells)}\n# exit: 0\n"


@pytest.mark.parametrize("name", sorted(CAPTURES))
def test_a_real_capture_with_header_and_units_gives_link_power_and_clock_facts(name):
    report = parse_output((SMI / name).read_text())
    assert report.ok and report.layout == "csv" and len(report.gpus) == 1
    assert facts(report.gpus[0]) == CAPTURES[name]


@pytest.mark.parametrize("name", sorted(CAPTURES))
def test_the_probe_form_of_a_real_capture_gives_the_same_facts(name):
    report = parse_probe_csv(probe_form(name))
    assert report.ok
    assert facts(report.gpus[0]) == CAPTURES[name]


def test_an_idle_link_below_its_maximum_is_read_as_both_current_and_maximum():
    idle = parse_output((SMI / "csv-header-units-rtx4080s-595.71.05-idle.txt").read_text()).gpus[0]
    loaded = parse_output((SMI / "csv-header-units-rtx4080s-595.71.05-load.txt").read_text()).gpus[0]
    assert (idle.pcie_gen, idle.pcie_gen_max) == (1, 4)  # power saving at idle (P8)
    assert (loaded.pcie_gen, loaded.pcie_gen_max) == (4, 4)


def test_a_host_max_of_na_is_none_and_keeps_its_raw_text():
    gpu = parse_output((SMI / "csv-header-units-h200-590.48.01-idle.txt").read_text()).gpus[0]
    assert gpu.raw["pcie.link.gen.hostmax"] == "[N/A]"


def test_the_newer_gpu_power_spellings_map_to_the_same_facts():
    text = ("gpu.power.requested_limit [W], gpu.power.current_limit [W], gpu.power.default_limit [W], "
            "gpu.power.max_limit [W], pcie.link.gen.gpucurrent, name\n"
            "700.00 W, 500.00 W, 700.00 W, 700.00 W, 5, NVIDIA H100 80GB HBM3\n")
    gpu = parse_output(text).gpus[0]
    assert (gpu.power_limit_w, gpu.enforced_power_limit_w, gpu.power_default_limit_w, gpu.power_max_limit_w,
            gpu.pcie_gen) == (700.0, 500.0, 700.0, 700.0, 5)


def test_a_v1_probe_transcript_without_the_new_fields_still_parses_with_them_unknown():
    line = "0, NVIDIA GeForce RTX 4090, GPU-1, 570.86.15, 24564, 1, 38, 0, [N/A], 0x0, 0x0, 4, 16"
    report = parse_probe_csv(f"# query: {','.join(PROBE_FIELDS_V1)}\n{line}\n# exit: 0\n")
    gpu = report.gpus[0]
    assert report.ok and (gpu.pcie_gen, gpu.pcie_width) == (4, 16)
    assert (gpu.pcie_gen_max, gpu.enforced_power_limit_w, gpu.clocks_max_sm_mhz) == (None, None, None)


def test_to_json_carries_the_new_facts():
    gpu = parse_output((SMI / "csv-header-units-rtx4080s-595.71.05-idle.txt").read_text()).gpus[0]
    data = gpu.to_json()
    assert (data["pcie_gen_max"], data["power_default_limit_w"], data["clocks_max_sm_mhz"]) == (4, 320.0, 3165)
