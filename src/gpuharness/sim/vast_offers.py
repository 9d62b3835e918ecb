"""Vast offers: the simulated marketplace and its search (POST /bundles/, PUT /search/asks/), under /vast."""

from __future__ import annotations

from typing import Any

from gpuharness.sim import catalog
from gpuharness.sim.routing import SimRequest, SimResponse, json_response
from gpuharness.sim.state import SimState
from gpuharness.sim.vast_query import Column, QueryError, filters, offer_order, ordered

OFFER_TYPES = ("on-demand", "bid", "reserved")
#: keys of a search body that are not filters
NOT_FILTERS = ("order", "type", "limit", "allocated_storage", "disable_bundling")

#: every column an offer has, with its type (numbers arrive as strings from the CLI)
COLUMNS: dict[str, Column] = {
    **dict.fromkeys(
        ("id", "ask_contract_id", "bundle_id", "machine_id", "host_id", "num_gpus", "gpu_ram", "gpu_total_ram",
         "dph_total", "dph_base", "min_bid", "reliability", "reliability2", "cuda_max_good", "inet_down",
         "inet_up", "inet_down_cost", "inet_up_cost", "disk_space", "disk_bw", "direct_port_count",
         "cpu_cores", "cpu_cores_effective", "cpu_ram", "cpu_ghz", "compute_cap", "total_flops", "dlperf",
         "dlperf_per_dphtotal", "flops_per_dphtotal", "score", "gpu_mem_bw", "gpu_max_power", "gpu_max_temp",
         "gpu_frac", "pci_gen", "pcie_bw", "bw_nvlink", "storage_cost", "duration", "end_date",
         "hosting_type", "cluster_id", "discounted_dph_total"), "num"),
    **dict.fromkeys(("rentable", "rented", "verified", "external", "datacenter", "static_ip", "has_avx",
                     "gpu_display_active", "vms_enabled", "is_bid"), "bool"),
    **dict.fromkeys(("gpu_name", "gpu_arch", "cpu_arch", "cpu_name", "ubuntu_version", "verification",
                     "public_ipaddr", "mobo_name", "disk_name", "os_version"), "str"),
    "driver_version": "version",
    "geolocation": "geo",
}


def gpu_ram(row: catalog.CatalogGpu) -> int:
    """Vast's gpu_ram for a catalog GPU: MiB, as nvidia-smi reports the card."""
    return row.gpu.memory_mib


def _hardware(row: catalog.CatalogGpu) -> tuple[int, float, float, float]:
    """What Vast lists of the card, from its class: compute capability x100, fp32 TFLOP/s, memory GB/s, power W."""
    gpu = row.gpu
    if gpu.compute_capability is None or gpu.fp32_tflops is None or gpu.memory_bandwidth_gbps is None \
            or gpu.power_w is None:
        raise KeyError(f"{gpu.name} lacks a figure Vast lists (gpuharness.gpu.classes)")
    major, minor = gpu.compute_capability
    return major * 100 + minor * 10, float(gpu.fp32_tflops), float(gpu.memory_bandwidth_gbps), float(gpu.power_w)


def offer_of(row_index: int, row: catalog.CatalogGpu, price_index: int, price: float, count: int) -> dict[str, Any]:
    """The offer of `count` cards of a catalog row at one of its prices, as Vast lists it."""
    offer_id = 5_000_000 + row_index * 100 + price_index * 10 + count
    cap, flops, bandwidth, power = _hardware(row)
    mib = gpu_ram(row)
    dph = round(price * count, 4)
    dlperf = round(flops * count * 0.9, 2)
    machine = 170 + row_index * 3 + price_index
    return {
        "id": offer_id, "ask_contract_id": offer_id, "bundle_id": offer_id - 1_000_000, "machine_id": machine,
        "host_id": 40_000 + machine, "gpu_name": row.display, "gpu_arch": "nvidia", "num_gpus": count,
        "gpu_ram": mib, "gpu_total_ram": mib * count, "gpu_frac": count / 8, "gpu_mem_bw": bandwidth,
        "gpu_max_power": power, "gpu_max_temp": 83.0, "gpu_display_active": False, "compute_cap": cap,
        "total_flops": round(flops * count, 1), "dlperf": dlperf, "dlperf_per_dphtotal": round(dlperf / dph, 2),
        "flops_per_dphtotal": round(flops * count / dph, 2), "score": round(dlperf / dph * 0.99, 2),
        "dph_total": dph, "dph_base": round(dph * 0.9, 4), "min_bid": round(dph * 0.5, 4),
        "storage_cost": 0.1, "inet_up_cost": 0.0, "inet_down_cost": 0.0,
        "reliability": 0.995, "reliability2": 0.995, "cuda_max_good": 12.8, "driver_version": "570.86.15",
        "cpu_name": "AMD EPYC 7543 32-Core Processor", "cpu_arch": "amd64", "cpu_cores": 64,
        "cpu_cores_effective": 8.0 * count, "cpu_ram": 64_000 * count, "cpu_ghz": 2.8, "has_avx": True,
        "mobo_name": "H12SSL-i", "pci_gen": 4.0, "pcie_bw": 24.5, "bw_nvlink": 0.0,
        "disk_space": 500.0, "disk_bw": 3000.0, "disk_name": "Samsung SSD 980 PRO 2TB",
        "geolocation": "Norway, NO" if price_index else "Texas, US", "inet_down": 940.0, "inet_up": 880.0,
        "direct_port_count": 20, "public_ipaddr": "127.0.0.1", "static_ip": True,
        "ubuntu_version": "22.04", "os_version": "22.04", "verification": "verified", "verified": True,
        "external": False, "datacenter": price_index == 0, "hosting_type": 1 if price_index == 0 else 0,
        "vms_enabled": False, "cluster_id": None, "duration": 30 * 86_400.0, "end_date": 4_102_444_800.0,
        "rentable": True, "rented": False, "is_bid": False,
    }


def _offers() -> list[dict[str, Any]]:
    offers: list[dict[str, Any]] = []
    for row_index, row in enumerate(catalog.CATALOG):
        for price_index, price in enumerate(row.vast_prices):
            for count in (1, 2) if price_index == 0 else (1,):
                offers.append(offer_of(row_index, row, price_index, price, count))
    return offers


OFFERS: tuple[dict[str, Any], ...] = tuple(_offers())


def offer_by_id(offer_id: int) -> dict[str, Any] | None:
    """The offer with this id, or None."""
    return next((o for o in OFFERS if o["id"] == offer_id), None)


def offer_for_gpu(gpu_name: str) -> dict[str, Any]:
    """An offer of this GPU (the hardware behind an instance made without one)."""
    return next((o for o in OFFERS if o["gpu_name"] == gpu_name), OFFERS[0])


def _priced(offer: dict[str, Any], offer_type: str) -> dict[str, Any]:
    # [UNVERIFIED] how bid and reserved searches price an offer (the client only displays these fields)
    if offer_type == "bid":
        # interruptible: what you pay is your bid, at least the current minimum
        return {**offer, "is_bid": True, "dph_total": offer["min_bid"]}
    if offer_type == "reserved":
        return {**offer, "discount_rate": 0.4, "discounted_dph_total": round(offer["dph_total"] * 0.6, 4)}
    return dict(offer)


def search(query: dict[str, Any]) -> list[dict[str, Any]]:
    """Offers matching a search body, ordered and limited; QueryError for what the server refuses."""
    offer_type = query.get("type", "on-demand")
    if offer_type not in OFFER_TYPES:
        raise QueryError(f"type must be one of {', '.join(OFFER_TYPES)}, got {offer_type!r}")
    # [UNVERIFIED] a filter on a column the simulator does not know is ignored, as the CLI only warns about it
    tests = filters(query, COLUMNS, skip=NOT_FILTERS)
    found = [_priced(o, offer_type) for o in OFFERS]
    found = [o for o in found if all(test(o) for test in tests)]
    found = ordered(found, offer_order(query.get("order")) or [("score", True)], COLUMNS)
    limit = query.get("limit")
    if limit is not None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise QueryError(f"limit must be a non-negative integer, got {limit!r}")
        found = found[:limit]
    return found


def _answer(query: Any) -> SimResponse:
    if not isinstance(query, dict):
        return json_response(400, {"success": False, "error": "invalid_args", "msg": "expected a JSON object"})
    try:
        return json_response(200, {"offers": search(query)})
    except QueryError as exc:
        return json_response(400, {"success": False, "error": "invalid_args", "msg": str(exc)})


def search_offers(req: SimRequest, state: SimState) -> SimResponse:
    """POST /api/v0/bundles/: the body is the query."""
    return _answer(req.body if req.body is not None else {})


def search_asks(req: SimRequest, state: SimState) -> SimResponse:
    """PUT /api/v0/search/asks/ (`search offers --new`): {"select_cols": ["*"], "q": query}."""
    body = req.body if isinstance(req.body, dict) else {}
    return _answer(body.get("q", {}))


def gpu_names(req: SimRequest, state: SimState) -> SimResponse:
    """GET /api/v0/gpu_names/unique/ (read without a key, when the CLI starts)."""
    return json_response(200, {"gpu_names": sorted({o["gpu_name"] for o in OFFERS})})
