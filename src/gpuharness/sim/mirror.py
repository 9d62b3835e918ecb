"""Instances listed elsewhere, copied into the simulator under their own ids (a plan's rehearsal needs them)."""

from __future__ import annotations

from typing import Any

from gpuharness.sim.state import SimInstance, SimState

#: What each simulated provider keeps about an instance beyond the common fields (its name, where the wire
#: format has a separate label; the image a VM was made from).
_EXTRA: dict[str, Any] = {
    "runpod": lambda label: {},
    "vast": lambda label: {"label": label},
    "massed": lambda label: {"image_id": 7},
}
SIMULATED = frozenset(_EXTRA)


def mirror_instance(state: SimState, provider: str, instance_id: str, *, label: str, name: str | None, gpu: str,
                    gpu_count: int, cost_hr: float, region: str, stopped: bool = False) -> SimInstance:
    """Create the instance in the simulator with the id it has elsewhere; stopped if it is stopped there."""
    if provider not in _EXTRA:
        raise ValueError(f"the simulator has no provider {provider!r} (it simulates {', '.join(sorted(SIMULATED))})")
    instance = state.create(provider, name=name or label, gpu=gpu, gpu_count=gpu_count, cost_hr=cost_hr,
                            image="mirrored", region=region, extra=_EXTRA[provider](label), count_launch=False,
                            instance_id=instance_id)
    if stopped:
        state.stop(instance)
    return instance
