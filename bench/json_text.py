"""What refusing repeated keys and unwritable values costs, as ratios against a peer run in the same process.

    python bench/json_text.py [--deployments 1000] [--lines 200000] [--repeat 5]

- a state document (deployments.json with N deployments): core.json_text.loads (repeated keys, finite numbers,
  integers that fit a float) against plain json.loads; check_writable against the dump it precedes;
- ledger lines (the demo ledger, repeated): orjson.loads plus line_duplicate (the cheap bound, exact only when it
  cannot decide) against orjson.loads alone; the exact check (stdlib json with an object_pairs_hook) against
  orjson.loads alone, for comparison; and the JobLine Struct decode with Ledger.current's check (key_bound against
  keys_at_least) against the Struct decode alone.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path

import orjson

from gpuharness.core import json_text
from gpuharness.core.job_line import decode_job_line
from gpuharness.core.statefile import dump_json

ROOT = Path(__file__).resolve().parent.parent


def pair(repeat: int, work: Callable[[], object], peer: Callable[[], object]) -> tuple[float, float]:
    """Best times of work and of its peer, run alternately (a shared machine's load hits both alike)."""
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(repeat):
        for index, job in enumerate((work, peer)):
            started = time.perf_counter()
            job()
            times[index].append(time.perf_counter() - started)
    return min(times[0]), min(times[1])


def deployments(count: int) -> dict[str, object]:
    return {"schema_version": 1, "deployments": [
        {"id": f"dep_{i:05d}", "provider": "vast", "instance_id": f"inst-{i}", "gpu": "RTX 4090", "gpu_count": 1,
         "runtime": "comfyui", "model": "sdxl-base", "endpoint": f"http://127.0.0.1:{8000 + i % 1000}",
         "ssh": {"host": "127.0.0.1", "port": 22000 + i % 1000, "user": "root", "workspace": "gh-workspace"},
         "status": "ready", "cost_hr": 0.4 + i / 1e4, "created_at": "2026-11-30T20:00:00Z",
         "shutdown_rule": {"idle_minutes": 30}, "labels": {"gh_key": f"gh-dep_{i:05d}"}} for i in range(count)]}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--deployments", type=int, default=1000)
    parser.add_argument("--lines", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    document = deployments(args.deployments)
    text = json.dumps(document, indent=2)
    checked, plain = pair(args.repeat, lambda: json_text.loads(text, "deployments.json"), lambda: json.loads(text))
    writable, dump = pair(args.repeat, lambda: json_text.check_writable(document, "deployments.json"),
                          lambda: dump_json(document))
    print(f"deployments.json, {args.deployments} deployments ({len(text):,} bytes), best of {args.repeat}:")
    print(f"  read:  json_text.loads {checked * 1e3:.1f} ms / json.loads {plain * 1e3:.1f} ms = "
          f"{checked / plain:.2f}x")
    print(f"  write: check_writable {writable * 1e3:.1f} ms / dump_json {dump * 1e3:.1f} ms = {writable / dump:.2f}x "
          f"(check + dump = {(writable + dump) / dump:.2f}x the dump)")

    demo = (ROOT / "fixtures" / "demo" / ".pi" / "gpu" / "jobs.jsonl").read_bytes().splitlines()
    lines = (demo * (args.lines // len(demo) + 1))[:args.lines]

    def cheap() -> None:
        for raw in lines:
            json_text.line_duplicate(raw, orjson.loads(raw))

    def struct_checked() -> None:
        for raw in lines:
            line = decode_job_line(raw)
            if json_text.key_bound(raw) != line.keys_at_least():
                json_text.line_duplicate(raw, orjson.loads(raw))

    def parsed() -> None:
        for raw in lines:
            orjson.loads(raw)

    def exact_only() -> None:
        for raw in lines:
            json_text.first_duplicate(raw)

    def struct_only() -> None:
        for raw in lines:
            decode_job_line(raw)

    with_check, bare = pair(args.repeat, cheap, parsed)
    exact, bare_again = pair(args.repeat, exact_only, parsed)
    struct_check, struct = pair(args.repeat, struct_checked, struct_only)
    print(f"ledger lines, {len(lines):,} demo lines, best of {args.repeat}:")
    print(f"  orjson + line_duplicate {with_check:.2f} s / orjson alone {bare:.2f} s = {with_check / bare:.2f}x")
    print(f"  exact check alone (json + object_pairs_hook) {exact:.2f} s / orjson alone {bare_again:.2f} s = "
          f"{exact / bare_again:.2f}x")
    print(f"  JobLine Struct + key_bound/keys_at_least (Ledger.current's check) {struct_check:.2f} s / Struct alone "
          f"{struct:.2f} s = {struct_check / struct:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
