"""Run pytest with the product's clock moved to another moment, to find tests whose outcome depends on the date.

    python tests/as_of.py 2026-12-31T12:00:00Z -n 2 -q      # the suite as of noon on the last day of a month

Every Python process the run starts (xdist workers, `gpuharness` subprocesses, pytester runs, the simulator) reads
`gpuharness.core.clock.utcnow` moved by one fixed offset, through a sitecustomize on PYTHONPATH; the offset is taken
once here, so all of them agree. What does not read that clock is not moved: the simulator's provider clock
(`time.time`, as a real provider's own clock is not ours), file times and monotonic timers. So a failure is a date
dependence only when it is not about the simulator's accrual or a guard's idle timer; `docs/development.md` lists
the ones seen.
"""

from __future__ import annotations

import os
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

SITECUSTOMIZE = '''\
import os

if os.environ.get("GPUHARNESS_CLOCK_SHIFT_S"):
    try:
        import gpuharness.core.clock as _clock
    except ImportError:  # an interpreter without gpuharness (an official client's venv): nothing to move
        _clock = None
    if _clock is not None:
        from datetime import timedelta

        _clock._SHIFT = timedelta(seconds=float(os.environ["GPUHARNESS_CLOCK_SHIFT_S"]))

        def _moved():
            return datetime.now(UTC) + _SHIFT  # noqa: F821 (globals of the clock module)

        # the function's code, not the name: every `from gpuharness.core.clock import utcnow` sees the move
        _clock.utcnow.__code__ = _moved.__code__
'''


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 2
    target = datetime.fromisoformat(argv[0].replace("Z", "+00:00"))
    if target.tzinfo is None:
        target = target.replace(tzinfo=UTC)
    shim = Path(tempfile.mkdtemp(prefix="gh-as-of-"))
    (shim / "sitecustomize.py").write_text(SITECUSTOMIZE)
    env = dict(os.environ, GPUHARNESS_CLOCK_SHIFT_S=str((target - datetime.now(UTC)).total_seconds()),
               PYTHONPATH=os.pathsep.join(filter(None, [str(shim), os.environ.get("PYTHONPATH")])))
    print(f"as of {target.isoformat()}: the product's clock moved by {env['GPUHARNESS_CLOCK_SHIFT_S']} s",
          flush=True)
    os.execvpe(sys.executable, [sys.executable, "-m", "pytest", *argv[1:]], env)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
