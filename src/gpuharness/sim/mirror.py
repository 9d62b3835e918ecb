"""Instances listed elsewhere, copied into the simulator under their own ids (a plan's rehearsal needs them)."""

from __future__ import annotations

from gpuharness.sim import wires
from gpuharness.sim.state import SimInstance, SimState


def mirror_instance(state: SimState, provider: str, instance_id: str, *, label: str, name: str | None, gpu: str,
                    gpu_count: int, cost_hr: float, region: str, stopped: bool = False) -> SimInstance:
    """Create the instance in the simulator with the id it has elsewhere; stopped if it is stopped there."""
    wire = wires.provider(provider)
    if wire is None or wire.mirrored is None:
        kept = ", ".join(w.provider for w in wires.keeping_instances() if w.mirrored is not None)
        raise ValueError(f"the simulator has no provider {provider!r} (it simulates {kept})")
    instance = state.create(provider, name=name or label, gpu=gpu, gpu_count=gpu_count, cost_hr=cost_hr,
                            image="mirrored", region=region, extra=wire.mirrored(label), count_launch=False,
                            instance_id=instance_id)
    if stopped:
        state.stop(instance)
    return instance
