"""Specifications of the one timestamp format: RFC 3339, UTC, Z suffix."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from jsonschema import Draft202012Validator

from gpuharness.core.clock import format_ts, now_ts, parse_ts, utcnow


def test_format_is_utc_with_milliseconds_and_z() -> None:
    assert format_ts(datetime(2026, 11, 30, 20, 3, 51, 123456, tzinfo=UTC)) == "2026-11-30T20:03:51.123Z"


def test_other_offsets_are_converted_to_utc() -> None:
    new_york = timezone(timedelta(hours=-5))
    assert format_ts(datetime(2026, 11, 30, 23, 30, tzinfo=new_york)) == "2026-12-01T04:30:00.000Z"


def test_naive_datetimes_are_taken_as_utc() -> None:
    assert format_ts(datetime(2026, 1, 2, 3, 4, 5)) == "2026-01-02T03:04:05.000Z"
    assert parse_ts("2026-01-02T03:04:05").tzinfo is not None


def test_parse_round_trips_and_accepts_z_and_offsets() -> None:
    moment = datetime(2026, 11, 30, 20, 3, 51, 123000, tzinfo=UTC)
    assert parse_ts(format_ts(moment)) == moment
    assert parse_ts("2026-11-30T15:03:51.123-05:00") == moment
    assert parse_ts("2026-11-30T20:03:51.123z") == moment


def test_now_is_aware_and_its_text_passes_the_schema_date_time_check() -> None:
    assert utcnow().tzinfo is not None
    assert Draft202012Validator.FORMAT_CHECKER.conforms(now_ts(), "date-time")


def test_a_leap_second_parses_as_the_next_second() -> None:
    assert format_ts(parse_ts("2016-12-31T23:59:60Z")) == "2017-01-01T00:00:00.000Z"
    assert format_ts(parse_ts("2016-12-31t23:59:60.250z")) == "2017-01-01T00:00:00.250Z"
    with pytest.raises(ValueError):
        parse_ts("2016-12-31T23:59:61Z")
