"""Commands over provider inventory and plans: status [--refresh], plan make, plan apply."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpuharness.cli import emit, existing_registry
from gpuharness.cli.arguments import non_negative, positive, timeout_option, whole
from gpuharness.core.clock import utcnow
from gpuharness.core.errors import UserError
from gpuharness.core.ledger import Ledger
from gpuharness.core.registry import Registry
from gpuharness.operations import reconcile
from gpuharness.operations.unresolved import refuse_while_unresolved
from gpuharness.plans.plan import LaunchRequest, load_plan, make_plan, save_plan, step_label
from gpuharness.providers import cassette, inventory
from gpuharness.providers.base import ProviderError
from gpuharness.providers.offers import cheapest_offer

DEFAULT_INVENTORY = Path("cassettes/http/inventory.yaml")
#: Where `plan make` writes plans and their rehearsal cassettes unless told otherwise (in the registry).
PLANS_DIR = "plans"


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    p = subparsers.add_parser("status", parents=[common],
                              help="the registry view; --refresh reconciles it against every provider (one list each)")
    p.add_argument("--refresh", action="store_true", help="list every provider once and reconcile the registry")
    p.add_argument("--all", action="store_true", help="also list destroyed deployments")
    p.add_argument("--gpu-mode", choices=("live", "record", "offline"), default="live",
                   help="live lists providers; record also writes --cassette; offline replays --cassette")
    p.add_argument("--cassette", type=Path, default=DEFAULT_INVENTORY,
                   help=f"inventory cassette for record/offline (default {DEFAULT_INVENTORY})")
    timeout_option(p, 300.0, "seconds for the whole refresh, every provider's list included")
    p.set_defaults(handler=provider_errors_as_user_errors(cmd_status))

    plan = subparsers.add_parser("plan", help="plans of provider mutations: make, verify offline, apply live")
    sub = plan.add_subparsers(dest="plan_command", metavar="ACTION", required=True)
    p = sub.add_parser("make", parents=[common],
                       help="write a plan (launch and/or teardown), rehearsed against the simulator into a cassette")
    p.add_argument("--provider", help="provider name of providers.json for the launch")
    p.add_argument("--gpu", help="GPU as the provider names it, e.g. 'NVIDIA GeForce RTX 4090'")
    p.add_argument("--image", help="container or VM image")
    p.add_argument("--cost-hr", type=non_negative,
                   help="the hourly price accepted (default, live: the provider's cheapest offer of --gpu)")
    p.add_argument("--idle-minutes", type=positive, help="stop condition: idle minutes")
    p.add_argument("--max-hours", type=positive, help="stop condition: max hours")
    p.add_argument("--gpu-count", type=whole(minimum=1), default=1, help="GPUs per instance (default 1)")
    p.add_argument("--region", help="only offers in this region")
    p.add_argument("--disk-gb", type=whole(minimum=1), default=50, help="disk size in GB (default 50)")
    p.add_argument("--checkpoint-path", help="where on the instance jobs keep checkpoints")
    p.add_argument("--terminate", action="append", default=[], metavar="DEPLOYMENT",
                   help="add a retrieve then a terminate of this deployment (repeatable)")
    p.add_argument("--gpu-mode", choices=("live", "offline"), default="live",
                   help="where the inventory comes from: live lists, or offline from --inventory")
    p.add_argument("--inventory", type=Path, default=DEFAULT_INVENTORY, help="inventory cassette (offline)")
    p.add_argument("--cassette", type=Path,
                   help="plan cassette to record (default: the registry's plans/<plan>.yaml, never the project's "
                        "cassettes)")
    p.add_argument("-o", "--output", type=Path,
                   help="plan file to write (default: the registry's plans/plan-<UTC time>.json)")
    p.set_defaults(handler=provider_errors_as_user_errors(cmd_plan_make))

    p = sub.add_parser("apply", parents=[common], help="run a verified plan live; refuses a stale plan")
    p.add_argument("file", type=Path, help="the plan file `plan make` wrote")
    p.add_argument("--artifacts", type=Path, default=Path("artifacts"),
                   help="where retrieve steps sync artifacts (default ./artifacts)")
    p.add_argument("--yes", action="store_true", help="do not ask before each mutation (the disclosure still prints)")
    p.set_defaults(handler=provider_errors_as_user_errors(cmd_plan_apply))


def provider_errors_as_user_errors(handler: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """A classified provider failure (auth, capacity, rate limit, network...) is the user's one line, not a
    traceback; its message never carries the key."""

    def run(args: argparse.Namespace) -> int:
        try:
            return handler(args)
        except ProviderError as exc:
            hint = ("nothing more was changed; reconcile with `gpuharness status --refresh` before retrying"
                    if exc.kind == "unknown_outcome" else "nothing more was changed")
            raise UserError(str(exc), place=exc.provider, hint=hint) from None

    return run


def cmd_status(args: argparse.Namespace) -> int:
    registry = existing_registry(args)
    if not args.refresh:
        from gpuharness.cli import status_view

        emit(args, status_view.payload(registry),
             "" if getattr(args, "json", False) else status_view.render(registry, show_all=args.all))
        return 0
    found = inventory.current(registry, cassette.Mode.parse(args.gpu_mode), args.cassette, deadline_s=args.deadline)
    guarded = _guard_stops(registry, found)
    report = reconcile.reconcile(registry, found)
    stale = reconcile.stale_running_jobs(Ledger(registry.ledger_path), registry.deployments(),
                                         vanished=report.vanished)
    payload = {**report.to_json(), "stale_jobs": [s.to_json() for s in stale],
               "guard_stops": [{"deployment": s.deployment, **s.marker()} for s in guarded]}
    counts = ", ".join(f"{p} {len(items)}" for p, items in found.instances.items()) or "no providers"
    lines = [f"reconciled against {found.source} at {found.observed_at}: {counts} instance(s)"]
    lines += [f"skipped {p}: {why}" for p, why in found.skipped.items()]
    lines += [f"  {change}" for change in report.machine_changes]
    lines += [f"  transition {s.deployment} -> stopped: {s.words()} at {s.at} ({s.evidence})" for s in guarded]
    lines += [f"  transition {t}" for t in report.transitions]
    lines += [f"ORPHAN   {o.message()}" for o in report.orphans]
    lines += [f"VANISHED {v.message()}" for v in report.vanished]
    lines += [f"{'LINKED' if u.linked else 'UNRESOLVED'} {u.message()}" for u in report.unresolved]
    lines += [f"INTERRUPTED {i.message()}" for i in report.interrupted]
    lines += [f"{'OVER CEILING' if r.exceeds_ceiling else 'RATE'} {r.message()}" for r in report.rate_changes]
    lines += [f"STALE JOB {s.job_id} on {s.deployment_id}: {s.reason}" for s in stale]
    if report.clean and not stale:
        lines.append("clean: no orphans, no vanished deployments, no unresolved launches or destroys, no stale "
                     "running jobs, no rate above max_cost_hr")
    emit(args, payload, "\n".join(lines))
    return 0 if report.clean and not stale else 1


def _guard_stops(registry: Registry, found: Any) -> list[Any]:
    """The pods their guards stopped, read from the guards' logs before reconcile journals the provider's word."""
    from gpuharness.operations.guard_stop import journal_guard_stops
    from gpuharness.operations.seams import cli_context

    return journal_guard_stops(cli_context(registry), found)


def cheapest_offer_price(registry: Registry, name: str, gpu: str, gpu_count: int) -> float:
    """The hourly price of the cheapest offer of gpu at the provider (one read), for the plan's expected burn."""
    provider = inventory.adapter_factory()(registry.provider(name))
    try:
        best = cheapest_offer(provider, gpu, gpu_count)
    finally:
        provider.close()
    if best is None:
        raise UserError(f"no offer of {gpu!r} at {name}", place="plan make",
                        hint="pass --cost-hr, or pick a GPU from `gpuharness offers`")
    return best.cost_hr


def _launch_request(args: argparse.Namespace, registry: Registry) -> LaunchRequest | None:
    wanted = [args.provider, args.gpu, args.image]
    if not any(wanted):
        return None
    if not all(wanted):
        raise UserError("a launch needs --provider, --gpu and --image", place="plan make")
    cost_hr = args.cost_hr
    if cost_hr is None:
        if args.gpu_mode != "live":
            raise UserError("an offline launch plan needs --cost-hr (the hourly price you accept)",
                            place="plan make", hint="see `gpuharness offers --gpu ...`")
        cost_hr = cheapest_offer_price(registry, args.provider, args.gpu, args.gpu_count)
    return LaunchRequest(provider=args.provider, gpu=args.gpu, image=args.image, expected_cost_hr=cost_hr,
                         idle_minutes=args.idle_minutes, max_hours=args.max_hours, gpu_count=args.gpu_count,
                         region=args.region, disk_gb=args.disk_gb, checkpoint_path=args.checkpoint_path)


def cmd_plan_make(args: argparse.Namespace) -> int:
    registry = existing_registry(args)
    if any([args.provider, args.gpu, args.image]):
        refuse_while_unresolved(registry, "plan a launch")
    request = _launch_request(args, registry)
    if request is not None:
        registry.provider(request.provider)
    found = inventory.current(registry, cassette.Mode.parse(args.gpu_mode), args.inventory)
    plans = registry.path(PLANS_DIR)
    output: Path = args.output or plans / f"plan-{utcnow().strftime('%Y%m%dT%H%M%SZ')}.json"
    cassette_path: Path = args.cassette or plans / f"{output.stem}.yaml"
    if args.output is None or args.cassette is None:
        plans.mkdir(parents=True, exist_ok=True)
    relative = os.path.relpath(cassette_path.resolve(), output.resolve().parent)
    plan = make_plan(registry.deployments(), found, launches=[request] if request else [],
                     terminate=args.terminate, cassette=relative)
    from gpuharness.plans.replay import rehearse_with_mirror  # vcrpy: only when a plan is made

    rehearse_with_mirror(plan, registry.providers(), found, cassette_path)
    save_plan(output, plan)
    lines = [f"plan {output} ({len(plan['steps'])} step(s), fingerprint {plan['fingerprint'][:19]}…)"]
    lines += [f"  {step_label(s)}" for s in plan["steps"]]
    lines.append(f"rehearsed against the simulator into {cassette_path}; verify offline with "
                 f"`pytest checks/plan --plan {output}`")
    emit(args, plan, "\n".join(lines))
    return 0


def cmd_plan_apply(args: argparse.Namespace) -> int:
    from gpuharness.operations.seams import cli_context
    from gpuharness.plans.apply import apply_plan

    registry = existing_registry(args)
    plan = load_plan(args.file)
    done = apply_plan(plan, cli_context(registry), artifacts=args.artifacts, ask=None if args.yes else _ask,
                      plan_path=args.file)
    emit(args, {"applied": done}, "\n".join(f"applied {line}" for line in done) or "nothing applied")
    return 0


def _ask(question: str) -> bool:
    try:
        answer = input(f"{question} [y/N] ")
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")
