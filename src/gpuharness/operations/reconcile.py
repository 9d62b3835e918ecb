"""Reconcile the registry with provider inventory: one list call per provider, orphans and vanished deployments."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, final

from gpuharness.core import lifecycle
from gpuharness.core.deployment import Deployment
from gpuharness.core.journal import JournalEntry
from gpuharness.core.json_fields import JsonFields
from gpuharness.core.ledger import Ledger
from gpuharness.core.registry import Registry
from gpuharness.operations.rate_changes import RateChange, record_rate_changes
from gpuharness.operations.retrieving import release_abandoned
from gpuharness.operations.unresolved import InterruptedDestroy, UnresolvedLaunch, interrupted_destroys, resolve
from gpuharness.providers.base import KEY_PREFIX, Instance
from gpuharness.providers.inventory import Inventory

#: Deployment states in which the registry claims an instance exists and should be running or stopped.
#: `destroying` is excluded: gone at the provider is what a destroy expects.
CLAIMS_INSTANCE = lifecycle.LIVE - {"destroying"}
GONE = frozenset({"terminated"})


@final
@dataclass(frozen=True, slots=True)
class Orphan:
    """An instance carrying our key prefix that no live deployment claims: money leaking. A second instance
    carrying a live deployment's key, while that deployment records another instance, is one too (duplicate_of)."""

    provider: str
    instance_id: str
    key: str | None
    status: str
    cost_hr: float | None
    claimed_by: str | None = None  # a destroyed deployment that still points at it
    duplicate_of: str | None = None  # the live deployment whose key it carries (it records another instance)

    def message(self) -> str:
        cost = f"${self.cost_hr:.2f}/hr" if self.cost_hr is not None else "cost unknown"
        if self.duplicate_of:
            why = (f"a second instance with the key of deployment {self.duplicate_of}, which records another "
                   "instance: a duplicate launch, billing")
        elif self.claimed_by:
            why = (f"deployment {self.claimed_by} is destroyed in the registry but the instance is still "
                   f"{self.status}")
        else:
            why = "no deployment in the registry claims it"
        return (f"orphan {self.provider}/{self.instance_id} (key {self.key}, {self.status}, {cost}): {why}; "
                f"terminate it (`gpuharness reap --orphans --apply`) or register it")

    def to_json(self) -> dict[str, Any]:
        return {"kind": "orphan", "provider": self.provider, "instance_id": self.instance_id, "key": self.key,
                "status": self.status, "cost_hr": self.cost_hr, "claimed_by": self.claimed_by,
                "duplicate_of": self.duplicate_of, "message": self.message()}


@final
@dataclass(frozen=True, slots=True)
class Vanished:
    """A deployment the registry calls live whose instance the provider no longer has (or has terminated)."""

    deployment_id: str
    provider: str
    instance_id: str
    registry_status: str
    provider_status: str | None  # None: absent from the list

    def message(self) -> str:
        seen = f"reports it {self.provider_status}" if self.provider_status else "no longer lists it"
        return (f"vanished deployment {self.deployment_id}: the registry says {self.registry_status} but "
                f"{self.provider} {seen} (instance {self.instance_id}); check its artifacts, then mark it "
                f"destroyed (`gpuharness destroy {self.deployment_id}`)")

    def to_json(self) -> dict[str, Any]:
        return {"kind": "vanished", "deployment_id": self.deployment_id, "provider": self.provider,
                "instance_id": self.instance_id, "registry_status": self.registry_status,
                "provider_status": self.provider_status, "message": self.message()}


def key_prefixes(providers: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Each provider's key prefix (providers.json `key_prefix`, else gh-)."""
    return {str(p["name"]): str(p.get("key_prefix") or KEY_PREFIX) for p in providers}


def _carries_key(instance: Instance, prefix: str) -> str | None:
    key = instance.idempotency_key
    if key and key.startswith(prefix):
        return key
    if instance.name and instance.name.startswith(prefix):
        return instance.name
    return None


def find_orphans(deployments: Iterable[Deployment], inventory: Inventory,
                 prefixes: Mapping[str, str] | None = None) -> list[Orphan]:
    """Instances (not terminated) carrying our prefix that no non-destroyed deployment claims: by its exact id,
    or by its key while the deployment records no instance yet (a launch not resolved). An instance carrying the
    key of a deployment that records another instance is a duplicate, so an orphan."""
    prefixes = prefixes or {}
    live_ids: set[tuple[str, str]] = set()
    live_keys: dict[tuple[str, str], Deployment] = {}
    destroyed_ids: dict[tuple[str, str], str] = {}
    for dep in deployments:
        provider, instance_id, key = dep.provider, dep.instance_id, dep.idempotency_key
        if not dep.is_live:
            if instance_id:
                destroyed_ids[(provider, instance_id)] = dep.id
            continue
        if instance_id:
            live_ids.add((provider, instance_id))
        if key:
            live_keys[(provider, key)] = dep
    orphans: list[Orphan] = []
    for provider, items in inventory.instances.items():
        prefix = prefixes.get(provider, KEY_PREFIX)
        for instance in items:
            if instance.status in GONE:
                continue
            key = _carries_key(instance, prefix)
            if key is None or (provider, instance.id) in live_ids:
                continue
            owner = live_keys.get((provider, key))
            if owner is not None and not owner.instance_id:
                continue  # the launch of its deployment is not resolved yet: reconcile links it
            orphans.append(Orphan(provider, instance.id, key, instance.status, instance.cost_hr,
                                  destroyed_ids.get((provider, instance.id)),
                                  owner.id if owner is not None else None))
    return orphans


def find_vanished(deployments: Iterable[Deployment], inventory: Inventory) -> list[Vanished]:
    """Deployments claiming an instance that their provider's list lacks or reports terminated."""
    index = {(p, i.id): i for p, items in inventory.instances.items() for i in items}
    vanished: list[Vanished] = []
    for dep in deployments:
        provider, instance_id = dep.provider, dep.instance_id
        if not instance_id or dep.status not in CLAIMS_INSTANCE or not inventory.covers(provider):
            continue
        instance = index.get((provider, instance_id))
        if instance is None or instance.status in GONE:
            vanished.append(Vanished(dep.id, provider, instance_id, dep.status,
                                     instance.status if instance else None))
    return vanished


@final
@dataclass(slots=True)
class ReconcileReport:
    """What one reconcile saw and changed."""

    inventory: Inventory
    orphans: list[Orphan] = field(default_factory=list)
    vanished: list[Vanished] = field(default_factory=list)
    unresolved: list[UnresolvedLaunch] = field(default_factory=list)
    interrupted: list[InterruptedDestroy] = field(default_factory=list)
    machine_changes: list[str] = field(default_factory=list)
    transitions: list[str] = field(default_factory=list)
    rate_changes: list[RateChange] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return (not self.orphans and not self.vanished and not self.unresolved and not self.interrupted
                and not any(change.exceeds_ceiling for change in self.rate_changes))

    def to_json(self) -> dict[str, Any]:
        counts = {p: len(items) for p, items in self.inventory.instances.items()}
        return {"observed_at": self.inventory.observed_at, "source": self.inventory.source,
                "instances": counts, "skipped": dict(self.inventory.skipped),
                "orphans": [o.to_json() for o in self.orphans], "vanished": [v.to_json() for v in self.vanished],
                "unresolved": [u.to_json() for u in self.unresolved],
                "interrupted": [i.to_json() for i in self.interrupted],
                "machine_changes": self.machine_changes, "transitions": self.transitions,
                "rate_changes": [r.to_json() for r in self.rate_changes]}


def machine_record(instance: Instance, observed_at: str) -> dict[str, Any]:
    """machines.json form of an Instance as the provider reported it (a negative price is no price)."""
    record: dict[str, Any] = {
        "provider": instance.provider, "instance_id": instance.id, "name": instance.name, "gpu": instance.gpu,
        "gpu_count": instance.gpu_count, "region": instance.region, "cost_hr": instance.cost_hr,
        "status": instance.status, "raw_status": instance.raw_status, "observed_at": observed_at,
        "created_at": instance.created_at, "labels": dict(instance.labels),
        "ssh": ({"host": instance.ssh.host, "port": instance.ssh.port, "user": instance.ssh.user}
                if instance.ssh else None),
    }
    if record["cost_hr"] is not None and record["cost_hr"] < 0:
        record["cost_hr"] = None
    return record


def _update_machines(registry: Registry, inventory: Inventory) -> tuple[list[str], dict[tuple[str, str], str]]:
    """Upsert every listed instance; mark listed providers' missing instances vanished. Returns changes."""
    changes: list[str] = []
    status_moves: dict[tuple[str, str], str] = {}
    with registry.update("machines.json") as document:
        machines: list[dict[str, Any]] = document["machines"]
        index = {(m["provider"], m["instance_id"]): n for n, m in enumerate(machines)}
        seen: set[tuple[str, str]] = set()
        for instance in inventory.all():
            key = (instance.provider, instance.id)
            seen.add(key)
            fresh = machine_record(instance, inventory.observed_at)
            if key not in index:
                index[key] = len(machines)
                machines.append(fresh)
                changes.append(f"new {instance.provider}/{instance.id} {instance.status}")
                continue
            old = machines[index[key]]
            if old.get("status") != fresh["status"] or old.get("vanished"):
                changes.append(f"{instance.provider}/{instance.id} {old.get('status')} -> {fresh['status']}")
                status_moves[key] = f"{old.get('status')} -> {fresh['status']}"
            machines[index[key]] = fresh
        for key, n in index.items():
            if key not in seen and inventory.covers(key[0]) and not machines[n].get("vanished"):
                machines[n]["vanished"] = True
                changes.append(f"{key[0]}/{key[1]} no longer listed")
                status_moves[key] = f"{machines[n].get('status')} -> gone"
    return changes, status_moves


def reconcile(registry: Registry, inventory: Inventory) -> ReconcileReport:
    """Write the inventory into machines.json, journal what changed, link or report unresolved launches (listed
    by their key), and flag orphans (duplicates included) and vanished deployments.

    A vanished deployment moves to `error` (via the one transition table), naming what the provider said,
    unless it is still provisioning (then it is only flagged);
    a deployment whose instance the provider stopped moves to `stopped` where the table allows it.
    """
    report = ReconcileReport(inventory)
    report.machine_changes, moves = _update_machines(registry, inventory)
    # no verdict on a deployment whose launch is unresolved before listing for its key: link or report it
    report.unresolved = resolve(registry, inventory, registry.deployments())
    report.transitions += release_abandoned(registry)  # `retrieving` left by a retrieve that died
    report.interrupted = interrupted_destroys(registry, inventory, registry.deployments())
    deployments = registry.deployments()
    report.orphans = find_orphans(deployments, inventory, key_prefixes(registry.providers()))
    report.vanished = find_vanished(deployments, inventory)
    vanished_ids = {v.deployment_id for v in report.vanished}
    listed = {(i.provider, i.id): i for i in inventory.all()}
    report.rate_changes = record_rate_changes(registry, [d for d in deployments if d.id not in vanished_ids],
                                              listed, inventory.observed_at)
    for item in report.vanished:
        # provisioning is left alone: a launch may be mid-flight in another process, which owns that state
        if item.registry_status not in ("error", "provisioning"):
            lifecycle.transition(registry, item.deployment_id, "error", route="provider-list",
                                 observed_at=inventory.observed_at, marker={"reconcile": "vanished"},
                                 note=item.message(), next_action="destroy", error=item.message())
            report.transitions.append(f"{item.deployment_id} {item.registry_status} -> error (vanished)")
    for dep in deployments:
        key = (dep.provider, str(dep.instance_id))
        if dep.id in vanished_ids or key not in moves:
            continue
        instance = listed.get(key)
        if instance is not None and instance.status == "stopped" and lifecycle.allowed(dep.status, "stopped"):
            lifecycle.transition(registry, dep.id, "stopped", route="provider-list",
                                 observed_at=inventory.observed_at, marker={"reconcile": moves[key]},
                                 note=f"the provider reports the instance stopped ({instance.raw_status})",
                                 next_action="start, then health-check")
            report.transitions.append(f"{dep.id} {dep.status} -> stopped")
        else:
            # An observation, not a state change: journaled so the history shows what the provider said.
            lifecycle.journal(registry, JournalEntry.of(dep, route="provider-list", observed_at=inventory.observed_at,
                                                        marker={"reconcile": moves[key]},
                                                        note=f"provider status {moves[key]}"))
    return report


@final
@dataclass(frozen=True, slots=True)
class StaleJob(JsonFields):
    """A job whose current ledger line says running although nothing can be running it."""

    job_id: str
    deployment_id: str
    reason: str


def pid_alive(pid: int) -> bool:
    """Whether a local process exists (signal 0)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stale_running_jobs(ledger: Ledger, deployments: Iterable[Deployment], *,
                       vanished: Iterable[Vanished] = (), is_alive: Callable[[int], bool] = pid_alive,
                       hostname: str | None = None) -> list[StaleJob]:
    """Jobs left `running` whose runner died: a local `pid` that is gone, or a deployment that is gone.

    It only lists them; the caller decides how to mark them (a new ledger line, never a rewrite).
    """
    host = hostname or socket.gethostname()
    by_id = {d.id: d for d in deployments}
    gone = {v.deployment_id for v in vanished}
    stale: list[StaleJob] = []
    for job in ledger.current(status="running").values():
        dep_id = str(job.get("deployment_id"))
        dep = by_id.get(dep_id)
        reason: str | None = None
        pid = job.get("pid")
        if dep is None:
            reason = f"deployment {dep_id} is not in the registry"
        elif dep.status in ("destroyed", "error"):
            reason = f"deployment {dep_id} is {dep.status}"
        elif dep_id in gone:
            reason = f"deployment {dep_id} vanished at its provider"
        elif isinstance(pid, int) and job.get("host", host) == host and not is_alive(pid):
            reason = f"its runner process {pid} on {host} is gone"
        if reason:
            stale.append(StaleJob(str(job["id"]), dep_id, reason))
    return stale

