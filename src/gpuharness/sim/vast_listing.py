"""Vast instance lists: the deprecated v0 list and the keyset-paginated v1 list with its filters, under /vast.

The v1 list honours what `vastai show instances` sends: `select_filters`, `order_by`, `select_cols`, `limit` (at
most 25) and `after_token` (the previous page's `next_token`); each is a JSON text in the query string.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections import Counter
from typing import Any

from gpuharness.sim import vast_records
from gpuharness.sim.routing import SimRequest, SimResponse, json_response
from gpuharness.sim.state import SimState
from gpuharness.sim.vast_query import Column, QueryError, filters, list_order, ordered

PROVIDER = "vast"
PAGE_MAX = 25
DEFAULT_ORDER: list[dict[str, str]] = [{"col": "id", "dir": "asc"}]
#: where a light row keeps its instance until its page is rendered
INSTANCE = "__instance__"


def _rows(state: SimState) -> list[dict[str, Any]]:
    return [vast_records.render(i, state) for i in state.live(PROVIDER)]


def list_v0(req: SimRequest, state: SimState) -> SimResponse:
    """GET /api/v0/instances/ (deprecated, unpaginated)."""
    rows = _rows(state)
    return json_response(200, {"instances_found": len(rows), "instances": rows})


def _json_param(req: SimRequest, name: str, default: Any) -> Any:
    text = req.param(name)
    if text is None or text == "":
        return default
    try:
        return json.loads(text)
    except ValueError:
        raise QueryError(f"{name} is not JSON") from None


def _limit(req: SimRequest) -> int:
    text = req.param("limit")
    if text is None or text == "":
        return PAGE_MAX
    try:
        limit = int(text)
    except ValueError:
        raise QueryError(f"limit must be an integer, got {text!r}") from None
    if limit < 1:
        raise QueryError(f"limit must be at least 1, got {limit}")
    return min(limit, PAGE_MAX)


def token(order: list[tuple[str, bool]], row: dict[str, Any]) -> str:
    """The keyset token after `row`: its values in the sort columns, in the order they sort."""
    keys = [row.get(column) for column, _ in order]
    return base64.urlsafe_b64encode(json.dumps({"v": 2, "id": row["id"], "keys": keys}).encode()).decode()


def _after(text: str) -> dict[str, Any]:
    try:
        decoded = json.loads(base64.urlsafe_b64decode(text.encode()))
        if not isinstance(decoded, dict) or not isinstance(decoded.get("id"), int):
            raise ValueError(text)
        return decoded
    except (ValueError, TypeError, binascii.Error):
        raise QueryError("after_token is not valid") from None


def _position(rows: list[dict[str, Any]], after: dict[str, Any], order: list[tuple[str, bool]]) -> int:
    """Where the page after the token starts: after the row it names, or after where that row would sort."""
    for index, row in enumerate(rows):
        if row["id"] == after["id"]:
            return index + 1
    marker = dict(zip([c for c, _ in order], after.get("keys") or [], strict=False))
    marker["id"] = after["id"]
    placed = ordered([*rows, {**marker, "__marker__": True}], order, {"id": "num"})
    return next(i for i, r in enumerate(placed) if r.get("__marker__"))


def _query(req: SimRequest) -> tuple[dict[str, Any], list[tuple[str, bool]], list[str] | None]:
    select = _json_param(req, "select_filters", {})
    if not isinstance(select, dict):
        raise QueryError("select_filters must be an object")
    order = list_order(_json_param(req, "order_by", DEFAULT_ORDER))
    if not any(column == "id" for column, _ in order):
        order.append(("id", False))  # ids break ties: the keyset stays total
    cols = _json_param(req, "select_cols", None)
    if cols is not None and (not isinstance(cols, list) or not all(isinstance(c, str) for c in cols)):
        raise QueryError("select_cols must be a list of column names")
    return select, order, None if cols is None or "*" in cols else cols


def _matching(state: SimState, select: dict[str, Any], order: list[tuple[str, bool]],
              cols: list[str] | None) -> list[dict[str, Any]]:
    """The account's rows passing select, in order. Ordered by id alone and unfiltered (every list the clients send
    by default), rows stay light ({"id", "label", instance}) and only the page is rendered."""
    instances = state.live(PROVIDER)
    sample = vast_records.render(instances[0], state) if instances else None
    types: dict[str, Column] = vast_records.column_types(sample) if sample else {"id": "num"}
    tests = filters(select, types, strict=sample is not None)
    # [UNVERIFIED] an unknown filter, order or select column is refused (400 invalid_request)
    unknown = [c for c in [*(c for c, _ in order), *(cols or [])] if sample and c not in types]
    if unknown:
        raise QueryError(f"unknown column {unknown[0]!r}")
    if not select and all(column == "id" for column, _ in order):
        light = [{"id": int(i.id), "label": i.extra.get("label"), INSTANCE: i} for i in instances]
        return ordered(light, order, types)
    rows = [vast_records.render(i, state) for i in instances]
    return ordered([r for r in rows if all(test(r) for test in tests)], order, types)


def list_v1(req: SimRequest, state: SimState) -> SimResponse:
    """GET /api/v1/instances/: one page, filtered and ordered, with next_token when more remain."""
    try:
        select, order, cols = _query(req)
        limit = _limit(req)
        rows = _matching(state, select, order, cols)
        after = req.param("after_token")
        start = _position(rows, _after(after), order) if after else 0
    except QueryError as exc:
        code = "invalid_token" if "after_token" in str(exc) else "invalid_request"
        return json_response(400, {"success": False, "error": code, "msg": str(exc)})
    page = [vast_records.render(r[INSTANCE], state) if INSTANCE in r else r for r in rows[start:start + limit]]
    more = start + limit < len(rows)
    labels = Counter(r.get("label") or "" for r in rows)
    return json_response(200, {
        "success": True, "instances_found": len(page), "total_instances": len(rows),
        "label_counts": dict(sorted(labels.items())), "next_token": token(order, page[-1]) if more else None,
        "instances": [{c: r.get(c) for c in ["id", *cols]} if cols else r for r in page]})


def filters_route(req: SimRequest, state: SimState) -> SimResponse:
    """GET /api/v0/instances/filters/: the distinct (status, verification, gpu) of the account's instances."""
    seen = sorted({(r.get("actual_status") or "", r.get("verification") or "", r.get("gpu_name") or "")
                   for r in _rows(state)})
    return json_response(200, {"filters": [{"actual_status": s or None, "verification": v, "gpu_name": g}
                                           for s, v, g in seen]})
