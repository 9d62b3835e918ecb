"""Read loosely typed wire fields: numbers that arrive as strings, Go-style or epoch timestamps."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

from gpuharness.core.clock import format_ts
from gpuharness.providers.base import ProviderError


def number(value: Any) -> float | None:
    """A finite float from a number or a numeric string ("0.74"); None otherwise (NaN, Infinity and integers
    beyond a float are not prices)."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        found = float(value) if not isinstance(value, str) or len(value) <= 64 else math.nan
    except (ValueError, OverflowError):
        return None
    return found if math.isfinite(found) else None


def integer(value: Any, default: int = 1) -> int:
    found = number(value)
    return int(found) if found is not None else default


def timestamp(value: Any) -> str | None:
    """RFC 3339 UTC from ISO text, RunPod's Go time text ("2026-08-20 06:16:19.436 +0000 UTC") or epoch."""
    if value is None or value == "":
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = number(value)
        try:
            return None if seconds is None else format_ts(datetime.fromtimestamp(seconds, UTC))
        except (OverflowError, OSError, ValueError):  # beyond the calendar
            return None
    if not isinstance(value, str):
        return None
    text = value.strip()
    if text.endswith(" UTC"):
        text = text[:-4]
    for candidate in (text.replace("Z", "+00:00"), text):
        try:
            return format_ts(datetime.fromisoformat(candidate))
        except ValueError:
            pass
    for pattern in ("%Y-%m-%d %H:%M:%S.%f %z", "%Y-%m-%d %H:%M:%S %z"):
        try:
            return format_ts(datetime.strptime(text, pattern))
        except ValueError:
            pass
    return None


def mapping(body: Any, provider: str, what: str) -> dict[str, Any]:
    """The body as a JSON object, or a ProviderError naming what was expected."""
    if not isinstance(body, dict):
        raise ProviderError("server", f"unexpected response for {what}: expected a JSON object, got "
                            f"{type(body).__name__}", provider=provider)
    return body


def items(value: Any, provider: str, what: str) -> list[dict[str, Any]]:
    """A list of JSON objects (None counts as empty: Vast answers `"instances": null`)."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise ProviderError("server", f"unexpected response for {what}: expected a list of objects",
                            provider=provider)
    return value


def obj(value: Any) -> dict[str, Any]:
    """value if it is a JSON object, else an empty one (for optional nested objects)."""
    return value if isinstance(value, dict) else {}
