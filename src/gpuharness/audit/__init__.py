"""The audit of a registry: schemas, references, the append-only ledger, spend, history, shutdown and secrets."""

from gpuharness.audit.checkpoint import Checkpoint, LedgerState, checkpoint_path
from gpuharness.audit.findings import Finding
from gpuharness.audit.run import AuditRun, run_audit

__all__ = ["AuditRun", "Checkpoint", "Finding", "LedgerState", "checkpoint_path", "run_audit"]
