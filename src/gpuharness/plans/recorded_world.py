"""The committed recordings: a small world born in the simulator (registry, inventory cassette, a plan and
its cassette), recorded with a planted API key that must appear nowhere afterwards.

    python -m gpuharness.plans.recorded_world [--root .]      # rewrites cassettes/http/ and fixtures/plan/
"""

from __future__ import annotations

import argparse
import os
import secrets
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, final

from gpuharness.core import terminal
from gpuharness.core.deployment import Deployment, ShutdownRule
from gpuharness.core.registry import Registry
from gpuharness.plans.plan import LaunchRequest, make_plan, save_plan
from gpuharness.plans.replay import rehearse_with_mirror
from gpuharness.providers import cassette, inventory
from gpuharness.sim.server import Simulator

KINDS = ("runpod", "vast", "massed")
TS = "2026-11-30T20:00:00.000Z"
FIXTURE_DEPLOYMENT = "plan-rtx4090-fixture"
#: the fields each seeded deployment spells out (as the committed fixture has them)
SEEDED_FIELDS = frozenset({"id", "provider", "instance_id", "gpu", "gpu_count", "status", "cost_hr", "created_at",
                           "ready_at", "idempotency_key", "shutdown_rule", "checkpoint_path"})


@final
@dataclass(frozen=True, slots=True)
class World:
    """Where one recorded world lives."""

    registry: Path
    inventory: Path
    plan: Path
    plan_cassette: Path

    def files(self) -> Iterator[Path]:
        yield from (p for p in self.registry.rglob("*") if p.is_file())
        yield from (self.inventory, self.plan, self.plan_cassette)


def layout(root: Path) -> World:
    """The committed layout under a repository root."""
    return World(registry=root / "fixtures/plan/registry", inventory=root / "cassettes/http/inventory.yaml",
                 plan=root / "fixtures/plan/plan.json", plan_cassette=root / "cassettes/http/plan.yaml")


def planted_secret() -> str:
    """The API key used while recording: $GPUHARNESS_TEST_SECRET, planted with a fresh value if unset."""
    value = os.environ.get(cassette.TEST_SECRET_ENV)
    if not value:
        value = "gh-test-" + secrets.token_hex(20)
        os.environ[cassette.TEST_SECRET_ENV] = value
    return value


def seed(sim: Simulator, registry: Registry) -> list[Deployment]:
    """Instances at each simulated provider, each claimed by a ready deployment of the registry."""
    registry.init()
    deployments: list[Deployment] = []
    for kind, count in (("runpod", 2), ("vast", 1), ("massed", 1)):
        ids = sim.create_instances(kind, count, name_prefix=f"gh-{kind}-")
        listed = {i.id: i for i in inventory.fetch_inventory(
            {kind: inventory.adapter_factory()(_entry(kind, sim))}).instances[kind]}
        for n, instance_id in enumerate(ids, 1):
            seen = listed[instance_id]
            deployments.append(Deployment(
                id=f"dep-{kind}-{n}", provider=kind, instance_id=instance_id, gpu=seen.gpu,
                gpu_count=seen.gpu_count, status="ready", cost_hr=seen.cost_hr or 0.0, created_at=TS,
                ready_at=TS, idempotency_key=seen.idempotency_key, shutdown_rule=ShutdownRule(idle_minutes=20),
                checkpoint_path=f"/workspace/out/dep-{kind}-{n}", written=SEEDED_FIELDS))
    with registry.update("providers.json") as document:
        document["providers"] = [_entry(kind, sim) for kind in KINDS]
    with registry.update("policy.json") as document:
        document["max_concurrent_deployments"] = 8
    with registry.update("deployments.json") as document:
        document["deployments"] = [d.to_json() for d in deployments]
    return deployments


def _entry(kind: str, sim: Simulator) -> dict[str, Any]:
    return {"name": kind, "kind": kind, "credential_env": cassette.TEST_SECRET_ENV, "api_base": sim.url(kind)}


def record(world: World) -> list[str]:
    """Build and record the world; return the files written. Raises if the planted key leaked anywhere."""
    secret = planted_secret()
    with Simulator(ready_delay_s=0.0) as sim:
        registry = Registry(world.registry)
        seed(sim, registry)
        entries = registry.providers()
        found = inventory.record_inventory(world.inventory, entries, inventory.adapter_factory(),
                                           secrets=[secret], registry_root=world.registry)
        plan = make_plan(registry.deployments(), found, launches=[LaunchRequest(
            provider="runpod", gpu="NVIDIA GeForce RTX 4090", image="runpod/pytorch:2.4.0", expected_cost_hr=0.69,
            idle_minutes=20, deployment_id=FIXTURE_DEPLOYMENT, checkpoint_path="/workspace/out")],
            terminate=["dep-runpod-2", "dep-vast-1"],
            cassette=os.path.relpath(world.plan_cassette.resolve(), world.plan.resolve().parent))
        rehearse_with_mirror(plan, entries, found, world.plan_cassette, secrets=[secret])
        world.plan.parent.mkdir(parents=True, exist_ok=True)
        save_plan(world.plan, plan)
    # the simulator's port is gone: offline replay takes each base from the cassette's metadata
    with registry.update("providers.json") as document:
        for entry in document["providers"]:
            entry["api_base"] = None
    leaks = [str(p) for p in world.files() if secret.encode() in p.read_bytes()]
    if leaks:
        raise RuntimeError(f"the planted key leaked into {leaks}")
    return [str(p) for p in world.files()]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gpuharness.plans.recorded_world", description=__doc__)
    parser.add_argument("--root", type=Path, default=Path("."), help="repository root (default .)")
    args = parser.parse_args(argv)
    for path in record(layout(args.root)):
        terminal.show(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
