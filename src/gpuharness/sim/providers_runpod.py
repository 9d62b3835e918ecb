"""RunPod Pods REST v2 as observed on the wire, under /runpod (the spec:
https://github.com/runpod/docs/blob/a900806e/api-reference-v2/openapi.json)."""

from __future__ import annotations

from datetime import UTC, datetime
from functools import partial
from typing import Any

from gpuharness.sim import catalog, provider_bills
from gpuharness.sim.routing import InPodWire, Made, ProviderWire, Route, SimRequest, SimResponse, json_response
from gpuharness.sim.state import SimInstance, SimState

PROVIDER = "runpod"
PREFIX = "/runpod"

#: RunPod bills a stopped pod's volume $0.20 per GB-month (730 hours)
STOPPED_VOLUME_USD_GB_MONTH = 0.20
HOURS_PER_MONTH = 730.0
_STATUS = {"pending": "PROVISIONING", "running": "RUNNING", "stopped": "EXITED", "terminated": "TERMINATED"}
_ACTIONS = {"pending": ["terminate"], "running": ["stop", "restart", "terminate"], "stopped": ["start", "terminate"]}


def problem(status: int, title: str, detail: str) -> SimResponse:
    """An RFC 9457 problem body, the v2 error shape."""
    return SimResponse(status, {"title": title, "status": status, "detail": detail},
                       content_type="application/problem+json")


def iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _status(pod: SimInstance, state: SimState | None) -> str:
    # as observed: v2 says RUNNING during the second half of provisioning, before any port exists
    if pod.status == "pending" and state is not None and state.ready_delay_s > 0:
        if state.clock() >= pod.ready_at_mono - state.ready_delay_s / 2:
            return "RUNNING"
    return _STATUS[pod.status]


def render(pod: SimInstance, state: SimState | None = None) -> dict[str, Any]:
    host = pod.host if pod.status == "running" else None
    runtime: dict[str, Any] | None = None
    direct: dict[str, Any] | None = None
    if host is not None:
        ports = [{"ip": host.ssh_host, "private": 22, "public": host.ssh_port, "type": "tcp"}]
        ports += [{"ip": host.ssh_host, "private": private, "public": public, "type": "http"}
                  for private, public in sorted(host.http_ports.items())]
        runtime = {"uptimeInSeconds": 0, "ports": ports}
        direct = {"host": host.ssh_host, "port": host.ssh_port, "username": "root",
                  "command": f"ssh root@{host.ssh_host} -p {host.ssh_port}"}
    return {
        "id": pod.id,
        "name": pod.name,
        "image": pod.image,
        "status": _status(pod, state),
        "actions": _ACTIONS.get(pod.status, []),
        "cloud": pod.extra.get("cloud", "SECURE"),
        "cost": pod.cost_hr,
        "gpu": {"id": pod.gpu, "count": pod.gpu_count},
        "dataCenterId": pod.region,
        "createdAt": iso(pod.created_wall),  # [UNVERIFIED] field name/format in v2; v1 uses a Go time string
        "interruptible": bool(pod.extra.get("interruptible", False)),
        "ports": pod.extra.get("ports", ["22/tcp"]),
        "env": pod.extra.get("env", {}),
        "runtime": runtime,
        "ssh": {"direct": direct, "proxy": {"host": "ssh.runpod.io", "port": 22, "username": f"{pod.id}-64410065"}},
    }


def list_pods(req: SimRequest, state: SimState) -> SimResponse:
    return json_response(200, {"pods": [render(p, state) for p in state.live(PROVIDER)]})


def get_pod(req: SimRequest, state: SimState) -> SimResponse:
    pod = state.get(PROVIDER, req.match["id"])
    if pod is None:
        return problem(404, "Not Found", "pod not found")
    return json_response(200, render(pod, state))


def create_pod(req: SimRequest, state: SimState) -> SimResponse:
    body = req.body if isinstance(req.body, dict) else {}
    gpu_field = body.get("gpu")
    gpu: dict[str, Any] = gpu_field if isinstance(gpu_field, dict) else {}
    image = body.get("image")
    if not isinstance(image, str) or not image:
        return problem(400, "Bad Request", "image is required")
    row = catalog.by_runpod_id(str(gpu.get("id", "")))
    if row is None:
        return problem(400, "Bad Request", f"unknown gpu id {gpu.get('id')!r}")
    count = gpu.get("count", 1)
    if not isinstance(count, int) or count < 1:
        return problem(400, "Bad Request", "gpu.count must be a positive integer")
    if body.get("interruptible"):
        return json_response(500, {"error": "create pod: Spot pods are no longer offered", "status": 500})
    cloud = body.get("cloud", "SECURE")
    price = row.runpod_community if cloud == "COMMUNITY" else row.runpod_secure
    if price is None:
        return json_response(500, {"error": "create pod: There are no instances currently available", "status": 500})
    pod = state.create(PROVIDER, name=str(body.get("name") or "my pod"), gpu=row.runpod_id, gpu_count=count,
                       cost_hr=price * count, image=image, region=str(body.get("dataCenterId") or "EU-RO-1"),
                       extra={"cloud": cloud, "env": body.get("env") or {}, "ports": body.get("ports") or ["22/tcp"]})
    disk = body.get("disk", 50)
    if isinstance(disk, int | float) and not isinstance(disk, bool) and disk > 0:
        pod.storage_hr = STOPPED_VOLUME_USD_GB_MONTH * float(disk) / HOURS_PER_MONTH
    return json_response(201, render(pod, state))


def delete_pod(req: SimRequest, state: SimState) -> SimResponse:
    pod = state.get(PROVIDER, req.match["id"])
    if pod is None:
        return problem(404, "Not Found", "pod not found")
    state.terminate(pod)
    return SimResponse(204)


def pod_action(req: SimRequest, state: SimState) -> SimResponse:
    pod = state.get(PROVIDER, req.match["id"])
    if pod is None:
        return problem(404, "Not Found", "pod not found")
    action = req.body.get("action") if isinstance(req.body, dict) else None
    if action not in ("start", "stop", "restart", "terminate"):
        return problem(400, "Bad Request", "action must be start, stop, restart or terminate")
    if action == "terminate":
        state.terminate(pod)
        return SimResponse(204)
    allowed = _ACTIONS.get(pod.status, [])
    if action not in allowed:
        return problem(409, "Conflict", f"cannot {action} a pod in state {_STATUS[pod.status]}")
    if action == "stop":
        state.stop(pod)
    elif action == "start":
        state.start(pod)
    else:
        state.stop(pod)
        state.start(pod)
    return json_response(200, render(pod, state))


def stop_v1(req: SimRequest, state: SimState) -> SimResponse:
    """POST /v1/pods/{id}/stop (REST v1, the route `runpodctl stop pod` calls) -> 200 + the pod."""
    pod = state.get(PROVIDER, req.match["id"])
    if pod is None:
        return problem(404, "Not Found", "pod not found")
    if pod.status == "running":
        state.stop(pod)
    return json_response(200, render(pod, state))


WIRE = ProviderWire(
    provider=PROVIDER,
    prefix=PREFIX,
    routes=(
        Route.of("GET", "/runpod/v2/pods", "read", list_pods),
        Route.of("POST", "/runpod/v2/pods", "launch", create_pod),
        Route.of("GET", "/runpod/v2/pods/{id}", "read", get_pod),
        Route.of("DELETE", "/runpod/v2/pods/{id}", "mutation", delete_pod),
        Route.of("POST", "/runpod/v2/pods/{id}/action", "mutation", pod_action),
        Route.of("GET", "/runpod/v2/billing/pods", "read", partial(provider_bills.runpod_pod_billing,
                                                                   provider=PROVIDER)),
        Route.of("GET", "/runpod/v1/billing/pods", "read", partial(provider_bills.runpod_pod_billing_v1,
                                                                   provider=PROVIDER)),
        Route.of("POST", "/runpod/v1/pods/{id}/stop", "mutation", stop_v1),
    ),
    unauthorized=lambda: problem(401, "Unauthorized", "missing or invalid API key"),
    rate_limited=lambda retry_after: problem(429, "Too Many Requests", "rate limit exceeded for the minute window"),
    capacity=lambda: json_response(500, {"error": "create pod: There are no instances currently available",
                                         "status": 500}),
    server_error=lambda: json_response(500, {"error": "Something went wrong.", "status": 500}),
    not_found=lambda: problem(404, "Not Found", "no such route"),
    bad_request=lambda reason: problem(400, "Bad Request", reason),
    made=lambda row, name: Made(row.runpod_id, row.runpod_secure or 0.0),
    mirrored=lambda label: {},
    in_pod=InPodWire("RUNPOD_POD_ID", "RUNPOD_API_KEY", "/runpod/v1", "POST /runpod/v1/pods/{id}/stop",
                     lambda pod, state: json_response(200, render(pod, state))),
)
