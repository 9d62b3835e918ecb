"""Orphans: instances that carry our key prefix while no live deployment claims them, billing with nobody
watching. `gpuharness reap --orphans` finds them as reconcile does (one list call per provider, plus pages) and,
with --apply, says what each is and the burn it stops, then terminates it, verified by listing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, final

from gpuharness.operations.context import Context
from gpuharness.operations.launch import terminate_instance
from gpuharness.operations.reconcile import Orphan, find_orphans, key_prefixes
from gpuharness.providers.base import Provider, ProviderError
from gpuharness.providers.inventory import fetch_inventory, listed_providers

OrphanOutcome = Literal["listed", "terminated", "failed"]


@final
@dataclass(frozen=True, slots=True)
class OrphanAction:
    """What `reap --orphans` did with one orphan."""

    orphan: Orphan
    outcome: OrphanOutcome
    detail: str

    def to_json(self) -> dict[str, Any]:
        return {**self.orphan.to_json(), "outcome": self.outcome, "detail": self.detail}


def disclosure(orphans: list[Orphan]) -> str:
    """What terminating these orphans means, said before any terminate call."""
    burn = sum(o.cost_hr or 0.0 for o in orphans)
    lines = [f"terminating {len(orphans)} orphan instance(s), stopping ${burn:.3f}/hr in all:"]
    for o in orphans:
        cost = f"${o.cost_hr:.3f}/hr" if o.cost_hr is not None else "cost unknown"
        owner = f"deployment {o.claimed_by} (destroyed)" if o.claimed_by else "no deployment"
        lines.append(f"  {o.provider}/{o.instance_id}  key {o.key}  {o.status}  {cost}  claimed by {owner}")
    lines.append("  no deployment claims them, so nothing is synced off them first: what is on their disks is lost")
    return "\n".join(lines)


def reap_orphans(ctx: Context, *, apply: bool = False) -> list[OrphanAction]:
    """List every provider that rents instances (one client each for the phase), find the orphans, and with
    apply terminate each (a lost answer is reconciled by listing, never repeated blind)."""
    providers: dict[str, Provider] = {}
    try:
        for entry in listed_providers(ctx.registry.providers()):
            providers[str(entry["name"])] = ctx.providers(entry)
        inventory = fetch_inventory(providers)
        orphans = find_orphans(ctx.registry.deployments(), inventory, key_prefixes(ctx.registry.providers()))
        if not apply:
            return [OrphanAction(o, "listed", "dry run: pass --apply to terminate it") for o in orphans]
        if orphans:
            ctx.say(disclosure(orphans))
        return [_terminate(ctx, providers[o.provider], o) for o in orphans]
    finally:
        for provider in providers.values():
            provider.close()


def _terminate(ctx: Context, provider: Provider, orphan: Orphan) -> OrphanAction:
    try:
        calls = terminate_instance(provider, orphan.instance_id)
    except ProviderError as exc:
        return OrphanAction(orphan, "failed", f"not verified gone: {exc}; it may still be billing")
    with ctx.registry.update("machines.json") as document:
        for machine in document["machines"]:
            if machine.get("provider") == orphan.provider and machine.get("instance_id") == orphan.instance_id:
                machine.update(status="terminated", observed_at=ctx.now())
    return OrphanAction(orphan, "terminated", f"terminated, verified by listing ({calls} terminate call(s))")
