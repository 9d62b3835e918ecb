"""A probe whose nvidia-smi output is large, through the real health suite (`pytest checks/health`, one deployment).

1. Offline: a recorded transcript in the probe v4 layout (marked sections), its nvidia-smi section grown to N MB by
   repeating its GPU row, replayed with --gpu-mode offline, against the same transcript at its normal size.
2. Live: a simulated host whose nvidia-smi prints N MB (its GPU row, repeated), probed with --gpu-mode live, against
   the same host printing its one row.

Prints the wall time of each suite run and the ratio large/normal.

Run: python bench/probe_transcript.py [--mb 10]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from health_world import HealthWorld  # noqa: E402

from gpuharness.sim.host import HostSpec  # noqa: E402

ROW = ("0, NVIDIA GeForce RTX 4090, GPU-0b67ba03-6118-54fb-853d-533f932c1fed, 570.86.15, 24564, 1, 38, 0, [N/A], "
       "0x0000000000000000, 0x0000000000000000, 4, 16")
QUERY = ("index,name,uuid,driver_version,memory.total,memory.used,temperature.gpu,utilization.gpu,"
         "ecc.errors.uncorrected.volatile.total,clocks_event_reasons.active,clocks_throttle_reasons.active,"
         "pcie.link.gen.current,pcie.link.width.current")
#: a probe v4 transcript as the probe printed it (marked sections); {rows} is the nvidia-smi section's body
LEGACY = ("@@gpuharness gpus\n# query: " + QUERY + "\n{rows}\n# exit: 0\n@@gpuharness end rc=0\n"
          "@@gpuharness header\n| NVIDIA-SMI 570.86.15              Driver Version: 570.86.15      CUDA Version: 12.8"
          "    |\n@@gpuharness end rc=0\n@@gpuharness apps\n@@gpuharness end rc=0\n"
          "@@gpuharness disk\n/workspace 209715200 157286400\n/ 209715200 157286400\n@@gpuharness end rc=0\n"
          "@@gpuharness process\nfound_by pattern\n 4242 python main.py --listen 0.0.0.0 --port 8188\n"
          "@@gpuharness end rc=0\n@@gpuharness ports\nLISTEN 0      4096         0.0.0.0:8188      0.0.0.0:*\n"
          "@@gpuharness end rc=0\n@@gpuharness log\nStarting server\n@@gpuharness end rc=0\n"
          "@@gpuharness progress\n@@gpuharness end rc=0\n@@gpuharness torch\ninterpreter none \n"
          "service_torch unknown\nno_python\nsmoke_rc 127\n@@gpuharness end rc=0\n@@gpuharness done\n")


def rows(megabytes: float) -> str:
    return "\n".join([ROW] * max(1, int(megabytes * 1e6) // (len(ROW) + 1)))


def suite(world: HealthWorld, dep_id: str, mode: str, cassettes: Path) -> float:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pytest", str(ROOT / "checks" / "health"), "-q", "-p",
                           "no:cacheprovider", "--registry", str(world.registry.root), "--gpu-mode", mode,
                           "--cassettes", str(cassettes), "--deployment", dep_id],
                          capture_output=True, text=True, cwd=world.root, check=False)
    wall = time.perf_counter() - started
    print(f"   {dep_id}: {done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr[-300:]}")
    return wall


def offline(world: HealthWorld, megabytes: float) -> tuple[float, float]:
    cassettes = world.root / "cassettes"
    (cassettes / "ssh").mkdir(parents=True)
    walls = []
    for dep_id, body in (("dep_normal", rows(0)), ("dep_large", rows(megabytes))):
        world.add(dep_id)
        document = {"deployment": dep_id, "recorded_at": "2026-11-30T20:30:00Z", "source": "simulator",
                    "probe_version": 4, "stdout": LEGACY.format(rows=body), "stderr": "", "exit_status": 0}
        (cassettes / "ssh" / f"{dep_id}.json").write_text(json.dumps(document))
        walls.append(suite(world, dep_id, "offline", cassettes))
    return walls[0], walls[1]


def live(world: HealthWorld, megabytes: float) -> tuple[float, float]:
    walls = []
    for dep_id, count in (("dep_live_normal", 1), ("dep_live_large", rows(megabytes).count("\n") + 1)):
        host = world.add(dep_id, HostSpec())
        smi = host.bin / "nvidia-smi"
        smi.rename(host.bin / "nvidia-smi.one")
        smi.write_text("#!/bin/sh\ncase \"$*\" in *--query-gpu=*) "
                       f"\"$(dirname \"$0\")/nvidia-smi.one\" \"$@\" | awk '{{for (i = 0; i < {count}; i++) print}}'"
                       " ;; *) exec \"$(dirname \"$0\")/nvidia-smi.one\" \"$@\" ;; esac\n")
        smi.chmod(0o755)
        walls.append(suite(world, dep_id, "live", world.root / "cassettes"))
    return walls[0], walls[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=10.0)
    args = parser.parse_args()
    for name, method in (("1. offline replay of a probe v4 transcript", offline), ("2. live probe", live)):
        root = Path(tempfile.mkdtemp(prefix="gh-bench-probe-"))
        world = HealthWorld(root)
        try:
            normal, large = method(world, args.mb)
        finally:
            world.close()
            shutil.rmtree(root, ignore_errors=True)
        print(f"== {name}: nvidia-smi output {args.mb:g} MB: wall={large:.2f} s; at its normal size: {normal:.2f} s;"
              f" ratio large/normal = {large / normal:.1f}x")


if __name__ == "__main__":
    main()
