"""A suite's fixed cost: `pytest checks/audit` on the tiny demo registry against a trivial one-test pytest run.

    python bench/suite_startup.py [--repeat 5]

Both run as subprocesses from the same temporary directory with the same interpreter and plugins (the gpuharness
plugin loads for every pytest run): the trivial run is one file with one passing test; the audit run is the whole
audit suite on a copy of fixtures/demo/.pi/gpu (2,003 ledger lines), writing its HTML and JUnit reports as it does by
default. It prints the fastest of `--repeat` runs of each and their ratio (goal: at most 1.5x), and, to show what the
HTML report (pytest-html and the spend chart) costs, the same audit run with `-p no:html`. Beside each wall time it
prints the least CPU time (user and system, the run and its child processes): on a machine shared with other jobs
the CPU time varies far less than the wall time.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "fixtures" / "demo" / ".pi" / "gpu"
NOW = "2026-11-30T18:10:00Z"


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def fastest(command: list[str], *, cwd: Path, env: dict[str, str], repeat: int) -> tuple[float, float]:
    """The least wall time and the least CPU time of `repeat` runs; a failing run ends the benchmark."""
    best, best_cpu = float("inf"), float("inf")
    for _ in range(repeat):
        start, cpu = time.perf_counter(), children_cpu()
        done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
        seconds, cpu = time.perf_counter() - start, children_cpu() - cpu
        if done.returncode != 0:
            print(done.stdout[-3000:], done.stderr[-3000:])
            raise SystemExit(f"{' '.join(command)} failed (exit {done.returncode})")
        best, best_cpu = min(best, seconds), min(best_cpu, cpu)
    return best, best_cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5, help="runs of each command; the fastest counts")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="gh-startup-"))
    try:
        (work / "test_trivial.py").write_text("def test_one():\n    assert 1 + 1 == 2\n")
        registry = work / "registry"
        shutil.copytree(DEMO, registry, ignore=shutil.ignore_patterns("*.lock"))
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "GPUHARNESS_REGISTRY")}
        env["GPUHARNESS_AUDIT_NOW"] = NOW
        pytest = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
        trivial = [*pytest, "test_trivial.py"]
        audit = [*pytest, str(REPO / "checks" / "audit"), "--registry", str(registry)]
        for command in (trivial, audit):  # warm-up: bytecode and pytest's assertion-rewrite cache
            fastest(command, cwd=work, env=env, repeat=1)
        best = {"trivial": (float("inf"), float("inf")), "audit": (float("inf"), float("inf")),
                "bare": (float("inf"), float("inf"))}
        for _ in range(args.repeat):  # interleaved, so that a busy spell on the machine weighs on all three alike
            for name, command in (("trivial", trivial), ("audit", audit), ("bare", [*audit, "-p", "no:html"])):
                seconds, cpu = fastest(command, cwd=work, env=env, repeat=1)
                best[name] = (min(best[name][0], seconds), min(best[name][1], cpu))
        (trivial_s, trivial_cpu), (audit_s, audit_cpu), (bare_s, bare_cpu) = best.values()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"trivial one-test pytest run        {trivial_s:.2f} s ({trivial_cpu:.2f} s CPU; fastest of {args.repeat})")
    print(f"pytest checks/audit, demo registry {audit_s:.2f} s ({audit_cpu:.2f} s CPU; reports written)")
    print(f"audit/trivial                      {audit_s / trivial_s:.2f}x   (goal <= 1.5x); CPU "
          f"{audit_cpu / trivial_cpu:.2f}x")
    print(f"the same audit with -p no:html     {bare_s:.2f} s = {bare_s / trivial_s:.2f}x the trivial run (JUnit "
          f"report only); CPU {bare_cpu / trivial_cpu:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
