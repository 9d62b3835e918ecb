"""Deployment states, the one table of allowed transitions, and the transition journal."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from gpuharness.core import schema
from gpuharness.core.clock import now_ts
from gpuharness.core.errors import UserError
from gpuharness.core.jsonl import append_record, read_records
from gpuharness.core.registry import Registry

STATES = ("provisioning", "installing", "configuring", "health-checking", "ready", "running",
          "retrieving", "destroying", "destroyed", "error", "stopped")
LIVE = frozenset(STATES) - {"destroyed"}
#: live states that bill cost_hr: a stopped instance keeps its disk but not its GPU rate
BILLING = LIVE - {"stopped"}

#: The only table of allowed transitions. `error` is reachable from every state but destroyed.
ALLOWED: dict[str, frozenset[str]] = {
    "provisioning": frozenset({"installing", "configuring", "health-checking", "destroying"}),
    "installing": frozenset({"configuring", "destroying"}),
    "configuring": frozenset({"health-checking", "destroying"}),
    "health-checking": frozenset({"ready", "health-checking", "destroying"}),
    "ready": frozenset({"running", "retrieving", "destroying", "stopped", "health-checking"}),
    "running": frozenset({"ready", "retrieving", "destroying"}),
    "retrieving": frozenset({"ready", "destroying"}),
    "destroying": frozenset({"destroyed"}),
    "stopped": frozenset({"health-checking", "destroying"}),
    "error": frozenset({"installing", "configuring", "health-checking", "destroying"}),
    "destroyed": frozenset(),
}


def live_burn(deployments: Iterable[dict[str, Any]]) -> tuple[float, int]:
    """Hourly burn and count of the deployments that bill (BILLING): what max_cost_hr and
    max_concurrent_deployments are measured against, by provision, offers and the audit alike."""
    billing = [d for d in deployments if d.get("status") in BILLING]
    return sum(float(d.get("cost_hr") or 0.0) for d in billing), len(billing)


def allowed(current: str, target: str) -> bool:
    """Whether current -> target is in the table (error is reachable from any live state)."""
    if target == "error":
        return current != "destroyed"
    return target in ALLOWED.get(current, frozenset())


def journal(registry: Registry, entry: dict[str, Any]) -> None:
    """Append one transition to transitions.jsonl (validated)."""
    entry = {"ts": now_ts(), **entry}
    errors, _ = schema.check("transition", entry)
    if errors:
        raise ValueError(f"bad journal entry {errors[0].json_path}: {errors[0].message}")
    append_record(registry.journal_path, entry)


def observe(registry: Registry, deployment: Mapping[str, Any], *, marker: Any, note: str,
            route: str | None = None) -> None:
    """Journal an observation of a deployment that changes no state (from and to are its status)."""
    status = deployment["status"]
    journal(registry, {"deployment": deployment["id"], "provider": deployment.get("provider"),
                       "target_id": deployment.get("instance_id"), "from": status, "to": status, "route": route,
                       "observed_at": now_ts(), "marker": marker, "note": note})


def read_journal(path: Path) -> Iterator[dict[str, Any]]:
    """Stream the journal; a torn final line is skipped, a broken one is a one-line error."""
    return read_records(path, what="journal line")


def transition(registry: Registry, deployment_id: str, target: str, *, route: str | None = None,
               marker: Any = None, next_action: str | None = None, note: str | None = None,
               observed_at: str | None = None, **fields: Any) -> dict[str, Any]:
    """Move a deployment to target under the registry lock, journal it, and return the new record.

    Extra fields (ready_at, health, error, ...) are set on the deployment in the same write.
    """
    with registry.update("deployments.json") as document:
        for deployment in document["deployments"]:
            if deployment["id"] == deployment_id:
                break
        else:
            raise UserError(f"no deployment {deployment_id!r}", path=registry.path("deployments.json"))
        current = deployment["status"]
        if not allowed(current, target):
            raise UserError(f"deployment {deployment_id} cannot go from {current} to {target}",
                            path=registry.path("deployments.json"),
                            hint=f"allowed from {current}: {[*sorted(ALLOWED[current]), 'error']}")
        deployment["status"] = target
        deployment.update(fields)
        if target == "destroyed" and not deployment.get("destroyed_at"):
            deployment["destroyed_at"] = now_ts()
        result = dict(deployment)
        # Write-ahead, under the registry lock: the journal keeps the order in which states changed, and a
        # crash between the two writes leaves a journaled intent, never an unjournaled transition.
        registry.validate("deployments.json", document)
        journal(registry, {"deployment": deployment_id, "provider": result.get("provider"),
                           "target_id": result.get("instance_id"), "from": current, "to": target,
                           "route": route, "observed_at": observed_at or now_ts(), "marker": marker,
                           "next_action": next_action, "note": note})
    return result
