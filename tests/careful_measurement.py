"""The careful measurement the GPU measurement is held against (issue 21): the one of the real H200 run's ground
truth (docs/gpu-calibration.md), at the same sizes: a mean of 10 runs after 3 warm-ups, each timed alone with CUDA
events, plus a cold loop of 320 matmuls timed as a whole (what the first program read). Run by an interpreter
whose torch is real or the simulator's stand-in; used by tests/gpu/test_gpu_measurement_agreement.py and
bench/measurement_agreement.py."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

CAREFUL = r'''
import json, torch
MIB = 1 << 20
dev = torch.device("cuda", 0)


def mean_rate(work, amount, warmups=3, runs=10):
    for _ in range(warmups):
        work()
    torch.cuda.synchronize()
    rates = []
    for _ in range(runs):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        work()
        end.record()
        end.synchronize()
        rates.append(amount / (start.elapsed_time(end) / 1000.0))
    return sum(rates) / len(rates)


def loop_rate(work, amount, count=320):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(count):
        work()
    end.record()
    end.synchronize()
    return amount * count / (start.elapsed_time(end) / 1000.0)


host = torch.empty(256 * MIB, dtype=torch.uint8, pin_memory=True)
near = torch.empty(256 * MIB, dtype=torch.uint8, device=dev)
source = torch.empty(512 * MIB, dtype=torch.uint8, device=dev)
target = torch.empty(512 * MIB, dtype=torch.uint8, device=dev)
n = 8192
a, b, c = (torch.randn(n, n, device=dev, dtype=torch.bfloat16) for _ in range(3))
figures = {
    "matmul_tflops": mean_rate(lambda: torch.matmul(a, b, out=c), 2 * n ** 3 / 1e12),
    "h2d_gbps": mean_rate(lambda: near.copy_(host, non_blocking=True), 256 * MIB / 1e9),
    "d2h_gbps": mean_rate(lambda: host.copy_(near, non_blocking=True), 256 * MIB / 1e9),
    "device_copy_gbps": mean_rate(lambda: target.copy_(source), 2 * 512 * MIB / 1e9),
    "matmul_loop_tflops": loop_rate(lambda: torch.matmul(a, b, out=c), 2 * n ** 3 / 1e12),
}
print(json.dumps(figures))
'''
FIGURES = ("matmul_tflops", "h2d_gbps", "d2h_gbps", "device_copy_gbps")


def careful(python: Path | str) -> dict[str, float]:
    """The careful figures, measured by `python` on its GPU 0."""
    done = subprocess.run([str(python), "-c", CAREFUL], capture_output=True, text=True, timeout=120, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])
