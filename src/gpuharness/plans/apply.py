"""Apply a verified plan live: refuse a stale one, disclose before each mutation, journal every transition."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpuharness.audit.billed import billed_so_far
from gpuharness.core import lifecycle
from gpuharness.core.deployment import ShutdownRule
from gpuharness.core.errors import UserError
from gpuharness.core.policy import Policy
from gpuharness.health.gate import gate_command
from gpuharness.operations.context import Context
from gpuharness.operations.destroy import destroy
from gpuharness.operations.provision import ProvisionRequest, provision, stop_condition
from gpuharness.operations.retrieve import retrieve
from gpuharness.operations.unresolved import refuse_while_unresolved
from gpuharness.plans.plan import (
    APPLIES,
    MUTATIONS,
    PAID,
    RULES,
    PlanContext,
    cassette_of,
    check,
    fingerprint,
    step_label,
    target_text,
)
from gpuharness.plans.replay import replay_calls
from gpuharness.providers.base import KEY_PREFIX, Provider
from gpuharness.providers.inventory import Inventory, fetch_inventory, listed_providers


def disclosure(step: dict[str, Any], found: Inventory) -> str:
    """One line before a mutation: target, image, quantity, region, hourly burn, stop condition."""
    spec = step.get("spec") or {}
    instance = found.find(step["provider"], str(step["target"].get("instance_id")))
    burn = step.get("expected_cost_hr")
    if burn is None and instance is not None:
        burn = instance.cost_hr
    image = spec.get("image") or "(as running)"
    quantity = f"{spec.get('gpu_count') or (instance.gpu_count if instance else 1)} x " \
               f"{spec.get('gpu') or (instance.gpu if instance else '?')}"
    region = spec.get("region") or (instance.region if instance else None) or "any"
    burn_text = f"${float(burn):.3f}/hr" if burn is not None else "unknown"
    return (f"{step['id']} {step['action'].upper()} {step['provider']} target={target_text(step)} image={image} "
            f"quantity={quantity} region={region} burn={burn_text} "
            f"stop={_stop_words(step) if step['action'] in ('launch', 'start') else '-'}")


def _stop_words(step: dict[str, Any]) -> str:
    stop = step.get("stop_condition")
    return stop_condition(ShutdownRule.from_json(stop) if stop else None)


def _refusals(plan: dict[str, Any], ctx: Context, found: Inventory, plan_path: Path | None) -> list[str]:
    problems = []
    for step in plan["steps"]:
        if step["action"] == "run":
            problems.append(f"step {step['id']} (run): plan apply does not run jobs; use `gpuharness run`")
        if step["action"] == "launch":
            dep_id, key = step["target"].get("deployment_id"), step["target"].get("idempotency_key")
            if not dep_id or key != f"{KEY_PREFIX}{dep_id}":
                problems.append(f"step {step['id']} (launch): the key must be {KEY_PREFIX}<deployment_id> so a lost "
                                f"answer is reconciled by it (got key {key!r}, deployment {dep_id!r})")
    today, month = billed_so_far(ctx.registry, ctx.now())
    rules = [r for r in RULES if r != "replay"]
    replay: dict[str, str | None] = {s["id"]: None for s in plan["steps"]}
    if plan_path is not None:
        # the rehearsed calls must still replay: the plan was not edited since `plan make`
        recorded = cassette_of(plan, plan_path)
        if recorded is None or not recorded.exists():
            problems.append(f"{plan_path}: the plan's cassette {recorded} is missing, so its calls cannot be "
                            "replayed; make the plan again")
        else:
            replay = dict(replay_calls(plan["steps"], recorded))
            rules = list(RULES)
    verify = PlanContext(plan, found, ctx.registry.deployments(), Policy(ctx.registry.policy_document()),
                         today, month, now=ctx.now(), replay=replay)
    problems += [p for step in plan["steps"] for rule in rules
                 if step["action"] in APPLIES[rule] and (p := check(step, rule, verify)) is not None]
    return problems


def apply_plan(plan: dict[str, Any], ctx: Context, *, artifacts: Path, ask: Callable[[str], bool] | None = None,
               plan_path: Path | None = None) -> list[str]:
    """Apply every step in order. Before any mutation: list every provider once (one client each), refuse if
    the fingerprint changed (a stale plan) or a rule fails against the live inventory (with plan_path, the
    rehearsed calls must also replay from the plan's cassette). Returns what was done."""
    registry = ctx.registry
    if any(step["action"] in PAID for step in plan["steps"]):
        registry.spending_policy()  # a launch or start spends: no policy.json, no apply
    if any(step["action"] == "launch" for step in plan["steps"]):
        refuse_while_unresolved(registry, "apply a launch")
    entries = listed_providers(registry.providers())
    providers: dict[str, Provider] = {str(e["name"]): ctx.providers(e) for e in entries}
    done: list[str] = []
    try:
        found = fetch_inventory(providers)
        now = fingerprint(registry.deployments(), found)
        if now != plan["fingerprint"]:
            raise UserError(f"stale plan: the registry or the provider inventory changed since it was made "
                            f"(fingerprint {plan['fingerprint'][:19]}… is now {now[:19]}…)", place="fingerprint",
                            hint="make the plan again; nothing was applied")
        problems = _refusals(plan, ctx, found, plan_path)
        if problems:
            more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
            raise UserError(f"the plan does not verify against the live state: {problems[0]}{more}",
                            hint="nothing was applied")
        for step in plan["steps"]:
            if step["action"] in MUTATIONS:
                ctx.say(disclosure(step, found))
                if ask is not None and not ask(f"apply {step_label(step)}?"):
                    raise UserError(f"stopped before step {step['id']}", place=step_label(step),
                                    hint=f"{len(done)} earlier step(s) were applied: {', '.join(done) or 'none'}")
            _apply_step(step, ctx, providers, found, artifacts)
            done.append(step_label(step))
    finally:
        for provider in providers.values():
            provider.close()
    return done


def _deployment_for(ctx: Context, step: dict[str, Any]) -> str | None:
    target = step["target"]
    if target.get("deployment_id"):
        return str(target["deployment_id"])
    return next((d.id for d in ctx.registry.deployments()
                 if d.instance_id == target.get("instance_id") and d.provider == step["provider"]), None)


def _apply_step(step: dict[str, Any], ctx: Context, providers: dict[str, Provider], found: Inventory,
                artifacts: Path) -> None:
    action = step["action"]
    dep_id = _deployment_for(ctx, step)
    if action == "launch":
        spec, stop = step.get("spec") or {}, step.get("stop_condition") or {}
        provision(ctx, ProvisionRequest(
            provider=step["provider"], gpu=str(spec.get("gpu")), image=str(spec.get("image")),
            cost_hr=float(step["expected_cost_hr"]), gpu_count=int(spec.get("gpu_count") or 1),
            region=spec.get("region"), disk_gb=int(spec.get("disk_gb") or 50), idle_minutes=stop.get("idle_minutes"),
            max_hours=stop.get("max_hours"), deadline=stop.get("deadline"),
            interruptible=bool(spec.get("interruptible")), checkpoint_path=step.get("checkpoint_path"),
            deployment_id=dep_id))
    elif action == "retrieve":
        assert dep_id is not None
        retrieve(ctx, dep_id, artifacts / dep_id)
    elif action == "terminate":
        if dep_id is None:
            raise UserError(f"step {step['id']}: instance {step['target'].get('instance_id')} has no deployment",
                            hint="terminate orphans with `gpuharness reap --orphans --apply`")
        destroy(ctx, dep_id, confirm=dep_id)
    elif action in ("stop", "start"):
        instance_id = str(step["target"]["instance_id"])
        provider = providers[step["provider"]]
        if action == "stop":
            provider.stop(instance_id)
        else:
            provider.start(instance_id)
        if dep_id is not None:
            target = "stopped" if action == "stop" else "health-checking"
            lifecycle.transition(ctx.registry, dep_id, target, route=f"{step['provider']} API",
                                 marker={"plan_step": step["id"]},
                                 next_action="start" if action == "stop" else gate_command(dep_id))
