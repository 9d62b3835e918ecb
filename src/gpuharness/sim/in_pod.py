"""What a simulated provider places in its pods for their own use, and the in-pod stop it honours with it.

A provider's wire declares it (routing.InPodWire): the variables that hold the pod's id and a key scoped to that
pod, and the one request that key may make: its own pod's stop. Anything else asked with a pod key is refused as
the provider refuses a bad key. `GPUHARNESS_GUARD_API` tells the pod's guard where this simulator answers.

A pod stopped from inside keeps its simulated host (its disk, and the SSH server that reads it) so the guard's log
stays readable to `status --refresh`; its service and the GPU's billing stop with it.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from gpuharness.sim.routing import InPodWire, ProviderWire, Route, SimRequest, SimResponse

if TYPE_CHECKING:
    from gpuharness.sim.state import SimInstance, SimState

KEY: Final = "pod_key"
GUARD_PID: Final = ".gh-guard/pid"
#: seconds in the guard's minute (60 unless a test shortens it, so that idle minutes pass in seconds)
MINUTE: Final = "GPUHARNESS_GUARD_MINUTE_S"


def identity(base_url: str, instance: SimInstance, wire: InPodWire | None) -> dict[str, str]:
    """The environment the provider places in this pod (empty where it places nothing)."""
    if wire is None:
        return {}
    key = instance.extra.setdefault(KEY, f"pod-{secrets.token_hex(16)}")
    return {wire.id_env: instance.id, wire.key_env: str(key), "GPUHARNESS_GUARD_API": base_url + wire.base}


def placed(instance: SimInstance, host: Any, base_url: str, wire: InPodWire | None) -> None:
    """Give a new host its pod's identity."""
    place = getattr(host, "place_in_pod", None)
    if place is not None:
        place(identity(base_url, instance, wire))


def guard_env(runtime_url: str | None, minute_s: float | None = None) -> dict[str, str]:
    """Where a simulated host's runtime answers on loopback (its port is not the container's 8188 or 8000), and the
    guard's minute where the host (minute_s) or the simulator's own environment (GPUHARNESS_GUARD_MINUTE_S, for
    tests) shortens it."""
    env = {"GPUHARNESS_GUARD_RUNTIME": runtime_url} if runtime_url else {}
    minute = f"{minute_s:g}" if minute_s is not None else os.environ.get(MINUTE)
    if minute:
        env[MINUTE] = minute
    return env


def pod_of(state: SimState, token: str | None) -> SimInstance | None:
    """The instance whose in-pod key this is, if it is one."""
    if not token:
        return None
    with state.lock:
        return next((i for i in state.instances.values() if i.live and i.extra.get(KEY) == token), None)


def answer(state: SimState, wire: ProviderWire, route: Route, req: SimRequest, pod: SimInstance) -> SimResponse:
    """A request made with a pod's own key: its own stop, or the provider's refusal of the key."""
    own = wire.in_pod
    allowed = (own is not None and wire.provider == pod.provider and route.key == own.route
               and req.match.get("id") == pod.id and (own.body is None or req.body == own.body))
    if not allowed or own is None:
        return wire.unauthorized()
    with state.lock:
        if pod.status == "running":
            stop_from_inside(state, pod)
    return own.stopped(pod, state)


def stop_from_inside(state: SimState, pod: SimInstance) -> None:
    """Stop the pod's billing and its service; its host (disk, SSH) stays for the guard's log to be read."""
    host, pod.host = pod.host, None
    state.stop(pod)
    pod.extra["stopped_by"] = "pod"
    state.kept_hosts.append(host)
    stop_service = getattr(host, "stop_service", None)
    if stop_service is not None:
        stop_service()


def kill_guard(workspace: Path) -> None:
    """Stop a guard left running in a simulated host's workspace (a host stopping takes its processes with it)."""
    with contextlib.suppress(OSError, ValueError):
        pid = int((workspace / GUARD_PID).read_text().strip())
        for _ in range(100):  # configure writes the pid as it forks: the child may not have exec'd guard.sh yet
            if b"guard.sh" in Path(f"/proc/{pid}/cmdline").read_bytes():
                os.kill(pid, signal.SIGKILL)
                return
            time.sleep(0.02)
