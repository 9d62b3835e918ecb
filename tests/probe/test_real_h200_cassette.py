"""The real-H200 recording (cassettes/ssh/real-h200.json, the shared reference run) replays offline with
its registry (fixtures/real-h200/.pi/gpu): every check the SSH recording covers passes, and the performance figures
are the recorded ones. The run shipped no runtime HTTP cassettes, so the service endpoint and test-generation checks
(which replay runtime/<id>-health.yaml and -generation.yaml) are shown failing for that reason alone."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

from checkout import ROOT

CASSETTE = ROOT / "cassettes" / "ssh" / "real-h200.json"
REGISTRY = ROOT / "fixtures" / "real-h200" / ".pi" / "gpu"
SSH_CHECKS = ("host_reachable", "gpu_matches_order", "driver_and_cuda_meet_minimum", "no_uncorrected_ecc",
              "no_harmful_throttling", "temperature_under_limit", "no_foreign_compute_processes",
              "disk_has_room_for_model", "service_process_and_port", "log_tail_has_no_classified_failure",
              "cuda_smoke_test", "gpu_performs_like_its_class", "shutdown_guard_armed")
HTTP_CHECKS = ("service_health_endpoint", "test_generation_succeeds")


def recorded_device() -> dict:
    document = json.loads(CASSETTE.read_text())
    lines = [json.loads(line.split(" ", 2)[2]) for line in document["measurement"]["stdout"].splitlines()
             if line.startswith("@@gpuharness measure {")]
    return next(line for line in lines if line["kind"] == "device")


def test_the_cassette_is_labelled_real_hardware():
    document = json.loads(CASSETTE.read_text())
    assert document["source"] == "real hardware" and document["real"] is True
    assert "NVIDIA H200" in document["hardware"] and document["deployment"] == "dep_h200_local"


def test_offline_replay_passes_every_recorded_check_with_the_recorded_figures(tmp_path):
    (tmp_path / "ssh").mkdir()
    shutil.copy(CASSETTE, tmp_path / "ssh" / "dep_h200_local.json")
    shutil.copytree(REGISTRY, tmp_path / "registry")
    done = subprocess.run([sys.executable, "-m", "pytest", str(ROOT / "checks" / "health"), "-p", "no:cacheprovider",
                           "-n", "0", "-q", "-rA", "--gpu-mode", "offline", "--registry", str(tmp_path / "registry"),
                           "--cassettes", str(tmp_path)], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    passed = set(re.findall(r"^PASSED \S+::test_(\w+)\[dep_h200_local\]", done.stdout, re.M))
    failed = set(re.findall(r"^FAILED \S+::test_(\w+)\[dep_h200_local\]", done.stdout, re.M))
    assert passed == set(SSH_CHECKS), done.stdout[-3000:]
    assert failed == set(HTTP_CHECKS) and done.stdout.count("cassette not found") >= 2, done.stdout[-3000:]
    device = recorded_device()
    assert (device["matmul_tflops"], device["device_copy_gbps"], device["h2d_gbps"], device["d2h_gbps"]) == (
        685.3, 4222.3, 55.0, 55.19)
    line = next(text for text in done.stdout.splitlines() if text.startswith("gpuharness performance:"))
    for figure in ("dense matmul bf16 685 TFLOP/s", "device memory copy 4222 GB/s",
                   "host->device copy (pinned) 55 GB/s", "device->host copy (pinned) 55.2 GB/s",
                   "PCIe generation (under load) Gen5"):
        assert figure in line, line
    # judged against what a healthy H200 reaches (the careful figures of the same run), not the datasheet
    for judged in ("dense matmul bf16 685 TFLOP/s is 0.87 of its class's 784 TFLOP/s (floor 0.85)",
                   "device memory copy 4222 GB/s is 1.00 of its class's 4222 GB/s (floor 0.85)",
                   "host->device copy (pinned) 55 GB/s is 1.00 of its class's 55 GB/s (floor 0.85)"):
        assert judged in line, line
