"""Massed Compute REST v1: inventory, images, instances (202 launches), terminate. No stop/start."""

from __future__ import annotations

import re
from typing import Any, ClassVar, final

from gpuharness.core.policy import exceeds
from gpuharness.providers import fields
from gpuharness.providers.base import (
    Capabilities,
    Instance,
    InventorySource,
    LaunchSpec,
    Offer,
    ProviderError,
    ProviderKind,
    SshEndpoint,
    Status,
    adapter,
    gpu_matches,
)
from gpuharness.providers.transport import ProviderHttp, json_body

#: Brev's mapping of Massed statuses (the full enum is [UNVERIFIED])
STATUS: dict[str, Status] = {
    "active": "running", "running": "running", "rented": "running",
    "pending": "pending", "booting": "pending", "creating": "pending", "provisioning": "pending",
    "restarting": "pending", "stopping": "stopped", "stopped": "stopped",
    "terminating": "terminated", "deleting": "terminated", "terminated": "terminated", "deleted": "terminated",
    "failed": "error", "error": "error",
}
_COUNT_PREFIX = re.compile(r"^\s*(\d+)x\s+", re.IGNORECASE)


def massed_instance(provider: str, row: dict[str, Any]) -> Instance:
    raw = row.get("status")
    product = fields.obj(row.get("product"))
    description = str(product.get("description") or product.get("name") or "") or None
    gpu = _COUNT_PREFIX.sub("", description) if description else None
    region = row.get("region")
    ip = row.get("ip")
    return Instance(
        provider=provider,
        id=str(row.get("uuid") or row.get("id")),
        status=STATUS.get(str(raw).lower(), "unknown") if raw else "unknown",
        raw_status=None if raw is None else str(raw),
        name=row.get("name"),
        cost_hr=fields.number(product.get("price_hr")),
        gpu=gpu,
        gpu_count=fields.integer(product.get("gpu_count"), 1),
        region=region.get("name") if isinstance(region, dict) else region,
        # ssh_port is the simulator's extension; real VMs listen on 22
        ssh=SshEndpoint(str(ip), fields.integer(row.get("ssh_port"), 22), str(row.get("username") or "ubuntu"))
        if ip else None,
        created_at=fields.timestamp(row.get("created")),
    )


def _envelope(body: Any, provider: str, what: str) -> list[dict[str, Any]]:
    """`runningInstances` (the real envelope, an array) or the spec's single `runningInstance`."""
    data = fields.mapping(body, provider, what)
    if "runningInstances" in data:
        return fields.items(data["runningInstances"], provider, what)
    single = data.get("runningInstance")
    return [fields.mapping(single, provider, what)] if single is not None else []


@final
@adapter
class MassedCompute:
    """Massed Compute. api_base is the host (https://vm.massedcompute.com or http://127.0.0.1:N/massed)."""

    kind: ClassVar[ProviderKind] = ProviderKind("massed")
    capabilities = Capabilities(label="Massed Compute VM", api_base="https://vm.massedcompute.com",
                                stop_start=False, interruptible=False, bid_price=False, serverless=False, ssh=True,
                                inventory=InventorySource.API, offers=True, rents=True)

    def __init__(self, name: str, http: ProviderHttp) -> None:
        self.name = name
        self.http = http

    def list_instances(self) -> list[Instance]:
        body = json_body(self.http.read("GET", "/api/v1/instance"), self.name)
        return [massed_instance(self.name, r) for r in _envelope(body, self.name, "GET /api/v1/instance")]

    def get_instance(self, instance_id: str) -> Instance | None:
        response = self.http.read("GET", f"/api/v1/instance/{instance_id}", allow=(404,))
        if response.status_code == 404:
            return None
        rows = _envelope(json_body(response, self.name), self.name, "GET /api/v1/instance/{uuid}")
        return massed_instance(self.name, rows[0]) if rows else None

    def offers(self, gpu: str) -> list[Offer]:
        body = fields.mapping(json_body(self.http.read("GET", "/api/v1/gpu-inventory"), self.name), self.name,
                              "GET /api/v1/gpu-inventory")
        inventory = body.get("gpu_inventory") or {}
        found: list[Offer] = []
        for product, entry in (inventory.items() if isinstance(inventory, dict) else []):
            kind = entry.get("instance_type") if isinstance(entry, dict) else None
            if not isinstance(kind, dict):
                continue
            description = str(kind.get("description") or product)
            cents = fields.number(kind.get("price_cents_per_hour"))
            if cents is None or not gpu_matches(gpu, _COUNT_PREFIX.sub("", description), str(product)):
                continue
            match = _COUNT_PREFIX.match(description)
            regions = entry.get("regions_with_capacity_available") or []
            found.append(Offer(provider=self.name, gpu=_COUNT_PREFIX.sub("", description), cost_hr=cents / 100,
                               gpu_count=int(match.group(1)) if match else 1, offer_id=str(product),
                               region=regions[0].get("name") if regions and isinstance(regions[0], dict) else None,
                               available=fields.integer(entry.get("capacity_available"), 0)))
        return sorted(found, key=lambda o: o.cost_hr)

    def _image_id(self, image: str) -> int:
        if image.isdigit():
            return int(image)
        images = self.http.read("GET", "/api/v1/images")
        body = fields.mapping(json_body(images, self.name), self.name, "GET /api/v1/images")
        for row in fields.items(body.get("images"), self.name, "GET /api/v1/images"):
            if str(row.get("vm_image_name", "")).lower() == image.lower():
                return fields.integer(row.get("vm_image_id"), 0)
        raise ProviderError("invalid", f"no VM image named {image!r}; give its vm_image_id or an exact name from "
                            "GET /images", provider=self.name)

    def _product(self, spec: LaunchSpec) -> tuple[str, float | None]:
        if spec.gpu.startswith("gpu_"):
            return spec.gpu, None
        priced_above: float | None = None
        for offer in self.offers(spec.gpu):
            if offer.gpu_count == spec.gpu_count and offer.offer_id and (offer.available or 0) > 0:
                if not exceeds(offer.cost_hr, spec.max_cost_hr):
                    return offer.offer_id, offer.cost_hr
                priced_above = offer.cost_hr if priced_above is None else min(priced_above, offer.cost_hr)
        if priced_above is not None:
            raise ProviderError("invalid", f"the cheapest product is ${priced_above:.3f}/hr, above the allowed "
                                f"${spec.max_cost_hr or 0:.3f}/hr; refused before the launch, nothing was created",
                                provider=self.name)
        raise ProviderError("capacity", f"no product with capacity for {spec.gpu_count}x {spec.gpu}",
                            provider=self.name)

    def launch(self, spec: LaunchSpec) -> Instance:
        product, cost = self._product(spec)
        body = {"imageId": self._image_id(spec.image), "productName": product,
                "regionName": spec.region or "any", "instanceName": spec.idempotency_key}
        launched = self.http.mutate("POST", "/api/v1/instance/launch", json=body)
        answer = fields.mapping(json_body(launched, self.name, mutation=True), self.name,
                                "POST /api/v1/instance/launch")
        instance_id = answer.get("response")
        if not isinstance(instance_id, str) or not instance_id:
            raise ProviderError("server", "launch answered without an instance uuid in `response`",
                                provider=self.name)
        return Instance(provider=self.name, id=instance_id, status="pending", name=spec.idempotency_key,
                        cost_hr=cost, gpu=spec.gpu, gpu_count=spec.gpu_count, region=spec.region)

    def stop(self, instance_id: str) -> None:
        raise ProviderError("unsupported", "Massed Compute has no stop/start (only restart and terminate)",
                            provider=self.name)

    def start(self, instance_id: str) -> None:
        self.stop(instance_id)

    def terminate(self, instance_id: str) -> None:
        try:
            self.http.mutate("POST", "/api/v1/instance/terminate", json={"instanceUuids": [instance_id]})
        except ProviderError as exc:
            if exc.kind != "not_found":
                raise

    def check(self) -> None:
        self.http.read("POST", "/api/v1/account/token/validation", json={})

    def close(self) -> None:
        self.http.close()
