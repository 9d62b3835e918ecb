"""Stewardship of paid resources: every live paid deployment has a cleanup owner and a reason (the operators'
runbook: "a Pod is a persistent billed resource and needs an explicit reason plus a cleanup owner")."""

from __future__ import annotations

import getpass
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, final

from gpuharness.core.deployment import Deployment
from gpuharness.core.errors import UserError


def needs_steward(deployment: Deployment) -> bool:
    """Live and paid by the hour: someone must be named to clean it up, for a stated reason."""
    return deployment.is_live and deployment.cost_hr > 0


def local_user() -> str | None:
    """The user running this command (the default cleanup owner), or None when the system cannot say."""
    try:
        name = getpass.getuser()
    except (OSError, KeyError):
        name = os.environ.get("USER") or ""
    return name.strip() or None


@final
@dataclass(frozen=True, slots=True)
class Unstewarded:
    """A live paid deployment missing its cleanup owner or its reason."""

    deployment_id: str
    missing: tuple[str, ...]  # "owner", "reason"
    cost_hr: float

    def message(self) -> str:
        return (f"deployment {self.deployment_id} bills ${self.cost_hr:.3f}/hr with no {' and no '.join(self.missing)}"
                ": a paid resource needs a cleanup owner and a reason (set them in deployments.json, or destroy it)")


def missing_steward(record: Mapping[str, Any]) -> tuple[str, ...]:
    """Which of owner and reason a deployments.json record does not name (a non-empty string each)."""
    return tuple(name for name in ("owner", "reason")
                 if not (isinstance(record.get(name), str) and str(record[name]).strip()))


def unstewarded(deployments: Iterable[Deployment]) -> list[Unstewarded]:
    """The audit's rule: every live paid deployment names its owner and its reason."""
    found = []
    for deployment in deployments:
        if not needs_steward(deployment):
            continue
        missing = missing_steward({"owner": deployment.owner, "reason": deployment.reason})
        if missing:
            found.append(Unstewarded(deployment.id, missing, deployment.cost_hr))
    return found


def refuse_dropped_owner(before: Mapping[str, Mapping[str, Any]], after: Iterable[Mapping[str, Any]],
                         path: str | Path | None) -> None:
    """At a write of deployments.json: a live paid deployment may not be added with an owner of null (or empty),
    nor lose the owner it had. Records that never named one stay as written (the audit reports them), so an old
    record never blocks the writes that clean it up."""
    for record in after:
        deployment = Deployment.from_json(record)
        if not needs_steward(deployment) or (deployment.owner or "").strip():
            continue
        earlier = before.get(deployment.id)
        dropped = ("owner" in record) if earlier is None else bool((earlier.get("owner") or "").strip())
        if dropped:
            raise UserError(f"owner {deployment.owner!r} refused for live paid deployment {deployment.id} "
                            f"(${deployment.cost_hr:.3f}/hr): every paid resource has a cleanup owner", path=path,
                            place=deployment.id, hint="name the person who cleans it up (--owner); nothing was "
                                                      "changed")
