"""The checkpoint's anchor outside the registry: an HMAC-SHA256 keyed by GPUHARNESS_CHECKPOINT_KEY.

Whoever can rewrite the ledger can also rewrite `audit/checkpoint.json` and recompute its prefix digest; they
cannot recompute its MAC without the key, which lives in the environment (never in a file under the registry).
The key is taken as a configured secret (core.secrets.remember), so no sink writes it.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from typing import Any, Final, NamedTuple

import orjson

from gpuharness.core import secrets

KEY_ENV: Final = "GPUHARNESS_CHECKPOINT_KEY"
#: The checkpoint field that holds the anchor: {"kind": "hmac-sha256", "mac": hex}.
FIELD: Final = "anchor"
KIND: Final = "hmac-sha256"
HMAC: Final = "hmac"
UNANCHORED: Final = "none: unanchored"


class Verdict(NamedTuple):
    """Which anchor the audit used (HMAC or UNANCHORED) and, when it does not hold, why (else None)."""

    used: str
    problem: str | None = None


NO_ANCHOR: Final = Verdict(UNANCHORED)
#: A key shorter than this is guessable (and one under secrets.MIN_VALUE_LENGTH is not even redacted).
STRONG_FROM: Final = 16


def key() -> bytes | None:
    """The checkpoint key from the environment, None when unset or empty."""
    value = os.environ.get(KEY_ENV, "")
    if not value:
        return None
    secrets.remember(value)
    return value.encode()


def weak_key() -> str | None:
    """Why the key in the environment is too weak to anchor anything, or None."""
    value = os.environ.get(KEY_ENV, "")
    if value and len(value) < STRONG_FROM:
        return f"{KEY_ENV} is {len(value)} characters long; use a random key of at least {STRONG_FROM}"
    return None


def mac(doc: dict[str, Any], secret: bytes) -> str:
    """The HMAC-SHA256 of a checkpoint document, its anchor field left out, keys sorted."""
    body = {k: v for k, v in doc.items() if k != FIELD}
    return hmac.new(secret, orjson.dumps(body, option=orjson.OPT_SORT_KEYS), hashlib.sha256).hexdigest()


def signed(doc: dict[str, Any]) -> dict[str, Any]:
    """The document with its anchor, when the key is set; unchanged (unanchored) otherwise."""
    secret = key()
    body = {k: v for k, v in doc.items() if k != FIELD}
    return body if secret is None else dict(body, **{FIELD: {"kind": KIND, "mac": mac(body, secret)}})


def verify(doc: dict[str, Any]) -> Verdict:
    """Check a loaded checkpoint document's anchor against the key in the environment."""
    secret = key()
    if secret is None:
        return Verdict(UNANCHORED)
    found = doc.get(FIELD)
    if not isinstance(found, dict) or found.get("kind") != KIND or not isinstance(found.get("mac"), str):
        return Verdict(HMAC, f"it carries no {KIND} anchor while {KEY_ENV} is set: it was written without the key "
                             "or its anchor was removed")
    if not hmac.compare_digest(found["mac"], mac(doc, secret)):
        return Verdict(HMAC, f"its {KIND} anchor does not match under {KEY_ENV}: the checkpoint was rewritten "
                             "after it was signed (or the key changed)")
    return Verdict(HMAC)
