"""RunPod's GraphQL API (POST {api base}/graphql;
https://github.com/runpod/docs/blob/a900806e/sdks/graphql/manage-pods.mdx), under /runpod/graphql.

What runpod-python 1.12 sends (get_gpus, get_gpu, get_pods, get_pod, create_pod, stop_pod, resume_pod,
terminate_pod) and podRentInterruptable, over the same pods as REST v2. Errors come in GraphQL's shape: a refused
document is HTTP 400, a refused field HTTP 200 with `errors` (capacity: extensions.code SUPPLY_CONSTRAINT).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gpuharness.sim import catalog
from gpuharness.sim.faults import RequestKind
from gpuharness.sim.graphql_exec import FieldError, RequestError, Resolver, execute
from gpuharness.sim.graphql_syntax import Field, GraphQLSyntaxError, parse
from gpuharness.sim.routing import ProviderWire, Route, SimRequest, SimResponse, json_response
from gpuharness.sim.runpod_graphql_records import SCHEMA, gpu_type, pod_record, spot_price
from gpuharness.sim.state import SimInstance, SimState

PROVIDER = "runpod"
PREFIX = "/runpod/graphql"
LAUNCHES = ("podFindAndDeployOnDemand", "podRentInterruptable")
NO_CAPACITY = ("There are no longer any instances available with the requested specifications. Please refresh "
               "and try again.")
CLOUD_TYPES = ("ALL", "SECURE", "COMMUNITY")


def errors(status: int, message: str, code: str) -> SimResponse:
    """A request-level GraphQL error: {"errors": [{"message", "extensions": {"code"}}]}."""
    return json_response(status, {"errors": [{"message": message, "extensions": {"code": code}}]})


def _input(args: dict[str, Any]) -> dict[str, Any]:
    value = args.get("input")
    if not isinstance(value, dict):
        raise FieldError("input is required", "BAD_USER_INPUT")
    return value


def _pod(args: dict[str, Any], state: SimState) -> SimInstance:
    pod_id = _input(args).get("podId")
    pod = state.get(PROVIDER, str(pod_id)) if isinstance(pod_id, str) else None
    if pod is None:
        raise FieldError(f"Pod {pod_id} not found", "NOT_FOUND")  # [UNVERIFIED] message and code
    return pod


def _env(value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, list) or not all(isinstance(e, dict) and "key" in e for e in value):
        raise FieldError("env must be a list of {key, value}", "BAD_USER_INPUT")
    return {str(e["key"]): str(e.get("value", "")) for e in value}


def _price(row: catalog.CatalogGpu, cloud: str) -> tuple[float, str] | None:
    options = {"SECURE": [(row.runpod_secure, "SECURE")], "COMMUNITY": [(row.runpod_community, "COMMUNITY")],
               "ALL": [(row.runpod_community, "COMMUNITY"), (row.runpod_secure, "SECURE")]}[cloud]
    priced = [(p, c) for p, c in options if p is not None]
    return min(priced) if priced else None


def _deploy(spec: dict[str, Any], state: SimState, interruptible: bool) -> dict[str, Any]:
    """podFindAndDeployOnDemand / podRentInterruptable: rent a pod of gpuTypeId in cloudType."""
    row = catalog.by_runpod_id(str(spec.get("gpuTypeId") or ""))
    if row is None:
        raise FieldError(NO_CAPACITY, "SUPPLY_CONSTRAINT")
    image = spec.get("imageName") or (spec.get("templateId") and "runpod/template")
    if not isinstance(image, str) or not image:
        raise FieldError("imageName or templateId is required", "BAD_USER_INPUT")  # [UNVERIFIED] message
    cloud = spec.get("cloudType", "ALL")
    count = spec.get("gpuCount", 1)
    if cloud not in CLOUD_TYPES or isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise FieldError("cloudType must be ALL, SECURE or COMMUNITY and gpuCount a positive integer",
                         "BAD_USER_INPUT")
    priced = _price(row, cloud)
    if priced is None:
        raise FieldError(NO_CAPACITY, "SUPPLY_CONSTRAINT")
    price, where = priced
    if interruptible:
        bid = spec.get("bidPerGpu")
        floor = spot_price(row) or 0.0
        if isinstance(bid, bool) or not isinstance(bid, int | float) or bid < floor:
            raise FieldError(f"Your bid per GPU must be at least ${floor:.3f}/hr", "BAD_USER_INPUT")  # [UNVERIFIED]
        price = float(bid)
    ports = str(spec.get("ports") or "22/tcp")
    pod = state.create(PROVIDER, name=str(spec.get("name") or "my pod"), gpu=row.runpod_id, gpu_count=count,
                       cost_hr=price * count, image=image, region=str(spec.get("dataCenterId") or "EU-RO-1"),
                       extra={"cloud": where, "env": _env(spec.get("env")), "interruptible": interruptible,
                              "ports": [p.strip() for p in ports.split(",") if p.strip()],
                              "containerDiskInGb": spec.get("containerDiskInGb"),
                              "volumeInGb": spec.get("volumeInGb"), "dockerArgs": spec.get("dockerArgs") or "",
                              "volumeMountPath": spec.get("volumeMountPath") or "/workspace",
                              "templateId": spec.get("templateId")})
    return pod_record(pod, state)


def _roots(state: SimState) -> dict[str, Resolver]:
    def pods(_args: dict[str, Any]) -> list[dict[str, Any]]:
        return [pod_record(p, state) for p in state.live(PROVIDER)]

    def one_pod(args: dict[str, Any]) -> dict[str, Any] | None:
        pod_id = _input(args).get("podId")
        pod = state.get(PROVIDER, str(pod_id)) if isinstance(pod_id, str) else None
        return pod_record(pod, state) if pod is not None else None

    def gpu_types(args: dict[str, Any]) -> list[dict[str, Any]]:
        given = args.get("input")
        wanted: dict[str, Any] = given if isinstance(given, dict) else {}
        ids = [wanted["id"]] if wanted.get("id") else list(wanted.get("ids") or [])
        return [gpu_type(g) for g in catalog.CATALOG if not ids or g.runpod_id in ids]

    def stop(args: dict[str, Any]) -> dict[str, Any]:
        pod = _pod(args, state)
        if pod.status != "stopped":
            state.stop(pod)
        return pod_record(pod, state)

    def resume(args: dict[str, Any]) -> dict[str, Any]:
        pod = _pod(args, state)
        if pod.status == "stopped":
            state.start(pod)
        return pod_record(pod, state)

    def terminate(args: dict[str, Any]) -> None:
        state.terminate(_pod(args, state))

    myself = {"id": "user_sim", "email": "sim@example.invalid", "pubKey": "", "clientBalance": 100.0,
              "currentSpendPerHr": 0.0, "spendLimit": 80, "networkVolumes": [], "pods": pods}
    return {"myself": lambda _args: myself, "pod": one_pod, "gpuTypes": gpu_types,
            "podFindAndDeployOnDemand": lambda args: _deploy(_input(args), state, interruptible=False),
            "podRentInterruptable": lambda args: _deploy(_input(args), state, interruptible=True),
            "podStop": stop, "podResume": resume, "podTerminate": terminate}


def graphql(req: SimRequest, state: SimState) -> SimResponse:
    """POST /graphql {"query", "variables"?}."""
    body = req.body
    if not isinstance(body, dict) or not isinstance(body.get("query"), str) or not body["query"].strip():
        return errors(400, "GraphQL operations must contain a non-empty `query` or a `persistedQuery` extension.",
                      "BAD_REQUEST")
    try:
        operation = parse(body["query"])
        return json_response(200, execute(operation, SCHEMA, _roots(state), body.get("variables")))
    except GraphQLSyntaxError as exc:
        return errors(400, str(exc), "GRAPHQL_PARSE_FAILED")
    except RequestError as exc:
        return json_response(400, {"errors": exc.errors})


def request_kind(req: SimRequest) -> RequestKind:
    """A query reads; a create mutation launches; any other mutation mutates."""
    body = req.body if isinstance(req.body, dict) else {}
    try:
        operation = parse(str(body.get("query") or ""))
    except GraphQLSyntaxError:
        return "read"
    if operation.kind != "mutation":
        return "read"
    names = {s.name for s in operation.selections if isinstance(s, Field)}
    return "launch" if names & set(LAUNCHES) else "mutation"


def _fault(message: str, code: str) -> Callable[[], SimResponse]:
    return lambda: json_response(200, {"errors": [{"message": message, "extensions": {"code": code}}],
                                       "data": None})


WIRE = ProviderWire(
    provider=PROVIDER,
    prefix=PREFIX,
    routes=(Route.of("POST", PREFIX, "read", graphql, classify=request_kind),),
    # [UNVERIFIED] bodies of 401 and 429: runpod-python reads only the status of a 401
    unauthorized=lambda: errors(401, "Unauthorized", "UNAUTHENTICATED"),
    rate_limited=lambda retry_after: errors(429, "Too many requests", "TOO_MANY_REQUESTS"),
    capacity=_fault(NO_CAPACITY, "SUPPLY_CONSTRAINT"),
    server_error=_fault("Something went wrong. Please try again later or contact support.",
                        "INTERNAL_SERVER_ERROR"),
    not_found=lambda: errors(404, "no such route", "NOT_FOUND"),
    query_key="api_key",
    bad_request=lambda reason: errors(400, reason, "BAD_REQUEST"),
)
