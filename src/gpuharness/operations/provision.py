"""provision: policy first, disclosure, reuse, one idempotent launch (reconciled), then the records."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any, final

from gpuharness.audit.billed import billed_so_far
from gpuharness.core import runtimes
from gpuharness.core.claims import Claim, alive, holder, process_mark, take
from gpuharness.core.deployment import Deployment, ShutdownRule, SshAccess, id_refusal, live_burn
from gpuharness.core.errors import UserError
from gpuharness.core.journal import JournalEntry, read_entries
from gpuharness.core.lifecycle import journal, resume_or_destroy, transition
from gpuharness.core.policy import MONEY_CEILINGS, Action, Policy, exceeds
from gpuharness.core.registry import Registry
from gpuharness.core.stewardship import local_user
from gpuharness.core.terminal import looks_empty
from gpuharness.health.gate import gate_command
from gpuharness.operations.context import Context
from gpuharness.operations.destroy import destroy
from gpuharness.operations.launch import launch_instance
from gpuharness.operations.reconcile import machine_record
from gpuharness.providers.base import (
    ADAPTERS,
    KEY_PREFIX,
    Capabilities,
    Instance,
    LaunchSpec,
    Provider,
    ProviderError,
    ProviderKind,
)
from gpuharness.providers.factory import capabilities_of, kind_of
from gpuharness.providers.offers import cheapest_offer

#: states in which a deployment may be reused for the same request
REUSABLE = frozenset({"provisioning", "installing", "configuring", "health-checking", "ready", "running"})
#: the fields a new deployment spells out (null included), as people and agents expect to find them
CREATED_FIELDS = frozenset({"id", "provider", "instance_id", "gpu", "gpu_count", "runtime", "model", "workflow",
                            "image", "region", "endpoint", "ssh", "status", "cost_hr", "created_at", "ready_at",
                            "destroyed_at", "shutdown_rule", "owner", "reason", "checkpoint_path", "idempotency_key",
                            "interruptible", "service_port"})


@final
@dataclass(frozen=True, slots=True)
class ProvisionRequest:
    """What the user asked for. cost_hr is the hourly price they accept; None takes the provider's cheapest
    offer of the GPU (one read, after the policy's other ceilings passed)."""

    provider: str
    gpu: str
    image: str
    cost_hr: float | None
    runtime: str | None = None
    model: str | None = None
    workflow: str | None = None
    gpu_count: int = 1
    region: str | None = None
    disk_gb: int = 50
    idle_minutes: float | None = None
    max_hours: float | None = None
    deadline: str | None = None
    interruptible: bool = False
    bid_price: float | None = None
    owner: str | None = None  # None: the local user
    reason: str | None = None  # None: what it runs (workflow, model or image) on which GPU
    checkpoint_path: str | None = None
    deployment_id: str | None = None
    service_port: int | None = None
    ssh_key_file: str | None = None
    known_hosts: str | None = None
    env: dict[str, str] = field(default_factory=dict)

    @property
    def price(self) -> float:
        """The accepted hourly price; resolved (see accepted_price) before any record or launch."""
        if self.cost_hr is None:
            raise AssertionError("the accepted price was not resolved before use")
        return self.cost_hr

    def shutdown_rule(self) -> ShutdownRule | None:
        rule = ShutdownRule(self.idle_minutes, self.max_hours, self.deadline)
        return None if rule == ShutdownRule() else rule


@final
@dataclass(frozen=True, slots=True)
class ProvisionResult:
    deployment: Deployment
    reused: bool
    disclosure: str
    launched: Instance | None = None


def stop_condition(rule: ShutdownRule | None) -> str:
    """The shutdown rule in words."""
    return (rule or ShutdownRule()).words()


def ceilings_words(document: dict[str, Any]) -> str:
    """The money ceilings of policy.json that apply, in words; or that none does, with the policy's reason."""
    policy = Policy(document)
    if policy.ceilings_none:
        return f"none (reason: {document.get('reason') or 'none given'})"
    words = [f"{name} ${value:,.2f}" + ("/hr" if name == "max_cost_hr" else "")
             for name in MONEY_CEILINGS if (value := getattr(policy.ceilings, name)) is not None]
    return ", ".join(words) or "none"


def disclosure(request: ProvisionRequest, capabilities: Capabilities, policy: dict[str, Any] | None = None) -> str:
    """What is about to be bought, stated before any provider call, with the ceilings that apply (policy.json)."""
    mode = capabilities.label
    if request.interruptible:
        mode += " (interruptible" + (f", bid ${request.bid_price:.3f}/hr" if request.bid_price else "") + ")"
    burn = "the provider's cheapest offer" if request.cost_hr is None else f"${request.cost_hr:.3f}/hr"
    return "\n".join([
        f"provider:        {request.provider} ({mode})",
        f"spec:            {request.gpu_count} x {request.gpu}, image {request.image}, disk {request.disk_gb} GB"
        + (f", runtime {request.runtime}" if request.runtime else "")
        + (f", model {request.model}" if request.model else ""),
        "quantity:        1 instance",
        f"region:          {request.region or 'any'}",
        f"hourly burn:     {burn}",
        *([f"ceilings:        {ceilings_words(policy)}"] if policy is not None else []),
        f"stop condition:  {stop_condition(request.shutdown_rule())}",
        f"cleanup owner:   {request.owner or '(none)'}",
        f"reason:          {request.reason or '(none)'}",
        f"checkpoint path: {request.checkpoint_path or '(none: outputs are synced by `gpuharness retrieve`)'}",
    ])


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "", text.lower())[:12] or "gpu"


def new_deployment_id(existing: set[str], request: ProvisionRequest) -> str:
    """dep_<model-or-gpu>_<nn>, the first one not taken (ids are never reused: history stays)."""
    stem = f"dep_{_slug(request.model or request.gpu)}"
    for number in range(1, 10000):
        candidate = f"{stem}_{number:02d}"
        if candidate not in existing:
            return candidate
    raise UserError("no free deployment id", place=stem)


def find_reusable(deployments: list[Deployment], request: ProvisionRequest) -> Deployment | None:
    """A live deployment that already matches the request (same provider, GPU, image, runtime, model), or
    one whose launch outcome was never confirmed (no instance id yet: resumed by its key)."""
    for deployment in deployments:
        unconfirmed = deployment.status == "error" and not deployment.instance_id
        if deployment.status not in REUSABLE and not unconfirmed:
            continue
        if request.deployment_id and deployment.id != request.deployment_id:
            continue
        if (deployment.provider == request.provider and deployment.gpu == request.gpu
                and deployment.image == request.image and deployment.runtime == request.runtime
                and deployment.model == request.model and deployment.gpu_count == request.gpu_count):
            return deployment
    return None


def accepted_price(ctx: Context, entry: dict[str, Any], request: ProvisionRequest) -> float:
    """No --cost-hr: the cheapest offer of the GPU at the provider, read once, after every ceiling that does not
    depend on the price passed (so a refused request makes no provider call at all)."""
    if not capabilities_of(entry).rents:
        return 0.0  # billed per request / already paid for: no hourly burn of a new instance
    check_policy(ctx, replace(request, cost_hr=0.0), kind_of(entry))
    provider = ctx.providers(entry)
    try:
        best = cheapest_offer(provider, request.gpu, request.gpu_count)
    except ProviderError as exc:
        raise UserError(f"cannot read the offers of {request.provider}: {exc}", place="provision",
                        hint="pass --cost-hr with the hourly price you accept") from None
    finally:
        provider.close()
    if best is None:
        raise UserError(f"no offer of {request.gpu!r} at {request.provider}", place="provision",
                        hint="pick a GPU from `gpuharness offers --gpu ...`, or pass --cost-hr")
    ctx.say(f"accepting the cheapest offer: ${best.cost_hr:.4f}/hr for {request.gpu_count} x {request.gpu} "
            "(pass --cost-hr to set your own ceiling)")
    return best.cost_hr


def check_policy(ctx: Context, request: ProvisionRequest, kind: ProviderKind,
                 deployments: list[Deployment] | None = None) -> None:
    """Refuse before any provider call when a ceiling would be exceeded (deployments: as read under the
    reservation's lock; else read now)."""
    registry = ctx.registry
    policy = Policy(registry.spending_policy())
    burn_hr, live_count = live_burn(registry.deployments() if deployments is None else deployments)
    spent_day, spent_month = billed_so_far(registry, ctx.now())
    allowed = policy.allowed_providers
    name = request.provider
    if allowed is not None and name not in allowed and kind.value in allowed:
        name = kind.value
    decision = policy.evaluate(Action(
        kind="launch", provider=name, cost_hr=request.price,
        has_shutdown_rule=request.shutdown_rule() is not None, idle_minutes=request.idle_minutes,
        live_burn_hr=burn_hr, live_deployments=live_count,
        spent_today_usd=spent_day, spent_month_usd=spent_month))
    if not decision.allowed:
        raise UserError(f"refused before any provider call: {decision.reason}", path=registry.path("policy.json"),
                        place=decision.ceiling, hint="raise the ceiling in policy.json, destroy a live deployment, "
                        "or change the request; nothing was launched")


def observe(ctx: Context, instance: Instance) -> None:
    """Upsert the instance into machines.json (the raw view, with its observation time)."""
    record = machine_record(instance, ctx.now())
    with ctx.registry.update("machines.json") as document:
        machines = document["machines"]
        for index, machine in enumerate(machines):
            if machine.get("provider") == instance.provider and machine.get("instance_id") == instance.id:
                machines[index] = {**machine, **record}
                break
        else:
            machines.append(record)


def wait_until_up(ctx: Context, provider: Provider, instance: Instance, *, serverless: bool,
                  deadline_s: float, poll_s: float) -> Instance:
    """One timer for this launch: poll the exact id until it runs with a route (SSH or endpoint)."""
    waited = 0.0
    current = instance
    while True:
        up = current.status == "running" and (current.endpoint if serverless else current.ssh) is not None
        if up:
            return current
        if current.status in ("terminated", "error"):
            raise UserError(f"instance {current.id} is {current.raw_status or current.status} at the provider",
                            place=f"{instance.provider}:{instance.id}",
                            hint="see `gpuharness status --refresh`; destroy it with `gpuharness destroy`")
        if waited >= deadline_s:
            raise UserError(f"instance {current.id} did not come up within {deadline_s:g} s "
                            f"(last status {current.raw_status or current.status})",
                            place=f"{instance.provider}:{instance.id}",
                            hint="it may still be billing: check `gpuharness status --refresh`, then destroy it")
        ctx.sleep(poll_s)
        waited += poll_s
        seen = provider.get_instance(current.id)
        if seen is None:
            raise UserError(f"instance {current.id} vanished at the provider while starting",
                            place=f"{instance.provider}:{instance.id}")
        current = seen
        observe(ctx, current)


def _new_deployment(ctx: Context, request: ProvisionRequest, capabilities: Capabilities,
                    taken: set[str]) -> Deployment:
    """The new deployment's record, `provisioning` with its idempotency key, before any launch call."""
    deployment_id = request.deployment_id or new_deployment_id(taken, request)
    return Deployment(
        id=deployment_id, provider=request.provider, status="provisioning", cost_hr=request.price,
        created_at=ctx.now(), gpu=request.gpu, gpu_count=request.gpu_count,
        runtime=request.runtime,
        model=request.model, workflow=request.workflow, image=request.image, region=request.region,
        shutdown_rule=request.shutdown_rule(), owner=request.owner, reason=request.reason,
        checkpoint_path=request.checkpoint_path,
        idempotency_key=f"{KEY_PREFIX}{deployment_id}", interruptible=request.interruptible,
        service_port=request.service_port, written=CREATED_FIELDS)


@final
@dataclass(slots=True)
class Reservation:
    """What the reservation decided. created: a new deployment, recorded; claim held: this process launches (a new
    deployment, or a resumed one whose launcher died); no claim: an existing deployment is reused as it is
    (launching_pid: another live process is launching it right now)."""

    deployment: Deployment
    claim: Claim | None
    resumed: bool = False
    launching_pid: int | None = None
    created: bool = False  # a new deployment, recorded by this reservation


def reserve(ctx: Context, request: ProvisionRequest, capabilities: Capabilities, kind: ProviderKind) -> Reservation:
    """One reservation under the deployments.json lock (Registry.add_deployment), before any launch call: reuse,
    the policy and the new `provisioning` entry are decided together, so concurrent provisions cannot all pass a
    ceiling or all miss each other's entry; the launch claim is taken under the same lock, so one process at most
    launches a key."""
    registry = ctx.registry
    decided: list[Reservation] = []

    def build(deployments: list[Deployment]) -> Deployment | None:
        decided.append(_reservation(ctx, request, capabilities, kind, deployments))
        return decided[0].deployment if decided[0].created else None

    registry.add_deployment(build)
    reservation = decided[0]
    if reservation.created:
        deployment = reservation.deployment
        journal(registry, JournalEntry.of(deployment, from_state=None, route=f"{request.provider} API",
                                          observed_at=ctx.now(), marker=deployment.idempotency_key,
                                          next_action="launch", note="recorded before the launch call"))
    return reservation


def _reservation(ctx: Context, request: ProvisionRequest, capabilities: Capabilities, kind: ProviderKind,
                 deployments: list[Deployment]) -> Reservation:
    """What reserve decides from the deployments recorded now (under their lock): reuse one, or a new one."""
    root = ctx.registry.root
    reuse = find_reusable(deployments, request)
    if reuse is not None:
        claim = take(root, "launch", reuse.id)
        if claim is None:
            return Reservation(reuse, None, launching_pid=holder(root, "launch", reuse.id))
        if reuse.launch_unfinished:
            return Reservation(reuse, claim, resumed=True)
        claim.release()
        return Reservation(reuse, None)
    if request.cost_hr is None:
        raise UserError("the deployment this request matched changed while its price was read",
                        place="provision", hint="run the same provision again; nothing was launched")
    _refuse_taken_id(ctx.registry, request, deployments)
    check_policy(ctx, request, kind, deployments)
    taken = {d.id for d in deployments}
    deployment = _new_deployment(ctx, request, capabilities, taken)
    if deployment.id in taken:  # refused by Registry.add_deployment, before a claim is taken
        return Reservation(deployment, None, created=True)
    claim = take(root, "launch", deployment.id)
    if claim is None:
        raise ctx.registry.id_taken(deployment.id)
    return Reservation(deployment, claim, created=True)


def _refuse_taken_id(registry: Registry, request: ProvisionRequest, deployments: list[Deployment]) -> None:
    """--id of a deployment this request does not reuse is refused before the ceilings are counted (it would count
    itself): one that never came up is resumed, not launched again."""
    taken = next((d for d in deployments if d.id == request.deployment_id), None)
    if taken is None:
        return
    way_on = (resume_or_destroy(taken.id) if taken.never_came_up
              else "ids are never reused: pick another or omit --id; `gpuharness status` shows it")
    raise UserError(f"deployment id {taken.id!r} already exists ({taken.status}"
                    f"{', its instance never came up' if taken.never_came_up else ''})",
                    path=registry.path("deployments.json"), hint=f"{way_on}; nothing was launched")


def live_launcher(registry: Registry, deployment_id: str) -> int | None:
    """The pid of another live process whose launch of this deployment the journal shows last (its launch events
    carry the launcher's mark, core.claims.process_mark), or None: a launch still under way whose claim file was
    removed or replaced under it."""
    last: str | None = None
    for entry in read_entries(registry.journal_path):
        marker = entry.marker
        launch = marker.get("launch") if entry.deployment == deployment_id and isinstance(marker, dict) else None
        if isinstance(launch, dict) and isinstance(launch.get("launcher"), str):
            last = launch["launcher"]
    if last is None or last == process_mark() or not alive(last):
        return None
    return int(last.partition("@")[0])


def _refuse_live_launcher(ctx: Context, deployment: Deployment) -> None:
    """A resume refuses while the process that launched the deployment last still runs: its claim file was taken
    from it, and its launch call may be in flight (listing the key now would not see it yet)."""
    pid = live_launcher(ctx.registry, deployment.id)
    if pid is not None:
        raise UserError(f"another provision (pid {pid}) is launching {deployment.id} right now; its launch claim file "
                        "was removed or replaced under it", place=deployment.id,
                        hint="wait for it to finish, then `gpuharness status --refresh`; nothing was launched")


def _priced(ctx: Context, entry: dict[str, Any], request: ProvisionRequest) -> ProvisionRequest:
    """No --cost-hr: a deployment this request would reuse or resume keeps its price (no provider call);
    otherwise the cheapest offer is accepted (see accepted_price)."""
    deployments = ctx.registry.deployments()
    match = find_reusable(deployments, request)
    if match is None:
        _refuse_taken_id(ctx.registry, request, deployments)
    price = match.cost_hr if match is not None else accepted_price(ctx, entry, request)
    return replace(request, cost_hr=price)


def provision(ctx: Context, request: ProvisionRequest, *, up_deadline_s: float = 900.0,
              poll_s: float = 5.0) -> ProvisionResult:
    """Policy check, disclosure, one reservation (reuse, ceilings, the record), one reconciled launch, then the
    machines/deployments/journal records."""
    policy = ctx.registry.spending_policy()  # no policy.json, no spending: refused before anything else
    refusal = id_refusal(request.deployment_id) if request.deployment_id is not None else None
    if refusal is not None:  # the request's own word first, before any ceiling is weighed
        raise UserError(refusal, place="provision --id", hint="pick another id; nothing was launched")
    entry = ctx.registry.provider(request.provider)
    capabilities = capabilities_of(entry)
    _refuse_what_is_not_offered(request, kind_of(entry), capabilities)
    request = replace(stewarded(request), runtime=runtime_on(request, capabilities))
    if request.cost_hr is None:
        request = _priced(ctx, entry, request)
    text = disclosure(request, capabilities, policy)
    reservation = reserve(ctx, request, capabilities, kind_of(entry))
    deployment = reservation.deployment
    try:
        if reservation.claim is None:
            busy = (f": another provision (pid {reservation.launching_pid}) is launching it right now"
                    if reservation.launching_pid is not None else "")
            ctx.say(f"reusing live deployment {deployment.id} ({deployment.status}){busy}; nothing was launched")
            return ProvisionResult(deployment, True, text)
        if reservation.resumed:
            # an earlier provision died between its record and the end of its launch: the listing by key (before
            # any launch) adopts what it may have created, so this never duplicates
            _refuse_live_launcher(ctx, deployment)
            ctx.say(f"resuming {deployment.id}: its launch was recorded and never finished (its process died); "
                    "reconciling by its key first")
        ctx.say(text)
        if deployment.is_serverless:  # the record answers from here on (runtime_on wrote it from the kind)
            return _register_endpoint(ctx, entry, deployment.id, text)
        instance = _launch(ctx, request, deployment, reservation.claim, up_deadline_s=up_deadline_s, poll_s=poll_s)
        result = ProvisionResult(record_instance(ctx, request, deployment.id, instance), False, text, instance)
    finally:
        if reservation.claim is not None:
            reservation.claim.release()
    return refuse_billed_above(ctx, request, result)


def stewarded(request: ProvisionRequest) -> ProvisionRequest:
    """The request with its cleanup owner (the local user unless given; one that shows nothing is refused) and its
    reason (what it runs on which GPU unless one that shows something is given): every paid resource has both."""
    owner = local_user() if request.owner is None else request.owner.strip()
    if looks_empty(owner):
        raise UserError("a paid resource needs a cleanup owner" + (
            ": --owner shows nothing (empty, spaces or invisible characters)" if request.owner is not None
            else " and the local user is unknown"), place="provision",
            hint="pass --owner NAME (who destroys it when the work is done); nothing was launched")
    given = (request.reason or "").strip()
    reason = given if not looks_empty(given) else (
        f"run {request.workflow or request.model or request.image} on {request.gpu_count} x {request.gpu}")
    return replace(request, owner=owner, reason=reason)


def runtime_on(request: ProvisionRequest, capabilities: Capabilities) -> str | None:
    """The new deployment's runtime, as its record will hold it: whether it is a serverless endpoint is answered by
    that record from then on (Deployment.is_serverless), so it must agree with the provider's kind. An endpoint runs
    the serverless runtime; an instance never does. A contradiction is refused before anything is written."""
    endpoint = runtimes.serverless()
    if capabilities.serverless:
        if request.runtime not in (None, endpoint):
            raise UserError(f"--runtime {request.runtime} cannot run on {request.provider}, a serverless endpoint: it "
                            "has no host of ours", place="provision",
                            hint=f"leave --runtime out (an endpoint runs {endpoint}); nothing was launched")
        return endpoint
    entry = runtimes.runtime(request.runtime)
    if entry is not None and not entry.has_host:
        raise UserError(f"--runtime {request.runtime} is a serverless endpoint's, and {request.provider} rents "
                        "instances", place="provision",
                        hint="give the runtime the instance will serve, or a serverless provider; nothing was "
                        "launched")
    return request.runtime


def _refuse_what_is_not_offered(request: ProvisionRequest, kind: ProviderKind, capabilities: Capabilities) -> None:
    if request.interruptible and not capabilities.interruptible:
        offering = sorted(name for name, adapter in ADAPTERS.items() if adapter.capabilities.interruptible)
        raise UserError(f"--interruptible is not offered by {kind.value}", place="provision",
                        hint=f"interruptible (spot/bid) exists on {', '.join(offering)}")
    if request.interruptible and capabilities.bid_price and request.bid_price is None:
        raise UserError("an interruptible Vast.ai instance is a bid: give --bid-price", place="provision",
                        hint="see `gpuharness economics --retryable` for when interruptible pays")


def launch_spec(request: ProvisionRequest, deployment: Deployment) -> LaunchSpec:
    """What the provider is asked to launch; the deployment's key travels with it."""
    return LaunchSpec(gpu=request.gpu, image=request.image, idempotency_key=str(deployment.idempotency_key),
                      gpu_count=request.gpu_count, region=request.region, interruptible=request.interruptible,
                      disk_gb=request.disk_gb, env=dict(request.env), bid_price=request.bid_price,
                      max_cost_hr=request.cost_hr,
                      ports=("22/tcp",) if request.service_port is None
                      else ("22/tcp", f"{request.service_port}/http"))


def _launch(ctx: Context, request: ProvisionRequest, deployment: Deployment, claim: Claim, *, up_deadline_s: float,
            poll_s: float) -> Instance:
    """One reconciled launch, recorded at once (machines.json, the instance id, the journal), then the wait
    until it runs with a route. A failed launch leaves the deployment error or destroyed, never ambiguous. Each
    launch call goes out only while this process still holds the deployment's launch claim (core.claims)."""
    spec = launch_spec(request, deployment)
    provider = ctx.provider_for(request.provider)
    try:
        try:
            outcome = launch_instance(provider, spec, policy=Policy(ctx.registry.policy_document()), sleep=ctx.sleep,
                                      on_event=lambda event: _journal_launch_event(ctx, deployment, event),
                                      before_call=lambda: claim.check(f"the launch of {deployment.id}"),
                                      clock=ctx.clock)
        except ProviderError as exc:
            raise _launch_failed(ctx, request, deployment.id, spec, exc) from None
        observe(ctx, outcome.instance)
        launched = ctx.registry.update_deployment(deployment.id, instance_id=outcome.instance.id)
        journal(ctx.registry, JournalEntry.of(launched, route=f"{request.provider} API", observed_at=ctx.now(),
                                              marker={"key": spec.idempotency_key, "reconciled": outcome.reconciled},
                                              next_action="wait until running", note="launched"))
        try:
            return wait_until_up(ctx, provider, outcome.instance, serverless=False, deadline_s=up_deadline_s,
                                 poll_s=poll_s)
        except UserError as exc:  # it may still come up, and bills meanwhile: wait again, or end it
            transition(ctx.registry, deployment.id, "error", error=exc.what,
                       next_action=f"gpuharness provision --resume {deployment.id}")
            raise UserError(exc.what, place=exc.place, hint=f"it may be billing: {resume_or_destroy(deployment.id)}"
                            ) from None
    finally:
        provider.close()


#: what each event of a reconciled launch says in the journal
_LAUNCH_NOTES = {
    "exists": "an instance already carries the key (listed before any launch): adopted, nothing launched",
    "attempt": "launch attempt {attempt} sent",
    "created": "launch attempt {attempt} answered: instance created",
    "refused": "launch attempt {attempt} refused ({kind}); nothing was created",
    "unknown_outcome": "launch attempt {attempt}: answer lost; listing the key before anything else",
    "not_listed_yet": "launch attempt {attempt}: the key is not listed yet; listing again",
    "reconciled": "launch attempt {attempt}: its lost answer was settled by listing the key",
    "nothing_created": "launch attempt {attempt}: listed, nothing carries the key: nothing was created",
    "reconcile_failed": "launch attempt {attempt}: the listing to settle it failed: outcome unknown",
    "wait": "waiting {wait_s} s before the next launch attempt",
    "gave_up": "no more launch attempts",
    "deadline": "the launch phase's deadline (launch_deadline_s) ends it: no more attempts",
    "not_sent": "launch attempt {attempt} not sent: {error}",
}


def _journal_launch_event(ctx: Context, deployment: Deployment, event: dict[str, Any]) -> None:
    """Each launch attempt is its own journal entry, written before its call goes out, and so is each outcome:
    the journal shows every attempt, not a count after the fact."""
    # the launcher's mark (pid and start time): a resume knows a live launcher whose claim file was taken from it
    fields = {**{k: v for k, v in event.items() if k not in ("ts", "provider", "op")},
              "launcher": process_mark()}
    template = _LAUNCH_NOTES.get(str(event.get("event")), "launch event {event}")
    journal(ctx.registry, JournalEntry.of(deployment, route=f"{deployment.provider} API", observed_at=ctx.now(),
                                          marker={"launch": fields},
                                          note=template.format_map(_Missing(fields))))


class _Missing(dict[str, Any]):
    def __missing__(self, key: str) -> str:
        return "?"


def _launch_failed(ctx: Context, request: ProvisionRequest, deployment_id: str, spec: LaunchSpec,
                   exc: ProviderError) -> UserError:
    """Record a launch that failed: an unknown outcome stays `error` (it may exist: reconcile first); a refused
    launch created nothing (verified by listing), so the deployment is closed as history."""
    route, place = f"{request.provider} API", f"{request.provider}:{spec.idempotency_key}"
    if exc.kind == "unknown_outcome":
        transition(ctx.registry, deployment_id, "error", error=str(exc), route=route,
                   note="the launch may have happened and could not be checked",
                   next_action="gpuharness status --refresh, then provision again (it adopts by key)")
        return UserError(f"launch outcome unknown: {exc}", place=place,
                         hint="do not launch by hand: run `gpuharness status --refresh` first")
    transition(ctx.registry, deployment_id, "error", error=str(exc), route=route,
               note="launch failed; nothing was created (reconciled by listing)",
               next_action="provision again later or on another provider")
    transition(ctx.registry, deployment_id, "destroying", note="no instance exists")
    transition(ctx.registry, deployment_id, "destroyed", note="no instance was created; kept as history")
    return UserError(f"launch failed: {exc}", place=place,
                     hint="nothing was created (verified by listing); try another region, GPU or provider, or later")


def _ssh_access(ctx: Context, request: ProvisionRequest, instance: Instance) -> tuple[SshAccess | None,
                                                                                      dict[str, Any]]:
    """The instance's SSH block (with the key and known_hosts files the request names, else those its
    providers.json entry names), and the other fields only the host knows (ctx.host_details: the simulator's
    keys, ports, workspace)."""
    ssh: dict[str, Any] = {}
    if instance.ssh is not None:
        ssh = {"host": instance.ssh.host, "port": instance.ssh.port, "user": instance.ssh.user, "transport": "ssh"}
        entry = ctx.registry.provider(request.provider)
        key_file = request.ssh_key_file or entry.get("ssh_key_file")
        known_hosts = request.known_hosts or entry.get("known_hosts")
        if key_file:
            ssh["key_file"] = key_file
        if known_hosts:
            ssh["known_hosts"] = known_hosts
    fields: dict[str, Any] = {"endpoint": instance.endpoint}
    if ctx.host_details is not None:
        details = dict(ctx.host_details(instance))
        ssh = {**ssh, **details.pop("ssh", {})}
        fields.update(details)
    return (SshAccess.from_json(ssh) if ssh else None), fields


def price_limit(ctx: Context, request: ProvisionRequest) -> float:
    """The hourly price the launch holds: the accepted --cost-hr (or cheapest offer), never above max_cost_hr."""
    ceiling = Policy(ctx.registry.policy_document()).ceilings.max_cost_hr
    return request.price if ceiling is None else min(request.price, ceiling)


def _billed_price(ctx: Context, request: ProvisionRequest, deployment: Deployment, instance: Instance) -> float:
    """What the provider bills, as it reports it right after the launch; above the held limit it is journaled (the
    caller destroys the instance), and the deployment records the billed price."""
    cost_hr = instance.cost_hr if instance.cost_hr is not None else request.price
    limit = price_limit(ctx, request)
    if exceeds(cost_hr, limit):
        warning = (f"the provider bills ${cost_hr:.3f}/hr, above the allowed ${limit:.3f}/hr "
                   f"(--cost-hr / max_cost_hr); destroying {deployment.id} before any further cost")
        ctx.say(f"REFUSED: {warning}")
        journal(ctx.registry, JournalEntry.of(deployment, route=None, observed_at=ctx.now(),
                                              marker={"billed_cost_hr": cost_hr, "accepted_cost_hr": limit},
                                              note=warning, next_action=f"destroy {deployment.id}"))
    return cost_hr


def refuse_billed_above(ctx: Context, request: ProvisionRequest, result: ProvisionResult) -> ProvisionResult:
    """A launched instance the provider bills above the held limit is destroyed at once (with the destroy's
    disclosure), after the launch claim was released (destroy takes the same claim), and the provision fails."""
    deployment = result.deployment
    limit = price_limit(ctx, request)
    if result.launched is None or not exceeds(deployment.cost_hr, limit):
        return result
    destroy(ctx, deployment.id, confirm=deployment.id)
    raise UserError(f"the provider bills ${deployment.cost_hr:.3f}/hr for {deployment.id}, above the allowed "
                    f"${limit:.3f}/hr: it was destroyed", place=f"{deployment.provider}:{deployment.instance_id}",
                    hint="pick a cheaper GPU or raise --cost-hr (and max_cost_hr); nothing is left running")


def record_instance(ctx: Context, request: ProvisionRequest, deployment_id: str, instance: Instance) -> Deployment:
    """The running instance's route, endpoint, region and billed price on the deployment, journaled."""
    ssh, fields = _ssh_access(ctx, request, instance)
    cost_hr = _billed_price(ctx, request, ctx.registry.deployment(deployment_id), instance)
    deployment = ctx.registry.update_deployment(deployment_id, ssh=ssh, cost_hr=cost_hr,
                                                region=instance.region or request.region, **fields)
    if ssh is not None:
        journal(ctx.registry, JournalEntry.of(deployment, route=deployment.ssh_route, observed_at=ctx.now(),
                                              marker=instance.raw_status, note="instance running",
                                              next_action=f"gpuharness install {deployment_id}"))
    return deployment


def _register_endpoint(ctx: Context, entry: dict[str, Any], deployment_id: str, text: str) -> ProvisionResult:
    """RunPod Serverless: the deployment is the endpoint (scale to zero); nothing is launched, there is no SSH."""
    endpoint_id = entry.get("endpoint_id")
    if not endpoint_id:
        transition(ctx.registry, deployment_id, "error", error="providers.json names no endpoint_id")
        raise UserError(f"provider {entry['name']!r} names no endpoint_id", path=ctx.registry.path("providers.json"),
                        place=str(entry["name"]), hint="add endpoint_id (the id in /v2/<endpoint_id>/run)")
    base = str(entry.get("api_base") or "https://api.runpod.ai").rstrip("/")
    ctx.registry.update_deployment(deployment_id, instance_id=str(endpoint_id), endpoint=f"{base}/v2/{endpoint_id}",
                                   ssh=None)
    deployment = transition(ctx.registry, deployment_id, "health-checking", route=f"{base}/v2/{endpoint_id}",
                            note="serverless endpoint: no SSH, nothing to install",
                            next_action=gate_command(deployment_id))
    return ProvisionResult(deployment, False, text)
