"""The real H200's nvidia-smi outputs (copied to data/real-h200 from the shared reference run): `-q`, `-q -x`,
the table, the CSV query and the probe's query all read as the same GPU."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuharness.gpu.nvidia_smi import PROBE_FIELDS, SmiParseError, parse_output, parse_probe_csv
from gpuharness.gpu.smi_query import is_query, parse_query

DATA = Path(__file__).parent / "data" / "real-h200"
UUID = "GPU-5b9f3c4c-c0a2-0fed-cdf6-b663d5605d20"


@pytest.mark.parametrize("name", ["nvidia-smi-q.txt", "nvidia-smi-q.xml"])
def test_query_outputs_read_the_h200(name):
    text = (DATA / name).read_text()
    assert is_query(text)
    report = parse_query(text)
    assert (report.layout, report.error, report.driver_version, report.cuda_version) == (
        "query", None, "580.159.04", "13.0")
    (gpu,) = report.gpus
    assert (gpu.index, gpu.name, gpu.uuid, gpu.bus_id) == (0, "NVIDIA H200", UUID, "00000000:00:06.0")
    assert (gpu.memory_total_mib, gpu.memory_used_mib, gpu.temperature_c, gpu.utilization_pct) == (143771, 0, 35, 0)
    assert (gpu.pcie_gen, gpu.pcie_width, gpu.pcie_gen_max, gpu.pcie_width_max) == (5, 16, 5, 16)
    assert (gpu.power_limit_w, gpu.enforced_power_limit_w, gpu.power_default_limit_w, gpu.power_max_limit_w) == (
        700.0, 700.0, 700.0, 700.0)
    assert (gpu.clocks_sm_mhz, gpu.clocks_max_sm_mhz, gpu.ecc_uncorrected) == (345, 1980, 0)
    assert gpu.clock_event_names == ("gpu_idle",) and gpu.power_draw_w is not None


def test_query_text_and_xml_agree_with_the_probe_csv():
    probe = parse_probe_csv((DATA / "probe-query-0.txt").read_text(), PROBE_FIELDS).gpus[0]
    for name in ("nvidia-smi-q.txt", "nvidia-smi-q.xml"):
        gpu = parse_query((DATA / name).read_text()).gpus[0]
        for attr in ("index", "name", "uuid", "memory_total_mib", "pcie_gen", "pcie_width", "pcie_gen_max",
                     "pcie_width_max", "enforced_power_limit_w", "power_default_limit_w", "power_max_limit_w",
                     "clocks_max_sm_mhz", "clock_event_reasons", "ecc_uncorrected"):
            assert getattr(gpu, attr) == getattr(probe, attr), (name, attr)


def test_table_and_csv_query_read_the_h200():
    table = parse_output((DATA / "nvidia-smi.txt").read_text())
    assert table.gpus[0].name == "NVIDIA H200" and table.driver_version == "580.159.04"
    csv = parse_output((DATA / "query-csv.txt").read_text())
    gpu = csv.gpus[0]
    assert (gpu.bus_id, gpu.pcie_gen_max, gpu.clocks_max_sm_mhz, gpu.memory_total_mib) == (
        "00000000:00:06.0", 5, 1980, 143771)


def test_headerless_csv_is_refused_when_guessing_is_off():
    text = (DATA / "probe-query-0.txt").read_text()
    with pytest.raises(SmiParseError):
        parse_output(text, guess=False)
    assert parse_output(text, PROBE_FIELDS, guess=False).gpus[0].uuid == UUID


def test_xml_with_entities_is_refused():
    with pytest.raises(ValueError, match="entities"):
        parse_query('<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "b">]><nvidia_smi_log>&a;</nvidia_smi_log>')


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=400))
def test_query_text_of_any_shape_parses_without_raising(noise):
    lines = (DATA / "nvidia-smi-q.txt").read_text().splitlines()[:40]
    report = parse_query("\n".join([*lines, noise]))
    assert report.layout == "query" and report.error is None


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=200))
def test_query_xml_of_any_shape_parses_or_raises_a_value_or_syntax_error(noise):
    try:
        report = parse_query(f"<?xml version='1.0'?>\n<nvidia_smi_log><gpu>{noise}</gpu></nvidia_smi_log>")
    except (ValueError, SyntaxError):
        return
    assert report.layout == "query"


def test_list_output_reads_index_name_and_uuid():
    text = (DATA / "list.txt").read_text()
    assert is_query(text)
    report = parse_query(text)
    assert report.layout == "list" and report.error is None
    assert [(g.index, g.name, g.uuid) for g in report.gpus] == [(0, "NVIDIA H200", UUID)]
    mig = "GPU 1: NVIDIA A100-SXM4-80GB (UUID: GPU-aa)\n  MIG 1g.10gb     Device  0: (UUID: MIG-bb)\n"
    assert [(g.index, g.uuid) for g in parse_query(mig).gpus] == [(1, "GPU-aa")]
