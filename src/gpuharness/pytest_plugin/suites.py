"""The packaged check suites: where they are, and the one pytest command line that runs one of them."""

from __future__ import annotations

import itertools
import sys
from collections.abc import Sequence
from pathlib import Path

from gpuharness.core.errors import UserError

SUITES = ("health", "audit", "plan")
#: the suites that never collect a health check
OTHER_SUITES = frozenset(SUITES) - {"health"}
#: how a suite's step header starts (pytest_plugin.steps): `grep '^gpuharness step'` reads a run's phases
STEP_PREFIX = "gpuharness step"


def is_health_path(path: Path) -> bool:
    """Whether a test file belongs to the health suite (checks/health/, or gpuharness/_checks/health/ in a wheel)."""
    return any(a in ("checks", "_checks") and b == "health" for a, b in itertools.pairwise(path.parts))


def suite_of(arg: str, invocation_dir: Path) -> str | None:
    """The check suite a pytest argument points into: `audit` for checks/audit/... (or _checks/audit/ in a wheel),
    `checks` for the checks directory itself, None for a path outside them (the project's tests)."""
    path = Path(arg.split("::")[0])
    if not path.is_absolute():
        path = invocation_dir / path
    parts = path.resolve().parts
    for index in range(len(parts) - 1, -1, -1):  # the innermost: a clone may itself live under a dir named checks
        if parts[index] in ("checks", "_checks"):
            name = parts[index + 1] if index + 1 < len(parts) else "checks"
            return name.removesuffix(".py")
    return None


def may_collect_health(args: Sequence[str], invocation_dir: Path) -> bool:
    """Whether a run may collect health checks: unless every argument points into another check suite (a run of
    checks/audit or checks/plan alone then spares the health family's imports, about a tenth of its start-up)."""
    return not args or any(suite_of(arg, invocation_dir) not in OTHER_SUITES for arg in args)


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
