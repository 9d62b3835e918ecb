"""Memory safety of the compiled scanner: tests/fuzz/linescan_asan.c, built with AddressSanitizer and
UndefinedBehaviorSanitizer, feeds it mutated ledger lines (exact-size buffers, so a read past a line is caught)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
HARNESS = REPO / "tests" / "fuzz" / "linescan_asan.c"
SEEDS = REPO / "fixtures" / "demo" / ".pi" / "gpu" / "jobs.jsonl"
SANITIZE = ["-g", "-O1", "-fno-omit-frame-pointer", "-fsanitize=address,undefined", "-fno-sanitize-recover=all"]


def python_config() -> str | None:
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    for candidate in (Path(sys.base_prefix) / "bin" / f"python{version}-config", Path(sys.base_prefix) / "bin"
                      / "python3-config"):
        if candidate.exists():
            return str(candidate)
    return shutil.which(f"python{version}-config")


def test_the_scanner_reads_nothing_outside_a_line(tmp_path: Path) -> None:
    compiler = shutil.which("gcc")
    config = python_config()
    if compiler is None or config is None:
        pytest.skip("needs gcc and python3-config (the Python headers) to build the sanitized harness")
    probe = tmp_path / "probe.c"
    probe.write_text("int main(void) { return 0; }\n")
    if subprocess.run([compiler, *SANITIZE, str(probe), "-o", str(tmp_path / "probe")], capture_output=True).returncode:
        pytest.skip("this gcc has no AddressSanitizer runtime (libasan)")
    flags = subprocess.run([config, "--includes", "--ldflags", "--embed"], capture_output=True, text=True,
                           check=True).stdout.split()
    binary = tmp_path / "linescan_asan"
    built = subprocess.run([compiler, *SANITIZE, f"-I{REPO / 'src' / 'gpuharness'}", str(HARNESS), *flags,
                            f"-Wl,-rpath,{Path(sys.base_prefix) / 'lib'}", "-o", str(binary)],
                           capture_output=True, text=True)
    assert built.returncode == 0, built.stderr[-3000:]
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=0:abort_on_error=0", PYTHONMALLOC="malloc",
               PYTHONHOME=sys.base_prefix)
    ran = subprocess.run([str(binary), str(SEEDS), "40000"], capture_output=True, text=True, env=env, timeout=600)
    assert ran.returncode == 0, (ran.stdout + ran.stderr)[-5000:]
    iterations, proven = (int(word) for word in ran.stdout.split()[1::2])
    assert iterations == 40000 and 0 < proven < iterations  # both verdicts were exercised
