"""Provider commands: `providers check` and `offers`."""

from __future__ import annotations

import argparse
from typing import Any

from gpuharness.cli import emit, existing_registry
from gpuharness.cli.arguments import non_negative, positive
from gpuharness.core.deployment import live_burn
from gpuharness.core.errors import UserError
from gpuharness.core.policy import Policy
from gpuharness.core.registry import Registry
from gpuharness.providers.authentication import check_all
from gpuharness.providers.base import OfferSource
from gpuharness.providers.factory import PhaseOptions, build_provider, capabilities_of
from gpuharness.providers.offers import gather


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    providers = subparsers.add_parser("providers", help="configured providers")
    prov_sub = providers.add_subparsers(dest="providers_command", metavar="ACTION", required=True)
    p = prov_sub.add_parser("check", parents=[common],
                            help="one cheap authenticated read per provider; records authenticated/checked_at")
    p.add_argument("--provider", metavar="NAME", help="only this provider")
    p.add_argument("--deadline", type=positive, default=60.0, metavar="S", help="phase deadline (default 60 s)")
    p.set_defaults(handler=cmd_providers_check)

    p = subparsers.add_parser("offers", parents=[common], help="what can be rented now, cheapest first")
    p.add_argument("--gpu", required=True, help='GPU model, e.g. "RTX 4090"')
    p.add_argument("--max-cost-hr", type=non_negative, metavar="X", help="hide offers above X $/hr")
    p.add_argument("--provider", metavar="NAME", action="append", help="only this provider (repeatable)")
    p.add_argument("--deadline", type=positive, default=60.0, metavar="S", help="phase deadline (default 60 s)")
    p.set_defaults(handler=cmd_offers)


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
