"""Every benchmark in bench/ still runs: each at its smallest size, exit 0. The benchmarks call the project's own
functions, so a changed signature breaks them where no other test looks (bench/health_roundtrips.py passed a dict
where the health rules had come to take a Deployment, and nothing failed until it was run by hand). Figures are
not checked here: they belong to docs/benchmarks.md, measured on purpose."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
from checkout import ROOT

BENCH = ROOT / "bench"

#: each benchmark with the arguments that make it smallest (crash_matrix and fault_matrix run as their own tests)
SMALLEST = {
    "health_roundtrips.py": ["--targets", "2", "--rounds", "1", "--latency-ms", "5"],
    "install_progress.py": ["--small", "2", "--large", "1", "--large-mb", "1", "--repeat", "1"],
    "json_text.py": ["--deployments", "10", "--lines", "500", "--repeat", "1"],
    "ledger_pass_parts.py": ["--lines", "2000", "--repeat", "1"],
    "reconcile.py": ["--sizes", "10", "--repeat", "1"],
    "suite_startup.py": ["--repeat", "1"],
    "ledger_audit.py": ["--lines", "2000", "--repeat", "1"],
    "probe_transcript.py": ["--mb", "0.05"],
    "measurement_agreement.py": [],
}


def test_every_benchmark_is_listed_here_or_run_by_its_own_test():
    own_tests = {"crash_matrix.py", "fault_matrix.py"}
    assert {path.name for path in BENCH.glob("*.py")} == set(SMALLEST) | own_tests


@pytest.mark.parametrize("name", sorted(SMALLEST))
def test_the_benchmark_runs_at_its_smallest_size(name, tmp_path):
    if name == "ledger_audit.py" and shutil.which("jq") is None:
        pytest.skip("ledger_audit.py times jq, which is not installed here")
    done = subprocess.run([sys.executable, str(BENCH / name), *SMALLEST[name]], capture_output=True, text=True,
                          timeout=600, cwd=tmp_path, env={**os.environ, "TMPDIR": str(tmp_path)})
    assert done.returncode == 0, f"bench/{name} failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
