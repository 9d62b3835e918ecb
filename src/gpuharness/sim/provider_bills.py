"""The simulated providers' own bills, from the simulator's accrual (SimInstance.accrued_by_day), in the shapes the
official clients read:

- RunPod pod billing history, `GET /v2/billing/pods` (`{"records": [...], "metadata": {...}}`, as runpodctl's
  `billing pods` reads it) and the retired v1 route `GET /v1/billing/pods` (a bare array), under /runpod;
- Vast.ai `show invoices` (`GET /api/v0/users/me/invoices`) and `show invoices-v1 --charges`
  (`GET /api/v0/charges/`), as pip `vastai` 1.9 (vastai/api/billing.py) reads them, under /vast.

Every bucket is a UTC day. Terminated instances stay on the bill. Each handler takes the provider whose instances
it bills (its wire binds it).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from gpuharness.sim.routing import SimRequest, SimResponse, json_response
from gpuharness.sim.state import SimInstance, SimState

DAY_S = 86_400
#: what the RunPod route answers without startTime: the last 30 days
DEFAULT_WINDOW_S = 30 * DAY_S


def _day_start(day: str) -> float:
    return datetime.strptime(day, "%Y-%m-%d").replace(tzinfo=UTC).timestamp()


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def day_rows(state: SimState, provider: str, start: float, end: float) -> list[tuple[SimInstance, str, float]]:
    """(instance, UTC day, amount) for every day with a charge whose bucket meets [start, end), oldest first."""
    rows = [(instance, day, amount) for instance in state.accruals(provider)
            for day, amount in sorted(instance.accrued_by_day.items())
            if amount > 0 and _day_start(day) < end and _day_start(day) + DAY_S > start]
    return sorted(rows, key=lambda row: (row[1], row[0].id))


# RunPod


def _rfc3339(req: SimRequest, name: str, default: float) -> float | None:
    text = req.param(name)
    if text is None:
        return default
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


def _runpod_query(req: SimRequest, state: SimState) -> tuple[float, float] | SimResponse:
    from gpuharness.sim.providers_runpod import problem

    if req.param("bucketSize", "day") != "day":
        return problem(400, "Bad Request", "the simulator buckets pod billing by day only (bucketSize=day)")
    if req.param("grouping", "podId") not in ("podId", "gpuTypeId"):
        return problem(400, "Bad Request", "grouping must be podId or gpuTypeId")
    now = state.wall()
    start, end = _rfc3339(req, "startTime", now - DEFAULT_WINDOW_S), _rfc3339(req, "endTime", now)
    if start is None or end is None:
        return problem(400, "Bad Request", "startTime and endTime are RFC 3339 times (2026-12-01T00:00:00Z)")
    return start, end


def _pod_records(req: SimRequest, state: SimState, provider: str, start: float, end: float) -> list[dict[str, Any]]:
    pod_id, by_gpu = req.param("podId"), req.param("grouping") == "gpuTypeId"
    grouped: dict[tuple[str, str], dict[str, Any]] = {}
    for instance, day, amount in day_rows(state, provider, start, end):
        if pod_id is not None and instance.id != pod_id:
            continue
        key = (day, instance.gpu if by_gpu else instance.id)
        record = grouped.setdefault(key, {"startTime": _iso(_day_start(day)), "endTime": _iso(_day_start(day) + DAY_S),
                                          **({"gpuTypeId": instance.gpu} if by_gpu else {"podId": instance.id}),
                                          "totalAmount": 0.0, "gpuAmount": 0.0, "cpuAmount": 0.0, "diskAmount": 0.0,
                                          "timeBilledMs": 0})
        disk = instance.storage_by_day.get(day, 0.0)
        record["totalAmount"] = round(record["totalAmount"] + amount, 6)
        record["diskAmount"] = round(record["diskAmount"] + disk, 6)
        record["gpuAmount"] = round(record["totalAmount"] - record["diskAmount"], 6)
        gpu_hours = (amount - disk) / instance.cost_hr if instance.cost_hr else 0.0
        record["timeBilledMs"] += int(gpu_hours * 3_600_000)
    return list(grouped.values())


def runpod_pod_billing(req: SimRequest, state: SimState, provider: str) -> SimResponse:
    """GET /v2/billing/pods?startTime&endTime&bucketSize=day&grouping=podId|gpuTypeId&podId."""
    window = _runpod_query(req, state)
    if isinstance(window, SimResponse):
        return window
    records = _pod_records(req, state, provider, *window)
    metadata = {"startTime": _iso(window[0]), "endTime": _iso(window[1]), "bucketSize": "day",
                "grouping": req.param("grouping", "podId"), "recordCount": len(records),
                "totalAmount": round(sum(r["totalAmount"] for r in records), 6)}
    return json_response(200, {"records": records, "metadata": metadata})


def runpod_pod_billing_v1(req: SimRequest, state: SimState, provider: str) -> SimResponse:
    """GET /v1/billing/pods: the retired v1 shape, a bare array of {time, amount, timeBilledMs, podId}."""
    window = _runpod_query(req, state)
    if isinstance(window, SimResponse):
        return window
    return json_response(200, [{"time": r["startTime"], "amount": r["totalAmount"], "timeBilledMs": r["timeBilledMs"],
                                **{k: r[k] for k in ("podId", "gpuTypeId") if k in r}}
                               for r in _pod_records(req, state, provider, *window)])


# Vast.ai


def _number(req: SimRequest, name: str, default: float) -> float | None:
    text = req.param(name)
    if text is None:
        return default
    try:
        return float(text)
    except ValueError:
        return None


def vast_invoices(req: SimRequest, state: SimState, provider: str) -> SimResponse:
    """GET /api/v0/users/me/invoices?owner=me&sdate&edate&inc_charges -> {"invoices": [...], "current": {...}}:
    one `charge` row per instance and UTC day, stamped at the last moment it accrued that day."""
    now = state.wall()
    start, end = _number(req, "sdate", now - DAY_S), _number(req, "edate", now)
    if start is None or end is None:
        return json_response(400, {"success": False, "error": "invalid_args", "msg": "sdate and edate are epochs"})
    rows: list[dict[str, Any]] = []
    if req.param("inc_charges", "true") != "false":
        for instance, day, amount in day_rows(state, provider, start, end):
            hours = amount / instance.cost_hr if instance.cost_hr else 0.0
            rows.append({"id": len(rows) + 1, "type": "charge", "instance_id": int(instance.id),
                         "description": f"Instance {instance.id} GPU charge: {hours:.4f} hours at "
                                        f"${instance.cost_hr:g}/hr",
                         "quantity": round(hours, 6), "rate": instance.cost_hr, "amount": round(amount, 6),
                         "timestamp": round(min(_day_start(day) + DAY_S - 1, now), 3)})
    total = round(sum(r["amount"] for r in rows), 6)
    return json_response(200, {"invoices": rows, "current": {"charges": total, "service_fee": 0.0, "total": total}})


def _charges_window(req: SimRequest, state: SimState) -> tuple[float, float] | None:
    try:
        filters = json.loads(req.param("select_filters") or "{}")
        day = filters.get("day") or {}
        now = state.wall()
        return float(day.get("gte", now - 7 * DAY_S)), float(day.get("lte", now))
    except (ValueError, TypeError, AttributeError):
        return None


def vast_charges(req: SimRequest, state: SimState, provider: str) -> SimResponse:
    """GET /api/v0/charges/?select_filters={"day":{"gte","lte"}}&limit&after_token: `show invoices-v1 --charges`."""
    window = _charges_window(req, state)
    limit = _number(req, "limit", 20)
    if window is None or limit is None or limit < 1:
        return json_response(400, {"success": False, "error": "invalid_args", "msg": "bad select_filters or limit"})
    results = [{"type": "instance", "source": instance.id, "amount": round(amount, 6),
                "description": f"{instance.gpu} x{instance.gpu_count} at ${instance.cost_hr:g}/hr",
                "start": _day_start(day), "end": _day_start(day) + DAY_S - 1, "items": [], "metadata": {}}
               for instance, day, amount in day_rows(state, provider, *window)]
    if req.param("latest_first") == "true":
        results.reverse()
    offset = int(_number(req, "after_token", 0) or 0)
    page = results[offset:offset + min(int(limit), 100)]
    after = offset + len(page)
    return json_response(200, {"results": page, "count": len(page), "total": len(results),
                               "next_token": str(after) if after < len(results) else None})

