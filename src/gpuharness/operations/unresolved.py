"""Unresolved launches: a deployment whose launch was recorded and never finished, with no live process launching
it (its launcher died, e.g. kill -9 between the launch call and its record). No verdict on it without listing for
its key first: what carries the key is linked (or terminated by destroy), never left billing unreported."""

from __future__ import annotations

import shlex
from collections.abc import Iterable
from dataclasses import dataclass
from typing import ClassVar, final

from gpuharness.core import claims
from gpuharness.core.deployment import Deployment
from gpuharness.core.errors import UserError
from gpuharness.core.journal import JournalEntry
from gpuharness.core.json_fields import KindJsonFields
from gpuharness.core.lifecycle import journal
from gpuharness.core.registry import Registry
from gpuharness.providers.base import Instance
from gpuharness.providers.inventory import Inventory


@final
@dataclass(frozen=True, slots=True)
class UnresolvedLaunch(KindJsonFields):
    """A launch nobody is finishing, as the listing by its key left it."""

    KIND: ClassVar[str] = "unresolved_launch"

    deployment_id: str
    provider: str
    key: str | None
    status: str
    instance_id: str | None  # the instance carrying its key (linked now when `linked`), or None
    linked: bool
    resume: str

    def message(self) -> str:
        if self.key is None:
            seen = "it records no idempotency key, so nothing can be matched to it: check the provider's console"
        elif self.instance_id:
            seen = (f"instance {self.instance_id} carries its key {self.key} and bills"
                    + (" (linked now: the launch's answer was lost)" if self.linked else ""))
        else:
            seen = f"no instance carries its key {self.key} (listed): nothing bills"
        return (f"unresolved launch of {self.deployment_id} ({self.status}): the provision that launched it died "
                f"before it finished; {seen}; resume it with `{self.resume}`, or close it with "
                f"`gpuharness destroy {self.deployment_id} --confirm {self.deployment_id}`")


@final
@dataclass(frozen=True, slots=True)
class InterruptedDestroy(KindJsonFields):
    """A deployment left `destroying` by a destroy that died (no live process holds its claim)."""

    KIND: ClassVar[str] = "interrupted_destroy"

    deployment_id: str
    provider: str
    instance_id: str | None
    billing: bool  # the listing still shows an instance it holds

    def message(self) -> str:
        seen = (f"instance {self.instance_id or '(carrying its key)'} is still listed and bills" if self.billing
                else "nothing it holds is listed any more")
        return (f"interrupted destroy of {self.deployment_id}: the destroy that held it died; {seen}; finish it "
                f"with `gpuharness destroy {self.deployment_id} --confirm {self.deployment_id}`")


def interrupted_destroys(registry: Registry, inventory: Inventory,
                         deployments: Iterable[Deployment]) -> list[InterruptedDestroy]:
    """Deployments of a listed provider left `destroying` while no live destroy holds them (destroy holds the
    deployment's launch claim while it works)."""
    found = []
    for deployment in deployments:
        if (deployment.status != "destroying" or not inventory.covers(deployment.provider)
                or not claims.is_free(registry.root, "launch", deployment.id)):
            continue
        listed = inventory.instances[deployment.provider]
        held = [i for i in listed if i.status != "terminated" and i.id == deployment.instance_id]
        held += carrying_key(listed, deployment.idempotency_key)
        found.append(InterruptedDestroy(deployment.id, deployment.provider, deployment.instance_id, bool(held)))
    return found


def stalled(registry: Registry, deployments: Iterable[Deployment]) -> list[Deployment]:
    """Deployments whose launch is unfinished while no live process holds their launch claim."""
    return [d for d in deployments if d.launch_unfinished and claims.is_free(registry.root, "launch", d.id)]


def carrying_key(instances: Iterable[Instance], key: str | None) -> list[Instance]:
    """The live instances carrying this idempotency key (name or label), oldest first."""
    if not key:
        return []
    found = [i for i in instances if i.status != "terminated" and key in (i.idempotency_key, i.name)]
    return sorted(found, key=lambda i: (i.created_at or "", i.id))


def resume_command(deployment: Deployment) -> str:
    """The provision command that matches the deployment again, so it resumes (by its key) instead of launching
    a new one."""
    words = ["gpuharness", "provision", "--provider", deployment.provider, "--gpu", str(deployment.gpu),
             "--image", str(deployment.image), "--cost-hr", f"{deployment.cost_hr:g}", "--id", deployment.id]
    if deployment.gpu_count != 1:
        words += ["--gpu-count", str(deployment.gpu_count)]
    for option, value in (("--runtime", deployment.runtime), ("--model", deployment.model),
                          ("--workflow", deployment.workflow), ("--region", deployment.region)):
        if value:
            words += [option, value]
    rule = deployment.shutdown_rule
    if rule is not None:
        for option, number in (("--idle-minutes", rule.idle_minutes), ("--max-hours", rule.max_hours)):
            if number is not None:
                words += [option, f"{number:g}"]
        if rule.deadline:
            words += ["--deadline", rule.deadline]
    return shlex.join(words)


def resolve(registry: Registry, inventory: Inventory, deployments: Iterable[Deployment]) -> list[UnresolvedLaunch]:
    """Every stalled launch of a listed provider, after listing for its key: one instance carrying it is linked
    (the oldest; any other is a duplicate, so an orphan), and the link is journaled. Holds each deployment's
    launch claim while it links, so a provision resuming it at the same moment cannot be overtaken."""
    found: list[UnresolvedLaunch] = []
    for deployment in stalled(registry, deployments):
        if not inventory.covers(deployment.provider):
            continue
        carriers = carrying_key(inventory.instances[deployment.provider], deployment.idempotency_key)
        instance_id, linked = deployment.instance_id, False
        if instance_id is None and carriers:
            claim = claims.take(registry.root, "launch", deployment.id)
            if claim is None:
                continue  # a provision took it up a moment ago: it owns the launch now
            try:
                deployment = registry.update_deployment(deployment.id, instance_id=carriers[0].id)
            finally:
                claim.release()
            instance_id, linked = carriers[0].id, True
            journal(registry, JournalEntry.of(
                deployment, route="provider-list", observed_at=inventory.observed_at,
                marker={"linked_by_key": deployment.idempotency_key},
                note=f"the launch's answer was lost: instance {instance_id} carries the deployment's key",
                next_action=resume_command(deployment)))
        found.append(UnresolvedLaunch(deployment.id, deployment.provider, deployment.idempotency_key,
                                      deployment.status, instance_id, linked, resume_command(deployment)))
    return found


def refuse_while_unresolved(registry: Registry, doing: str) -> None:
    """A new launch (a plan's) is refused while a recorded launch is unresolved: made again, a plan carries a new
    key, so it would launch a second instance next to the first one's lost answer."""
    for deployment in stalled(registry, registry.deployments()):
        raise UserError(f"refused to {doing}: the launch of {deployment.id} was recorded and never finished (the "
                        "process that launched it died), and a new plan would launch again under a new key",
                        path=registry.path("deployments.json"), place=deployment.id,
                        hint=f"resume it with `{resume_command(deployment)}`, or close it with `gpuharness destroy "
                             f"{deployment.id} --confirm {deployment.id}` (it terminates what carries its key)")
