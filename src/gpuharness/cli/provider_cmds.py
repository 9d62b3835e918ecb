"""Provider commands: the simulator (`sim serve`), `providers check` and `offers`."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from gpuharness.cli import emit
from gpuharness.core.deployment import live_burn
from gpuharness.core.errors import UserError
from gpuharness.core.policy import Policy
from gpuharness.core.registry import Registry
from gpuharness.providers.authentication import check_all
from gpuharness.providers.base import OfferSource
from gpuharness.providers.factory import PhaseOptions, build_provider, capabilities_of
from gpuharness.providers.offers import gather


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    sim = subparsers.add_parser("sim", help="the loopback provider simulator")
    sim_sub = sim.add_subparsers(dest="sim_command", metavar="ACTION", required=True)
    p = sim_sub.add_parser("serve", parents=[common], help="serve RunPod/Vast/Massed wire formats on loopback")
    p.add_argument("--host", default="127.0.0.1", help="loopback address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8765, help="port (default 8765; 0 picks a free one)")
    p.add_argument("--ready-delay", type=float, default=0.2, metavar="S",
                   help="seconds an instance stays pending before running (default 0.2)")
    p.add_argument("--verbose", action="store_true", help="log each request line (never headers)")
    p.add_argument("--configure", action="store_true",
                   help="point providers.json (runpod, vast, massed, runpod-serverless) at this simulator")
    p.add_argument("--no-hosts", action="store_true",
                   help="do not start a simulated SSH host + runtime for each running instance")
    p.set_defaults(handler=cmd_sim_serve)

    providers = subparsers.add_parser("providers", help="configured providers")
    prov_sub = providers.add_subparsers(dest="providers_command", metavar="ACTION", required=True)
    p = prov_sub.add_parser("check", parents=[common],
                            help="one cheap authenticated read per provider; records authenticated/checked_at")
    p.add_argument("--provider", metavar="NAME", help="only this provider")
    p.add_argument("--deadline", type=float, default=60.0, metavar="S", help="phase deadline (default 60 s)")
    p.set_defaults(handler=cmd_providers_check)

    p = subparsers.add_parser("offers", parents=[common], help="what can be rented now, cheapest first")
    p.add_argument("--gpu", required=True, help='GPU model, e.g. "RTX 4090"')
    p.add_argument("--max-cost-hr", type=float, metavar="X", help="hide offers above X $/hr")
    p.add_argument("--provider", metavar="NAME", action="append", help="only this provider (repeatable)")
    p.add_argument("--deadline", type=float, default=60.0, metavar="S", help="phase deadline (default 60 s)")
    p.set_defaults(handler=cmd_offers)


def cmd_sim_serve(args: argparse.Namespace) -> int:
    from gpuharness.sim import Simulator  # the server is only needed by this command

    if args.port < 0 or args.port > 65535:
        raise UserError(f"--port {args.port} is not a TCP port", place="sim serve")
    log = (lambda line: print(line, file=sys.stderr, flush=True)) if args.verbose else None
    sim = Simulator(host=args.host, port=args.port, ready_delay_s=args.ready_delay, log=log)
    if not args.no_hosts:
        from gpuharness.sim.host import host_factory

        sim.host_factory = host_factory(counter=sim.state.increment)
    try:
        sim.start()
    except OSError as exc:
        raise UserError(f"cannot listen on {args.host}:{args.port}: {exc.strerror}", place="sim serve",
                        hint="pick another --port, or 0 for a free one") from None
    if args.configure:
        entries = sim.provider_entries()
        with Registry.locate(args.registry).update("providers.json") as document:
            names = {e["name"] for e in entries}
            document["providers"] = [p for p in document["providers"] if p["name"] not in names] + entries
        print(f"providers.json points at {sim.base_url}; export {entries[0]['credential_env']}=<any 20+ characters>",
              file=sys.stderr, flush=True)
    print(f"ready {sim.base_url}", flush=True)
    try:
        while True:
            sim.wait(3600)
    except KeyboardInterrupt:
        pass
    finally:
        sim.stop()
    return 0


def cmd_providers_check(args: argparse.Namespace) -> int:
    registry = Registry.locate(args.registry)
    results = check_all(registry, options=PhaseOptions(deadline_s=args.deadline), only=args.provider)
    lines = []
    for r in results:
        word = {True: "ok", False: "REFUSED", None: "unknown"}[r.authenticated]
        lines.append(f"{r.name:<18} {r.kind:<18} {word:<8} {r.detail}")
    emit(args, [r.to_json() for r in results], "\n".join(lines) or "(no providers in providers.json)")
    return 0 if all(r.authenticated is not False for r in results) else 1


def cmd_offers(args: argparse.Namespace) -> int:
    registry = Registry.locate(args.registry)
    policy = Policy(registry.policy_document())
    burn_hr, live_count = live_burn(registry.deployments())
    options = PhaseOptions(deadline_s=args.deadline)
    sources: list[tuple[str, str, OfferSource]] = []
    failures: dict[str, str] = {}
    opened: list[Any] = []
    for entry in registry.providers():
        if args.provider and entry["name"] not in args.provider:
            continue
        try:
            if not capabilities_of(entry).offers:
                continue
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
    emit(args, payload, "\n".join(lines))
    return 0
