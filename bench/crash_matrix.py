"""Print the crash matrix as a Markdown table (runs tests/project/test_crash_matrix.py and collects its rows):
kill -9 of a real `gpuharness` process at each step of provision, destroy, retrieve and plan apply, then what
status --refresh said, the recovery its message names, and the invariants after it.

    python bench/crash_matrix.py            # about two minutes on 2 cores
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HEADER = ("cell", "killed", "state after the kill", "status --refresh after the kill", "recovery",
          "billing unreported", "duplicate instances", "stuck deployments", "instances billing after", "audit",
          "s")


def main() -> int:
    started = time.monotonic()
    matrix = ROOT / "tests" / "project" / "test_crash_matrix.py"
    completed = subprocess.run([sys.executable, "-m", "pytest", str(matrix), "-q", "-s", "-p", "no:cacheprovider"],
                               cwd=ROOT, capture_output=True, text=True)
    rows = [line.split("CRASH|", 1)[1].split("|") for line in completed.stdout.splitlines() if "CRASH|" in line]
    print("| " + " | ".join(HEADER) + " |")
    print("|" + "---|" * len(HEADER))
    for row in rows:
        print("| " + " | ".join(cell.replace("|", "/") for cell in row) + " |")
    print(f"\n{len(rows)} cells in {time.monotonic() - started:.0f} s; pytest exit {completed.returncode}")
    if completed.returncode:
        print(completed.stdout[-3000:])
    return completed.returncode


if __name__ == "__main__":
    raise SystemExit(main())
