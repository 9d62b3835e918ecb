"""Print the lifecycle fault matrix as a Markdown table (runs tests/project/test_fault_matrix.py and collects its rows).

    python bench/fault_matrix.py            # about a minute on 2 cores
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HEADER = ("cell", "duplicate launches", "lost/rewritten ledger lines", "destroys with unsynced artifacts",
          "ready without passing test gen", "instances launched", "message")


def main() -> int:
    started = time.monotonic()
    matrix = ROOT / "tests" / "project" / "test_fault_matrix.py"
    completed = subprocess.run([sys.executable, "-m", "pytest", str(matrix), "-q", "-s", "-p", "no:cacheprovider"],
                               cwd=ROOT, capture_output=True, text=True)
    rows = [line.split("MATRIX|", 1)[1].split("|") for line in completed.stdout.splitlines() if "MATRIX|" in line]
    print("| " + " | ".join(HEADER) + " |")
    print("|" + "---|" * len(HEADER))
    for row in rows:
        message = row[-1].replace("|", "/")
        message = message if len(message) <= 160 else message[:157] + "..."
        print("| " + " | ".join([*row[:-1], message]) + " |")
    print(f"\n{len(rows)} cells in {time.monotonic() - started:.0f} s; pytest exit {completed.returncode}")
    return completed.returncode


if __name__ == "__main__":
    raise SystemExit(main())
