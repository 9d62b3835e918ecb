"""A native deployment: the harness runs no service of its own there (the host is yours to use), so there is no
health endpoint to ask, no test generation and no jobs; the host is still installed, probed and retrieved from."""

from __future__ import annotations

from typing import Final

from gpuharness.core.runtimes import Runtime
from gpuharness.runtimes import declare

#: its entry in the runtime table: a host of ours and nothing on it to call
RUNTIME: Final = declare(Runtime("native", generates=False))
