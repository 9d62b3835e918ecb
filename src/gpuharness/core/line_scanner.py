"""The compiled ledger-line scanner (`_linescan`, built from _linescan.c when a C compiler was found at install).

The audit's ledger pass and the ledger's current-line lookups use it. Without it they parse every line in Python,
with the same results; `GPUHARNESS_AUDIT_NATIVE=0` forces that.
"""

from __future__ import annotations

import importlib
import os
from typing import Any, Protocol, cast

ENV_VAR = "GPUHARNESS_AUDIT_NATIVE"


class LineScanner(Protocol):
    """What _linescan.c provides (see its docstrings)."""

    def scan_block(self, data: bytes, cut: int, part: int, parts: int, strings: dict[str, str], /
                   ) -> tuple[int, list[Any]]: ...

    def candidate_lines(self, data: bytes, limit: int, needles: tuple[bytes, ...], /) -> list[tuple[int, int]]: ...

    def last_lines(self, data: bytes, cut: int, base: int, last: dict[str, Any], wanted: bytes | None, /
                   ) -> tuple[int, list[tuple[int, int, int]]]: ...


def compiled() -> LineScanner | None:
    """The compiled scanner, or None when it is not built or is switched off."""
    if os.environ.get(ENV_VAR, "1") == "0":
        return None
    try:
        module = importlib.import_module("gpuharness._linescan")
    except ImportError:
        return None
    return cast(LineScanner, module)
