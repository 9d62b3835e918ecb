"""Benchmark the audit of a big ledger against DuckDB's bare sum and the jq spend command.

    python bench/ledger_audit.py                 # 1,000,000 lines (~450 MB) in a temp dir (heavy: minutes)
    python bench/ledger_audit.py --lines 100000  # a quick run

In one run it generates a registry and ledger consistent with its policy (fixtures/make_demo.py), then times:
the full audit (`pytest checks/audit --registry DIR` as a subprocess, with its peak RSS), DuckDB's
`SELECT sum(cost_usd) FROM read_ndjson_auto(...)`, the jq command
`jq -s 'map(select(.status=="completed")) | map(.cost_usd // 0) | add'`, and, after appending 1% more lines,
the incremental audit (which proves the whole attested prefix unchanged by its hash). It also times the audit of
the 2,003-line demo registry: the fixed cost every audit pays
(pytest's start-up, the other checks, the report, teardown). It prints the figures, the ratios against the targets,
and the same ratios less that fixed cost.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "fixtures"))

import make_demo  # noqa: E402

NOW = "2026-11-30T18:10:00Z"


#: A small process that starts the measured commands: a child's peak RSS (ru_maxrss) includes the memory of the
#: process it was forked from, so they are forked from this ~10 MB launcher, not from the benchmark itself. ru_maxrss
#: is the peak of the largest process of the tree (the audit may fork a child for half the ledger), so the launcher
#: also samples the tree every 20 ms and keeps the peak of its summed PSS (each shared page counted once, shared
#: between the processes that map it).
LAUNCHER = r"""
import json, os, subprocess, sys, tempfile, time

def tree(pid):
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        try:
            with open(f"/proc/{current}/task/{current}/children") as handle:
                todo.extend(int(child) for child in handle.read().split())
        except OSError:
            pass
    return found

def pss_mb(pids):
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/smaps_rollup") as handle:
                total += next(int(line.split()[1]) for line in handle if line.startswith("Pss:"))
        except (OSError, StopIteration):
            pass
    return total / 1024.0

for request in sys.stdin:
    job = json.loads(request)
    start = time.perf_counter()
    peak_pss = 0.0
    with tempfile.TemporaryFile() as out:
        process = subprocess.Popen(job["command"], cwd=job["cwd"], env=job["env"], stdout=out,
                                   stderr=subprocess.STDOUT)
        while True:
            peak_pss = max(peak_pss, pss_mb(tree(process.pid)))
            pid, status, usage = os.wait4(process.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() - start > job["timeout"]:
                process.kill()
                pid, status, usage = os.wait4(process.pid, 0)
                break
            time.sleep(0.02)
        seconds = time.perf_counter() - start
        out.seek(0)
        tail = out.read().decode("utf-8", "replace")[-3000:]
    print(json.dumps([seconds, usage.ru_maxrss / 1024.0, os.waitstatus_to_exitcode(status), tail, peak_pss,
                      usage.ru_utime + usage.ru_stime]), flush=True)
"""
_launcher: subprocess.Popen[str] | None = None


def start_launcher() -> None:
    global _launcher
    _launcher = subprocess.Popen([sys.executable, "-c", LAUNCHER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 text=True)


#: The peak summed PSS (MB) of the process tree of the last command run_child ran, and its CPU seconds (user and
#: system, the whole tree): on a shared machine CPU time varies far less than wall time.
last_tree_pss_mb = 0.0
last_cpu_s = 0.0


def run_child(command: list[str], *, cwd: Path, env: dict[str, str], timeout: float) -> tuple[float, float, int, str]:
    """Run a command (through the launcher); return (seconds, peak RSS in MB of its largest process, exit code,
    output tail). The peak summed PSS of its process tree is left in `last_tree_pss_mb`."""
    global last_tree_pss_mb, last_cpu_s
    if _launcher is None:
        start_launcher()
    assert _launcher is not None and _launcher.stdin is not None and _launcher.stdout is not None
    _launcher.stdin.write(json.dumps({"command": command, "cwd": str(cwd), "env": env, "timeout": timeout}) + "\n")
    _launcher.stdin.flush()
    seconds, peak, code, tail, pss, cpu = json.loads(_launcher.stdout.readline())
    last_tree_pss_mb, last_cpu_s = float(pss), float(cpu)
    return float(seconds), float(peak), int(code), str(tail)


def audit_command(registry: Path) -> list[str]:
    return [sys.executable, "-m", "pytest", str(REPO / "checks" / "audit"), "--registry", str(registry), "-q",
            "-p", "no:cacheprovider"]


def fastest_audit(registry: Path, label: str, workdir: Path, env: dict[str, str], repeat: int, *, timeout: float
                  ) -> tuple[float, float, float, float]:
    """The fastest of `repeat` full audits of a registry (its checkpoint removed each time), the highest peak RSS
    of a process, the highest peak summed PSS of the process tree and the least CPU time; a failing audit ends the
    benchmark."""
    fastest, peak_mb, tree_mb, cpu = float("inf"), 0.0, 0.0, float("inf")
    for _ in range(max(1, repeat)):
        shutil.rmtree(registry / "audit", ignore_errors=True)
        seconds, peak, code, tail = run_child(audit_command(registry), cwd=workdir, env=env, timeout=timeout)
        if code != 0:
            print(tail)
            raise SystemExit(f"{label} failed (exit {code}); see above")
        print(f"{label}: {seconds:.2f} s ({last_cpu_s:.2f} s CPU), peak RSS {peak:.0f} MB (largest process), "
              f"{last_tree_pss_mb:.0f} MB (PSS of the process tree)", flush=True)
        fastest, peak_mb, tree_mb = min(fastest, seconds), max(peak_mb, peak), max(tree_mb, last_tree_pss_mb)
        cpu = min(cpu, last_cpu_s)
    return fastest, peak_mb, tree_mb, cpu


def incremental_audit(registry: Path, lines: int, workdir: Path, env: dict[str, str], repeat: int
                      ) -> dict[str, float]:
    """Append `lines` lines to an audited registry, then time its incremental audit, fastest of `repeat` (the
    checkpoint is put back before each)."""
    attested = registry.parent / "attested-audit"
    shutil.rmtree(attested, ignore_errors=True)
    shutil.copytree(registry / "audit", attested)
    append_jobs(registry, lines)
    best = {"incremental_audit_s": float("inf"), "incremental_audit_cpu_s": float("inf"),
            "incremental_audit_peak_mb": 0.0}
    for _ in range(max(1, repeat)):
        shutil.rmtree(registry / "audit")
        shutil.copytree(attested, registry / "audit")
        seconds, peak, code, tail = run_child(audit_command(registry), cwd=workdir, env=env, timeout=3600)
        if code != 0 or f"{lines} validated (incremental)" not in tail:
            print(tail)
            raise SystemExit(f"the incremental audit failed or was not incremental (exit {code})")
        print(f"incremental audit after {lines:,} new lines: {seconds:.2f} s ({last_cpu_s:.2f} s CPU), peak RSS "
              f"{peak:.0f} MB", flush=True)
        best["incremental_audit_s"] = min(best["incremental_audit_s"], seconds)
        best["incremental_audit_cpu_s"] = min(best["incremental_audit_cpu_s"], last_cpu_s)
        best["incremental_audit_peak_mb"] = max(best["incremental_audit_peak_mb"], peak)
    return best


def append_jobs(registry: Path, lines: int) -> None:
    """Append `lines` new ledger lines: short jobs on a live deployment, consistent with its cost_hr."""
    deployments = json.loads((registry / "deployments.json").read_text())["deployments"]
    live = next(d for d in deployments if d["status"] == "running")
    rate = float(live["cost_hr"])
    origin = make_demo.END - make_demo.timedelta(minutes=50)
    with open(registry / "jobs.jsonl", "ab") as ledger:
        written = 0
        number = 0
        while written < lines:
            number += 1
            started = origin + make_demo.timedelta(milliseconds=number * 700)
            completed = started + make_demo.timedelta(seconds=12)
            base = {"id": f"J-inc-{number:07d}", "deployment_id": live["id"], "provider": live["provider"],
                    "model": live["model"], "workflow": live["workflow"], "workflow_version": 1, "gpu": live["gpu"],
                    "inputs": {"prompt": "incremental benchmark job", "seed": number}}
            records = [{**base, "status": "queued", "ts": make_demo.ts(started)},
                       {**base, "status": "running", "started_at": make_demo.ts(started), "ts": make_demo.ts(started)},
                       {**base, "status": "completed", "started_at": make_demo.ts(started),
                        "completed_at": make_demo.ts(completed), "duration_s": 12.0,
                        "cost_usd": round(12.0 * rate / 3600.0, 6), "ts": make_demo.ts(completed)}]
            for record in records[: lines - written]:
                ledger.write(orjson.dumps(record) + b"\n")
                written += 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lines", type=int, default=1_000_000, help="ledger lines to generate (default 1,000,000)")
    parser.add_argument("--append", type=int, default=None,
                        help="lines appended before the incremental audit (default: 1%% of --lines)")
    parser.add_argument("--workdir", type=Path, default=None, help="where to build (default: a temp dir, removed)")
    parser.add_argument("--keep", action="store_true", help="keep the work dir")
    parser.add_argument("--jq-timeout", type=float, default=900.0)
    parser.add_argument("--repeat", type=int, default=1,
                        help="time the full and incremental audits and DuckDB this many times and keep the fastest "
                             "(shared machines)")
    args = parser.parse_args()
    if args.append is None:
        args.append = max(1, args.lines // 100)

    start_launcher()  # while this process is still small
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="gh-bench-"))
    registry = workdir / "registry"
    if registry.exists():
        shutil.rmtree(registry)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["GPUHARNESS_AUDIT_NOW"] = NOW
    env.pop("GPUHARNESS_REGISTRY", None)
    figures: dict[str, float] = {}
    try:
        started = time.perf_counter()
        built = make_demo.build(registry, lines=args.lines)
        ledger = registry / "jobs.jsonl"
        size_mb = ledger.stat().st_size / 1e6
        print(f"generated {int(built['ledger_lines']):,} lines, {size_mb:,.0f} MB in "
              f"{time.perf_counter() - started:.1f} s ({registry})", flush=True)

        # Warm-up on a copy of the small demo: compiles bytecode and pytest's rewrite cache, as on any used machine.
        warm = workdir / "warm"
        shutil.copytree(make_demo.DEMO_DIR, warm, ignore=shutil.ignore_patterns("audit", "*.lock"), dirs_exist_ok=True)
        run_child(audit_command(warm), cwd=workdir, env=env, timeout=600)
        # The fixed cost every audit pays whatever the ledger's size: pytest's start-up, the other checks, the report
        # with its chart, teardown. Timed as the full audit of the 2,003-line demo registry.
        figures["floor_demo_audit_s"], _, _, _ = fastest_audit(warm, "the audit of the demo registry", workdir, env,
                                                               args.repeat, timeout=600)
        seconds, _, _, _ = run_child([sys.executable, "-m", "pytest", str(REPO / "checks" / "audit"), "--registry",
                                      str(warm), "-q", "-p", "no:cacheprovider", "--co"],
                                     cwd=workdir, env=env, timeout=600)
        figures["pytest_collect_only_s"] = seconds
        import duckdb

        figures.update(full_audit_s=float("inf"), full_audit_peak_mb=0.0, full_audit_tree_pss_mb=0.0,
                       full_audit_cpu_s=float("inf"), duckdb_sum_s=float("inf"), duckdb_sum_cpu_s=float("inf"))
        for _ in range(max(1, args.repeat)):  # interleaved: a busy spell on the machine weighs on both alike
            seconds, peak, tree, cpu = fastest_audit(registry, "full audit", workdir, env, 1, timeout=3600)
            figures.update(full_audit_s=min(figures["full_audit_s"], seconds),
                           full_audit_peak_mb=max(figures["full_audit_peak_mb"], peak),
                           full_audit_tree_pss_mb=max(figures["full_audit_tree_pss_mb"], tree),
                           full_audit_cpu_s=min(figures["full_audit_cpu_s"], cpu))
            start, cpu = time.perf_counter(), time.process_time()
            total = duckdb.sql(f"SELECT sum(cost_usd) FROM read_ndjson_auto('{ledger}')").fetchall()[0]
            seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
            print(f"duckdb sum(cost_usd): {seconds:.2f} s ({cpu:.2f} s CPU) (= {total[0] if total else None})",
                  flush=True)
            figures["duckdb_sum_s"] = min(figures["duckdb_sum_s"], seconds)
            figures["duckdb_sum_cpu_s"] = min(figures["duckdb_sum_cpu_s"], cpu)

        figures.update(incremental_audit(registry, args.append, workdir, env, args.repeat))

        jq = shutil.which("jq")
        if jq:
            program = 'map(select(.status=="completed")) | map(.cost_usd // 0) | add'
            seconds, peak, code, _ = run_child([jq, "-s", program, str(ledger)], cwd=workdir, env=env,
                                               timeout=args.jq_timeout)
            figures.update(jq_s=seconds, jq_cpu_s=last_cpu_s, jq_peak_mb=peak)
            note = "" if code == 0 else f" (did not finish: exit {code}, killed at the timeout or out of memory)"
            print(f"jq -s: {seconds:.2f} s, peak RSS {peak:.0f} MB{note}", flush=True)
    finally:
        if _launcher is not None and _launcher.stdin is not None:
            _launcher.stdin.close()
            _launcher.wait()
        if not args.keep and args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)

    ratio = {
        "audit/duckdb": figures["full_audit_s"] / figures["duckdb_sum_s"],
        "jq/audit": figures.get("jq_s", float("nan")) / figures["full_audit_s"],
        "peak_mb": max(figures["full_audit_peak_mb"], figures["full_audit_tree_pss_mb"]),
        "incremental/full": figures["incremental_audit_s"] / figures["full_audit_s"],
        "incremental/duckdb": figures["incremental_audit_s"] / figures["duckdb_sum_s"],
    }
    floor = figures["floor_demo_audit_s"]
    net_full = figures["full_audit_s"] - floor
    ratio["net audit/duckdb"] = net_full / figures["duckdb_sum_s"]
    ratio["net incremental/full"] = max(0.0, figures["incremental_audit_s"] - floor) / net_full
    print()
    print(f"lines {args.lines:,}  ledger {size_mb:,.0f} MB  cpus {os.cpu_count()}")
    for key, value in figures.items():
        print(f"  {key:28} {value:10.2f}")
    print(f"  audit/duckdb      {ratio['audit/duckdb']:6.2f}x   (target <= 3x)")
    print(f"  jq/audit          {ratio['jq/audit']:6.2f}x   (target >= 5x)")
    print(f"  peak MB           {ratio['peak_mb']:6.0f}    (target <= 200; the larger of the largest process' RSS "
          "and the tree's summed PSS)")
    print(f"  incremental/duckdb {ratio['incremental/duckdb']:5.2f}x   (target <= 1x, after +{args.append:,} lines)")
    print(f"  incremental/full  {ratio['incremental/full']:6.1%}")
    print(f"  less the fixed cost of any audit ({floor:.2f} s, the demo registry's audit):")
    print(f"  net audit/duckdb  {ratio['net audit/duckdb']:6.2f}x")
    print(f"  net incr./full    {ratio['net incremental/full']:6.1%}")
    print(f"  net incr./duckdb  {max(0.0, figures['incremental_audit_s'] - floor) / figures['duckdb_sum_s']:6.2f}x")
    duck_cpu = figures["duckdb_sum_cpu_s"]
    print("  CPU time (user + system, every thread and process; less sensitive to other jobs on the machine):")
    print(f"  cpu audit/duckdb  {figures['full_audit_cpu_s'] / duck_cpu:6.2f}x   "
          f"cpu incremental/duckdb {figures['incremental_audit_cpu_s'] / duck_cpu:5.2f}x   "
          f"cpu jq/audit {figures.get('jq_cpu_s', float('nan')) / figures['full_audit_cpu_s']:5.2f}x")
    print(json.dumps({"lines": args.lines, **{k: round(v, 3) for k, v in figures.items()},
                      **{k: round(v, 3) for k, v in ratio.items()}}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
