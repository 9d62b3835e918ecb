"""destroy: exact confirmation, artifacts synced first, one reconciled terminate, verified by listing."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import final

from gpuharness.core import claims
from gpuharness.core.deployment import Deployment
from gpuharness.core.errors import UserError
from gpuharness.core.ledger import Ledger
from gpuharness.core.lifecycle import transition
from gpuharness.operations.context import Context
from gpuharness.operations.launch import terminate_instance
from gpuharness.operations.retrieve import unsynced
from gpuharness.operations.unresolved import carrying_key
from gpuharness.providers.base import ProviderError


@final
@dataclass(frozen=True, slots=True)
class DestroyResult:
    deployment: Deployment
    terminate_calls: int
    discarded: tuple[str, ...]
    verified: bool
    disclosure: str = ""


def disclosure(ctx: Context, deployment: Deployment, discard_artifacts: bool) -> str:
    """What is about to be destroyed, stated before any provider call, as before a launch: the exact target,
    its provider and instance, what is lost with it, and the burn it stops."""
    pending = unsynced(Ledger(ctx.registry.ledger_path), deployment.id)
    names = [f"{job}/{a['name']}" for job, items in sorted(pending.items()) for a in items]
    if names and discard_artifacts:
        lost = f"{len(names)} unsynced artifact(s), discarded on purpose: {', '.join(names)}"
    else:
        lost = "no unsynced artifact (every one is synced or was discarded)"
    disk = f"; the instance's disk, checkpoint path {deployment.checkpoint_path} included" \
        if deployment.checkpoint_path else "; whatever else is on the instance's disk"
    instance = deployment.instance_id or (f"none recorded: every instance carrying its key "
                                          f"{deployment.idempotency_key} is terminated")
    return "\n".join([
        f"target:          {deployment.id} ({deployment.status}, owner {deployment.owner or 'unknown'})",
        f"provider:        {deployment.provider}",
        f"instance:        {instance}",
        f"lost:            {lost}{disk}",
        f"burn stopped:    ${deployment.burn_hr:.3f}/hr"
        + ("" if deployment.bills else f" (it is {deployment.status}: not billing the GPU rate now)"),
    ])


def refusal(ctx: Context, deployment_id: str, confirm: str | None, discard_artifacts: bool) -> str | None:
    """Why destroy must refuse (checked before any provider call), or None."""
    if confirm != deployment_id:
        return (f"destroy needs --confirm {deployment_id} (the exact id); got "
                f"{'nothing' if confirm is None else repr(confirm)}")
    deployment = ctx.registry.deployment(deployment_id)
    if deployment.status == "destroyed":
        return f"{deployment_id} is already destroyed (at {deployment.destroyed_at})"
    ledger = Ledger(ctx.registry.ledger_path, clock=ctx.clock)
    running = [r["id"] for r in ledger.current(status="running").values() if r["deployment_id"] == deployment_id]
    if running:
        return f"job(s) {', '.join(running)} still running on {deployment_id}"
    pending = unsynced(ledger, deployment_id)
    if pending and not discard_artifacts:
        names = ", ".join(f"{job}/{a['name']}" for job, items in sorted(pending.items()) for a in items)
        return (f"artifacts not synced off the instance: {names}; run `gpuharness retrieve {deployment_id}` "
                "first, or pass --discard-artifacts to lose them on purpose")
    return None


def _discard(ctx: Context, deployment_id: str) -> tuple[str, ...]:
    """Record, as new lines, that the unsynced artifacts were given up on purpose."""
    ledger = Ledger(ctx.registry.ledger_path, clock=ctx.clock)
    discarded: list[str] = []
    for job_id in sorted(unsynced(ledger, deployment_id)):
        current = ledger.current(job_id)
        artifacts = [a if a.get("synced_at") else {**a, "discarded": True} for a in current.get("artifacts") or []]
        line = {k: v for k, v in current.items() if k != "ts"}
        line.update(artifacts=artifacts, correction=True, ts=ctx.now(),
                    reason="artifacts discarded at destroy (--discard-artifacts)")
        ledger.append(line, check_sequence=True)
        discarded.extend(f"{job_id}/{a['name']}" for a in artifacts if a.get("discarded"))
    return tuple(discarded)


def destroy(ctx: Context, deployment_id: str, *, confirm: str | None,
            discard_artifacts: bool = False) -> DestroyResult:
    """Terminate what the deployment holds (its recorded instance, and any instance carrying its key: a launch
    whose answer was lost is found by listing, never assumed absent) and keep it as `destroyed` (history stays).
    Holds the deployment's launch claim, so no provision resumes it meanwhile."""
    problem = refusal(ctx, deployment_id, confirm, discard_artifacts)
    if problem is not None:
        raise UserError(f"refused: {problem}", place=deployment_id, hint="nothing was terminated")
    text = disclosure(ctx, ctx.registry.deployment(deployment_id), discard_artifacts)
    ctx.say(text)
    with claims.claimed(ctx.registry.root, "launch", deployment_id,
                        busy=f"refused: a provision is launching {deployment_id} right now",
                        hint="wait for it to finish (or stop it), then destroy; nothing was terminated"):
        return replace(_destroy_claimed(ctx, deployment_id, discard_artifacts), disclosure=text)


def _destroy_claimed(ctx: Context, deployment_id: str, discard_artifacts: bool) -> DestroyResult:
    discarded = _discard(ctx, deployment_id) if discard_artifacts else ()
    deployment = ctx.registry.deployment(deployment_id)
    if deployment.status != "destroying":
        transition(ctx.registry, deployment_id, "destroying", route=f"{deployment.provider} API",
                   marker={"discarded": list(discarded)} if discarded else None, next_action="terminate")
    if deployment.is_serverless:  # its record answers (provision wrote it from the provider's kind)
        deployment = transition(ctx.registry, deployment_id, "destroyed", route=deployment.endpoint,
                                note="serverless endpoint: nothing to terminate (it scales to zero); closed here",
                                next_action=None, destroyed_at=ctx.now())
        return DestroyResult(deployment, 0, discarded, False)
    calls, terminated = _terminate_what_it_holds(ctx, deployment)
    if terminated:
        note = f"terminated {', '.join(terminated)} and verified by listing"
    elif deployment.instance_id:
        note = f"{deployment.instance_id} was already gone (verified by listing)"
    else:
        note = f"no instance carries its key {deployment.idempotency_key} (listed): no instance was created"
    deployment = transition(ctx.registry, deployment_id, "destroyed", route=f"{deployment.provider} API",
                            marker={"terminate_calls": calls, "verified_by_listing": True,
                                    "terminated": list(terminated)},
                            note=note, next_action=None, destroyed_at=ctx.now())
    return DestroyResult(deployment, calls, discarded, True)


def _terminate_what_it_holds(ctx: Context, deployment: Deployment) -> tuple[int, tuple[str, ...]]:
    """One listing, then a reconciled terminate of every live instance that is the deployment's or carries its
    key. Returns (terminate calls, the ids terminated)."""
    provider = ctx.provider_for(deployment.provider)
    calls = 0
    try:
        try:
            listed = provider.list_instances()
        except ProviderError as exc:
            raise UserError(f"cannot list {deployment.provider} to find what {deployment.id} holds: {exc}",
                            place=deployment.id, hint="nothing was terminated; re-run destroy") from None
        held = {i.id for i in carrying_key(listed, deployment.idempotency_key)}
        targets = tuple(i.id for i in listed
                        if i.status != "terminated" and (i.id == deployment.instance_id or i.id in held))
        for instance_id in targets:
            try:
                calls += terminate_instance(provider, instance_id)
            except ProviderError as exc:
                raise UserError(f"terminate of {instance_id} not verified: {exc}", place=deployment.id,
                                hint="it may still be billing; re-run destroy (it reconciles, never doubles)") from None
    finally:
        provider.close()
    if targets:
        with ctx.registry.update("machines.json") as document:
            for machine in document["machines"]:
                if machine.get("provider") == deployment.provider and machine.get("instance_id") in targets:
                    machine.update(status="terminated", observed_at=ctx.now())
    return calls, targets
