"""The one table of allowed transitions between deployment states, and transition(): the journaled move."""

from __future__ import annotations

from typing import Any

from gpuharness.core.clock import now_ts
from gpuharness.core.deployment import BILLING, LIVE, STATES, Deployment, live_burn
from gpuharness.core.errors import UserError
from gpuharness.core.journal import JournalEntry, append_entry, read_journal
from gpuharness.core.registry import Registry

__all__ = ["ALLOWED", "BILLING", "LIVE", "STATES", "allowed", "journal", "live_burn", "read_journal",
           "resume_or_destroy", "transition"]

#: The only table of allowed transitions. `error` is reachable from every state but destroyed.
ALLOWED: dict[str, frozenset[str]] = {
    "provisioning": frozenset({"installing", "configuring", "health-checking", "destroying"}),
    "installing": frozenset({"configuring", "destroying"}),
    "configuring": frozenset({"health-checking", "destroying"}),
    # stopped: by the provider or by the pod's own shutdown guard, from any state that bills with a host up
    "health-checking": frozenset({"ready", "health-checking", "destroying", "stopped"}),
    "ready": frozenset({"running", "retrieving", "destroying", "stopped", "health-checking"}),
    "running": frozenset({"ready", "retrieving", "destroying", "stopped"}),
    "retrieving": frozenset({"ready", "destroying"}),
    "destroying": frozenset({"destroyed"}),
    "stopped": frozenset({"health-checking", "destroying"}),
    # error -> provisioning: `provision --resume ID` waits again for an instance that never came up
    "error": frozenset({"provisioning", "installing", "configuring", "health-checking", "destroying"}),
    "destroyed": frozenset(),
}


def resume_or_destroy(deployment_id: str) -> str:
    """The way on for a deployment whose instance never came up (no route recorded): wait for it again, or end it."""
    return (f"`gpuharness provision --resume {deployment_id}` waits for it again (--up-deadline SECONDS), or "
            f"`gpuharness destroy {deployment_id} --confirm {deployment_id}` ends it")


def allowed(current: str, target: str) -> bool:
    """Whether current -> target is in the table (error is reachable from any live state)."""
    if target == "error":
        return current != "destroyed"
    return target in ALLOWED.get(current, frozenset())


def journal(registry: Registry, entry: JournalEntry) -> None:
    """Append one entry to the registry's transitions.jsonl."""
    append_entry(registry.journal_path, entry)


def transition(registry: Registry, deployment_id: str, target: str, *, route: str | None = None,
               marker: Any = None, next_action: str | None = None, note: str | None = None,
               observed_at: str | None = None, **fields: Any) -> Deployment:
    """Move a deployment to target under the registry lock, journal it, and return the new record.

    Extra fields (ready_at, health, error, ...) are set on the deployment in the same write.
    """
    with registry.change_deployment(deployment_id) as change:
        current = change.before.status
        if not allowed(current, target):
            raise UserError(f"deployment {deployment_id} cannot go from {current} to {target}",
                            path=registry.path("deployments.json"),
                            hint=f"allowed from {current}: {[*sorted(ALLOWED[current]), 'error']}")
        change.set(status=target, **fields)
        if target == "destroyed" and not change.after.destroyed_at:
            change.set(destroyed_at=now_ts())
        # Write-ahead, under the registry lock: the journal keeps the order in which states changed, and a
        # crash between the two writes leaves a journaled intent, never an unjournaled transition.
        change.validate()
        journal(registry, JournalEntry.of(change.after, from_state=current, route=route, observed_at=observed_at,
                                          marker=marker, next_action=next_action, note=note))
    return change.after
