"""A Vast instance as `show instance(s)` returns it: every field the CLI and SDK read, with realistic values."""

from __future__ import annotations

from typing import Any

from gpuharness.sim import vast_offers
from gpuharness.sim.state import SimInstance, SimState
from gpuharness.sim.vast_query import Column

#: hardware columns an instance takes from the offer it was rented from
FROM_OFFER = ("machine_id", "host_id", "bundle_id", "gpu_arch", "cpu_name", "cpu_cores", "cpu_cores_effective",
              "cpu_ram", "cuda_max_good", "driver_version", "compute_cap", "total_flops", "dlperf", "pci_gen",
              "pcie_bw", "has_avx", "inet_up", "inet_down", "inet_up_cost", "inet_down_cost", "storage_cost",
              "reliability2", "verification", "hosting_type", "direct_port_count", "os_version", "geolocation")
#: the column types of an instance row where its value does not say (None until set)
NULLABLE: dict[str, Column] = {
    "actual_status": "str", "label": "str", "ssh_host": "str", "ssh_port": "num", "public_ipaddr": "str",
    "gpu_util": "num", "gpu_temp": "num", "end_date": "num", "onstart": "str", "template_id": "num",
    "template_name": "str", "template_hash_id": "str", "disk_usage": "num", "disk_util": "num",
}


def offer_of(instance: SimInstance) -> dict[str, Any]:
    """The offer an instance was rented from (or one of its GPU, for instances made in bulk)."""
    offer = vast_offers.offer_by_id(int(instance.extra.get("offer_id") or 0))
    return offer if offer is not None else vast_offers.offer_for_gpu(instance.gpu)


def status_of(instance: SimInstance, state: SimState) -> str | None:
    """actual_status: null while provisioning, then loading, then running (or stopped)."""
    if instance.status != "pending":
        return instance.status
    halfway = instance.ready_at_mono - state.ready_delay_s / 2
    return None if state.clock() < halfway else "loading"


def _ports(instance: SimInstance) -> dict[str, Any]:
    host = instance.host if instance.status == "running" else None
    ports: dict[str, Any] = {}
    if host is not None:
        ports["22/tcp"] = [{"HostIp": "0.0.0.0", "HostPort": str(host.ssh_port)}]
        for private, public in sorted(host.http_ports.items()):
            ports[f"{private}/tcp"] = [{"HostIp": "0.0.0.0", "HostPort": str(public)}]
    return ports


def _lifecycle(instance: SimInstance, state: SimState) -> dict[str, Any]:
    actual = status_of(instance, state)
    intended = "stopped" if instance.status == "stopped" else "running"
    running = instance.status == "running"
    now_mono, now_wall = state.clock(), state.wall()
    uptime = (now_mono - instance.ready_at_mono) / 60 if running else 0.0
    image = instance.image
    return {
        "actual_status": actual, "intended_status": intended, "cur_state": intended, "next_state": intended,
        "status_msg": f"success, running {image}" if running else ("Stopped." if actual == "stopped"
                                                                   else f"Pulling image {image} ..."),
        "start_date": round(instance.created_wall, 3), "end_date": None,
        "duration": round(now_wall - instance.created_wall, 3), "uptime_mins": round(max(uptime, 0.0), 2),
        "client_run_time": round(max(uptime, 0.0) * 60, 1), "host_run_time": round(max(uptime, 0.0) * 60, 1),
        "gpu_util": 0.0 if running else None, "gpu_temp": 38.0 if running else None,
        "cpu_util": 0.01 if running else 0.0, "disk_usage": 2.1 if running else None,
        "disk_util": round(2.1 / float(instance.extra.get("disk") or 10.0), 4) if running else None,
    }


def render(instance: SimInstance, state: SimState) -> dict[str, Any]:
    """The full instance row of show instance(s) and the v1 list."""
    offer = offer_of(instance)
    host = instance.host if instance.status == "running" else None
    env = instance.extra.get("env") or {}
    disk = float(instance.extra.get("disk") or 10.0)
    row: dict[str, Any] = {key: offer.get(key) for key in FROM_OFFER}
    row["geolocation"] = instance.region
    row.update(_lifecycle(instance, state))
    row.update({
        "id": int(instance.id), "label": instance.extra.get("label"),
        "image_uuid": instance.image, "image_args": list(instance.extra.get("args") or []),
        "image_runtype": instance.extra.get("runtype") or "ssh",
        # docker options (-p ...) are port requests, not variables
        "extra_env": [[k, v] for k, v in env.items() if not k.startswith("-")],
        "onstart": instance.extra.get("onstart"), "jupyter_token": instance.extra.get("jupyter_token", ""),
        "template_id": None, "template_name": None, "template_hash_id": instance.extra.get("template_hash_id"),
        "ssh_host": host.ssh_host if host else None, "ssh_port": host.ssh_port if host else None,
        "ssh_idx": "5", "machine_dir_ssh_port": host.ssh_port if host else None,
        "public_ipaddr": host.ssh_host if host else None, "local_ipaddrs": "127.0.0.1\n",
        "ports": _ports(instance), "direct_port_start": 40_000, "direct_port_end": 40_019,
        "gpu_name": instance.gpu, "num_gpus": instance.gpu_count,
        "gpu_ram": instance.extra.get("gpu_ram") or offer["gpu_ram"],
        "gpu_totalram": (instance.extra.get("gpu_ram") or offer["gpu_ram"]) * instance.gpu_count,
        "dph_total": instance.cost_hr, "dph_base": round(instance.cost_hr * 0.9, 4),
        "is_bid": bool(instance.extra.get("is_bid")), "min_bid": offer["min_bid"],
        "disk_space": disk, "volume_info": [], "mem_limit": None, "mem_usage": None, "vmem_usage": None,
        "credit_balance": None, "time_remaining": "", "rentable": True, "logo": "/static/logos/nvidia.png",
    })
    return row


def column_types(row: dict[str, Any]) -> dict[str, Column]:
    """The type of each column of an instance row, for select_filters and order_by."""
    types: dict[str, Column] = {}
    for key, value in row.items():
        if key in NULLABLE:
            types[key] = NULLABLE[key]
        elif isinstance(value, bool):
            types[key] = "bool"
        elif isinstance(value, int | float):
            types[key] = "num"
        elif isinstance(value, str) or value is None:
            types[key] = "geo" if key == "geolocation" else "str"
        else:
            types[key] = "json"
    return types
