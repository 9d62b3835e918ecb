"""Stewardship of paid resources: every live paid deployment has a cleanup owner and a reason (the operators'
runbook: "a Pod is a persistent billed resource and needs an explicit reason plus a cleanup owner")."""

from __future__ import annotations

import getpass
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from gpuharness.core.deployment import Deployment
from gpuharness.core.errors import UserError
from gpuharness.core.terminal import looks_empty


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


def missing_steward(deployment: Deployment) -> tuple[str, ...]:
    """The audit's rule (shutdown:steward): which of owner and reason a deployment that bills now does not name
    (a string that shows something each: spaces, zero-width and other format characters, controls and line
    separators name nobody); nothing for one that does not bill."""
    if deployment.burn_hr <= 0:
        return ()
    return tuple(name for name, value in (("owner", deployment.owner), ("reason", deployment.reason))
                 if looks_empty(value))


def refuse_dropped_owner(before: Mapping[str, Mapping[str, Any]], after: Iterable[Mapping[str, Any]],
                         path: str | Path | None) -> None:
    """At a write of deployments.json: a live paid deployment may not be added with an owner of null (or one that
    shows nothing),
    nor lose the owner it had. Records that never named one stay as written (the audit reports them), so an old
    record never blocks the writes that clean it up."""
    for record in after:
        deployment = Deployment.from_json(record)
        if not needs_steward(deployment) or not looks_empty(deployment.owner):
            continue
        earlier = before.get(deployment.id)
        dropped = ("owner" in record) if earlier is None else not looks_empty(earlier.get("owner"))
        if dropped:
            raise UserError(f"owner {deployment.owner!r} refused for live paid deployment {deployment.id} "
                            f"(${deployment.cost_hr:.3f}/hr): every paid resource has a cleanup owner", path=path,
                            place=deployment.id, hint="name the person who cleans it up (--owner); nothing was "
                                                      "changed")
