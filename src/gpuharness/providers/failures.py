"""Classify a provider's error answer by status AND text: capacity, balance, auth, rate limit..."""

from __future__ import annotations

import json
from typing import Any

from gpuharness.core import secrets
from gpuharness.core.json_text import loads_outside
from gpuharness.providers.base import ErrorKind, ProviderError

# Capacity refusals arrive as 500 (RunPod), 400/404/410 (RunPod v2, Vast) or 503: match the words.
CAPACITY_TEXT = (
    "supply_constraint", "no instances currently available", "no longer any instances available",
    "does not have the resources", "not enough free gpus", "no_such_ask", "out of stock",
    "insufficient capacity", "no capacity", "spot pods are no longer offered", "no workers available",
)
BALANCE_TEXT = ("balance is too low", "insufficient funds", "add funds", "insufficient balance",
                "billing method", "recharge")
AUTH_TEXT = ("auth_error", "invalid user key", "unauthenticated", "invalid api key", "unauthorized",
             "missing or invalid api key")
RATE_TEXT = ("too frequent", "rate limit", "too many requests", "too many attempts", "rate_limit_exceeded")

_MESSAGE_KEYS = ("error", "msg", "message", "detail", "title")


def redact(text: str, *values: str | None) -> str:
    """Replace every secret in text with *** (core.secrets' one redactor: these values and the configured ones in
    any form; values shorter than MIN_VALUE_LENGTH are left)."""
    return secrets.redact(text, values, mask="***")


def message_of(body_text: str) -> str:
    """The human message inside an error body (JSON error/msg/message/detail, GraphQL errors[], or text)."""
    try:
        body: Any = loads_outside(body_text, what="the error body")
    except ValueError:
        return " ".join(body_text.split())[:300] or "(empty body)"
    parts: list[str] = []
    if isinstance(body, dict):
        errors = body.get("errors")
        if isinstance(errors, list) and errors and isinstance(errors[0], dict):
            parts.append(str(errors[0].get("message", "")))
            code = (errors[0].get("extensions") or {}).get("code")
            if code:
                parts.append(f"[{code}]")
        for key in _MESSAGE_KEYS:
            value = body.get(key)
            if isinstance(value, str) and value and value not in parts:
                parts.append(value)
    text = " ".join(p for p in parts if p) or json.dumps(body)[:300]
    return " ".join(text.split())[:300]


def kind_of(status: int, text: str) -> ErrorKind:
    """The error kind from the status code and the body text (text wins where providers misuse codes)."""
    lowered = text.lower()
    if status == 402 or any(t in lowered for t in BALANCE_TEXT):
        return "balance"
    if any(t in lowered for t in CAPACITY_TEXT):
        return "capacity"
    if status in (401, 403) or any(t in lowered for t in AUTH_TEXT):
        return "auth"
    if status == 429 or any(t in lowered for t in RATE_TEXT):
        return "rate_limited"
    if status == 404:
        return "not_found"
    if 400 <= status < 500:
        return "invalid"
    return "server"


_ADVICE: dict[str, str] = {
    "capacity": "no capacity for this request; try another GPU type, region or provider (not retried blindly)",
    "balance": "the account cannot pay; add funds or set up billing at the provider, then retry",
    "rate_limited": "rate limited by the provider",
    "not_found": "not found",
    "invalid": "the provider refused the request as invalid",
    "server": "the provider failed on its side",
}


def classify(provider: str, status: int, body_text: str, *, credential_env: str | None = None,
             retry_after: float | None = None, secret: str | None = None) -> ProviderError:
    """A ProviderError with one actionable line; the key is never part of it."""
    detail = message_of(redact(body_text, secret))  # redact first: a cut key is no longer found
    kind = kind_of(status, body_text)
    if kind == "auth":
        where = f"the key in ${credential_env}" if credential_env else "the API key"
        advice = f"{where} was refused; check it is current, complete and has the needed scope"
    else:
        advice = _ADVICE[kind]
        if kind == "rate_limited" and retry_after is not None:
            advice += f" (Retry-After {retry_after:g}s)"
    return ProviderError(kind, f"HTTP {status}: {advice}: {detail}", provider=provider, status=status,
                         retry_after=retry_after)
