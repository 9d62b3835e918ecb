"""Vast.ai: v0 calls (offers, create, show, start/stop, destroy) and the paginated v1 instance list."""

from __future__ import annotations

from typing import Any, final

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
    gpu_matches,
)
from gpuharness.providers.transport import ProviderHttp

PAGE_LIMIT = 25  # the v1 list's maximum page size
MAX_PAGES = 10_000

#: actual_status -> normalized; None (still provisioning) is pending
STATUS: dict[str, Status] = {
    "created": "pending", "loading": "pending", "restarting": "pending", "rebooting": "pending",
    "running": "running", "stopped": "stopped", "frozen": "stopped", "exited": "error",
    "unknown": "unknown", "offline": "unknown",
}


def short_gpu_name(gpu: str) -> str:
    """Vast's gpu_name spelling: "NVIDIA GeForce RTX 4090" -> "RTX 4090"."""
    words = [w for w in gpu.split() if w.lower() not in ("nvidia", "geforce")]
    return " ".join(words)


def vast_instance(provider: str, row: dict[str, Any]) -> Instance:
    raw = row.get("actual_status")
    status: Status = "pending" if raw is None else STATUS.get(str(raw), "unknown")
    if row.get("cur_state") == "unloaded":
        status = "terminated"
    label = row.get("label")
    return Instance(
        provider=provider,
        id=str(row["id"]),
        status=status,
        raw_status=None if raw is None else str(raw),
        name=label,
        labels={"gh_key": str(label)} if label else {},
        cost_hr=fields.number(row.get("dph_total")),
        gpu=row.get("gpu_name"),
        gpu_count=fields.integer(row.get("num_gpus"), 1),
        region=row.get("geolocation"),
        ssh=_ssh(row),
        endpoint=_endpoint(row),
        created_at=fields.timestamp(row.get("start_date")),
    )


def _host_port(row: dict[str, Any], container_port: str) -> int | None:
    bindings = fields.obj(row.get("ports")).get(container_port)
    if isinstance(bindings, list) and bindings and isinstance(bindings[0], dict):
        return fields.integer(bindings[0].get("HostPort"), 0) or None
    return None


def _ssh(row: dict[str, Any]) -> SshEndpoint | None:
    direct = _host_port(row, "22/tcp")
    if direct and row.get("public_ipaddr"):
        return SshEndpoint(str(row["public_ipaddr"]).strip(), direct)
    if row.get("ssh_host") and row.get("ssh_port"):
        return SshEndpoint(str(row["ssh_host"]), int(row["ssh_port"]))
    return None


def _endpoint(row: dict[str, Any]) -> str | None:
    for container_port in sorted(fields.obj(row.get("ports"))):
        if container_port != "22/tcp":
            host_port = _host_port(row, container_port)
            if host_port and row.get("public_ipaddr"):
                return f"http://{str(row['public_ipaddr']).strip()}:{host_port}"
    return None


def docker_flags(spec: LaunchSpec) -> str:
    """Vast's `env` field: docker-style flags for env vars and exposed ports."""
    flags = [f"-e {k}={v}" for k, v in sorted(spec.env.items())]
    for port in spec.ports:
        number = port.split("/", 1)[0]
        if number != "22":
            flags.append(f"-p {number}:{number}")
    return " ".join(flags)


@final
class VastAi:
    """Vast.ai. api_base is the host (https://console.vast.ai or http://127.0.0.1:N/vast)."""

    kind = ProviderKind.VAST
    capabilities = Capabilities(label="Vast.ai instance", api_base="https://console.vast.ai", stop_start=True,
                                interruptible=True, bid_price=True, serverless=False, ssh=True,
                                inventory=InventorySource.API, offers=True, rents=True)

    def __init__(self, name: str, http: ProviderHttp) -> None:
        self.name = name
        self.http = http

    def list_instances(self) -> list[Instance]:
        """Every instance through the keyset-paginated v1 list (25 a page)."""
        found: list[Instance] = []
        params: dict[str, Any] = {"limit": PAGE_LIMIT}
        seen_tokens: set[str] = set()
        for _ in range(MAX_PAGES):
            body = fields.mapping(self.http.read("GET", "/api/v1/instances/", params=params).json(), self.name,
                                  "GET /api/v1/instances/")
            found += [vast_instance(self.name, r) for r in fields.items(body.get("instances"), self.name,
                                                                         "GET /api/v1/instances/")]
            token = body.get("next_token")
            if not token:
                return found
            if token in seen_tokens:
                raise ProviderError("server", "the v1 instance list repeated a next_token", provider=self.name)
            seen_tokens.add(str(token))
            params = {"limit": PAGE_LIMIT, "after_token": token}
        raise ProviderError("server", f"the v1 instance list did not end within {MAX_PAGES} pages",
                            provider=self.name)

    def get_instance(self, instance_id: str) -> Instance | None:
        response = self.http.read("GET", f"/api/v0/instances/{instance_id}/", params={"owner": "me"}, allow=(404,))
        if response.status_code == 404:
            return None
        row = fields.mapping(response.json(), self.name, "GET /api/v0/instances/{id}/").get("instances")
        if row is None:  # {"instances": null}: gone
            return None
        if isinstance(row, list):  # be lenient: some versions answer a one-element list
            row = row[0] if row else None
            if row is None:
                return None
        return vast_instance(self.name, fields.mapping(row, self.name, "GET /api/v0/instances/{id}/"))

    def offers(self, gpu: str, *, gpu_count: int | None = None, limit: int = 64) -> list[Offer]:
        query: dict[str, Any] = {
            "verified": {"eq": True}, "rentable": {"eq": True}, "rented": {"eq": False},
            "gpu_name": {"eq": short_gpu_name(gpu)}, "order": [["dph_total", "asc"]], "type": "on-demand",
            "limit": limit,
        }
        if gpu_count is not None:
            query["num_gpus"] = {"eq": gpu_count}
        body = fields.mapping(self.http.read("POST", "/api/v0/bundles/", json=query).json(), self.name,
                              "POST /api/v0/bundles/")
        found: list[Offer] = []
        for row in fields.items(body.get("offers"), self.name, "POST /api/v0/bundles/"):
            price = fields.number(row.get("dph_total"))
            if price is None or not gpu_matches(gpu, row.get("gpu_name")):
                continue
            ram = fields.number(row.get("gpu_ram"))
            found.append(Offer(provider=self.name, gpu=str(row.get("gpu_name")), cost_hr=price,
                               gpu_count=fields.integer(row.get("num_gpus"), 1), offer_id=str(row.get("id")),
                               region=row.get("geolocation"), available=1,
                               vram_gb=round(ram / 1024, 1) if ram else None))
        return sorted(found, key=lambda o: o.cost_hr)

    def launch(self, spec: LaunchSpec) -> Instance:
        offer_id = spec.offer_id
        cost: float | None = None
        if offer_id is None:
            offers = self.offers(spec.gpu, gpu_count=spec.gpu_count, limit=8)
            if not offers:
                raise ProviderError("capacity", f"no rentable offer for {spec.gpu_count}x {spec.gpu}; try another "
                                    "GPU type or provider", provider=self.name)
            offer_id, cost = offers[0].offer_id, offers[0].cost_hr
        body: dict[str, Any] = {"image": spec.image, "disk": spec.disk_gb, "label": spec.idempotency_key,
                                "runtype": "ssh_direct", "env": docker_flags(spec), "cancel_unavail": True}
        if spec.interruptible and spec.bid_price is not None:
            body["price"] = spec.bid_price
            cost = spec.bid_price
        answer = fields.mapping(self.http.mutate("PUT", f"/api/v0/asks/{offer_id}/", json=body).json(), self.name,
                                "PUT /api/v0/asks/{id}/")
        contract = answer.get("new_contract")
        if not answer.get("success") or contract is None:
            raise ProviderError("invalid", f"create was not accepted: {answer.get('msg') or answer.get('error')}",
                                provider=self.name)
        return Instance(provider=self.name, id=str(contract), status="pending", raw_status=None,
                        name=spec.idempotency_key, labels={"gh_key": spec.idempotency_key}, cost_hr=cost,
                        gpu=short_gpu_name(spec.gpu), gpu_count=spec.gpu_count, region=spec.region)

    def _set_state(self, instance_id: str, state: str) -> None:
        self.http.mutate("PUT", f"/api/v0/instances/{instance_id}/", json={"state": state})

    def stop(self, instance_id: str) -> None:
        self._set_state(instance_id, "stopped")

    def start(self, instance_id: str) -> None:
        self._set_state(instance_id, "running")

    def terminate(self, instance_id: str) -> None:
        try:
            self.http.mutate("DELETE", f"/api/v0/instances/{instance_id}/", json={})
        except ProviderError as exc:
            if exc.kind != "not_found":
                raise

    def check(self) -> None:
        self.http.read("GET", "/api/v1/instances/", params={"limit": 1})

    def close(self) -> None:
        self.http.close()
