"""The simulator world of plans.recorded_world.seed, for tests that spend in it."""

from __future__ import annotations

from gpuharness.core.registry import Registry
from gpuharness.plans.recorded_world import seed
from gpuharness.sim.server import Simulator


def seed_world(sim: Simulator, registry: Registry) -> None:
    """Seed the registry for the simulator, with ceilings no hour or date of a test run reaches: its four pods have
    billed since 2026-11-30 and bill on with the calendar (~$55 a day), and ceilings read billed spend, so the
    default $50 a day would refuse a launch late in any UTC day."""
    seed(sim, registry)
    with registry.update("policy.json") as document:
        document.update(daily_usd=10_000.0, monthly_usd=1_000_000.0)
