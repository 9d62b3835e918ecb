"""Vast.ai v0 calls and the paginated v1 instance list (shared/reference/providers.md §3), under /vast."""

from __future__ import annotations

import base64
import binascii
import json
import secrets
from collections.abc import Callable
from typing import Any

from gpuharness.sim import catalog
from gpuharness.sim.routing import ProviderWire, Route, SimRequest, SimResponse, json_response, text_response
from gpuharness.sim.state import SimInstance, SimState

PROVIDER = "vast"
PREFIX = "/vast"
PAGE_MAX = 25


def _offers() -> list[dict[str, Any]]:
    offers: list[dict[str, Any]] = []
    for row_index, row in enumerate(catalog.CATALOG):
        for price_index, price in enumerate(row.vast_prices):
            for count in (1, 2) if price_index == 0 else (1,):
                offer_id = 5_000_000 + row_index * 100 + price_index * 10 + count
                offers.append({
                    "id": offer_id, "ask_contract_id": offer_id, "machine_id": 170 + row_index * 3 + price_index,
                    "gpu_name": row.display, "num_gpus": count, "gpu_ram": row.vram_gb * 1024,
                    "gpu_total_ram": row.vram_gb * 1024 * count, "dph_total": round(price * count, 4),
                    "dph_base": round(price * count * 0.9, 4), "min_bid": round(price * count * 0.5, 4),
                    "reliability2": 0.995, "cuda_max_good": 12.8, "driver_version": "570.86.15",
                    "geolocation": "Norway, NO" if price_index else "Texas, US", "inet_down": 940.0,
                    "inet_up": 880.0, "disk_space": 500.0, "direct_port_count": 20,
                    "public_ipaddr": "127.0.0.1", "verification": "verified", "rentable": True, "rented": False,
                    "is_bid": False})
    return offers


OFFERS: tuple[dict[str, Any], ...] = tuple(_offers())


_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "eq": lambda v, e: bool(v == e), "neq": lambda v, e: bool(v != e),
    "gt": lambda v, e: bool(v > e), "lt": lambda v, e: bool(v < e),
    "gte": lambda v, e: bool(v >= e), "lte": lambda v, e: bool(v <= e),
    "in": lambda v, e: v in e, "notin": lambda v, e: v not in e,
}


def _matches(value: Any, condition: Any) -> bool:
    if not isinstance(condition, dict):
        return bool(value == condition)
    for op, expected in condition.items():
        check = _OPS.get(op)
        if check is not None and not check(value, expected):
            return False
    return True


def _sort_key(column: str) -> Callable[[dict[str, Any]], Any]:
    return lambda offer: offer.get(column) or 0


def search_offers(req: SimRequest, state: SimState) -> SimResponse:
    query = req.body if isinstance(req.body, dict) else {}
    found = [o for o in OFFERS
             if all(_matches(o.get(k), v) for k, v in query.items()
                    if k not in ("order", "type", "limit", "allocated_storage") and k in o)]
    order = query.get("order") or [["dph_total", "asc"]]
    for column, direction in reversed(order):
        found.sort(key=_sort_key(column), reverse=direction == "desc")
    limit = query.get("limit")
    if isinstance(limit, int):
        found = found[:limit]
    return json_response(200, {"offers": found})


def render(instance: SimInstance, state: SimState) -> dict[str, Any]:
    actual: str | None
    if instance.status == "pending":
        halfway = instance.created_mono + state.ready_delay_s / 2
        actual = None if state.clock() < halfway else "loading"
    else:
        actual = instance.status
    host = instance.host if instance.status == "running" else None
    ports: dict[str, Any] = {}
    if host is not None:
        ports["22/tcp"] = [{"HostIp": "0.0.0.0", "HostPort": str(host.ssh_port)}]
        for private, public in sorted(host.http_ports.items()):
            ports[f"{private}/tcp"] = [{"HostIp": "0.0.0.0", "HostPort": str(public)}]
    intended = "stopped" if instance.status == "stopped" else "running"
    return {
        "id": int(instance.id), "actual_status": actual, "intended_status": intended,
        "cur_state": intended, "next_state": intended, "label": instance.extra.get("label"),
        "status_msg": "Pulling image ..." if actual != "running" else "success, running",
        "image_uuid": instance.image, "image_runtype": instance.extra.get("runtype", "ssh_direct"),
        "gpu_name": instance.gpu, "num_gpus": instance.gpu_count, "gpu_ram": instance.extra.get("gpu_ram"),
        "dph_total": instance.cost_hr, "dph_base": round(instance.cost_hr * 0.9, 4),
        "is_bid": bool(instance.extra.get("is_bid")),
        "ssh_host": host.ssh_host if host else None, "ssh_port": host.ssh_port if host else None, "ssh_idx": "5",
        "public_ipaddr": host.ssh_host if host else None, "ports": ports,
        "start_date": round(instance.created_wall, 2), "end_date": None,
        "machine_id": instance.extra.get("machine_id"), "geolocation": instance.region,
        "disk_space": instance.extra.get("disk", 16.0),
    }


def create_instance(req: SimRequest, state: SimState) -> SimResponse:
    try:
        offer_id = int(req.match["id"])
    except ValueError:
        offer_id = -1
    offer = next((o for o in OFFERS if o["id"] == offer_id), None)
    if offer is None:
        return json_response(404, {"success": False, "error": "no_such_ask",
                                   "msg": f"error 404/3603: no_such_ask Instance type by id {req.match['id']} "
                                          "is not available."})
    body = req.body if isinstance(req.body, dict) else {}
    image = body.get("image")
    if not isinstance(image, str) or not image:
        return json_response(400, {"success": False, "error": "invalid_args", "msg": "image is required"})
    price = body.get("price")
    is_bid = price is not None
    cost = float(price) if price is not None else float(offer["dph_total"])
    label = body.get("label")
    instance = state.create(PROVIDER, name=str(label or ""), gpu=str(offer["gpu_name"]),
                            gpu_count=int(offer["num_gpus"]), cost_hr=cost, image=image,
                            region=str(offer["geolocation"]),
                            extra={"label": label, "disk": body.get("disk", 16.0), "is_bid": is_bid,
                                   "runtype": body.get("runtype", "ssh_direct"), "gpu_ram": offer["gpu_ram"],
                                   "machine_id": offer["machine_id"]})
    return json_response(200, {"success": True, "new_contract": int(instance.id),
                               "instance_api_key": secrets.token_hex(32)})


def list_v0(req: SimRequest, state: SimState) -> SimResponse:
    rendered = [render(i, state) for i in state.live(PROVIDER)]
    return json_response(200, {"instances_found": len(rendered), "instances": rendered})


def _token(last_id: int) -> str:
    return base64.urlsafe_b64encode(json.dumps({"v": 2, "id": last_id}).encode()).decode()


def list_v1(req: SimRequest, state: SimState) -> SimResponse:
    try:
        limit = min(int(req.param("limit", str(PAGE_MAX)) or PAGE_MAX), PAGE_MAX)
    except ValueError:
        return json_response(400, {"error": "invalid_request", "msg": "limit must be an integer"})
    after = req.param("after_token")
    after_id = 0
    if after:
        try:
            after_id = int(json.loads(base64.urlsafe_b64decode(after.encode()))["id"])
        except (ValueError, KeyError, TypeError, binascii.Error):
            return json_response(400, {"error": "invalid_token", "msg": "after_token is not valid"})
    live = sorted(state.live(PROVIDER), key=lambda i: int(i.id))
    page = [i for i in live if int(i.id) > after_id][:max(limit, 1)]
    more = bool(page) and int(page[-1].id) < int(live[-1].id)
    return json_response(200, {"success": True, "instances_found": len(page), "total_instances": len(live),
                               "label_counts": {}, "next_token": _token(int(page[-1].id)) if more else None,
                               "instances": [render(i, state) for i in page]})


def show_instance(req: SimRequest, state: SimState) -> SimResponse:
    instance = state.get(PROVIDER, req.match["id"])
    return json_response(200, {"instances": render(instance, state) if instance else None})


def manage_instance(req: SimRequest, state: SimState) -> SimResponse:
    instance = state.get(PROVIDER, req.match["id"])
    if instance is None:
        return json_response(404, {"success": False, "error": "not_found", "msg": "Instance not found"})
    body = req.body if isinstance(req.body, dict) else {}
    if "label" in body:
        instance.extra["label"] = body["label"]
        instance.name = str(body["label"] or "")
        return json_response(200, {"success": True,
                                   "msg": f"label for {instance.id} set to {body['label']!r}"})
    target = body.get("state")
    if target == "stopped" and instance.status != "stopped":
        state.stop(instance)
    elif target == "running" and instance.status == "stopped":
        state.start(instance)
    elif target not in ("stopped", "running"):
        return json_response(400, {"success": False, "error": "invalid_args",
                                   "msg": "state must be running or stopped"})
    return json_response(200, {"success": True})


def destroy_instance(req: SimRequest, state: SimState) -> SimResponse:
    instance = state.get(PROVIDER, req.match["id"])
    if instance is None:
        return json_response(404, {"error": "not_found", "msg": "Instance not found"})
    state.terminate(instance)
    return json_response(200, {"success": True})


WIRE = ProviderWire(
    provider=PROVIDER,
    prefix=PREFIX,
    routes=(
        Route.of("POST", "/vast/api/v0/bundles/", "read", search_offers),
        Route.of("PUT", "/vast/api/v0/asks/{id}/", "launch", create_instance),
        Route.of("GET", "/vast/api/v0/instances/", "read", list_v0),
        Route.of("GET", "/vast/api/v1/instances/", "read", list_v1),
        Route.of("GET", "/vast/api/v0/instances/{id}/", "read", show_instance),
        Route.of("PUT", "/vast/api/v0/instances/{id}/", "mutation", manage_instance),
        Route.of("DELETE", "/vast/api/v0/instances/{id}/", "mutation", destroy_instance),
    ),
    unauthorized=lambda: json_response(401, {"success": False, "error": "auth_error", "msg": "Invalid user key"}),
    rate_limited=lambda retry_after: text_response(429, "API requests too frequent endpoint threshold=2.0"),
    capacity=lambda: json_response(410, {"error": "no_such_ask",
                                         "msg": "error 410/3907: no_such_ask Instance type 5000001 is no longer "
                                                "available."}),
    server_error=lambda: json_response(500, {"success": False, "error": "server_error",  # [UNVERIFIED] body
                                             "msg": "Internal Server Error"}),
    not_found=lambda: json_response(404, {"success": False, "error": "not_found", "msg": "no such route"}),
    query_key="api_key",
)
