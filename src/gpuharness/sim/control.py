"""The simulator's control routes under /_sim/: stats, faults (of providers and of hosts), settings, bulk instances,
recorded requests, shutdown (`gpuharness sim stop`)."""

from __future__ import annotations

import threading
from typing import Any, Protocol

from gpuharness.sim import catalog, host_faults, wires
from gpuharness.sim.exchanges import RequestLog
from gpuharness.sim.faults import FaultPlan, parse_fault, seconds, whole_number
from gpuharness.sim.routing import SimRequest, SimResponse, json_response
from gpuharness.sim.state import SimState

#: the longest settable pending -> running delay (a day)
MAX_READY_DELAY_S = 86_400
MAX_BULK = 100_000


class Controlled(Protocol):
    """What the control routes act on (the Simulator): its state, armed faults, request log and stop signal."""

    state: SimState
    faults: FaultPlan
    requests: RequestLog
    shutdown_requested: threading.Event

    def stats(self) -> dict[str, Any]: ...


def control(sim: Controlled, req: SimRequest) -> SimResponse:
    """Answer one /_sim/ request; bad bodies get 400 with a one-line reason."""
    try:
        return _route(sim, req)
    except ValueError as exc:
        return json_response(400, {"error": str(exc)})
    except host_faults.UnknownInstance as exc:
        return json_response(404, {"error": str(exc)})


def _route(sim: Controlled, req: SimRequest) -> SimResponse:
    method, path = req.method, req.path
    if method == "GET" and path == "/_sim/stats":
        return json_response(200, sim.stats())
    if path == "/_sim/faults" and method in ("GET", "POST", "DELETE"):
        if method == "POST":
            sim.faults.arm(parse_fault(req.body))
        elif method == "DELETE":
            sim.faults.clear()
        return json_response(200, {"armed": sim.faults.armed()})
    if path == "/_sim/host-faults" and method in ("GET", "POST", "DELETE"):
        if method == "GET":
            return json_response(200, host_faults.listing(sim.state))
        status, answer = (host_faults.arm if method == "POST" else host_faults.clear)(sim.state, req.body)
        return json_response(status, answer)
    if method == "POST" and path == "/_sim/config":
        delay = req.body.get("ready_delay_s") if isinstance(req.body, dict) else None
        if delay is None or not seconds(delay, MAX_READY_DELAY_S):
            raise ValueError(f"'ready_delay_s' must be a number of seconds from 0 to {MAX_READY_DELAY_S}")
        sim.state.ready_delay_s = float(delay)
        return json_response(200, {"ready_delay_s": sim.state.ready_delay_s})
    if method == "POST" and path == "/_sim/instances":
        return json_response(200, {"ids": bulk_create(sim.state, req.body)})
    if method == "POST" and path == "/_sim/shutdown":
        sim.shutdown_requested.set()
        return json_response(200, {"stopping": True})
    if path == "/_sim/requests" and method in ("GET", "DELETE"):
        if method == "DELETE":
            sim.requests.clear()
        return json_response(200, {"requests": [r.to_json() for r in sim.requests.all()]})
    return json_response(404, {"error": f"no control route {method} {path}"})


def bulk_create(state: SimState, body: Any) -> list[str]:
    """Create instances directly (no launch counted): POST /_sim/instances."""
    if not isinstance(body, dict):
        raise ValueError("expected a JSON object")
    named = body.get("provider")
    wire = wires.provider(named) if isinstance(named, str) else None
    if wire is None or wire.made is None:
        raise ValueError(f"'provider' must be {' or '.join(w.provider for w in wires.keeping_instances())}")
    count = body.get("count", 1)
    if not whole_number(count) or not 1 <= count <= MAX_BULK:
        raise ValueError(f"'count' must be an integer between 1 and {MAX_BULK}")
    gpu_name = body.get("gpu") or catalog.CATALOG[0].runpod_id
    row = next((g for g in catalog.CATALOG if gpu_name in (g.runpod_id, g.display, g.massed_product)), None)
    if row is None:
        raise ValueError(f"unknown gpu {gpu_name!r}")
    prefix = str(body.get("name_prefix") or "gh-bulk-")
    ids: list[str] = []
    with state.lock:
        start = len(state.instances)
        for n in range(count):
            name = f"{prefix}{start + n:05d}"
            made = wire.made(row, name)
            instance = state.create(wire.provider, name=name, gpu=made.gpu, gpu_count=1, cost_hr=made.cost_hr,
                                    image=str(body.get("image") or "runpod/pytorch:2.4.0"), region="sim-1",
                                    extra=made.extra, count_launch=False)
            ids.append(instance.id)
    return ids
