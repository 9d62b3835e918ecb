"""Host faults armed on a running simulated host over the control route `/_sim/host-faults`, as provider faults
are over `/_sim/faults`: a user's own tests drive them against `gpuharness sim serve`."""

from __future__ import annotations

from typing import Any

from gpuharness.core.errors import GpuharnessError
from gpuharness.sim.state import SimInstance, SimState


class UnknownInstance(GpuharnessError, LookupError):
    """No simulated instance has the id a host-fault request names (404)."""


def known_faults() -> list[str]:
    """Every fault a simulated host can be given (sim.host.FAULTS)."""
    from gpuharness.sim.host import FAULTS  # paramiko (~0.3 s): only the host-fault routes need it

    return sorted(FAULTS)


def _instance(state: SimState, body: Any) -> tuple[SimInstance | None, str | None]:
    """The live instance a body names, or why there is none (an unknown id: UnknownInstance)."""
    if not isinstance(body, dict):
        raise ValueError("expected a JSON object")
    instance_id, provider = body.get("instance_id"), body.get("provider")
    if not isinstance(instance_id, str) or not instance_id:
        raise ValueError("'instance_id' must be the id of a simulated instance")
    if provider is not None and not isinstance(provider, str):
        raise ValueError("'provider' must be a provider name (runpod, vast, massed)")
    providers = sorted({p for p, i in state.instances if i == instance_id and (provider in (None, p))})
    if not providers:
        raise UnknownInstance(f"no simulated instance {instance_id!r}")
    if len(providers) > 1:
        raise ValueError(f"instance {instance_id!r} exists at {', '.join(providers)}: name its 'provider'")
    instance = state.get(providers[0], instance_id)
    if instance is None:
        return None, f"instance {instance_id} is terminated: host faults need a running instance"
    if instance.status != "running" or instance.host is None:
        return None, f"instance {instance_id} is {instance.status}: host faults need a running instance"
    if getattr(instance.host, "arm_fault", None) is None:
        return None, f"instance {instance_id} has no simulated host (the simulator was started without hosts)"
    return instance, None


def arm(state: SimState, body: Any) -> tuple[int, dict[str, Any]]:
    """POST: arm `fault` on the instance's host; (status, answer)."""
    instance, refusal = _instance(state, body)
    if instance is None:
        return 409, {"error": refusal}
    fault = body.get("fault")
    faults = known_faults()
    if fault not in faults:
        raise ValueError(f"'fault' must be one of {faults}")
    armed = instance.host.arm_fault(fault)  # type: ignore[union-attr]
    return 200, {"instance_id": instance.id, "provider": instance.provider, "armed": list(armed)}


def clear(state: SimState, body: Any) -> tuple[int, dict[str, Any]]:
    """DELETE: clear the faults of one instance's host (`instance_id`), or of every host (no body)."""
    if body in (None, {}):
        with state.lock:
            hosts = [i.host for i in state.instances.values() if i.live and i.host is not None]
        for host in hosts:
            if getattr(host, "clear_faults", None) is not None:
                host.clear_faults()  # type: ignore[attr-defined]
        return 200, {"armed": {}}
    instance, refusal = _instance(state, body)
    if instance is None:
        return 409, {"error": refusal}
    instance.host.clear_faults()  # type: ignore[union-attr]
    return 200, {"instance_id": instance.id, "provider": instance.provider, "armed": []}


def listing(state: SimState) -> dict[str, Any]:
    """GET: the faults a host can be given and those armed, per running instance."""
    with state.lock:
        running = [i for i in state.instances.values() if i.live and i.host is not None]
    armed = {i.id: list(getattr(i.host, "armed_faults", ())) for i in running}
    return {"faults": known_faults(), "armed": {k: v for k, v in armed.items() if v}}
