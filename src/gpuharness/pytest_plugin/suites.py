"""The packaged check suites: where they are, and the one pytest command line that runs one of them."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from gpuharness.core.errors import UserError

SUITES = ("health", "audit", "plan")
#: how a suite's step header starts (pytest_plugin.steps): `grep '^gpuharness step'` reads a run's phases
STEP_PREFIX = "gpuharness step"


def checks_root() -> Path:
    """The packaged checks (gpuharness/_checks in a wheel), else the repository's checks/ (editable installs)."""
    package = Path(__file__).resolve().parent.parent
    for candidate in (package / "_checks", package.parent.parent / "checks"):
        if (candidate / "health").is_dir() or (candidate / "audit").is_dir():
            return candidate
    raise UserError("the check suites are not installed", place=str(package / "_checks"),
                    hint="reinstall gpuharness (the wheel ships them as gpuharness/_checks)")


def suite_command(suite: str, args: Sequence[str] = (), *, root: Path | None = None) -> list[str]:
    """`python -m pytest <root>/<suite> --rootdir=<root> -p no:cacheprovider ARGS`, for `check`, the demo and tests."""
    root = root if root is not None else checks_root()
    path = root / suite
    if not path.is_dir():
        raise UserError(f"suite {suite!r} is not installed", path=path)
    return [sys.executable, "-m", "pytest", str(path), f"--rootdir={root}", "-p", "no:cacheprovider", *args]
