"""A retrieve's hold on its deployment: `retrieving` while the transfers run, claimed by the retrieving process.
A deployment left `retrieving` by a retrieve that died (kill -9) has a free claim: the next retrieve resumes the
hold, and a refresh returns it to the state it was in, so `run` and `destroy` are not refused forever."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import final

from gpuharness.core import claims
from gpuharness.core.deployment import Deployment
from gpuharness.core.errors import UserError
from gpuharness.core.journal import read_entries
from gpuharness.core.lifecycle import allowed, transition
from gpuharness.core.registry import Registry

#: the states a retrieve shows `retrieving` from (transfers from a running job's host do not change its state)
HOLDS_FROM = frozenset({"ready"})


def state_before(registry: Registry, deployment_id: str) -> str:
    """The state the deployment was in when it last moved to `retrieving` (from the journal), else ready."""
    before = "ready"
    for entry in read_entries(registry.journal_path):
        if entry.deployment == deployment_id and entry.to_state == "retrieving" and entry.from_state:
            before = entry.from_state
    return before if allowed("retrieving", before) else "ready"


@final
@dataclass(slots=True)
class Hold:
    """The retrieve under way: whether it shows `retrieving`, and the state it returns to."""

    deployment_id: str
    route: str | None
    returns_to: str | None  # None: the deployment's state is not changed by this retrieve
    resumed: bool = False
    next_action: str | None = None


@contextlib.contextmanager
def hold(registry: Registry, deployment: Deployment, jobs: list[str]) -> Iterator[Hold]:
    """Claim the deployment for this retrieve, show `retrieving` (a ready one moves; one left `retrieving` by a
    dead retrieve is taken over), and return it to where it was when the block ends, however it ends."""
    with claims.claimed(registry.root, "retrieve", deployment.id,
                        busy=f"refused: another `gpuharness retrieve` is working on {deployment.id}",
                        hint="wait for it; transfers of one deployment run one at a time"):
        current = registry.deployment(deployment.id)
        state = Hold(deployment.id, current.ssh_route, None)
        if current.status == "retrieving":
            state.returns_to, state.resumed = state_before(registry, deployment.id), True
        elif current.status in HOLDS_FROM:
            transition(registry, deployment.id, "retrieving", route=state.route, marker={"jobs": jobs},
                       next_action="wait for the transfers")
            state.returns_to = current.status
        try:
            yield state
        finally:
            if state.returns_to is not None:
                transition(registry, deployment.id, state.returns_to, route=state.route,
                           note="the retrieve that held it had died; resumed" if state.resumed else None,
                           next_action=state.next_action)


def release_abandoned(registry: Registry) -> list[str]:
    """Deployments left `retrieving` by a retrieve that died go back to where they were (for status --refresh);
    their unsynced artifacts stay pending, for the next retrieve. Returns the transitions made."""
    moved: list[str] = []
    for deployment in registry.deployments():
        if deployment.status != "retrieving":
            continue
        claim = claims.take(registry.root, "retrieve", deployment.id)
        if claim is None:
            continue  # a live retrieve holds it
        try:
            back = state_before(registry, deployment.id)
            try:
                transition(registry, deployment.id, back, route="provider-list",
                           note="the retrieve that held it died (no live process claims it); artifacts not yet "
                                "synced stay pending",
                           next_action=f"gpuharness retrieve {deployment.id}")
            except UserError:
                continue  # it moved meanwhile: nothing to release
            moved.append(f"{deployment.id} retrieving -> {back} (its retrieve had died)")
        finally:
            claim.release()
    return moved
