"""Lifecycle commands: provision, install, configure, run, retrieve, destroy, reap, demo, check."""

from __future__ import annotations

import argparse
import subprocess
from typing import Any

from gpuharness.cli import emit, existing_registry
from gpuharness.cli.arguments import non_negative, positive, timeout_option, whole
from gpuharness.core import runtimes
from gpuharness.core.errors import UserError

SUITES = ("health", "audit", "plan")


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    _register_provision(subparsers, common)

    for name, text in (("install", "download and sha256-verify the model files (one batched SSH exec)"),
                       ("configure", "runtime setup from the workflow manifest (one batched SSH exec)")):
        p = subparsers.add_parser(name, parents=[common], help=text)
        p.add_argument("deployment", help="the deployment id")
        timeout_option(p, 1800.0 if name == "install" else 900.0, "seconds for the one exec")
        p.set_defaults(handler=cmd_install if name == "install" else cmd_configure)
        if name == "configure":
            _guard_poll_option(p)

    p = subparsers.add_parser("guard", parents=[common],
                              help="(re-)arm the shutdown guard on a live deployment's pod (one batched SSH exec)")
    p.add_argument("deployment", help="the deployment id")
    _guard_poll_option(p)
    timeout_option(p, 120.0, "seconds for the one exec")
    p.set_defaults(handler=cmd_guard)

    p = subparsers.add_parser("run", parents=[common], help="run jobs on a ready deployment, with ledger lines")
    p.add_argument("deployment", help="the deployment id (status ready)")
    p.add_argument("--workflow", metavar="ID", help="a workflows.json id (default: the deployment's workflow)")
    p.add_argument("--inputs", action="append", default=[], metavar="JSON",
                   help="job inputs as a JSON object (repeat for a batch)")
    p.add_argument("--poll", type=positive, default=2.0, help="seconds between status polls (default 2)")
    p.set_defaults(handler=cmd_run)

    p = subparsers.add_parser("retrieve", parents=[common],
                              help="sync artifacts off the instance over SFTP (resumable, sha256-verified)")
    p.add_argument("deployment", help="the deployment id")
    p.add_argument("--to", default="outputs", help="local directory (default ./outputs)")
    timeout_option(p, 3600.0, "seconds for the whole retrieve; what is not synced by then stays pending")
    p.set_defaults(handler=cmd_retrieve)

    p = subparsers.add_parser("destroy", parents=[common],
                              help="terminate (needs --confirm <exact id>; refuses with unsynced artifacts)")
    p.add_argument("deployment", help="the deployment id")
    p.add_argument("--confirm", metavar="ID", help="the exact deployment id, again")
    p.add_argument("--discard-artifacts", action="store_true",
                   help="destroy although artifacts are not synced (recorded on the ledger)")
    p.set_defaults(handler=cmd_destroy)

    p = subparsers.add_parser("reap", parents=[common],
                              help="apply shutdown rules and idle economics (dry run unless --apply)")
    p.add_argument("--apply", action="store_true", help="sync artifacts, then destroy what the rules say")
    p.add_argument("--orphans", action="store_true",
                   help="instead: list instances with our key prefix that no live deployment claims (one list call "
                        "per provider); with --apply, terminate them after saying what they are and cost")
    p.add_argument("--to", default="outputs", help="where artifacts are synced before a destroy")
    p.add_argument("--startup-minutes", type=non_negative, default=12.0,
                   help="provision+install+load time used by the keep-alive economics (default 12)")
    p.set_defaults(handler=cmd_reap)

    p = subparsers.add_parser("demo", parents=[common],
                              help="the whole lifecycle on the built-in simulator, then the three check suites")
    p.add_argument("--workdir", help="workspace directory (default: a fresh temp dir)")
    p.add_argument("--no-suites", action="store_true", help="skip the health/audit/plan suites")
    p.set_defaults(handler=cmd_demo)

    p = subparsers.add_parser("check", help="run a packaged check suite with pytest: check health|audit|plan ARGS")
    p.add_argument("suite", choices=SUITES, help="which packaged suite")
    p.add_argument("pytest_args", nargs=argparse.REMAINDER, help="passed to pytest as they are")
    p.set_defaults(handler=cmd_check)


def _register_provision(subparsers: Any, common: argparse.ArgumentParser) -> None:
    p = subparsers.add_parser("provision", parents=[common],
                              help="check the policy, disclose, then launch one instance (or reuse a live match)")
    p.add_argument("--resume", metavar="ID", help="carry on the provision of ID, cut short before its instance came "
                   "up (--up-deadline, a crash), as recorded; nothing is launched twice")
    p.add_argument("--provider", help="a providers.json name (required unless --resume)")
    p.add_argument("--gpu", help='GPU model as offers shows it, e.g. "RTX 4090" (required unless --resume)')
    p.add_argument("--image", help="container or VM image the instance boots (required unless --resume)")
    p.add_argument("--cost-hr", type=non_negative, default=None,
                   help="the hourly price you accept (default: the provider's cheapest offer of --gpu); "
                        "checked against the policy")
    p.add_argument("--runtime", choices=runtimes.names(), help="what serves on the instance")
    p.add_argument("--model", help="a models.json name (installed by `gpuharness install`)")
    p.add_argument("--workflow", help="a workflows.json id (its test generation proves the deployment)")
    p.add_argument("--gpu-count", type=whole(minimum=1), default=1, help="GPUs per instance (default 1)")
    p.add_argument("--region", help="only offers in this region")
    p.add_argument("--disk-gb", type=whole(minimum=1), default=50, help="disk size in GB (default 50)")
    p.add_argument("--idle-minutes", type=positive, help="shutdown rule: destroy after this many idle minutes")
    p.add_argument("--max-hours", type=positive, help="shutdown rule: destroy after this many hours")
    p.add_argument("--deadline", help="RFC 3339 UTC time after which it is destroyed")
    p.add_argument("--interruptible", action="store_true", help="spot/bid where the provider offers it")
    p.add_argument("--bid-price", type=non_negative, help="with --interruptible: the bid, in $/hr")
    p.add_argument("--owner", help="who cleans it up (default: the local user)")
    p.add_argument("--reason", help="why it runs (default: what it runs on which GPU)")
    p.add_argument("--checkpoint-path", help="where on the instance jobs keep checkpoints (synced by retrieve)")
    p.add_argument("--id", dest="deployment_id", help="the deployment id (default dep_<model>_<nn>)")
    p.add_argument("--ssh-key", help="private key file for the instance's SSH route")
    p.add_argument("--known-hosts", help="known_hosts file pinning the instance's host key")
    p.add_argument("--up-deadline", type=positive, default=900.0, help="seconds to wait for running (default 900)")
    p.set_defaults(handler=cmd_provision)


def _ctx(args: argparse.Namespace) -> Any:
    from gpuharness.cli.progress import transfers_for
    from gpuharness.operations.seams import cli_context
    ctx = cli_context(existing_registry(args))
    ctx.transfers = transfers_for(args)
    return ctx


#: what `provision --resume` takes from the command line; the rest of the request is the deployment's record
RESUME_OPTIONS = ("resume", "up_deadline", "ssh_key", "known_hosts", "registry", "json", "handler", "command")


def cmd_provision(args: argparse.Namespace) -> int:
    from gpuharness.operations.provision import ProvisionRequest, provision
    if args.resume:
        return _resume(args)
    missing = [f"--{name}" for name in ("provider", "gpu", "image") if not getattr(args, name)]
    if missing:
        raise UserError(f"provision needs {', '.join(missing)}", place="provision",
                        hint="give them, or resume a cut-short provision with --resume ID")
    request = ProvisionRequest(
        provider=args.provider, gpu=args.gpu, image=args.image, cost_hr=args.cost_hr, runtime=args.runtime,
        model=args.model, workflow=args.workflow, gpu_count=args.gpu_count, region=args.region,
        disk_gb=args.disk_gb, idle_minutes=args.idle_minutes, max_hours=args.max_hours, deadline=args.deadline,
        interruptible=args.interruptible, bid_price=args.bid_price, owner=args.owner, reason=args.reason,
        checkpoint_path=args.checkpoint_path, deployment_id=args.deployment_id, ssh_key_file=args.ssh_key,
        known_hosts=args.known_hosts)
    result = provision(_ctx(args), request, up_deadline_s=args.up_deadline)
    dep = result.deployment
    verb = "reused" if result.reused else "provisioned"
    emit(args, {"deployment": dep.to_json(), "reused": result.reused, "disclosure": result.disclosure.splitlines()},
         f"{verb} {dep.id} ({dep.status}) on {dep.provider} instance {dep.instance_id}\n"
         f"next: gpuharness install {dep.id} && gpuharness configure {dep.id}")
    return 0


def _resume(args: argparse.Namespace) -> int:
    from gpuharness.operations.resume import resume_provision
    given = [f"--{name.replace('_', '-')}" for name, value in vars(args).items() if name not in RESUME_OPTIONS
             and value not in (None, False, PROVISION_DEFAULTS.get(name))]
    if given:
        raise UserError(f"--resume carries on the recorded request: {', '.join(sorted(given))} cannot change it",
                        place="provision", hint="leave them out (only --up-deadline, --ssh-key and --known-hosts "
                        "apply), or destroy it and provision anew")
    result = resume_provision(_ctx(args), args.resume, up_deadline_s=args.up_deadline, ssh_key_file=args.ssh_key,
                              known_hosts=args.known_hosts)
    dep = result.deployment
    emit(args, {"deployment": dep.to_json(), "reused": result.reused, "disclosure": result.disclosure.splitlines()},
         f"resumed {dep.id} ({dep.status}) on {dep.provider} instance {dep.instance_id}\n"
         f"next: gpuharness install {dep.id} && gpuharness configure {dep.id}")
    return 0


#: provision's defaults that --resume ignores (they are the parser's, not the user's)
PROVISION_DEFAULTS = {"gpu_count": 1, "disk_gb": 50}


def _guard_poll_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--guard-poll-s", type=positive, default=30.0, metavar="S",
                   help="seconds between the guard's looks at the runtime and the clock (default 30)")


def cmd_guard(args: argparse.Namespace) -> int:
    from gpuharness.operations.guard import arm
    lines = arm(_ctx(args), args.deployment, poll_s=args.guard_poll_s, deadline_s=args.deadline)
    emit(args, {"deployment": args.deployment, "guard": lines}, "\n".join(lines))
    return 0 if any(line.startswith("GH-GUARD armed") for line in lines) else 1


def cmd_install(args: argparse.Namespace) -> int:
    from gpuharness.operations.install import install
    result = install(_ctx(args), args.deployment, deadline_s=args.deadline)
    emit(args, {"deployment": result.deployment.to_json(), "duration_s": result.duration_s},
         f"installed {args.deployment} in {result.duration_s:.1f} s; next: gpuharness configure {args.deployment}")
    return 0


def cmd_configure(args: argparse.Namespace) -> int:
    from gpuharness.health.gate import gate_command
    from gpuharness.operations.install import configure
    result = configure(_ctx(args), args.deployment, deadline_s=args.deadline, guard_poll_s=args.guard_poll_s)
    emit(args, {"deployment": result.deployment.to_json(), "duration_s": result.duration_s},
         f"configured {args.deployment}; next: {gate_command(args.deployment)} (the only path to ready; "
         "without this repository: gpuharness check health --gpu-mode live ...)")
    return 0


def _inputs(texts: list[str]) -> list[dict[str, Any]]:
    from gpuharness.core.statefile import parse_json_text
    batch: list[dict[str, Any]] = []
    for index, text in enumerate(texts or ["{}"]):
        value = parse_json_text(text, f"--inputs #{index + 1}")
        if not isinstance(value, dict):
            raise UserError("inputs must be a JSON object", path=f"--inputs #{index + 1}", place="1:1")
        batch.append(value)
    return batch


def cmd_run(args: argparse.Namespace) -> int:
    from gpuharness.operations.job_inputs import check_batch
    from gpuharness.operations.run import mark_interrupted, run_job, spend_line
    ctx = _ctx(args)
    batch = _inputs(args.inputs)
    check_batch(ctx, args.deployment, args.workflow, batch)
    for job in mark_interrupted(ctx, args.deployment):
        ctx.say(f"{job}: marked interrupted (its run process had died)")
    ctx.say(spend_line(ctx))
    results = []
    code = 0
    for inputs in batch:
        result = run_job(ctx, args.deployment, workflow_id=args.workflow, inputs=inputs, poll_s=args.poll)
        results.append({"job": result.job_id, "status": result.status, "cost_usd": result.cost_usd,
                        "duration_s": result.duration_s, "attempts": result.attempts,
                        "cause": result.failure.cause if result.failure else None})
        if result.status != "completed":
            code = 1
            if result.failure is not None:
                ctx.say(f"{result.job_id}: {result.failure.message()}")
            if ctx.registry.deployment(args.deployment).status != "ready":
                break
    lines = [f"{r['job']} {r['status']} ${r['cost_usd']:.4f} {r['duration_s']:.1f}s"
             + (f" (cause {r['cause']})" if r["cause"] else "") for r in results]
    emit(args, results, "\n".join(lines))
    return code


def cmd_retrieve(args: argparse.Namespace) -> int:
    from gpuharness.operations.retrieve import retrieve
    result = retrieve(_ctx(args), args.deployment, args.to, deadline_s=args.deadline)
    emit(args, {"synced": result.synced, "bytes": result.bytes_transferred},
         f"synced {len(result.synced)} artifact(s), {result.bytes_transferred:,} bytes, into {args.to}")
    return 0


def cmd_destroy(args: argparse.Namespace) -> int:
    from gpuharness.operations.destroy import destroy
    result = destroy(_ctx(args), args.deployment, confirm=args.confirm, discard_artifacts=args.discard_artifacts)
    text = f"destroyed {args.deployment} (terminate verified by listing: {result.verified})"
    if result.discarded:
        text += f"; discarded on purpose: {', '.join(result.discarded)}"
    emit(args, {"deployment": result.deployment.to_json(), "discarded": list(result.discarded),
                "disclosure": result.disclosure.splitlines()}, text)
    return 0


def cmd_reap(args: argparse.Namespace) -> int:
    from gpuharness.operations.reap import reap
    if args.orphans:
        return _reap_orphans(args)
    decisions = reap(_ctx(args), apply=args.apply, retrieve_to=args.to, startup_minutes=args.startup_minutes)
    lines = []
    for d in decisions:
        lines.append(f"{d.deployment}: {d.action}" + ("" if args.apply or d.action != "destroy"
                                                      else " (dry run: pass --apply)"))
        lines += [f"  why: {r}" for r in d.reasons] + [f"  {a}" for a in d.arithmetic]
    emit(args, [d.to_json() for d in decisions], "\n".join(lines) or "no live deployments")
    return 1 if any(d.action == "refused" for d in decisions) else 0


def cmd_demo(args: argparse.Namespace) -> int:
    from gpuharness.demo.tour import run_demo
    summary = run_demo(workdir=args.workdir, suites=not args.no_suites)
    emit(args, summary.to_json(), summary.text())
    return 0 if summary.ok else 1


def cmd_check(args: argparse.Namespace) -> int:
    from gpuharness.pytest_plugin.suites import suite_command
    return subprocess.call(suite_command(args.suite, args.pytest_args))


def _reap_orphans(args: argparse.Namespace) -> int:
    """Exit 0 when nothing is left billing unclaimed, 1 while an orphan remains (a dry run, or a failed terminate)."""
    from gpuharness.operations.orphans import reap_orphans
    from gpuharness.providers.base import ProviderError
    try:
        actions = reap_orphans(_ctx(args), apply=args.apply)
    except ProviderError as exc:
        raise UserError(str(exc), place=exc.provider, hint="nothing was terminated") from None
    lines = [f"ORPHAN {a.orphan.provider}/{a.orphan.instance_id} (key {a.orphan.key}, {a.orphan.status}, "
             + (f"${a.orphan.cost_hr:.3f}/hr" if a.orphan.cost_hr is not None else "cost unknown")
             + f"): {a.detail}" for a in actions]
    emit(args, [a.to_json() for a in actions], "\n".join(lines) or "no orphans: every instance with our key prefix "
         "is claimed by a live deployment")
    return 1 if any(a.outcome != "terminated" for a in actions) else 0
