"""Issue 20 item 3: `gpuharness --version` prints the package's version."""
from __future__ import annotations

import subprocess
import sys

from gpuharness import __version__


def test_version_prints_the_package_version() -> None:
    done = subprocess.run([sys.executable, "-m", "gpuharness", "--version"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"gpuharness {__version__}"
