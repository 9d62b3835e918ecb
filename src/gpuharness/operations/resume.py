"""`provision --resume ID`: carry on a provision that was cut short (its instance never came up within
--up-deadline, or its process died), from the request its record holds, without launching anything twice and without
counting itself against max_concurrent_deployments."""

from __future__ import annotations

from gpuharness.core.claims import take
from gpuharness.core.deployment import Deployment
from gpuharness.core.errors import UserError
from gpuharness.core.lifecycle import resume_or_destroy, transition
from gpuharness.health.gate import next_step
from gpuharness.operations.context import Context
from gpuharness.operations.provision import (
    ProvisionRequest,
    ProvisionResult,
    disclosure,
    provision,
    record_instance,
    refuse_billed_above,
    wait_until_up,
)
from gpuharness.providers.base import Instance
from gpuharness.providers.factory import capabilities_of


def recorded_request(deployment: Deployment, *, ssh_key_file: str | None = None,
                     known_hosts: str | None = None) -> ProvisionRequest:
    """The request a deployment was provisioned with, as its record holds it (price included: nothing is re-priced)."""
    rule = deployment.shutdown_rule
    return ProvisionRequest(
        provider=deployment.provider, gpu=deployment.gpu or "", image=deployment.image or "",
        cost_hr=deployment.cost_hr, runtime=deployment.runtime, model=deployment.model, workflow=deployment.workflow,
        gpu_count=deployment.gpu_count, region=deployment.region, interruptible=deployment.interruptible,
        idle_minutes=rule.idle_minutes if rule else None, max_hours=rule.max_hours if rule else None,
        deadline=rule.deadline if rule else None, owner=deployment.owner, reason=deployment.reason,
        checkpoint_path=deployment.checkpoint_path, deployment_id=deployment.id, service_port=deployment.service_port,
        ssh_key_file=ssh_key_file, known_hosts=known_hosts)


def resume_provision(ctx: Context, deployment_id: str, *, up_deadline_s: float = 900.0, poll_s: float = 5.0,
                     ssh_key_file: str | None = None, known_hosts: str | None = None) -> ProvisionResult:
    """Wait again for the instance of a deployment that never came up and record its route; one whose launch was
    never confirmed (no instance id) is resumed by its key (provision adopts what carries it)."""
    deployment = ctx.registry.deployment(deployment_id)
    if not deployment.never_came_up:
        raise UserError(f"{deployment_id} is {deployment.status}: there is no cut-short provision to resume",
                        place=deployment_id, hint=next_step(deployment))
    request = recorded_request(deployment, ssh_key_file=ssh_key_file, known_hosts=known_hosts)
    if not deployment.instance_id:
        return provision(ctx, request, up_deadline_s=up_deadline_s, poll_s=poll_s)
    claim = take(ctx.registry.root, "launch", deployment_id)
    if claim is None:
        raise UserError(f"another provision is launching or resuming {deployment_id} right now", place=deployment_id,
                        hint="wait for it to finish, then `gpuharness status --refresh`; nothing was done")
    try:
        deployment = _wait_again(ctx, deployment, up_deadline_s, poll_s)
        result = ProvisionResult(record_instance(ctx, request, deployment_id, _up(ctx, deployment, up_deadline_s,
                                                                                 poll_s)),
                                 False, disclosure(request, capabilities_of(ctx.registry.provider(request.provider))))
    finally:
        claim.release()
    return refuse_billed_above(ctx, request, result)


def _wait_again(ctx: Context, deployment: Deployment, up_deadline_s: float, poll_s: float) -> Deployment:
    """Back to `provisioning` (journaled), saying what it waits for."""
    ctx.say(f"resuming {deployment.id}: waiting up to {up_deadline_s:g} s for instance {deployment.instance_id} "
            f"at {deployment.provider} to come up; nothing is launched")
    if deployment.status == "provisioning":
        return deployment
    return transition(ctx.registry, deployment.id, "provisioning", route=f"{deployment.provider} API",
                      note="provision --resume: waiting again for the instance", next_action="wait until running")


def _up(ctx: Context, deployment: Deployment, up_deadline_s: float, poll_s: float) -> Instance:
    """The instance once it runs with a route; gone, or still not up by the deadline: `error` again, with the way
    on."""
    provider = ctx.provider_for(deployment.provider)
    try:
        seen = provider.get_instance(str(deployment.instance_id))
        if seen is None:
            transition(ctx.registry, deployment.id, "error", error="its instance is gone at the provider",
                       next_action=f"gpuharness destroy {deployment.id} --confirm {deployment.id}")
            raise UserError(f"instance {deployment.instance_id} of {deployment.id} is gone at {deployment.provider}",
                            place=deployment.id, hint=f"`gpuharness destroy {deployment.id} --confirm {deployment.id}`"
                            " closes its record (verified by listing)")
        try:
            return wait_until_up(ctx, provider, seen, serverless=False, deadline_s=up_deadline_s, poll_s=poll_s)
        except UserError as exc:
            transition(ctx.registry, deployment.id, "error", error=exc.what,
                       next_action=f"gpuharness provision --resume {deployment.id}")
            raise UserError(exc.what, place=exc.place, hint=resume_or_destroy(deployment.id)) from None
    finally:
        provider.close()
