"""RunPod Pods through REST v2 (v1 retired 2026-11-15): list, get, launch, stop/start, terminate, GPU types."""

from __future__ import annotations

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
from gpuharness.providers.failures import classify
from gpuharness.providers.transport import ProviderHttp, json_body

GPU_TYPES_QUERY = "query GpuTypes { gpuTypes { id displayName memoryInGb securePrice communityPrice } }"

#: v2 PodStatus (and v1 desiredStatus) -> normalized status
STATUS: dict[str, Status] = {
    "PROVISIONING": "pending", "STARTING": "pending", "CREATED": "pending", "RESTARTING": "pending",
    "RUNNING": "running", "EXITED": "stopped", "PAUSED": "stopped", "ERROR": "error", "DEAD": "error",
    "TERMINATED": "terminated",
}


def pod_instance(provider: str, pod: dict[str, Any]) -> Instance:
    """A v2 pod (tolerating v1 field names) as an Instance."""
    raw = pod.get("status") or pod.get("desiredStatus")
    gpu = fields.obj(pod.get("gpu"))
    runtime = fields.obj(pod.get("runtime"))
    ports = [p for p in runtime.get("ports") or [] if isinstance(p, dict)]
    status: Status = STATUS.get(str(raw).upper(), "unknown") if raw else "unknown"
    ssh = _ssh(pod, ports)
    if status == "running" and ssh is None and not ports:
        status = "pending"  # v2 says RUNNING before the container's ports exist: not reachable yet
    return Instance(
        provider=provider,
        id=str(pod["id"]),
        status=status,
        raw_status=str(raw) if raw is not None else None,
        name=pod.get("name"),
        cost_hr=fields.number(pod.get("cost", pod.get("costPerHr"))),
        gpu=gpu.get("id") or fields.obj(pod.get("machine")).get("gpuDisplayName"),
        gpu_count=fields.integer(gpu.get("count", pod.get("gpuCount")), 1),
        region=pod.get("dataCenterId"),
        ssh=ssh,
        endpoint=next((f"http://{p['ip']}:{p['public']}" for p in ports
                       if p.get("type") == "http" and p.get("ip") and p.get("public")), None),
        created_at=fields.timestamp(pod.get("createdAt")),
    )


def _ssh(pod: dict[str, Any], ports: list[dict[str, Any]]) -> SshEndpoint | None:
    direct = fields.obj(pod.get("ssh")).get("direct")
    if isinstance(direct, dict) and direct.get("host") and direct.get("port"):
        return SshEndpoint(str(direct["host"]), int(direct["port"]), str(direct.get("username") or "root"))
    for port in ports:
        if port.get("private") == 22 and port.get("ip") and port.get("public"):
            return SshEndpoint(str(port["ip"]), int(port["public"]))
    mapped = fields.obj(pod.get("portMappings")).get("22")
    if pod.get("publicIp") and mapped:
        return SshEndpoint(str(pod["publicIp"]), int(mapped))
    return None


@final
@adapter
class RunPodPods:
    """RunPod Pods REST v2. api_base is the host (https://api.runpod.io or http://127.0.0.1:N/runpod)."""

    kind: ClassVar[ProviderKind] = ProviderKind("runpod")
    capabilities = Capabilities(label="RunPod Pod", api_base="https://api.runpod.io", stop_start=True,
                                interruptible=True, bid_price=False, serverless=False, ssh=True,
                                inventory=InventorySource.API, offers=True, rents=True,
                                stopped_storage_usd_gb_month=0.20,  # RunPod: stopped volumes, $0.20/GB/month
                                # the pod's id and pod-scoped key, as `runpodctl stop pod $RUNPOD_POD_ID` uses them
                                in_pod_stop=InPodStop("RUNPOD_POD_ID", "RUNPOD_API_KEY", "POST",
                                                      "https://rest.runpod.io/v1", "/pods/%s/stop"))

    def __init__(self, name: str, http: ProviderHttp, *, cloud: str = "SECURE") -> None:
        self.name = name
        self.http = http
        self.cloud = cloud

    def list_instances(self) -> list[Instance]:
        body = json_body(self.http.read("GET", "/v2/pods"), self.name)
        pods = body if isinstance(body, list) else fields.mapping(body, self.name, "GET /v2/pods").get("pods")
        return [pod_instance(self.name, p) for p in fields.items(pods, self.name, "GET /v2/pods")]

    def get_instance(self, instance_id: str) -> Instance | None:
        response = self.http.read("GET", f"/v2/pods/{instance_id}", allow=(404,))
        if response.status_code == 404:
            return None
        return pod_instance(self.name, fields.mapping(json_body(response, self.name), self.name, "GET /v2/pods/{id}"))

    def hold_price(self, spec: LaunchSpec) -> None:
        """An on-demand pod takes no price limit: read the GPU type's price first and refuse one above
        spec.max_cost_hr before the create call (nothing is created)."""
        if spec.max_cost_hr is None:
            return
        offers = self.offers(spec.gpu)
        exact = [offer for offer in offers if offer.offer_id == spec.gpu] or offers
        if exact and all(exceeds(o.cost_hr * spec.gpu_count, spec.max_cost_hr) for o in exact):
            cost = min(o.cost_hr for o in exact) * spec.gpu_count
            raise ProviderError("invalid", f"the pod's price is ${cost:.3f}/hr, above the allowed "
                                f"${spec.max_cost_hr:.3f}/hr; refused before the launch, nothing was created",
                                provider=self.name)

    def launch(self, spec: LaunchSpec) -> Instance:
        self.hold_price(spec)
        body: dict[str, Any] = {
            "name": spec.idempotency_key, "image": spec.image,
            "gpu": {"id": spec.gpu, "count": spec.gpu_count}, "cloud": self.cloud, "disk": spec.disk_gb,
            "ports": list(spec.ports), "env": dict(spec.env), "interruptible": spec.interruptible,
        }
        if spec.region:
            body["dataCenterIds"] = [spec.region]
        response = self.http.mutate("POST", "/v2/pods", json=body)
        created = json_body(response, self.name, mutation=True)
        return pod_instance(self.name, fields.mapping(created, self.name, "POST /v2/pods"))

    def _action(self, instance_id: str, action: str) -> None:
        self.http.mutate("POST", f"/v2/pods/{instance_id}/action", json={"action": action})

    def stop(self, instance_id: str) -> None:
        self._action(instance_id, "stop")

    def start(self, instance_id: str) -> None:
        self._action(instance_id, "start")

    def terminate(self, instance_id: str) -> None:
        try:
            self._action(instance_id, "terminate")
        except ProviderError as exc:
            if exc.kind != "not_found":  # already gone is what we wanted
                raise

    def gpu_types(self) -> list[dict[str, Any]]:
        """GPU types with prices, through GraphQL's `gpuTypes` as runpod-python's get_gpus asks (REST v2 has no
        list of GPU types)."""
        answer = self.http.read("POST", "/graphql", json={"query": GPU_TYPES_QUERY})
        data = fields.mapping(json_body(answer, self.name), self.name, "POST /graphql gpuTypes")
        if data.get("errors"):
            raise classify(self.name, answer.status_code, answer.text)
        return fields.items(fields.obj(data.get("data")).get("gpuTypes"), self.name, "POST /graphql gpuTypes")

    def offers(self, gpu: str) -> list[Offer]:
        found: list[Offer] = []
        for row in self.gpu_types():
            price = fields.number(row.get("communityPrice" if self.cloud == "COMMUNITY" else "securePrice"))
            if price is None or not gpu_matches(gpu, row.get("id"), row.get("displayName")):
                continue
            found.append(Offer(provider=self.name, gpu=str(row["id"]), cost_hr=price, offer_id=str(row["id"]),
                               vram_gb=fields.number(row.get("memoryInGb")), region=self.cloud))
        return found

    def charges(self, since: datetime, until: datetime) -> list[Charge]:
        """The pod billing history, per pod and UTC day (as `runpodctl billing pods` reads it)."""
        answer = self.http.read("GET", bill_records.RUNPOD_BILLING, params=bill_records.runpod_query(since, until))
        return bill_records.runpod_charges(self.name, json_body(answer, self.name))

    def check(self) -> None:
        self.http.read("GET", "/v2/pods")

    def close(self) -> None:
        self.http.close()
