"""The providers' own billing records read as Charges (core.bill): one instance, one UTC day, an amount.

- RunPod pod billing history, `GET /v2/billing/pods?bucketSize=day&grouping=podId&startTime&endTime`: runpodctl's
  `billing pods` reads `{"records": [{"startTime", "podId", "totalAmount", ...}], "metadata": {...}}`; the retired
  v1 route (rest.runpod.io/v1/billing/pods) answered a bare array of `{"time", "podId", "amount", ...}`. Both read.
- Vast.ai `show invoices`, `GET /api/v0/users/me/invoices?owner=me&sdate&edate&inc_charges=true` (pip vastai 1.9,
  vastai/api/billing.py): `{"invoices": [{"type": "charge", "instance_id", "amount", "timestamp", ...}],
  "current": {...}}`; rows of other types (payments) are not charges.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from gpuharness.core.bill import DAY_LEN, Charge
from gpuharness.core.clock import format_ts
from gpuharness.providers import fields

RUNPOD_BILLING = "/v2/billing/pods"
VAST_INVOICES = "/api/v0/users/me/invoices"


def runpod_query(since: datetime, until: datetime) -> dict[str, str]:
    """The query runpodctl sends for `billing pods --bucket-size day --grouping podId --start-time --end-time`."""
    return {"bucketSize": "day", "grouping": "podId", "startTime": format_ts(since), "endTime": format_ts(until)}


def runpod_charges(provider: str, body: Any) -> list[Charge]:
    """Pod billing records (v2's `records`, or v1's bare array) as Charges; records without a pod are left out."""
    what = f"GET {RUNPOD_BILLING}"
    rows = body if isinstance(body, list) else fields.mapping(body, provider, what).get("records")
    found: list[Charge] = []
    for row in fields.items(rows, provider, what):
        day = fields.timestamp(row.get("startTime", row.get("time")))
        amount = fields.number(row.get("totalAmount", row.get("amount")))
        if row.get("podId") and day and amount is not None:
            found.append(Charge(provider, str(row["podId"]), day[:DAY_LEN], amount))
    return found


def vast_query(since: datetime, until: datetime) -> dict[str, Any]:
    """The query `vastai show invoices` sends (its sdate/edate are epoch seconds)."""
    return {"owner": "me", "sdate": since.timestamp(), "edate": until.timestamp(), "inc_charges": "true"}


def vast_charges(provider: str, body: Any) -> list[Charge]:
    """The `charge` rows of Vast's invoices as Charges, dated by their timestamp's UTC day."""
    what = f"GET {VAST_INVOICES}"
    rows = fields.mapping(body, provider, what).get("invoices")
    found: list[Charge] = []
    for row in fields.items(rows, provider, what):
        day = fields.timestamp(row.get("timestamp"))
        amount = fields.number(row.get("amount"))
        if row.get("type") == "charge" and row.get("instance_id") is not None and day and amount is not None:
            found.append(Charge(provider, str(row["instance_id"]), day[:DAY_LEN], abs(amount)))
    return found
