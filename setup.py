"""Build hook: ship the check suites (checks/) inside the wheel as gpuharness/_checks, so that users who
installed the package without cloning the repository can run `gpuharness check health|audit|plan`.
All other metadata lives in pyproject.toml."""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

CHECKS = Path(__file__).resolve().parent / "checks"


class BuildWithChecks(build_py):
    """build_py plus a copy of checks/ into the built package (editable installs use checks/ in place)."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False) or not CHECKS.is_dir():
            return
        target = Path(self.build_lib) / "gpuharness" / "_checks"
        shutil.copytree(CHECKS, target, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache"))


setup(cmdclass={"build_py": BuildWithChecks})
