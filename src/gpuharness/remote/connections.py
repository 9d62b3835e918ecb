"""The connection registry (connections.json): the route each target was reached by and its last probe."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from gpuharness.core.clock import now_ts
from gpuharness.core.registry import Registry

if TYPE_CHECKING:  # the route module imports paramiko (~0.4 s): only a live probe needs it
    from gpuharness.remote.route import HostRoute


def record_probe(registry: Registry, route: HostRoute, *, phase: str, result: str,
                 accepted_key: str | None = None) -> None:
    """Record the route used for `route.target` and how its probe ended, under the registry lock; a
    trust-on-first-use acceptance is recorded with the key it accepted. Never credentials."""
    with registry.update("connections.json") as document:
        items = document["connections"]
        entry = next((c for c in items if c.get("target") == route.target), None)
        if entry is None:
            entry = {"target": route.target, "kind": "local" if route.transport == "local" else "ssh",
                     "route": route.label, "created_at": now_ts()}
            items.append(entry)
        entry["last_probe"] = {"phase": phase, "at": now_ts(), "result": result}
        entry["owner"] = entry.get("owner") or f"gpuharness {phase}"
        entry["pid"] = os.getpid()
        if accepted_key:
            entry["host_key"] = accepted_key
            entry["trust_on_first_use"] = True
