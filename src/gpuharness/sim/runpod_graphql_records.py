"""RunPod's GraphQL types as the simulator serves them: the schema (fields clients select) and the records.

Pods are the same SimInstance records REST v2 serves; only their rendering differs (`env` as ["K=V"], `ports`
as "8888/http,22/tcp", `runtime` null until the container is up). Field lists follow runpod-python 1.12
(runpod/api/queries, runpod/api/mutations) and the selections third-party clients make (reference §1.7).
"""

from __future__ import annotations

import hashlib
import time
from typing import Any

from gpuharness.sim import catalog
from gpuharness.sim.graphql_exec import FieldType
from gpuharness.sim.state import SimInstance, SimState

_S, _I, _F, _B = FieldType("String"), FieldType("Int"), FieldType("Float"), FieldType("Boolean")

POD_FIELDS: dict[str, FieldType] = {
    **dict.fromkeys(("id", "name", "imageName", "desiredStatus", "dockerArgs", "dockerId", "lastStatusChange",
                     "lastStartedAt", "machineId", "podType", "ports", "volumeMountPath", "templateId",
                     "networkVolumeId", "consumerUserId", "containerRegistryAuthId", "createdAt"), _S),
    **dict.fromkeys(("gpuCount", "vcpuCount", "memoryInGb", "containerDiskInGb", "volumeInGb", "uptimeSeconds",
                     "port", "version"), _I),
    **dict.fromkeys(("costPerHr", "adjustedCostPerHr", "lowestBidPriceToResume"), _F),
    **dict.fromkeys(("locked", "interruptible"), _B),
    "env": FieldType("[String]"), "runtime": FieldType("PodRuntime"), "machine": FieldType("PodMachineInfo"),
}
GPU_TYPE_FIELDS: dict[str, FieldType] = {
    **dict.fromkeys(("id", "displayName", "manufacturer"), _S),
    **dict.fromkeys(("memoryInGb", "cudaCores", "maxGpuCount", "maxGpuCountSecureCloud",
                     "maxGpuCountCommunityCloud"), _I),
    **dict.fromkeys(("secureCloud", "communityCloud"), _B),
    **dict.fromkeys(("securePrice", "communityPrice", "oneMonthPrice", "threeMonthPrice", "oneWeekPrice",
                     "communitySpotPrice", "secureSpotPrice"), _F),
    "lowestPrice": FieldType("LowestPrice", ("input",)),
}
SCHEMA: dict[str, dict[str, FieldType]] = {
    "Query": {"myself": FieldType("User"), "pod": FieldType("Pod", ("input",)),
              "gpuTypes": FieldType("[GpuType]", ("input",))},
    "Mutation": {name: FieldType("Pod", ("input",)) for name in
                 ("podFindAndDeployOnDemand", "podRentInterruptable", "podStop", "podResume")}
    | {"podTerminate": FieldType("Void", ("input",))},
    "User": {"id": _S, "email": _S, "pubKey": _S, "clientBalance": _F, "currentSpendPerHr": _F,
             "spendLimit": _I, "pods": FieldType("[Pod]"), "networkVolumes": FieldType("[NetworkVolume]")},
    "NetworkVolume": {"id": _S, "name": _S, "size": _I, "dataCenterId": _S},
    "Pod": POD_FIELDS,
    "PodRuntime": {"uptimeInSeconds": _I, "ports": FieldType("[PodRuntimePorts]"),
                   "gpus": FieldType("[PodRuntimeGpus]"), "container": FieldType("PodRuntimeContainer")},
    "PodRuntimePorts": {"ip": _S, "isIpPublic": _B, "privatePort": _I, "publicPort": _I, "type": _S},
    "PodRuntimeGpus": {"id": _S, "gpuUtilPercent": _I, "memoryUtilPercent": _I},
    "PodRuntimeContainer": {"cpuPercent": _I, "memoryPercent": _I},
    "PodMachineInfo": {"podHostId": _S, "gpuDisplayName": _S, "gpuTypeId": _S, "location": _S,
                       "dataCenterId": _S, "secureCloud": _B, "supportPublicIp": _B, "cpuCount": _I},
    "GpuType": GPU_TYPE_FIELDS,
    "LowestPrice": {"minimumBidPrice": _F, "uninterruptablePrice": _F, "minVcpu": _I, "minMemory": _I,
                    "stockStatus": _S, "maxUnreservedGpuCount": _I, "availableGpuCounts": FieldType("[Int]")},
}

_DESIRED = {"pending": "RUNNING", "running": "RUNNING", "stopped": "EXITED", "terminated": "TERMINATED"}


def spot_price(row: catalog.CatalogGpu) -> float | None:
    """The lowest interruptible bid per GPU (half the cheapest on-demand price)."""
    prices = [p for p in (row.runpod_community, row.runpod_secure) if p is not None]
    return round(min(prices) * 0.5, 3) if prices else None


def gpu_type(row: catalog.CatalogGpu) -> dict[str, Any]:
    """A catalog GPU as GraphQL's GpuType, `lowestPrice` answering its argument."""
    secure, community = row.runpod_secure, row.runpod_community
    spot = spot_price(row)

    def lowest(args: dict[str, Any]) -> dict[str, Any]:
        on_demand = [p for p in (community, secure) if p is not None]
        return {"minimumBidPrice": spot, "uninterruptablePrice": min(on_demand) if on_demand else None,
                "minVcpu": 8, "minMemory": 62, "stockStatus": "High", "maxUnreservedGpuCount": 8,
                "availableGpuCounts": [1, 2, 4, 8]}

    return {
        "id": row.runpod_id, "displayName": row.display, "manufacturer": "Nvidia", "memoryInGb": row.vram_gb,
        "cudaCores": row.gpu.cuda_cores, "maxGpuCount": 8, "maxGpuCountSecureCloud": 8,
        "maxGpuCountCommunityCloud": 8, "secureCloud": secure is not None, "communityCloud": community is not None,
        "securePrice": secure, "communityPrice": community,
        "oneWeekPrice": round(secure * 0.95, 3) if secure else None,
        "oneMonthPrice": round(secure * 0.9, 3) if secure else None,
        "threeMonthPrice": round(secure * 0.85, 3) if secure else None,
        "secureSpotPrice": round(secure * 0.5, 3) if secure else None,
        "communitySpotPrice": round(community * 0.5, 3) if community else None,
        "lowestPrice": lowest,
    }


def _machine_id(pod: SimInstance) -> str:
    return hashlib.sha256(f"machine:{pod.id}".encode()).hexdigest()[:12]


def _status_change(pod: SimInstance) -> str:
    verb = "Exited by User" if pod.status == "stopped" else "Rented by User"
    stamp = time.strftime("%a %b %d %Y %H:%M:%S", time.gmtime(pod.created_wall))
    return f"{verb}: {stamp} GMT+0000 (Coordinated Universal Time)"


def _runtime(pod: SimInstance, state: SimState) -> dict[str, Any] | None:
    host = pod.host if pod.status == "running" else None
    if host is None:
        return None  # null until the container is up
    ports = [{"ip": host.ssh_host, "isIpPublic": True, "privatePort": 22, "publicPort": host.ssh_port,
              "type": "tcp"}]
    ports += [{"ip": host.ssh_host, "isIpPublic": True, "privatePort": private, "publicPort": public,
               "type": "http"} for private, public in sorted(host.http_ports.items())]
    gpus = [{"id": f"GPU-{hashlib.sha256(f'{pod.id}:{n}'.encode()).hexdigest()[:8]}", "gpuUtilPercent": 0,
             "memoryUtilPercent": 0} for n in range(pod.gpu_count)]
    return {"uptimeInSeconds": int(max(0.0, state.clock() - pod.ready_at_mono)), "ports": ports, "gpus": gpus,
            "container": {"cpuPercent": 0, "memoryPercent": 1}}


def pod_record(pod: SimInstance, state: SimState) -> dict[str, Any]:
    """A pod as the GraphQL API shows it."""
    row = catalog.by_runpod_id(pod.gpu)
    env = pod.extra.get("env") or {}
    runtime = _runtime(pod, state)
    interruptible = bool(pod.extra.get("interruptible"))
    return {
        "id": pod.id, "name": pod.name, "imageName": pod.image, "desiredStatus": _DESIRED[pod.status],
        "costPerHr": pod.cost_hr, "adjustedCostPerHr": pod.cost_hr, "gpuCount": pod.gpu_count,
        "vcpuCount": 8 * pod.gpu_count, "memoryInGb": 62 * pod.gpu_count,
        "containerDiskInGb": int(pod.extra.get("containerDiskInGb") or pod.extra.get("disk") or 50),
        "volumeInGb": int(pod.extra.get("volumeInGb") or 0), "volumeMountPath": pod.extra.get("volumeMountPath",
                                                                                             "/workspace"),
        "env": [f"{k}={v}" for k, v in env.items()], "ports": ",".join(pod.extra.get("ports") or ["22/tcp"]),
        "dockerArgs": pod.extra.get("dockerArgs", ""), "dockerId": None, "port": None,
        "lastStatusChange": _status_change(pod), "lastStartedAt": None, "machineId": _machine_id(pod),
        "podType": "INTERRUPTABLE" if interruptible else "RESERVED", "interruptible": interruptible,
        "uptimeSeconds": runtime["uptimeInSeconds"] if runtime else 0, "runtime": runtime, "locked": False,
        "templateId": pod.extra.get("templateId"), "networkVolumeId": None, "consumerUserId": "user_sim",
        "containerRegistryAuthId": None, "createdAt": None, "version": 0,
        "lowestBidPriceToResume": spot_price(row) if row and interruptible else None,
        "machine": {"podHostId": f"{pod.id}-64410065", "gpuDisplayName": row.display if row else pod.gpu,
                    "gpuTypeId": pod.gpu, "location": pod.region, "dataCenterId": pod.region,
                    "secureCloud": pod.extra.get("cloud", "SECURE") == "SECURE", "supportPublicIp": True,
                    "cpuCount": 8 * pod.gpu_count},
    }
