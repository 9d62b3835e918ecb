"""Vast.ai: v0 calls (offers, create, show, start/stop, destroy) and the paginated v1 instance list.

Requests are shaped as the official client (pip `vastai` 1.9, vastai/api/) shapes the same operation: the v1 list's
query (`select_filters`, `order_by`, `limit`, `after_token`, each JSON text), the offer query as the CLI parses
`gpu_name=RTX_4090 num_gpus=1` (numbers as strings), and the create body of build_create_instance_payload.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, ClassVar, final

from gpuharness.core.bill import Charge
from gpuharness.core.policy import exceeds
from gpuharness.providers import bill_records, fields
from gpuharness.providers.base import (
    Capabilities,
    InPodStop,
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

PAGE_LIMIT = 25  # the v1 list's maximum page size
MAX_PAGES = 10_000
#: the official client's v1 list query, before paging: every instance, oldest first
LIST_QUERY: dict[str, Any] = {"select_filters": json.dumps({}), "order_by": json.dumps([{"col": "id", "dir": "asc"}]),
                              "limit": PAGE_LIMIT}
#: the runtype the official client sends for ssh=True, direct=True (its spelling: "ssh_direc")
RUNTYPE = "ssh_direc ssh_proxy"
#: allocated_storage the official client prices offers at by default (GiB)
DEFAULT_STORAGE_GB = 5.0

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


def docker_options(spec: LaunchSpec) -> dict[str, str]:
    """Vast's `env` object as the official client builds it: variables, plus `"-p N:N": "1"` per exposed port."""
    options = dict(sorted(spec.env.items()))
    for port in spec.ports:
        number = port.split("/", 1)[0]
        if number != "22":
            options[f"-p {number}:{number}"] = "1"
    return options


def held_ask(provider: str, offers: list[Offer], max_cost_hr: float | None) -> tuple[str | None, float]:
    """The cheapest ask at or below the price limit (the limit is held at the launch: no ask above it is rented);
    none: refused before the create call, so nothing is created."""
    within = [offer for offer in offers if not exceeds(offer.cost_hr, max_cost_hr)]
    if not within:
        raise ProviderError("invalid", f"the cheapest offer is ${offers[0].cost_hr:.3f}/hr, above the allowed "
                            f"${max_cost_hr or 0:.3f}/hr; refused before the launch, nothing was created",
                            provider=provider)
    return within[0].offer_id, within[0].cost_hr


def create_body(spec: LaunchSpec, price: float | None) -> dict[str, Any]:
    """The create body of the official client's build_create_instance_payload (ssh, direct, cancel_unavail)."""
    return {
        "client_id": "me", "image": spec.image, "env": docker_options(spec), "price": price, "disk": spec.disk_gb,
        "label": spec.idempotency_key, "extra": None, "onstart": None, "image_login": None, "python_utf8": False,
        "lang_utf8": False, "use_jupyter_lab": False, "jupyter_dir": None, "force": False, "cancel_unavail": True,
        "template_hash_id": None, "user": None, "runtype": RUNTYPE,
    }


def offer_query(gpu: str, gpu_count: int | None, limit: int, storage_gb: float) -> dict[str, Any]:
    """What `vastai search offers 'gpu_name=X num_gpus=N' -o dph_total --limit L` sends: the CLI's defaults, then
    the filters as it types them (names with spaces, numbers as strings)."""
    query: dict[str, Any] = {"verified": {"eq": True}, "external": {"eq": False}, "rentable": {"eq": True},
                             "gpu_name": {"eq": short_gpu_name(gpu)}}
    if gpu_count is not None:
        query["num_gpus"] = {"eq": str(gpu_count)}
    query.update({"order": [["dph_total", "asc"]], "type": "on-demand", "limit": limit,
                  "allocated_storage": storage_gb})
    return query


@final
@adapter
class VastAi:
    """Vast.ai. api_base is the host (https://console.vast.ai or http://127.0.0.1:N/vast)."""

    kind: ClassVar[ProviderKind] = ProviderKind("vast")
    capabilities = Capabilities(label="Vast.ai instance", api_base="https://console.vast.ai", stop_start=True,
                                interruptible=True, bid_price=True, serverless=False, ssh=True,
                                inventory=InventorySource.API, offers=True, rents=True,
                                # the instance's id and instance-scoped key, on the manage-instance route
                                in_pod_stop=InPodStop("CONTAINER_ID", "CONTAINER_API_KEY", "PUT",
                                                      "https://console.vast.ai/api/v0", "/instances/%s/",
                                                      '{"state":"stopped"}'))

    def __init__(self, name: str, http: ProviderHttp) -> None:
        self.name = name
        self.http = http

    def list_instances(self) -> list[Instance]:
        """Every instance through the keyset-paginated v1 list (25 a page)."""
        found: list[Instance] = []
        params: dict[str, Any] = dict(LIST_QUERY)
        seen_tokens: set[str] = set()
        for _ in range(MAX_PAGES):
            page = self.http.read("GET", "/api/v1/instances/", params=params)
            body = fields.mapping(json_body(page, self.name), self.name, "GET /api/v1/instances/")
            found += [vast_instance(self.name, r) for r in fields.items(body.get("instances"), self.name,
                                                                         "GET /api/v1/instances/")]
            token = body.get("next_token")
            if not token:
                return found
            if token in seen_tokens:
                raise ProviderError("server", "the v1 instance list repeated a next_token", provider=self.name)
            seen_tokens.add(str(token))
            params = {**LIST_QUERY, "after_token": token}
        raise ProviderError("server", f"the v1 instance list did not end within {MAX_PAGES} pages",
                            provider=self.name)

    def get_instance(self, instance_id: str) -> Instance | None:
        response = self.http.read("GET", f"/api/v0/instances/{instance_id}/", params={"owner": "me"}, allow=(404,))
        if response.status_code == 404:
            return None
        row = fields.mapping(json_body(response, self.name), self.name, "GET /api/v0/instances/{id}/").get("instances")
        if row is None:  # {"instances": null}: gone
            return None
        if isinstance(row, list):  # be lenient: some versions answer a one-element list
            row = row[0] if row else None
            if row is None:
                return None
        return vast_instance(self.name, fields.mapping(row, self.name, "GET /api/v0/instances/{id}/"))

    def offers(self, gpu: str, *, gpu_count: int | None = None, limit: int = 64,
               storage_gb: float = DEFAULT_STORAGE_GB) -> list[Offer]:
        query = offer_query(gpu, gpu_count, limit, storage_gb)
        body = fields.mapping(json_body(self.http.read("POST", "/api/v0/bundles/", json=query), self.name), self.name,
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
            offers = self.offers(spec.gpu, gpu_count=spec.gpu_count, limit=8, storage_gb=float(spec.disk_gb))
            if not offers:
                raise ProviderError("capacity", f"no rentable offer for {spec.gpu_count}x {spec.gpu}; try another "
                                    "GPU type or provider", provider=self.name)
            offer_id, cost = held_ask(self.name, offers, spec.max_cost_hr)
        price = spec.bid_price if spec.interruptible and spec.bid_price is not None else None
        if price is not None and exceeds(price, spec.max_cost_hr):
            raise ProviderError("invalid", f"bid ${price:.3f}/hr is above the allowed ${spec.max_cost_hr:.3f}/hr; "
                                "nothing was created", provider=self.name)
        if price is not None:
            cost = price
        body = create_body(spec, price)
        accepted = self.http.mutate("PUT", f"/api/v0/asks/{offer_id}/", json=body)
        answer = fields.mapping(json_body(accepted, self.name, mutation=True), self.name,
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

    def charges(self, since: datetime, until: datetime) -> list[Charge]:
        """The charge rows of the account's invoices, per instance and UTC day (as `vastai show invoices`)."""
        answer = self.http.read("GET", bill_records.VAST_INVOICES, params=bill_records.vast_query(since, until))
        return bill_records.vast_charges(self.name, json_body(answer, self.name))

    def check(self) -> None:
        """The read every official CLI command starts with (its role check)."""
        self.http.read("GET", "/api/v0/users/current")

    def close(self) -> None:
        self.http.close()
