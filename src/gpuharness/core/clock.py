"""UTC timestamps: one format everywhere (RFC 3339 with a Z suffix)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Final

#: The wall clock: now, timezone-aware (injectable: tests pass a fake).
WallClock = Callable[[], datetime]


def utcnow() -> datetime:
    """The current time, timezone-aware in UTC."""
    return datetime.now(UTC)


def format_ts(moment: datetime) -> str:
    """Format a datetime as RFC 3339 UTC, e.g. 2026-11-30T20:03:51.123Z."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    text = moment.astimezone(UTC).isoformat(timespec="milliseconds")
    return text.replace("+00:00", "Z")


def parse_ts(text: str) -> datetime:
    """Parse an RFC 3339 timestamp; naive values are taken as UTC. A leap second (second 60, which RFC 3339 and
    the schemas' date-time allow and datetime does not) is read as the start of the next second."""
    normal = text.upper().replace("Z", "+00:00")
    try:
        moment = datetime.fromisoformat(normal)
    except ValueError:
        if normal[17:19] != "60":
            raise
        moment = datetime.fromisoformat(normal[:17] + "59" + normal[19:]) + timedelta(seconds=1)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment


def now_ts() -> str:
    """The current time, formatted."""
    return format_ts(utcnow())


#: How far in the future a timestamp written to the ledger or the journal may lie (clocks drift a little; more than
#: this is a wrong clock or a forged line): refused when written, flagged by the audit.
FUTURE_SKEW: Final = timedelta(minutes=5)


def future_field(fields: Mapping[str, Any], names: Iterable[str], now: datetime) -> tuple[str, str] | None:
    """The first of `names` whose timestamp lies more than FUTURE_SKEW after now, and why; None when none does (a
    value that is no timestamp is left to the schema)."""
    for name in names:
        value = fields.get(name)
        if not isinstance(value, str):
            continue
        try:
            moment = parse_ts(value)
        except ValueError:
            continue
        ahead = (moment - now).total_seconds()
        if ahead > FUTURE_SKEW.total_seconds():
            return name, (f"{name} {value} lies {ahead / 60:,.1f} min in the future (now {format_ts(now)}; at most "
                          f"{FUTURE_SKEW.total_seconds() / 60:g} min of clock skew is allowed)")
    return None
