"""nvidia-smi parsing: CSV (header/units/[N/A]), the default table in old and new layouts, and error outputs."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest
from checkout import ROOT

from gpuharness.gpu.nvidia_smi import (
    ERROR_REMEDIES,
    HARMFUL_CLOCK_EVENTS,
    PROBE_FIELD_SETS,
    PROBE_FIELDS,
    PROBE_FIELDS_LEGACY,
    PROBE_FIELDS_V1,
    PROBE_FIELDS_V1_LEGACY,
    SmiParseError,
    cuda_version_from_header,
    decode_clock_events,
    parse_csv,
    parse_output,
    parse_probe_csv,
    probe_command,
    probe_shell_snippet,
    run_local,
)

SMI = ROOT / "fixtures" / "nvidia-smi"
#: Real captures with the link, power and clock fields (tests/gpu/test_nvidia_smi_performance_fields.py reads them).
PERFORMANCE_CAPTURES = tuple(p.name for p in SMI.glob("csv-header-units-*-*-*.txt"))


def read(name: str) -> str:
    return (SMI / name).read_text(encoding="utf-8")


# file -> (driver, cuda, gpu count, first name, used MiB, total MiB, temp C, util %, power W, power cap W)
TABLES = {
    "table-535-h100-8x.txt": ("535.129.03", "12.2", 8, "NVIDIA H100 80GB HBM3", 72459, 81559, 36, 0, 113.0, 700.0),
    "table-550-rtx4090.txt": ("550.107.02", "12.4", 1, "NVIDIA GeForce RTX 4090 D", 1, 24564, 30, 0, 44.0, 425.0),
    "table-580-a100-2x.txt": ("580.126.09", "13.0", 2, "NVIDIA A100-SXM4-40GB", 598, 40960, 41, 11, 67.0, 400.0),
    "table-610-b200-kmd-layout.txt": ("610.43.02", "13.3", 2, "NVIDIA B200", 0, 183359, 26, 0, 139.0, 1000.0),
    "table-460-p100-old-layout.txt": ("460.32.03", "11.2", 1, "Tesla P100-PCIE...", 3025, 16280, 40, 19, 39.0, 250.0),
    "table-450-a100-old-layout.txt": ("450.119.03", "11.0", 1, "A100-SXM4-40GB", 1404, 40537, 30, 0, 58.0, 400.0),
    "table-346-grid-k520-no-cuda.txt": ("346.46", None, 2, "GRID K520", 492, 4095, 54, 98, 68.0, 125.0),
    "table-555-l40s-tcc.txt": ("555.85", "12.5", 1, "NVIDIA L40S", 9, 46068, 17, 0, 21.0, 350.0),
    "table-470-geforce-old-layout.txt": ("470.57.02", "11.4", 1, "NVIDIA GeForce ...", 15, 7979, 42, 0, 24.0, 280.0),
    "table-570-h200-8x.txt": ("570.124.06", "12.8", 8, "NVIDIA H200", 1, 143771, 23, 0, 76.0, 700.0),
}


@pytest.mark.parametrize("name", sorted(TABLES))
def test_default_table_gives_driver_cuda_and_per_gpu_facts(name):
    driver, cuda, count, gpu_name, used, total, temp, util, power, cap = TABLES[name]
    report = parse_output(read(name))
    assert report.layout == "table" and report.error is None and report.ok
    assert (report.driver_version, report.cuda_version, len(report.gpus)) == (driver, cuda, count)
    first = report.gpus[0]
    assert (first.index, first.name, first.memory_used_mib, first.memory_total_mib) == (0, gpu_name, used, total)
    assert (first.temperature_c, first.utilization_pct, first.power_draw_w, first.power_limit_w) == (
        temp, util, power, cap)
    assert [g.index for g in report.gpus] == list(range(count))


def test_table_ecc_column_reads_zero_on_datacenter_gpus_and_none_when_off():
    assert parse_output(read("table-535-h100-8x.txt")).gpus[0].ecc_uncorrected == 0
    assert parse_output(read("table-550-rtx4090.txt")).gpus[0].ecc_uncorrected is None


def test_table_ignores_the_processes_section():
    report = parse_output(read("table-550-rtx4090.txt"))
    assert len(report.gpus) == 1


def test_probe_csv_with_query_markers_parses_eight_h200():
    report = parse_probe_csv(read("csv-probe-h200-8x.txt"))
    assert report.ok and report.fields == PROBE_FIELDS_V1  # recorded before the performance fields
    assert len(report.gpus) == 8
    assert {g.name for g in report.gpus} == {"NVIDIA H200"}
    assert {g.memory_total_mib for g in report.gpus} == {143771}
    gpu = report.gpus[3]
    assert (gpu.index, gpu.pcie_gen, gpu.pcie_width, gpu.ecc_uncorrected) == (3, 5, 16, 0)
    assert gpu.uuid == "GPU-3f6d5e9b-4a7c-4dba-8e4f-5c4b6a7f8e9d"
    assert gpu.clock_event_names == ("gpu_idle",)
    assert report.driver_version == "570.124.06"


def test_probe_csv_without_markers_defaults_to_probe_fields_and_decodes_thermal_throttling():
    report = parse_probe_csv(read("csv-probe-rtx4090-throttled.txt"))
    gpu = report.gpus[0]
    assert gpu.ecc_uncorrected is None  # [N/A] on a consumer GPU
    assert gpu.clock_event_names == ("sw_thermal_slowdown", "hw_thermal_slowdown")
    assert set(gpu.clock_event_names) <= HARMFUL_CLOCK_EVENTS
    assert (gpu.temperature_c, gpu.utilization_pct) == (86, 100)


def test_probe_csv_in_the_legacy_field_set_reads_the_throttle_spelling():
    report = parse_probe_csv(read("csv-probe-legacy-470-a100.txt"))
    assert report.fields == PROBE_FIELDS_V1_LEGACY
    gpu = report.gpus[0]
    assert (gpu.name, gpu.driver_version, gpu.clock_event_reasons) == ("NVIDIA A100-SXM4-80GB", "470.103.01", 1)


def test_csv_with_header_and_units_strips_units():
    report = parse_output(read("csv-header-units-rtx4090.txt"))
    gpu = report.gpus[0]
    assert (gpu.memory_total_mib, gpu.memory_used_mib, gpu.utilization_pct, gpu.power_draw_w) == (24564, 1, 0, 17.53)
    assert gpu.ecc_uncorrected is None
    assert report.fields[2] == "memory.total"


def test_csv_not_supported_values_become_none_and_keep_the_raw_text():
    gpu = parse_output(read("csv-header-not-supported-gtx770.txt")).gpus[0]
    assert (gpu.name, gpu.temperature_c, gpu.utilization_pct, gpu.power_draw_w) == ("GeForce GTX 770", 52, None, None)
    assert gpu.raw["utilization.gpu"] == "[Not Supported]"


def test_headerless_csv_is_recognised_by_its_known_column_count():
    report = parse_output(read("csv-basic-h100.txt"))
    gpu = report.gpus[0]
    assert (gpu.name, gpu.memory_total_mib, gpu.temperature_c, gpu.ecc_uncorrected) == (
        "NVIDIA H100 80GB HBM3", 81559, 33, 0)


def test_headerless_csv_with_unknown_columns_needs_field_names():
    text = "2004, 2004, 0, 44, [N/A], 0, 0\n"
    with pytest.raises(SmiParseError, match="name the fields"):
        parse_csv(text)
    fields = ["memory.total", "memory.free", "memory.used", "temperature.gpu", "fan.speed", "utilization.gpu",
              "utilization.memory"]
    gpu = parse_csv(text, fields).gpus[0]
    assert (gpu.memory_total_mib, gpu.temperature_c, gpu.utilization_pct) == (2004, 44, 0)


ERRORS = {
    "error-driver-not-loaded.txt": "driver_not_loaded",
    "error-driver-library-mismatch.txt": "driver_library_mismatch",
    "error-no-devices-found.txt": "no_devices_found",
    "error-device-handle-unknown.txt": "device_handle_unknown_error",
    "error-gpu-access-blocked.txt": "gpu_access_blocked",
    "error-crashed-after-header.txt": "nvidia_smi_crashed",
    "error-segfault-core-dumped.txt": "nvidia_smi_crashed",
    "error-invalid-field.txt": "query_field_invalid",
    "error-nvml-unknown.txt": "nvml_unknown_error",
    "error-gpu-lost.txt": "gpu_lost",
}


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_error_outputs_become_error_classes_with_a_remedy(name):
    report = parse_output(read(name))
    assert report.error == ERRORS[name]
    assert not report.ok and report.gpus == ()
    assert report.error_line and report.remedy == ERROR_REMEDIES[ERRORS[name]]


def test_every_fixture_is_covered_by_a_test_table():
    covered = set(TABLES) | set(ERRORS) | {
        "csv-probe-h200-8x.txt", "csv-probe-rtx4090-throttled.txt", "csv-probe-legacy-470-a100.txt",
        "csv-header-units-rtx4090.txt", "csv-header-not-supported-gtx770.txt", "csv-basic-h100.txt", "SOURCES.md",
        "table-470-v100-err-power.txt", "table-550-a100-mig.txt"} | set(PERFORMANCE_CAPTURES)
    assert {p.name for p in SMI.iterdir()} == covered


def test_unknown_field_error_names_the_field():
    report = parse_probe_csv(read("error-invalid-field.txt"))
    assert (report.error, report.invalid_field) == ("query_field_invalid", "clocks_event_reasons.active")


def test_device_handle_error_among_csv_lines_keeps_the_good_gpus():
    text = ("0, NVIDIA A30, GPU-1, 560.35.03, 24576, 0, 31, 0, 0, 0x1, 0x1, 4, 16\n"
            "Unable to determine the device handle for GPU0000:17:00.0: Unknown Error\n")
    report = parse_probe_csv(text)
    assert report.error == "device_handle_unknown_error" and len(report.gpus) == 1


def test_unexpected_output_is_a_crash_class():
    assert parse_output("").error == "nvidia_smi_crashed"
    assert parse_output("Illegal instruction\n").error == "nvidia_smi_crashed"
    assert parse_output("garbage that is not nvidia-smi\n").error == "nvidia_smi_crashed"
    assert parse_probe_csv("0, H100\n").error == "nvidia_smi_crashed"


def test_probe_exit_markers_map_to_timeout_missing_and_crash():
    assert parse_probe_csv("# query: index\n# exit: 124\n").error == "nvidia_smi_timeout"
    assert parse_probe_csv("# query: none\nnvidia-smi: not found\n# exit: 127\n").error == "nvidia_smi_missing"
    line = "0, NVIDIA H100 80GB HBM3, GPU-1, 550.54.15, 81559, 0, 33, 0, 0"
    crashed = parse_probe_csv(f"# query: {','.join(PROBE_FIELDS[:9])}\n{line}\n# exit: 255\n")
    assert crashed.error == "nvidia_smi_crashed" and len(crashed.gpus) == 1


def test_cuda_version_comes_from_the_header_or_the_q_output():
    assert cuda_version_from_header(read("table-535-h100-8x.txt")) == "12.2"
    assert cuda_version_from_header(read("table-610-b200-kmd-layout.txt")) == "13.3"
    assert cuda_version_from_header("Driver Version                            : 470.103.01\n"
                                    "CUDA Version                              : 11.4\n") == "11.4"
    assert cuda_version_from_header(read("table-346-grid-k520-no-cuda.txt")) is None


def test_clock_event_bits_decode_by_name():
    assert decode_clock_events(0) == ()
    assert decode_clock_events(None) == ()
    assert decode_clock_events(0x88) == ("hw_slowdown", "hw_power_brake_slowdown")


def test_probe_field_sets_try_both_spellings_then_each_alone():
    assert PROBE_FIELD_SETS[0] == PROBE_FIELDS
    assert "clocks_event_reasons.active" in PROBE_FIELDS and "clocks_throttle_reasons.active" in PROBE_FIELDS
    assert "clocks_event_reasons.active" not in PROBE_FIELD_SETS[1]
    assert "clocks_throttle_reasons.active" not in PROBE_FIELD_SETS[2]
    assert probe_command().endswith("--format=csv,noheader,nounits")


# --- real processes: a fake nvidia-smi on PATH ----------------------------------------------------------

# a 470 driver: no clocks_event_reasons yet, and the link, power and clock fields it has known for long
OLD_DRIVER_SMI = """#!/bin/sh
case "$*" in
  *clocks_event_reasons*) echo 'Field "clocks_event_reasons.active" is not a valid field to query.'; echo; exit 2;;
  *--query-gpu*) echo '0, NVIDIA A100-SXM4-80GB, GPU-a75cda02, 470.103.01, 81251, 0, 30, 0, 0, 0x1, 4, 16, 4, 16, \
400.00, 400.00, 400.00, 400.00, 1410, 1410';;
  *) cat "$TABLE";;
esac
"""
#: a driver (or a vGPU) that refuses a performance field: the probe falls back to the query without them
NO_MAX_CLOCK_SMI = """#!/bin/sh
case "$*" in
  *clocks.max.sm*) echo 'Field "clocks.max.sm" is not a valid field to query.'; echo; exit 2;;
  *clocks_event_reasons*) echo '0, NVIDIA A10, GPU-1, 535.54.03, 23028, 0, 31, 0, 0, 0x1, 0x1, 4, 16';;
  *) cat "$TABLE";;
esac
"""


def fake_smi(tmp_path: Path, body: str) -> Path:
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    exe = bindir / "nvidia-smi"
    exe.write_text(body)
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return exe


def run_snippet(tmp_path: Path, deadline_s: int = 15, path: str | None = None) -> str:
    env = {"PATH": path if path is not None else f"{tmp_path / 'bin'}:/usr/bin:/bin",
           "TABLE": str(SMI / "table-450-a100-old-layout.txt")}
    done = subprocess.run(["/bin/sh", "-c", probe_shell_snippet(deadline_s)], capture_output=True, text=True,
                          env=env, timeout=60, check=False)
    return done.stdout


def test_probe_snippet_falls_back_to_the_legacy_spelling_on_an_old_driver(tmp_path):
    fake_smi(tmp_path, OLD_DRIVER_SMI)
    report = parse_probe_csv(run_snippet(tmp_path))
    assert report.error is None, report.error_line
    assert report.fields == PROBE_FIELDS_LEGACY
    assert report.gpus[0].name == "NVIDIA A100-SXM4-80GB" and report.gpus[0].clock_event_reasons == 1


def test_probe_snippet_falls_back_to_the_facts_without_the_performance_fields(tmp_path):
    fake_smi(tmp_path, NO_MAX_CLOCK_SMI)
    report = parse_probe_csv(run_snippet(tmp_path))
    assert report.error is None and report.fields == PROBE_FIELDS_V1
    assert (report.gpus[0].pcie_gen, report.gpus[0].clocks_max_sm_mhz) == (4, None)


def test_probe_snippet_reports_a_hung_nvidia_smi_as_timeout(tmp_path):
    fake_smi(tmp_path, "#!/bin/sh\nexec sleep 30\n")
    report = parse_probe_csv(run_snippet(tmp_path, deadline_s=1))
    assert report.error == "nvidia_smi_timeout"


def test_probe_snippet_reports_missing_nvidia_smi(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    report = parse_probe_csv(run_snippet(tmp_path, path=str(empty)))
    assert report.error == "nvidia_smi_missing"


def test_run_local_reads_table_then_the_probe_csv_with_fallback(tmp_path, monkeypatch):
    exe = fake_smi(tmp_path, OLD_DRIVER_SMI)
    monkeypatch.setenv("TABLE", str(SMI / "table-450-a100-old-layout.txt"))
    report = run_local(executable=str(exe))
    assert report.error is None and report.layout == "csv"
    assert (report.driver_version, report.cuda_version) == ("450.119.03", "11.0")
    assert report.fields == PROBE_FIELDS_LEGACY and report.gpus[0].memory_total_mib == 81251


def test_run_local_cuts_off_a_hung_nvidia_smi(tmp_path):
    exe = fake_smi(tmp_path, "#!/bin/sh\nexec sleep 30\n")
    assert run_local(executable=str(exe), timeout_s=0.5).error == "nvidia_smi_timeout"


def test_run_local_without_nvidia_smi_is_a_missing_class(tmp_path):
    assert run_local(executable=str(tmp_path / "no-such-nvidia-smi")).error == "nvidia_smi_missing"


def test_run_local_error_output_is_classified(tmp_path):
    exe = fake_smi(tmp_path, "#!/bin/sh\necho 'Failed to initialize NVML: Driver/library version mismatch'\n"
                             "echo 'NVML library version: 610.43'\nexit 18\n")
    assert run_local(executable=str(exe)).error == "driver_library_mismatch"


@pytest.mark.skipif(not os.path.exists("/bin/sh"), reason="needs /bin/sh")
def test_snippet_is_posix_sh():
    done = subprocess.run(["/bin/sh", "-n", "-c", probe_shell_snippet()], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stderr


def test_probe_exit_137_after_the_kill_grace_is_also_a_timeout():
    assert parse_probe_csv("# query: index\n# exit: 137\n").error == "nvidia_smi_timeout"


def test_err_readings_are_kept_as_gpu_faults_not_as_numbers():
    report = parse_output(read("table-470-v100-err-power.txt"))
    assert report.error is None and len(report.gpus) == 2
    assert report.gpus[0].faults == () and report.gpus[0].power_draw_w == 37.0
    assert report.gpus[1].faults == ("power",) and report.gpus[1].power_draw_w is None
    assert report.gpus[1].to_json()["faults"] == ["power"]


def test_a_gpu_reading_err_everywhere_lists_each_fault():
    text = ("| NVIDIA-SMI 470.82.01    Driver Version: 470.82.01    CUDA Version: 11.4     |\n"
            "|   0  Tesla V100-PCIE...  On   | 00006E4B:00:00.0 Off |                    0 |\n"
            "|ERR!  ERR!  ERR!    N/A  /  N/A |      0MiB / 16160MiB |      0%      Default |\n")
    gpu = parse_output(text).gpus[0]
    assert gpu.faults == ("fan", "temperature", "perf") and gpu.temperature_c is None


def test_mig_devices_table_is_not_read_as_gpus():
    report = parse_output(read("table-550-a100-mig.txt"))
    assert len(report.gpus) == 1
    gpu = report.gpus[0]
    assert (gpu.name, gpu.memory_total_mib, gpu.utilization_pct) == ("NVIDIA A100-SXM4-40GB", 40960, None)


def test_csv_gpu_requires_reset_is_an_error_class():
    line = "0, NVIDIA H100 80GB HBM3, GPU-1, 550.54.15, 81559, 0, [GPU requires reset], 0, 0"
    report = parse_csv(line + "\n", PROBE_FIELDS[:9])
    assert report.error == "gpu_requires_reset" and "temperature.gpu" in (report.error_line or "")
    assert report.remedy == ERROR_REMEDIES["gpu_requires_reset"]


def test_a_table_cut_off_after_its_header_is_a_crash():
    text = "\n".join(read("table-550-rtx4090.txt").splitlines()[:8]) + "\n"
    report = parse_output(text)
    assert report.driver_version == "550.107.02" and report.error == "nvidia_smi_crashed"
