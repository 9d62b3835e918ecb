"""The audit of a registry: schemas, references, the append-only ledger, spend, history, shutdown and secrets."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpuharness.audit.checkpoint import Checkpoint, LedgerState, checkpoint_path
    from gpuharness.audit.findings import Finding
    from gpuharness.audit.run import AuditRun, run_audit

__all__ = ["AuditRun", "Checkpoint", "Finding", "LedgerState", "checkpoint_path", "run_audit"]

#: Where each public name lives: loaded on first use, so that `gpuharness.audit.rules` (read by the pytest plugin
#: in every suite) does not load the engine.
_HOMES = {"AuditRun": "run", "run_audit": "run", "Checkpoint": "checkpoint", "LedgerState": "checkpoint",
          "checkpoint_path": "checkpoint", "Finding": "findings"}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
