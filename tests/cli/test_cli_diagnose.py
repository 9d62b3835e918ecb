"""`gpuharness diagnose` and `gpuharness gpus` as real subprocesses."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from pathlib import Path

from checkout import ROOT

FIXTURES = ROOT / "fixtures"
LOGS = FIXTURES / "logs"
SMI = FIXTURES / "nvidia-smi"


def gpuharness(*args: str, stdin: str | None = None, env: dict[str, str] | None = None,
               cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpuharness", *args], input=stdin, capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=120, check=False)


def test_diagnose_classified_log_exits_zero_with_cause_line_and_remedy():
    done = gpuharness("diagnose", str(LOGS / "comfyui-oom-allocation-on-device.log"))
    assert done.returncode == 0, done.stderr
    assert "cuda_oom (line 6:" in done.stdout
    assert "--lowvram" in done.stdout and "retryable: no" in done.stdout


def test_diagnose_json_shape():
    done = gpuharness("diagnose", str(LOGS / "tgi-runpod-unsatisfied-cuda.log"), "--json")
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    assert {"log", "cause", "line_no", "line", "remedy", "retryable", "symptom", "source", "evidence"} <= set(payload)
    assert (payload["cause"], payload["line_no"], payload["retryable"]) == ("driver_mismatch", 9, False)
    assert payload["line"].startswith("nvidia-container-cli: requirement error")


def test_diagnose_dash_reads_stdin():
    text = (LOGS / "diffusers-no-space-left.log").read_text()
    done = gpuharness("diagnose", "-", "--json", stdin=text)
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    assert (payload["log"], payload["cause"], payload["line_no"]) == ("<stdin>", "disk_full", 10)


def test_diagnose_without_argument_reads_stdin_json():
    text = (LOGS / "runpod-serverless-oom-status.json").read_text()
    payload = json.loads(gpuharness("diagnose", "--json", stdin=text).stdout)
    assert (payload["cause"], payload["source"]) == ("cuda_oom", "runpod")


def test_diagnose_unclassified_log_still_exits_zero_as_unknown():
    done = gpuharness("diagnose", str(LOGS / "comfyui-clean-run.log"), "--json")
    assert done.returncode == 0
    assert json.loads(done.stdout)["cause"] == "unknown"


def test_diagnose_missing_file_is_a_one_line_error_exit_2(tmp_path):
    missing = tmp_path / "nope.log"
    done = gpuharness("diagnose", str(missing))
    assert done.returncode == 2
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr
    assert str(missing) in lines[0] and "no such log file" in lines[0]


def test_diagnose_directory_is_a_one_line_error_exit_2(tmp_path):
    done = gpuharness("diagnose", str(tmp_path))
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1


def test_gpus_from_table_json():
    done = gpuharness("gpus", "--from", str(SMI / "table-535-h100-8x.txt"), "--json")
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    assert (payload["layout"], payload["gpu_count"], payload["cuda_version"]) == ("table", 8, "12.2")
    assert payload["gpus"][0]["memory_total_mib"] == 81559 and payload["error"] is None


def test_gpus_from_csv_text_output():
    fields = ("index,name,uuid,driver_version,memory.total,memory.used,temperature.gpu,utilization.gpu,"
              "ecc.errors.uncorrected.volatile.total,clocks_event_reasons.active,clocks_throttle_reasons.active,"
              "pcie.link.gen.current,pcie.link.width.current")
    done = gpuharness("gpus", "--from", str(SMI / "csv-probe-rtx4090-throttled.txt"), "--fields", fields)
    assert done.returncode == 0, done.stderr
    assert "NVIDIA GeForce RTX 4090" in done.stdout and "hw_thermal_slowdown" in done.stdout


def test_gpus_from_error_output_prints_the_class_and_exits_2():
    done = gpuharness("gpus", "--from", str(SMI / "error-driver-library-mismatch.txt"), "--json")
    assert done.returncode == 2
    assert json.loads(done.stdout)["error"] == "driver_library_mismatch"
    assert len(done.stderr.strip().splitlines()) == 1 and "driver_library_mismatch" in done.stderr


def test_gpus_from_stdin():
    done = gpuharness("gpus", "--from", "-", "--json", stdin=(SMI / "table-610-b200-kmd-layout.txt").read_text())
    assert done.returncode == 0 and json.loads(done.stdout)["driver_version"] == "610.43.02"


def test_gpus_headerless_csv_of_unknown_shape_asks_for_fields(tmp_path):
    sample = tmp_path / "smi.csv"
    sample.write_text("2004, 2004, 0, 44, [N/A], 0, 0\n")
    done = gpuharness("gpus", "--from", str(sample))
    assert done.returncode == 2 and "--fields" in done.stderr and "Traceback" not in done.stderr
    fields = "memory.total,memory.free,memory.used,temperature.gpu,fan.speed,utilization.gpu,utilization.memory"
    done = gpuharness("gpus", "--from", str(sample), "--fields", fields, "--json")
    assert done.returncode == 0 and json.loads(done.stdout)["gpus"][0]["temperature_c"] == 44


def test_gpus_missing_file_exit_2(tmp_path):
    done = gpuharness("gpus", "--from", str(tmp_path / "none.txt"))
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1


def test_gpus_without_nvidia_smi_on_path_is_nvidia_smi_missing_exit_2(tmp_path):
    env = {"PATH": str(tmp_path), "PYTHONPATH": str(ROOT / "src")}
    done = gpuharness("gpus", "--json", env=env)
    assert done.returncode == 2
    assert json.loads(done.stdout)["error"] == "nvidia_smi_missing"
    assert "nvidia_smi_missing" in done.stderr


def test_gpus_runs_the_local_nvidia_smi(tmp_path):
    exe = tmp_path / "nvidia-smi"
    table = SMI / "table-550-rtx4090.txt"
    exe.write_text(f"#!/bin/sh\ncase \"$*\" in\n  *--query-gpu*) echo 'No devices were found'; exit 6;;\n"
                   f"  *) cat '{table}';;\nesac\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    env = {"PATH": f"{tmp_path}:/usr/bin:/bin", "PYTHONPATH": str(ROOT / "src")}
    done = gpuharness("gpus", "--json", env=env)
    payload = json.loads(done.stdout)
    assert payload["source"] == "nvidia-smi"
    assert (payload["error"], done.returncode) == ("no_devices_found", 2)


def test_diagnose_stdin_counts_lines_like_a_file():
    text = "start\n 10%|#   |\r100%|####|\nRuntimeError: CUDA error: out of memory\n"
    payload = json.loads(gpuharness("diagnose", "-", "--json", stdin=text).stdout)
    assert (payload["cause"], payload["line_no"]) == ("cuda_oom", 3)


REAL_H200 = ROOT / "tests" / "gpu" / "data" / "real-h200"


def test_gpus_from_real_h200_query_text_and_xml():
    for name in ("nvidia-smi-q.txt", "nvidia-smi-q.xml"):
        done = gpuharness("gpus", "--from", str(REAL_H200 / name), "--json")
        assert done.returncode == 0, done.stderr
        payload = json.loads(done.stdout)
        assert (payload["layout"], payload["gpu_count"], payload["cuda_version"]) == ("query", 1, "13.0")
        assert payload["gpus"][0]["name"] == "NVIDIA H200" and payload["gpus"][0]["pcie_gen"] == 5


def test_gpus_headerless_csv_without_fields_is_one_line_naming_fields_exit_2(tmp_path):
    probe = REAL_H200 / "probe-query-0.txt"
    done = gpuharness("gpus", "--from", str(probe))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "--fields" in done.stderr and str(probe) in done.stderr


def test_gpus_broken_query_xml_is_one_line_exit_2(tmp_path):
    sample = tmp_path / "q.xml"
    sample.write_text("<?xml version='1.0'?>\n<nvidia_smi_log><gpu>")
    done = gpuharness("gpus", "--from", str(sample))
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1 and str(sample) in done.stderr
