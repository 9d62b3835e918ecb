"""Vast.ai instance calls, v0 and the paginated v1 list (the vendor's spec:
https://github.com/vast-ai/docs/tree/c6246226/api-reference/openapi/yaml), under /vast.

Shapes follow the official client (pip `vastai` 1.9: vastai/api/instances.py) where it shows them.
"""

from __future__ import annotations

import itertools
import secrets
import shlex
from functools import partial
from typing import Any

from gpuharness.sim import provider_bills, vast_account, vast_listing, vast_offers, vast_records
from gpuharness.sim.faults import RequestKind
from gpuharness.sim.routing import (
    Handler,
    InPodWire,
    Made,
    ProviderWire,
    Route,
    SimRequest,
    SimResponse,
    json_response,
    text_response,
)
from gpuharness.sim.state import SimInstance, SimState

PROVIDER = "vast"
PREFIX = "/vast"
RUNTYPES = ("ssh", "ssh_proxy", "ssh_direc ssh_proxy", "jupyter_proxy ssh_proxy", "jupyter_direc ssh_direc ssh_proxy",
            "args", "ssh_direct", "jupyter", "jupyter_direct")


def error(status: int, code: str, msg: str) -> SimResponse:
    """Vast's error shape: {"success": false, "error": code, "msg": text}."""
    return json_response(status, {"success": False, "error": code, "msg": msg})


def docker_options(value: Any) -> dict[str, str] | None:
    """`env` as the CLI sends it ({"FOO": "bar", "-p 8188:8188": "1"}) or as a docker-flag string; None if neither."""
    if value is None:
        return {}
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {k: str(v) for k, v in value.items()}
    if not isinstance(value, str):
        return None
    found: dict[str, str] = {}
    words = shlex.split(value)
    for flag, word in itertools.pairwise(words):
        if flag == "-e" and "=" in word:
            name, _, text = word.partition("=")
            found[name] = text
        elif flag in ("-p", "-v", "-n"):
            found[f"{flag} {word}"] = "1"
        elif flag == "-h":
            found[flag] = word
    return found


def _create_args(body: dict[str, Any]) -> dict[str, Any] | SimResponse:
    """The checked fields of a create body, or Vast's 400."""
    image = body.get("image")
    if not isinstance(image, str) or not image:
        if not body.get("template_hash_id"):
            return error(400, "invalid_args", "image is required (or template_hash_id)")
        return error(404, "no_such_template", f"template {body['template_hash_id']!r} not found")
    disk = body.get("disk", 10)
    if isinstance(disk, bool) or not isinstance(disk, int | float) or not 0 < disk <= 100_000:
        return error(400, "invalid_args", f"disk must be a positive number of GB, got {disk!r}")
    env = docker_options(body.get("env"))
    if env is None:
        return error(400, "invalid_args", "env must be an object of variables and docker options")
    price = body.get("price")
    if price is not None and (isinstance(price, bool) or not isinstance(price, int | float) or price <= 0):
        return error(400, "invalid_price", f"price must be a positive number of $/hour, got {price!r}")
    label = body.get("label")
    if label is not None and not isinstance(label, str):
        return error(400, "invalid_args", "label must be a string")
    runtype = body.get("runtype") or "ssh"
    if runtype not in RUNTYPES:
        return error(400, "invalid_args", f"unknown runtype {runtype!r}")
    args = body.get("args")
    return {"image": image, "disk": float(disk), "env": env, "price": price, "label": label, "runtype": runtype,
            "onstart": body.get("onstart"), "args": args if isinstance(args, list) else [],
            "template_hash_id": body.get("template_hash_id")}


def _rent(offer: dict[str, Any], checked: dict[str, Any], state: SimState) -> SimInstance:
    price = checked["price"]
    return state.create(PROVIDER, name=str(checked["label"] or ""), gpu=str(offer["gpu_name"]),
                        gpu_count=int(offer["num_gpus"]), image=checked["image"],
                        cost_hr=float(price) if price is not None else float(offer["dph_total"]),
                        region=str(offer["geolocation"]),
                        extra={"label": checked["label"], "disk": checked["disk"], "is_bid": price is not None,
                               "runtype": checked["runtype"], "gpu_ram": offer["gpu_ram"], "offer_id": offer["id"],
                               "env": checked["env"], "onstart": checked["onstart"], "args": checked["args"],
                               "template_hash_id": checked["template_hash_id"],
                               "jupyter_token": secrets.token_hex(32)})


def _offer(raw: Any) -> dict[str, Any] | None:
    try:
        return vast_offers.offer_by_id(int(raw))
    except (TypeError, ValueError):
        return None


def create_instance(req: SimRequest, state: SimState) -> SimResponse:
    """PUT /api/v0/asks/{id}/ -> {"success": true, "new_contract": id, "instance_api_key": ...}."""
    offer = _offer(req.match["id"])
    if offer is None:
        return error(404, "no_such_ask", f"error 404/3603: no_such_ask Instance type by id {req.match['id']} "
                                         "is not available.")
    checked = _create_args(req.body if isinstance(req.body, dict) else {})
    if isinstance(checked, SimResponse):
        return checked
    instance = _rent(offer, checked, state)
    return json_response(200, {"success": True, "new_contract": int(instance.id),
                               "instance_api_key": secrets.token_hex(32)})


def create_bulk(req: SimRequest, state: SimState) -> SimResponse:
    """POST /api/v0/asks/bulk/: the create body plus "ids"; every offer is checked before any is rented."""
    body = req.body if isinstance(req.body, dict) else {}
    ids = body.get("ids")
    if not isinstance(ids, list) or not ids:
        return error(400, "invalid_args", "ids must be a non-empty list of offer ids")
    offers = [_offer(i) for i in ids]
    missing = [str(i) for i, o in zip(ids, offers, strict=True) if o is None]
    if missing:
        return error(404, "no_such_ask", f"error 404/3603: no_such_ask Instance type by id {missing[0]} "
                                         "is not available.")
    checked = _create_args(body)
    if isinstance(checked, SimResponse):
        return checked
    created = [int(_rent(o, checked, state).id) for o in offers if o is not None]
    # [UNVERIFIED] answer shape: the client only raises for status
    return json_response(200, {"success": True, "new_contracts": created})


def _instance(req: SimRequest, state: SimState) -> SimInstance | None:
    return state.get(PROVIDER, req.match["id"])


def show_instance(req: SimRequest, state: SimState) -> SimResponse:
    """GET /api/v0/instances/{id}/?owner=me -> {"instances": {...}} (a single object), or null when gone."""
    instance = _instance(req, state)
    return json_response(200, {"instances": vast_records.render(instance, state) if instance else None})


def _set_state(instance: SimInstance, target: Any, state: SimState) -> SimResponse | None:
    if target == "stopped" and instance.status != "stopped":
        state.stop(instance)
    elif target == "running" and instance.status == "stopped":
        state.start(instance)
    elif target not in ("stopped", "running"):
        return error(400, "invalid_args", "state must be running or stopped")
    return None


def manage_instance(req: SimRequest, state: SimState) -> SimResponse:
    """PUT /api/v0/instances/{id}/ with {"label"} or {"state": "running" | "stopped"}."""
    instance = _instance(req, state)
    if instance is None:
        return error(404, "not_found", "Instance not found")
    body = req.body if isinstance(req.body, dict) else {}
    if "label" in body:
        label = body["label"]
        if label is not None and not isinstance(label, str):
            return error(400, "invalid_args", "label must be a string")
        instance.extra["label"] = label
        instance.name = label or ""
        return json_response(200, {"success": True, "msg": f"label for {instance.id} set to {label!r}"})
    refused = _set_state(instance, body.get("state"), state)
    return refused or json_response(200, {"success": True})


def _ids(body: Any, key: str) -> list[str] | SimResponse:
    ids = body.get(key) if isinstance(body, dict) else None
    if not isinstance(ids, list) or not ids or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        return error(400, "invalid_args", f"{key} must be a non-empty list of instance ids")
    return [str(i) for i in ids]


def manage_bulk(req: SimRequest, state: SimState) -> SimResponse:
    """PUT /api/v0/instances/ with {"ids": [...], "state": ...} (`start instances`, `stop instances`)."""
    ids = _ids(req.body, "ids")
    if isinstance(ids, SimResponse):
        return ids
    for instance_id in ids:
        instance = state.get(PROVIDER, instance_id)
        if instance is None:
            return error(404, "not_found", f"Instance {instance_id} not found")
        refused = _set_state(instance, req.body.get("state"), state)
        if refused is not None:
            return refused
    return json_response(200, {"success": True})


def destroy_instance(req: SimRequest, state: SimState) -> SimResponse:
    """DELETE /api/v0/instances/{id}/ -> {"success": true}; 404 {"error": "not_found"} when gone."""
    instance = _instance(req, state)
    if instance is None:
        return json_response(404, {"error": "not_found", "msg": "Instance not found"})
    state.terminate(instance)
    return json_response(200, {"success": True})


def destroy_bulk(req: SimRequest, state: SimState) -> SimResponse:
    """DELETE /api/v0/instances/ with {"instance_ids": [...]} (`destroy instances`)."""
    ids = _ids(req.body, "instance_ids")
    if isinstance(ids, SimResponse):
        return ids
    found = [state.get(PROVIDER, i) for i in ids]
    for instance in found:
        if instance is not None:
            state.terminate(instance)
    return json_response(200, {"success": True, "destroyed": [int(i.id) for i in found if i is not None]})


def reboot_instance(req: SimRequest, state: SimState) -> SimResponse:
    """PUT /api/v0/instances/reboot/{id}/: the container stops and starts again, keeping its GPU."""
    instance = _instance(req, state)
    if instance is None:
        return error(404, "not_found", "Instance not found")
    if instance.status == "stopped":
        return error(400, "invalid_args", f"instance {instance.id} is stopped: start it instead")
    state.stop(instance)
    state.start(instance)
    return json_response(200, {"success": True})


def _route(method: str, path: str, kind: RequestKind, handler: Handler, public: bool = False) -> Route:
    return Route.of(method, PREFIX + path, kind, handler, public=public)


WIRE = ProviderWire(
    provider=PROVIDER,
    prefix=PREFIX,
    routes=(
        _route("GET", "/api/v0/users/current", "read", vast_account.show_user),
        _route("GET", "/api/v0/users/current/", "read", vast_account.show_user),
        _route("GET", "/api/v0/ssh/", "read", vast_account.show_ssh_keys),
        _route("GET", "/api/v0/users/me/invoices", "read", partial(provider_bills.vast_invoices, provider=PROVIDER)),
        _route("GET", "/api/v0/charges/", "read", partial(provider_bills.vast_charges, provider=PROVIDER)),
        _route("GET", "/api/v0/gpu_names/unique/", "read", vast_offers.gpu_names, public=True),
        _route("POST", "/api/v0/bundles/", "read", vast_offers.search_offers),
        _route("PUT", "/api/v0/search/asks/", "read", vast_offers.search_asks),
        _route("POST", "/api/v0/asks/bulk/", "launch", create_bulk),
        _route("PUT", "/api/v0/asks/{id}/", "launch", create_instance),
        _route("GET", "/api/v0/instances/", "read", vast_listing.list_v0),
        _route("PUT", "/api/v0/instances/", "mutation", manage_bulk),
        _route("DELETE", "/api/v0/instances/", "mutation", destroy_bulk),
        _route("GET", "/api/v1/instances/", "read", vast_listing.list_v1),
        _route("GET", "/api/v0/instances/filters/", "read", vast_listing.filters_route),
        _route("PUT", "/api/v0/instances/reboot/{id}/", "mutation", reboot_instance),
        _route("PUT", "/api/v0/instances/request_logs/{id}/", "read", vast_account.request_logs),
        _route("PUT", "/api/v0/instances/command/{id}/", "mutation", vast_account.execute),
        _route("GET", "/results/{token}", "read", vast_account.result, public=True),
        _route("GET", "/api/v0/instances/{id}/", "read", show_instance),
        _route("PUT", "/api/v0/instances/{id}/", "mutation", manage_instance),
        _route("DELETE", "/api/v0/instances/{id}/", "mutation", destroy_instance),
    ),
    unauthorized=lambda: error(401, "auth_error", "Invalid user key"),
    rate_limited=lambda retry_after: text_response(429, "API requests too frequent endpoint threshold=2.0"),
    capacity=lambda: json_response(410, {"error": "no_such_ask",
                                         "msg": "error 410/3907: no_such_ask Instance type 5000001 is no longer "
                                                "available."}),
    server_error=lambda: error(500, "server_error", "Internal Server Error"),  # [UNVERIFIED] body
    not_found=lambda: error(404, "not_found", "no such route"),
    query_key="api_key",
    bad_request=lambda reason: error(400, "invalid_args", reason),
    made=lambda row, name: Made(row.display, row.vast_prices[0], {"label": name, "gpu_ram": vast_offers.gpu_ram(row)}),
    mirrored=lambda label: {"label": label},
    in_pod=InPodWire("CONTAINER_ID", "CONTAINER_API_KEY", "/vast/api/v0", "PUT /vast/api/v0/instances/{id}/",
                     lambda pod, state: json_response(200, {"success": True}), body={"state": "stopped"}),
)
