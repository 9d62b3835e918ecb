"""Massed Compute REST v1 (https://vm-docs.massedcompute.com/api/v1, the reference its official MCP server names),
under /massed."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from gpuharness.sim import catalog
from gpuharness.sim.routing import Made, ProviderWire, Route, SimRequest, SimResponse, json_response
from gpuharness.sim.state import SimInstance, SimState

PROVIDER = "massed"
PREFIX = "/massed"
REGION = {"name": "us-central-3", "description": "Des Moines, IA"}
_STATUS = {"pending": "booting", "running": "running", "stopped": "stopped", "terminated": "terminated"}


def _product(name: str) -> dict[str, Any] | None:
    found = catalog.by_massed_product(name)
    if found is None:
        return None
    row, count = found
    price = (row.massed_price or 0.0) * count
    return {"name": name, "description": f"{count}x {row.display}", "gpu_count": count, "vcpu": 6 * count,
            "ram": 48 * count, "storage": 256 * count, "price_hr": f"{price:.2f}", "final_price_hr": "0"}


def gpu_inventory(req: SimRequest, state: SimState) -> SimResponse:
    inventory: dict[str, Any] = {}
    for row in catalog.CATALOG:
        if row.massed_product is None or row.massed_price is None:
            continue
        for count in (1, 2):
            base = row.massed_product.split("_", 2)[2]
            name = f"gpu_{count}x_{base}"
            inventory[name] = {
                "instance_type": {"name": name, "description": f"{count}x {row.display}",
                                  "price_cents_per_hour": round(row.massed_price * count * 100),
                                  "specs": {"vcpu_count": 6 * count, "memory_gib": 48 * count,
                                            "storage_gb": 256 * count}},
                "regions_with_capacity_available": [REGION],
                "capacity_available": 5 if count == 1 else 1,
            }
    return json_response(200, {"gpu_inventory": inventory})


def images(req: SimRequest, state: SimState) -> SimResponse:
    return json_response(200, {"images": [{"vm_image_id": i, "vm_image_name": name, "vm_image_description": name}
                                           for i, name in catalog.MASSED_IMAGES]})


def render(instance: SimInstance) -> dict[str, Any]:
    host = instance.host if instance.status == "running" else None
    image_id = int(instance.extra.get("image_id", 7))
    image_name = dict(catalog.MASSED_IMAGES).get(image_id, "custom")
    return {
        "uuid": instance.id, "name": instance.name, "ip": host.ssh_host if host else None,
        "ssh_port": host.ssh_port if host else None,  # simulator extension: real VMs listen on 22
        "username": "Ubuntu", "status": _STATUS[instance.status], "os_booted": 1 if host else 0,
        "command_startup": instance.extra.get("command", ""),
        "created": datetime.fromtimestamp(instance.created_wall, UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z"),
        "active": 1, "image": {"id": image_id, "name": image_name, "description": image_name},
        "product": _product(instance.gpu), "region": REGION,
    }


def list_instances(req: SimRequest, state: SimState) -> SimResponse:
    return json_response(200, {"runningInstances": [render(i) for i in state.live(PROVIDER)]})


def get_instance(req: SimRequest, state: SimState) -> SimResponse:
    instance = state.get(PROVIDER, req.match["uuid"])
    if instance is None:
        return json_response(404, {"message": "Instance not found"})  # [UNVERIFIED] body
    # the spec says `runningInstance`; the real envelope is `runningInstances` (an array)
    return json_response(200, {"runningInstances": [render(instance)]})


def launch(req: SimRequest, state: SimState) -> SimResponse:
    body = req.body if isinstance(req.body, dict) else {}
    missing = [k for k in ("imageId", "productName", "regionName") if body.get(k) in (None, "")]
    if missing:
        return json_response(422, {"message": f"missing required field(s): {', '.join(missing)}"})  # [UNVERIFIED]
    product = _product(str(body["productName"]))
    if product is None:
        return json_response(400, {"message": f"Product {body['productName']} not found"})  # [UNVERIFIED]
    if body["imageId"] not in dict(catalog.MASSED_IMAGES):
        return json_response(400, {"message": "Product does not support the VM Image"})
    instance = state.create(PROVIDER, name=str(body.get("instanceName") or ""), gpu=str(product["name"]),
                            gpu_count=int(product["gpu_count"]), cost_hr=float(product["price_hr"]),
                            image=str(body["imageId"]), region=REGION["name"],
                            extra={"image_id": body["imageId"], "command": body.get("command", "")})
    return json_response(202, {"response": instance.id})


def _targets(req: SimRequest, state: SimState) -> list[SimInstance] | SimResponse:
    uuids = req.body.get("instanceUuids") if isinstance(req.body, dict) else None
    if not isinstance(uuids, list) or not uuids:
        return json_response(422, {"message": "instanceUuids must be a non-empty list"})
    found = [state.get(PROVIDER, str(u)) for u in uuids]
    if any(i is None for i in found):
        return json_response(404, {"message": "Instance not found"})
    return [i for i in found if i is not None]


def restart(req: SimRequest, state: SimState) -> SimResponse:
    targets = _targets(req, state)
    if isinstance(targets, SimResponse):
        return targets
    for instance in targets:
        state.stop(instance)
        state.start(instance)
    return json_response(202, {"response": [{**render(i), "id": i.id} for i in targets]})


def terminate(req: SimRequest, state: SimState) -> SimResponse:
    targets = _targets(req, state)
    if isinstance(targets, SimResponse):
        return targets
    for instance in targets:
        state.terminate(instance)
    return json_response(202, {"response": {"data": {"terminated_instances": [
        {**render(i), "id": i.id} for i in targets]}}})


def validate_token(req: SimRequest, state: SimState) -> SimResponse:
    return json_response(200, {"message": "Valid Token"})


def billing(req: SimRequest, state: SimState) -> SimResponse:
    return json_response(200, {"billingMethod": "creditcard", "rechargeThreshold": "10",
                               "rechargeThresholdCents": 1000, "rechargeAmount": "20", "rechargeAmountCents": 2000})


WIRE = ProviderWire(
    provider=PROVIDER,
    prefix=PREFIX,
    routes=(
        Route.of("GET", "/massed/api/v1/gpu-inventory", "read", gpu_inventory),
        Route.of("GET", "/massed/api/v1/images", "read", images),
        Route.of("GET", "/massed/api/v1/instance", "read", list_instances),
        Route.of("POST", "/massed/api/v1/instance/launch", "launch", launch),
        Route.of("POST", "/massed/api/v1/instance/restart", "mutation", restart),
        Route.of("POST", "/massed/api/v1/instance/terminate", "mutation", terminate),
        Route.of("GET", "/massed/api/v1/instance/{uuid}", "read", get_instance),
        Route.of("POST", "/massed/api/v1/account/token/validation", "read", validate_token),
        Route.of("GET", "/massed/api/v1/account/billing", "read", billing),
    ),
    # error bodies below are [UNVERIFIED]: Massed Compute documents no error shape
    unauthorized=lambda: json_response(401, {"message": "Unauthenticated."}),
    rate_limited=lambda retry_after: json_response(429, {"message": "Too Many Attempts."}),
    capacity=lambda: json_response(503, {"message": "Insufficient capacity: product is out of stock"}),
    server_error=lambda: json_response(500, {"message": "Server Error"}),
    not_found=lambda: json_response(404, {"message": "Not Found"}),
    bad_request=lambda reason: json_response(400, {"message": reason}),
    made=lambda row, name: Made(row.massed_product or "gpu_1x_a6000", row.massed_price or 0.57, {"image_id": 7}),
    mirrored=lambda label: {"image_id": 7},
)
