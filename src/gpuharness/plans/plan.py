"""Plans: an intended list of provider mutations, its fingerprint, and the rules that verify it offline."""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, final

from gpuharness.core import schema
from gpuharness.core.clock import now_ts, parse_ts
from gpuharness.core.deployment import Deployment, live_burn
from gpuharness.core.errors import UserError
from gpuharness.core.policy import Action, Policy, exceeds
from gpuharness.core.statefile import atomic_write_json, read_json
from gpuharness.providers.base import KEY_PREFIX
from gpuharness.providers.inventory import Inventory

MUTATIONS = frozenset({"launch", "stop", "start", "terminate"})
PAID = frozenset({"launch", "start"})
RULES = ("target", "no-duplicate", "stop-condition", "budget", "sync-before-terminate", "bounded-retries",
         "replay")
#: The actions each rule judges (a rule is not generated as a test for a step it cannot judge).
APPLIES: dict[str, frozenset[str]] = {
    "target": frozenset({"launch", "stop", "start", "terminate", "run", "retrieve"}),
    "no-duplicate": frozenset({"launch"}),
    "budget": PAID,
    "stop-condition": PAID,
    "sync-before-terminate": frozenset({"terminate"}),
    "bounded-retries": frozenset({"launch", "stop", "start", "terminate", "run", "retrieve"}),
    "replay": MUTATIONS,
}
#: Attempt ceilings of policy.json (retry.*) per kind of step, with their defaults.
#: The retry count of policy.json that bounds a step's attempts (its default: core.policy.Retry).
RETRY_LIMITS = {"launch": "max_launch_attempts", "other": "max_api_attempts"}


def fingerprint(deployments: Iterable[Deployment], inventory: Inventory) -> str:
    """sha256 of what a plan depends on: which deployments claim which instances, and which instances exist.

    Status is reduced to live / stopped / destroyed so an instance merely finishing its boot does not make
    a plan stale, while any instance appearing, disappearing, stopping or changing hands does.
    """
    deps = sorted([d.id, d.provider, str(d.instance_id), "live" if d.is_live else "destroyed",
                   str(d.idempotency_key)] for d in deployments)
    found = sorted([i.provider, i.id, str(i.idempotency_key), "stopped" if i.status == "stopped" else "live"]
                   for i in inventory.all() if i.status != "terminated")
    canonical = json.dumps({"deployments": deps, "inventory": found}, separators=(",", ":"), sort_keys=True)
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


def load_plan(path: Path) -> dict[str, Any]:
    """Read and schema-check a plan file; errors name the file and the place."""
    document = read_json(path)
    errors, _ = schema.check("plan", document)
    if errors:
        first = errors[0]
        raise UserError(first.message, path=path, place=first.json_path, hint="fix the plan; nothing was applied")
    seen: set[str] = set()
    for n, step in enumerate(document["steps"]):
        if step["id"] in seen:
            raise UserError(f"duplicate step id {step['id']!r}", path=path, place=f"$.steps[{n}].id")
        seen.add(step["id"])
    plan: dict[str, Any] = document
    return plan


def save_plan(path: Path, plan: Mapping[str, Any]) -> None:
    """Write a plan atomically; a plan that fails its own schema is a bug, not a user error."""
    errors, _ = schema.check("plan", plan)
    if errors:
        raise ValueError(f"made an invalid plan: {errors[0].json_path}: {errors[0].message}")
    atomic_write_json(path, dict(plan))


def cassette_of(plan: Mapping[str, Any], plan_path: Path) -> Path | None:
    """The plan's cassette: relative names resolve against the plan file's directory, then the current one."""
    name = plan.get("cassette")
    if not name:
        return None
    candidate = Path(name)
    if candidate.is_absolute():
        return candidate
    beside = plan_path.parent / candidate
    return beside if beside.exists() or not candidate.exists() else candidate


def new_deployment_id(gpu: str) -> str:
    """A fresh deployment id for a planned launch: readable and unique (its key is gh-<id>)."""
    slug = "".join(c for c in gpu.lower().replace("nvidia", "").replace("geforce", "") if c.isalnum())[:10]
    return f"plan-{slug or 'gpu'}-{secrets.token_hex(4)}"


@final
@dataclass(frozen=True, slots=True)
class LaunchRequest:
    """What `gpuharness plan make` was asked for."""

    provider: str
    gpu: str
    image: str
    expected_cost_hr: float
    idle_minutes: float | None = None
    max_hours: float | None = None
    gpu_count: int = 1
    region: str | None = None
    disk_gb: int = 50
    interruptible: bool = False
    checkpoint_path: str | None = None
    deployment_id: str | None = None


def launch_step(request: LaunchRequest, step_id: str = "s1") -> dict[str, Any]:
    """The launch step of a request: key gh-<deployment id>, spec, expected burn, stop condition, no retries."""
    stop: dict[str, Any] = {}
    if request.idle_minutes:
        stop["idle_minutes"] = request.idle_minutes
    if request.max_hours:
        stop["max_hours"] = request.max_hours
    dep_id = request.deployment_id or new_deployment_id(request.gpu)
    return {"id": step_id, "action": "launch", "provider": request.provider,
            "target": {"idempotency_key": f"{KEY_PREFIX}{dep_id}", "deployment_id": dep_id},
            "spec": {"gpu": request.gpu, "image": request.image, "gpu_count": request.gpu_count,
                     "region": request.region, "disk_gb": request.disk_gb, "interruptible": request.interruptible},
            "expected_cost_hr": request.expected_cost_hr, "stop_condition": stop or None,
            "checkpoint_path": request.checkpoint_path, "max_retries": 0}


def teardown_steps(deployment: Deployment, first_index: int) -> list[dict[str, Any]]:
    """Retrieve (artifact sync) then terminate one deployment, naming the instance exactly."""
    instance_id = str(deployment.instance_id)
    common = {"provider": deployment.provider, "checkpoint_path": deployment.checkpoint_path, "max_retries": 0}
    return [
        {"id": f"s{first_index}", "action": "retrieve", "target": {"deployment_id": deployment.id}, **common},
        {"id": f"s{first_index + 1}", "action": "terminate", **common,
         "target": {"instance_id": instance_id, "deployment_id": deployment.id}, "confirm": instance_id},
    ]


def make_plan(deployments: list[Deployment], inventory: Inventory, *, launches: Iterable[LaunchRequest] = (),
              terminate: Iterable[str] = (), cassette: str | None = None) -> dict[str, Any]:
    """A plan of launches and teardowns, fingerprinted against the registry and inventory it was made from."""
    steps: list[dict[str, Any]] = []
    for request in launches:
        steps.append(launch_step(request, f"s{len(steps) + 1}"))
    by_id = {d.id: d for d in deployments}
    for dep_id in terminate:
        if dep_id not in by_id:
            raise UserError(f"no deployment {dep_id!r}", place="--terminate", hint="see `gpuharness status`")
        if not by_id[dep_id].instance_id:
            raise UserError(f"deployment {dep_id} has no instance id", place="--terminate")
        steps.extend(teardown_steps(by_id[dep_id], len(steps) + 1))
    if not steps:
        raise UserError("nothing to plan", place="plan make", hint="give --gpu/--image or --terminate DEPLOYMENT")
    plan: dict[str, Any] = {"schema_version": 1, "created_at": now_ts(),
                            "fingerprint": fingerprint(deployments, inventory), "steps": steps}
    if cassette:
        plan["cassette"] = cassette
    return plan


def target_text(step: Mapping[str, Any]) -> str:
    """The exact target of a step as text: instance id, else idempotency key, else deployment id."""
    target = step.get("target") or {}
    return (target.get("instance_id") or target.get("idempotency_key") or target.get("deployment_id")
            or "?")


def step_label(step: Mapping[str, Any]) -> str:
    """The readable id of a step: s2-terminate-abc123."""
    return f"{step['id']}-{step['action']}-{target_text(step)}"


@final
@dataclass(slots=True)
class PlanContext:
    """Everything the rules read: the plan, the recorded inventory, the registry view, the policy and spend."""

    plan: dict[str, Any]
    inventory: Inventory
    deployments: list[Deployment]
    policy: Policy
    spent_today_usd: float = 0.0
    spent_month_usd: float = 0.0
    now: str = field(default_factory=now_ts)
    replay: Mapping[str, str | None] = field(default_factory=dict)  # step id -> problem, from replay_calls

    @property
    def steps(self) -> list[dict[str, Any]]:
        steps: list[dict[str, Any]] = self.plan["steps"]
        return steps

    def index(self, step: Mapping[str, Any]) -> int:
        return next(n for n, s in enumerate(self.steps) if s["id"] == step["id"])


Rule = Callable[[dict[str, Any], PlanContext], str | None]


def rule_target(step: dict[str, Any], ctx: PlanContext) -> str | None:
    """Every target exists in the recorded inventory, or for a launch does not yet exist."""
    target, action, provider = step["target"], step["action"], step["provider"]
    if action == "launch":
        if not target.get("idempotency_key"):
            return "a launch must name its idempotency key (target.idempotency_key)"
        if target.get("instance_id"):
            return f"a launch cannot target an existing instance id {target['instance_id']!r}"
        return None
    if action in ("run", "retrieve"):
        dep_id = target.get("deployment_id")
        known = {d.id: d for d in ctx.deployments}
        launched = {s["target"].get("deployment_id") for s in ctx.steps[:ctx.index(step)] if s["action"] == "launch"}
        if not dep_id:
            return f"a {action} must name its deployment (target.deployment_id)"
        if dep_id not in known and dep_id not in launched:
            return f"deployment {dep_id!r} is neither in the registry nor launched by an earlier step"
        if dep_id in known and not known[dep_id].is_live:
            return f"deployment {dep_id} is already destroyed"
        return None
    instance_id = target.get("instance_id")
    if not instance_id:
        return f"a {action} must name the exact instance id (target.instance_id)"
    if not ctx.inventory.covers(provider):
        return f"the recorded inventory has no list of provider {provider!r}"
    instance = ctx.inventory.find(provider, instance_id)
    if instance is None or instance.status == "terminated":
        return (f"instance {instance_id!r} does not exist at {provider} in the recorded inventory "
                f"({ctx.inventory.source})")
    return None


def rule_no_duplicate(step: dict[str, Any], ctx: PlanContext) -> str | None:
    """No launch would duplicate an instance (or an earlier launch) with the same key."""
    if step["action"] != "launch":
        return None
    key = step["target"].get("idempotency_key")
    if not key:
        return None
    existing = [i for i in ctx.inventory.with_key(step["provider"], key) if i.status != "terminated"]
    if existing:
        return (f"instance {existing[0].id} at {step['provider']} already carries key {key!r} "
                f"({existing[0].status}); launching again would duplicate it")
    earlier = [s["id"] for s in ctx.steps[:ctx.index(step)]
               if s["action"] == "launch" and s["target"].get("idempotency_key") == key]
    if earlier:
        return f"step {earlier[0]} already launches key {key!r}"
    claimed = [d.id for d in ctx.deployments if d.idempotency_key == key and d.is_live]
    if claimed:
        return f"deployment {claimed[0]} already holds key {key!r}"
    return None


def _hours(stop: Mapping[str, Any] | None, now: str) -> float:
    """Paid hours a stop condition commits to at least: max_hours, time to the deadline, or one idle period."""
    if not stop:
        return 0.0
    if stop.get("max_hours"):
        return float(stop["max_hours"])
    if stop.get("deadline"):
        delta: float = (parse_ts(stop["deadline"]) - parse_ts(now)).total_seconds() / 3600.0
        return max(delta, 0.0)
    return float(stop.get("idle_minutes") or 0.0) / 60.0


def _step_cost(step: Mapping[str, Any], ctx: PlanContext) -> float:
    if step.get("expected_cost_hr") is not None:
        return float(step["expected_cost_hr"])
    instance = ctx.inventory.find(step["provider"], str(step["target"].get("instance_id")))
    return float(instance.cost_hr or 0.0) if instance else 0.0


def rule_budget(step: dict[str, Any], ctx: PlanContext) -> str | None:
    """Projected burn ($/hr) and projected spend stay within every ceiling of policy.json."""
    if step["action"] not in PAID:
        return None
    if step["action"] == "launch" and step.get("expected_cost_hr") is None:
        return "no expected_cost_hr: the burn cannot be projected"
    burn, count = live_burn(ctx.deployments)
    spend = 0.0
    for earlier in ctx.steps[:ctx.index(step)]:
        cost = _step_cost(earlier, ctx)
        if earlier["action"] in PAID:
            burn, count = burn + cost, count + 1
            spend += cost * _hours(earlier.get("stop_condition"), ctx.now)
        elif earlier["action"] in ("stop", "terminate"):
            burn, count = max(burn - cost, 0.0), max(count - 1, 0)
    cost = _step_cost(step, ctx)
    stop = step.get("stop_condition") or {}
    decision = ctx.policy.evaluate(Action(
        kind="launch", provider=step["provider"], cost_hr=cost, has_shutdown_rule=bool(stop),
        idle_minutes=stop.get("idle_minutes"), live_burn_hr=burn, live_deployments=count,
        spent_today_usd=ctx.spent_today_usd, spent_month_usd=ctx.spent_month_usd))
    if not decision.allowed and decision.ceiling != "require_shutdown_rule":
        return decision.reason
    if not stop and cost > 0:
        return _unbounded(cost, spend, ctx)
    spend += cost * _hours(stop, ctx.now)
    for name, spent, cap in _periods(ctx):
        if cap is not None and exceeds(spent + spend, cap):
            return (f"projected spend ${spent + spend:.2f} (spent ${spent:.2f} + planned ${spend:.2f} through "
                    f"this step's stop condition) > {name} ${cap:.2f}")
    return None


def _periods(ctx: PlanContext) -> tuple[tuple[str, float, float | None], ...]:
    """(ceiling name, spent so far, ceiling) of the day and of the month."""
    ceilings = ctx.policy.ceilings
    return (("daily_usd", ctx.spent_today_usd, ceilings.daily_usd),
            ("monthly_usd", ctx.spent_month_usd, ceilings.monthly_usd))


def _unbounded(cost: float, planned: float, ctx: PlanContext) -> str | None:
    """A paid step with no stop condition runs until someone stops it: at its rate it passes every finite spend
    ceiling, so the first one it reaches fails the budget (with when)."""
    reached = sorted((max(cap - spent - planned, 0.0) / cost, name, cap, spent)
                     for name, spent, cap in _periods(ctx) if cap is not None)
    if not reached:
        return None
    hours, name, cap, spent = reached[0]
    return (f"no stop condition: at ${cost:.2f}/hr it passes {name} ${cap:.2f} after {hours:.2f} h "
            f"(spent ${spent:.2f}) and no rule stops it")


def rule_stop_condition(step: dict[str, Any], ctx: PlanContext) -> str | None:
    """Every paid resource (launch, start) has a stop condition: idle minutes, max hours or a deadline."""
    if step["action"] not in PAID:
        return None
    stop = step.get("stop_condition")
    if not stop:
        return "a paid resource without a stop condition (set idle_minutes, max_hours or deadline)"
    if stop.get("deadline") and parse_ts(stop["deadline"]) <= parse_ts(ctx.now):
        return f"the deadline {stop['deadline']} has already passed"
    cap = ctx.policy.ceilings.max_idle_minutes
    if stop.get("idle_minutes") and cap is not None and float(stop["idle_minutes"]) > cap:
        return f"idle_minutes {stop['idle_minutes']} > max_idle_minutes {cap:g} of policy.json"
    return None


def _deployment_of(step: Mapping[str, Any], ctx: PlanContext) -> str | None:
    target = step.get("target") or {}
    if target.get("deployment_id"):
        return str(target["deployment_id"])
    instance_id = target.get("instance_id")
    return next((d.id for d in ctx.deployments
                 if d.instance_id == instance_id and d.provider == step.get("provider")), None)


def rule_sync_before_terminate(step: dict[str, Any], ctx: PlanContext) -> str | None:
    """A terminate names its target exactly (confirm == instance id) and follows a retrieve of that deployment."""
    if step["action"] != "terminate":
        return None
    instance_id = step["target"].get("instance_id")
    if not instance_id:
        return "a terminate must name the exact instance id (target.instance_id)"
    if step.get("confirm") != instance_id:
        return f"confirm must equal the exact instance id {instance_id!r} (got {step.get('confirm')!r})"
    dep_id = _deployment_of(step, ctx)
    if dep_id is None:
        return (f"instance {instance_id} belongs to no deployment of the registry, so no artifact sync can "
                f"precede it; register it, or terminate it as an orphan (`gpuharness reap --orphans --apply`)")
    synced = [s for s in ctx.steps[:ctx.index(step)]
              if s["action"] == "retrieve" and s["target"].get("deployment_id") == dep_id]
    if not synced:
        return f"no earlier retrieve step syncs the artifacts of deployment {dep_id} before it is terminated"
    return None


def rule_bounded_retries(step: dict[str, Any], ctx: PlanContext) -> str | None:
    """Retries are bounded by policy.json (a mutation whose answer is lost is reconciled, not retried blind)."""
    retries = step.get("max_retries", 0)
    name = RETRY_LIMITS["launch" if step["action"] == "launch" else "other"]
    attempts = ctx.policy.max_attempts(name)
    if retries + 1 > attempts:
        return f"max_retries {retries} allows {retries + 1} attempts > retry.{name} {attempts} of policy.json"
    if step["action"] in MUTATIONS and retries > 0 and step["action"] != "launch":
        return f"a {step['action']} is never retried blind (max_retries must be 0; reconcile by exact id instead)"
    return None


def rule_replay(step: dict[str, Any], ctx: PlanContext) -> str | None:
    """Every provider call of the step matches a recorded interaction when replayed in mode none."""
    if step["action"] not in MUTATIONS:
        return None
    if not step.get("calls"):
        return "the step has no recorded provider calls; make the plan again (`gpuharness plan make`)"
    sent = json.dumps(step["calls"])
    target = step["target"]
    must = ([target.get("idempotency_key"), (step.get("spec") or {}).get("image")] if step["action"] == "launch"
            else [target.get("instance_id")])
    missing = [str(m) for m in must if m and str(m) not in sent]
    if missing:
        return (f"the recorded calls do not carry {', '.join(repr(m) for m in missing)} of this step (the step was "
                "edited after it was rehearsed); make the plan again")
    if step["id"] not in ctx.replay:
        return "the plan's calls were not replayed (no cassette)"
    return ctx.replay[step["id"]]


RULE_FUNCTIONS: dict[str, Rule] = {
    "target": rule_target, "no-duplicate": rule_no_duplicate, "budget": rule_budget,
    "stop-condition": rule_stop_condition, "sync-before-terminate": rule_sync_before_terminate,
    "bounded-retries": rule_bounded_retries, "replay": rule_replay,
}


def check(step: dict[str, Any], rule: str, ctx: PlanContext) -> str | None:
    """The problem the rule finds with the step, as one line naming step and rule, or None."""
    problem = RULE_FUNCTIONS[rule](step, ctx)
    if problem is None:
        return None
    return f"step {step['id']} ({step['action']} {target_text(step)}): rule {rule}: {problem}"


def verify(ctx: PlanContext) -> list[str]:
    """Every problem of every step under every rule."""
    return [p for step in ctx.steps for rule in RULES
            if step["action"] in APPLIES[rule] and (p := check(step, rule, ctx)) is not None]



def fingerprint_problem(plan: Mapping[str, Any], ctx: PlanContext) -> str | None:
    """Whether the registry and recorded inventory are still the ones the plan was made from."""
    now = fingerprint(ctx.deployments, ctx.inventory)
    if now == plan["fingerprint"]:
        return None
    return (f"plan fingerprint {plan['fingerprint'][:19]}… does not match the registry and recorded inventory "
            f"({now[:19]}…): the plan is stale; make it again")
