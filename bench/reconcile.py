"""Reconcile 10, 100 and 1,000 deployments against the simulator: provider calls per reconcile, and time.

    python bench/reconcile.py [--sizes 10,100,1000] [--repeat 3]

Targets: 1 list call per provider plus pages (Vast pages 25 per call), 0 gets; time(1000)/time(10) well under 100x.
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

from gpuharness.core.registry import Registry
from gpuharness.operations.reconcile import reconcile
from gpuharness.providers import inventory
from gpuharness.sim.server import Simulator

KINDS = ("runpod", "vast", "massed")
KEY_ENV = "GPUHARNESS_BENCH_KEY"


def build(sim: Simulator, root: Path, size: int) -> Registry:
    """size instances spread over the three providers (via POST /_sim/instances), each claimed by a deployment."""
    registry = Registry(root)
    registry.init()
    entries = [{"name": k, "kind": k, "credential_env": KEY_ENV, "api_base": sim.url(k)} for k in KINDS]
    with registry.update("providers.json") as document:
        document["providers"] = entries
    with registry.update("policy.json") as document:
        document["max_concurrent_deployments"] = size + 1
    shares = {"runpod": size - 2 * (size // 3), "vast": size // 3, "massed": size // 3}
    with httpx.Client(base_url=sim.base_url) as client:
        for kind, count in shares.items():
            if count:
                client.post("/_sim/instances", json={"provider": kind, "count": count,
                                                     "name_prefix": f"gh-{kind}-"}).raise_for_status()
    listed = inventory.fetch_inventory({e["name"]: inventory.adapter_factory()(e) for e in entries})
    deployments = [{"id": f"dep-{i.provider}-{n}", "provider": i.provider, "instance_id": i.id, "status": "ready",
                    "cost_hr": i.cost_hr or 0.0, "created_at": "2026-11-30T20:00:00Z",
                    "idempotency_key": i.idempotency_key, "shutdown_rule": {"idle_minutes": 20}}
                   for n, i in enumerate(listed.all())]
    with registry.update("deployments.json") as document:
        document["deployments"] = deployments
    return registry


def requests_now(sim: Simulator) -> dict[str, int]:
    with httpx.Client(base_url=sim.base_url) as client:
        stats = client.get("/_sim/stats").json()
    requests: dict[str, int] = stats["requests"]
    return requests


def one_reconcile(sim: Simulator, registry: Registry) -> tuple[float, dict[str, int], int]:
    before = requests_now(sim)
    started = time.perf_counter()
    factory = inventory.adapter_factory()
    providers = {e["name"]: factory(e) for e in registry.providers()}
    try:
        found = inventory.fetch_inventory(providers)
    finally:
        for provider in providers.values():
            provider.close()
    report = reconcile(registry, found)
    elapsed = time.perf_counter() - started
    after = requests_now(sim)
    calls = {k: after.get(k, 0) - before.get(k, 0) for k in after if after.get(k, 0) != before.get(k, 0)}
    assert report.clean, report.to_json()
    return elapsed, calls, sum(len(v) for v in found.instances.values())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10,100,1000")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    os.environ.setdefault(KEY_ENV, "bench-" + secrets.token_hex(16))
    times: dict[int, float] = {}
    for size in (int(s) for s in args.sizes.split(",")):
        with Simulator(ready_delay_s=0.0) as sim, tempfile.TemporaryDirectory() as tmp:
            registry = build(sim, Path(tmp) / "registry", size)
            runs = [one_reconcile(sim, registry) for _ in range(args.repeat)]
            times[size] = statistics.median(r[0] for r in runs)
            calls = runs[-1][1]
            lists = sum(n for route, n in calls.items() if route.startswith("GET") and "{" not in route)
            gets = sum(n for route, n in calls.items() if route.startswith("GET") and "{" in route)
            others = sum(n for route, n in calls.items() if not route.startswith("GET"))
            print(f"{size:>5} deployments: {runs[-1][2]} instances listed; provider calls per reconcile: "
                  f"{lists} list (incl. pages), {gets} get, {others} other  {dict(sorted(calls.items()))}; "
                  f"median {times[size] * 1000:.1f} ms over {args.repeat}")
    sizes = sorted(times)
    if len(sizes) >= 2:
        ratio = times[sizes[-1]] / times[sizes[0]]
        print(f"time ratio {sizes[-1]} / {sizes[0]} deployments: {ratio:.1f}x (linear would be "
              f"{sizes[-1] / sizes[0]:.0f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
