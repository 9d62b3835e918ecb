"""Provider commands: `providers add`, `providers check` and `offers`."""

from __future__ import annotations

import argparse
import os
import re
from typing import Any

from gpuharness.cli import emit, existing_registry
from gpuharness.cli.arguments import non_negative, timeout_option
from gpuharness.core.deployment import live_burn
from gpuharness.core.errors import UserError
from gpuharness.core.policy import Policy
from gpuharness.core.registry import Registry
from gpuharness.providers.authentication import check_all
from gpuharness.providers.base import ADAPTERS, OfferSource, ProviderKind
from gpuharness.providers.factory import PhaseOptions, build_provider, capabilities_of
from gpuharness.providers.offers import gather

KEY_ENV = re.compile(r"[A-Z_][A-Z0-9_]*")  # the pattern of credential_env in the providers schema


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    providers = subparsers.add_parser("providers", help="configured providers")
    prov_sub = providers.add_subparsers(dest="providers_command", metavar="ACTION", required=True)
    p = prov_sub.add_parser("add", parents=[common], help="add a provider to providers.json",
                            epilog="example: gpuharness providers add vast --kind vast --key-env VAST_API_KEY")
    p.add_argument("name", help="the name commands use for it (--provider NAME)")
    p.add_argument("--kind", required=True, help=f"which adapter speaks to it: {', '.join(ADAPTERS)}")
    p.add_argument("--key-env", metavar="VAR",
                   help="the environment variable holding its API key (the key itself is never written)")
    p.add_argument("--api-base", metavar="URL", help="another base URL (a proxy, or the simulator)")
    p.add_argument("--ssh-key-file", metavar="FILE", help="the SSH key its instances are reached with")
    p.add_argument("--known-hosts", metavar="FILE", help="the known_hosts file its instances' keys are pinned in")
    p.add_argument("--guard-action", choices=("shutdown",),
                   help="where the provider places no in-pod stop (Massed, owned hosts): the pod's shutdown guard "
                        "runs `shutdown -h now` (default: no guard; reap --apply alone stops it)")
    p.add_argument("--replace", action="store_true", help="replace an entry of the same name")
    p.set_defaults(handler=cmd_providers_add)
    p = prov_sub.add_parser("check", parents=[common],
                            help="one cheap authenticated read per provider; records authenticated/checked_at")
    p.add_argument("--provider", metavar="NAME", help="only this provider")
    timeout_option(p, 60.0, "seconds for the whole check")
    p.set_defaults(handler=cmd_providers_check)

    p = subparsers.add_parser("offers", parents=[common], help="what can be rented now, cheapest first")
    p.add_argument("--gpu", required=True, help='GPU model, e.g. "RTX 4090"')
    p.add_argument("--max-cost-hr", type=non_negative, metavar="X", help="hide offers above X $/hr")
    p.add_argument("--provider", metavar="NAME", action="append", help="only this provider (repeatable)")
    timeout_option(p, 60.0, "seconds for every provider's answer")
    p.set_defaults(handler=cmd_offers)


def cmd_providers_add(args: argparse.Namespace) -> int:
    registry = existing_registry(args)
    kind = ProviderKind.parse(args.kind, place="--kind")
    if args.key_env is not None and not KEY_ENV.fullmatch(args.key_env):
        raise UserError(f"--key-env {args.key_env!r} is not an environment variable name",
                        hint="upper case letters, digits and _, e.g. VAST_API_KEY; the name, never the key")
    entry = {"name": args.name, "kind": kind.value, "credential_env": args.key_env}
    entry |= {k: v for k, v in (("api_base", args.api_base), ("ssh_key_file", args.ssh_key_file),
                                ("known_hosts", args.known_hosts), ("guard_action", args.guard_action))
              if v is not None}
    with registry.update("providers.json") as document:
        taken = [p for p in document["providers"] if p["name"] == args.name]
        if taken and not args.replace:
            raise UserError(f"provider {args.name!r} is already in providers.json", path=registry.path(
                "providers.json"), hint="pass --replace to replace it, or choose another name")
        document["providers"] = [p for p in document["providers"] if p["name"] != args.name] + [entry]
    unset = args.key_env and not os.environ.get(args.key_env)
    after = (f"\n  ${args.key_env} is not set here: export {args.key_env}=... before" if unset else "\n  next:")
    emit(args, entry, f"providers.json: added {args.name} (kind {kind.value}"
         + (f", key from ${args.key_env})" if args.key_env else ", no key)")
         + f"{after} gpuharness providers check --provider {args.name}")
    return 0


def cmd_providers_check(args: argparse.Namespace) -> int:
    registry = existing_registry(args)
    results = check_all(registry, options=PhaseOptions(deadline_s=args.deadline), only=args.provider)
    lines = []
    for r in results:
        word = {True: "ok", False: "REFUSED", None: "unknown"}[r.authenticated]
        lines.append(f"{r.name:<18} {r.kind:<18} {word:<8} {r.detail}")
    emit(args, [r.to_json() for r in results], "\n".join(lines) or "(no providers in providers.json)")
    return 0 if all(r.authenticated is not False for r in results) else 1


def cmd_offers(args: argparse.Namespace) -> int:
    registry = existing_registry(args)
    policy = Policy(registry.policy_document())
    burn_hr, live_count = live_burn(registry.deployments())
    options = PhaseOptions(deadline_s=args.deadline)
    sources: list[tuple[str, str, OfferSource]] = []
    failures: dict[str, str] = {}
    opened: list[Any] = []
    asked: list[str] = []
    for entry in registry.providers():
        if args.provider and entry["name"] not in args.provider:
            continue
        try:
            if not capabilities_of(entry).offers:
                continue
            asked.append(entry["name"])
            provider = build_provider(entry, options=options, registry=registry)
        except UserError as exc:
            failures[entry["name"]] = exc.what
            continue
        opened.append(provider)
        if isinstance(provider, OfferSource):
            sources.append((entry["name"], entry["kind"], provider))
    try:
        offers, fetch_failures = gather(sources, args.gpu, policy, max_cost_hr=args.max_cost_hr, burn_hr=burn_hr,
                                        live_count=live_count)
    finally:
        for provider in opened:
            provider.close()
    failures.update(fetch_failures)
    payload = {"gpu": args.gpu, "max_cost_hr": args.max_cost_hr, "offers": [o.to_json() for o in offers],
               "failures": failures, "policy": registry.policy_origin()}
    lines = [f"{'$/hr':>8}  {'provider':<10} {'gpu':<26} {'n':>2}  {'region':<16} {'offer':<22} policy"]
    for o in offers:
        lines.append(f"{o.cost_hr:>8.3f}  {o.provider:<10} {o.gpu[:26]:<26} {o.gpu_count:>2}  "
                     f"{(o.region or '-')[:16]:<16} {(o.offer_id or '-')[:22]:<22} "
                     f"{'REFUSED ' + o.refused if o.refused else 'ok'}")
    if not offers:
        lines.append(f"(no offers for {args.gpu!r})")
    lines += [f"{name}: {why}" for name, why in failures.items()]
    if not registry.has_policy():
        lines.append(f"policy: {registry.policy_origin()}")
    nothing = _nothing_asked(registry, asked, failures)
    if nothing:
        lines.append(nothing)
    emit(args, payload, "\n".join(lines))
    return 1 if nothing else 0


def _nothing_asked(registry: Registry, asked: list[str], failures: dict[str, str]) -> str | None:
    """Why no provider's offers were read (then `offers` listed nothing and exits 1), or None."""
    if not asked:
        return (f"no provider in {registry.path('providers.json')} lists offers: add one with "
                "`gpuharness providers add NAME --kind KIND --key-env VAR`")
    if all(name in failures for name in asked):
        return (f"no provider answered ({', '.join(asked)}): fix the keys above, then run "
                "`gpuharness providers check`")
    return None
