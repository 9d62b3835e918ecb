"""A suite's fixed cost: `pytest checks/audit` on the tiny demo registry against a trivial one-test pytest run.

    python bench/suite_startup.py [--repeat 5]

Both run as subprocesses from the same temporary directory with the same interpreter and plugins (the gpuharness
plugin loads for every pytest run): the trivial run is one file with one passing test; the audit run is the whole
audit suite on a copy of fixtures/demo/.pi/gpu (2,003 ledger lines), writing its HTML and JUnit reports as it does by
default. It prints the fastest of `--repeat` runs of each and their ratio (goal: at most 1.5x), and, to show what the
HTML report (pytest-html and the matplotlib spend chart) costs, the same audit run with `-p no:html`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "fixtures" / "demo" / ".pi" / "gpu"
NOW = "2026-11-30T18:10:00Z"


def fastest(command: list[str], *, cwd: Path, env: dict[str, str], repeat: int) -> float:
    """The fastest wall time of `repeat` runs; a failing run ends the benchmark."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
        seconds = time.perf_counter() - start
        if done.returncode != 0:
            print(done.stdout[-3000:], done.stderr[-3000:])
            raise SystemExit(f"{' '.join(command)} failed (exit {done.returncode})")
        best = min(best, seconds)
    return best


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
        figures = {"trivial_s": 0.0, "audit_s": 0.0, "audit_no_html_s": 0.0}
        figures["trivial_s"] = fastest(trivial, cwd=work, env=env, repeat=args.repeat)
        figures["audit_s"] = fastest(audit, cwd=work, env=env, repeat=args.repeat)
        figures["audit_no_html_s"] = fastest([*audit, "-p", "no:html"], cwd=work, env=env, repeat=args.repeat)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    ratio = figures["audit_s"] / figures["trivial_s"]
    print(f"trivial one-test pytest run        {figures['trivial_s']:.2f} s (fastest of {args.repeat})")
    print(f"pytest checks/audit, demo registry {figures['audit_s']:.2f} s (fastest of {args.repeat}; reports written)")
    print(f"audit/trivial                      {ratio:.2f}x   (goal <= 1.5x)")
    print(f"the same audit with -p no:html     {figures['audit_no_html_s']:.2f} s = "
          f"{figures['audit_no_html_s'] / figures['trivial_s']:.2f}x the trivial run (JUnit report only)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
