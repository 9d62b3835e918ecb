"""Specifications of gpuharness.core.schema: strict known fields, warnings for unknown ones, real formats."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

import mutants
import pytest
from checkout import ROOT
from jsonschema import Draft202012Validator

from gpuharness.core import schema


def test_format_checker_really_checks_date_time() -> None:
    assert "date-time" in Draft202012Validator.FORMAT_CHECKER.checkers
    assert "date-time" in schema.validator("job").format_checker.checkers


def test_bad_date_time_is_an_error_naming_the_field(job_line) -> None:
    errors, _ = schema.check("job", job_line(ts="yesterday at noon"))
    assert [e.json_path for e in errors] == ["$.ts"]
    assert "date-time" in errors[0].message


def test_bad_date_time_fails_the_fast_validator_too(job_line) -> None:
    assert schema.is_valid_fast("job", job_line())
    assert not schema.is_valid_fast("job", job_line(started_at="2026-13-45T99:00:00Z"))


def test_unknown_field_is_a_warning_not_an_error(job_line) -> None:
    errors, warnings = schema.check("job", job_line(priority="high"))
    assert errors == []
    assert len(warnings) == 1 and "priority" in warnings[0].message and "unknown field" in warnings[0].message
    assert schema.is_valid_fast("job", job_line(priority="high"))


def test_unknown_nested_field_is_a_warning_with_its_path(deployment_item) -> None:
    doc = {"schema_version": 1, "deployments": [deployment_item(ssh={"host": "h", "port": 22, "colour": "red"})]}
    errors, warnings = schema.check("deployments", doc)
    assert errors == []
    assert [w.json_path for w in warnings] == ["$.deployments[0].ssh"]


def test_known_field_of_wrong_type_is_an_error(deployment_item) -> None:
    doc = {"schema_version": 1, "deployments": [deployment_item(cost_hr="0.70")]}
    errors, _ = schema.check("deployments", doc)
    assert [e.json_path for e in errors] == ["$.deployments[0].cost_hr"]
    assert "number" in errors[0].message


def test_bad_enum_is_an_error(job_line) -> None:
    errors, _ = schema.check("job", job_line(status="done"))
    assert [e.json_path for e in errors] == ["$.status"]


def test_missing_required_field_is_an_error(job_line) -> None:
    record = job_line()
    del record["deployment_id"]
    errors, _ = schema.check("job", record)
    assert errors and "deployment_id" in errors[0].message


def test_bad_shutdown_rule_reports_the_inner_reason(deployment_item) -> None:
    doc = {"schema_version": 1, "deployments": [deployment_item(shutdown_rule={"idle_minutes": -5})]}
    errors, _ = schema.check("deployments", doc)
    assert errors and errors[0].json_path.startswith("$.deployments[0].shutdown_rule")
    assert "-5" in errors[0].message


@pytest.mark.parametrize("name", schema.SCHEMA_NAMES)
def test_every_packaged_schema_is_valid_2020_12(name: str) -> None:
    loaded = schema.load_schema(name)
    assert loaded["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    Draft202012Validator.check_schema(loaded)


@pytest.mark.parametrize("name", ["providers", "machines", "deployments", "models", "workflows",
                                  "connections", "policy"])
def test_every_whole_file_schema_requires_schema_version_1(name: str) -> None:
    loaded = schema.load_schema(name)
    assert "schema_version" in loaded["required"]
    errors, _ = schema.check(name, {"schema_version": 2})
    assert any(e.json_path == "$.schema_version" for e in errors)


def test_unknown_schema_name_is_refused() -> None:
    with pytest.raises(KeyError):
        schema.load_schema("jobs")


def test_schema_files_are_packaged_as_json() -> None:
    names = sorted(p.name for p in resources.files("gpuharness.core.schemas").iterdir() if p.name.endswith(".json"))
    assert names == sorted(f"{n}.schema.json" for n in schema.SCHEMA_NAMES)
    for name in names:
        json.loads(resources.files("gpuharness.core.schemas").joinpath(name).read_text("utf-8"))


# --- the compiled validator decides "valid" for check(): it must never pass what jsonschema would report ----------

_EDGE_STRINGS = ["2026-11-01T09:05:28.695Z", "2026-11-01 09:05:28Z", "2026-11-01T09:05:28+0100", "2026-02-30T00:00:00Z",
                 "2026-12-31T23:59:60Z", "0000-01-01T00:00:00Z", "2026-11-01t09:05:28z", "", "x", "-1", "running",
                 "https://example.com/a", "not a uri", "a" * 70, "0" * 64]


def _leap_second(error: Any) -> bool:
    """The one known difference: RFC 3339 (and so the schemas, as jsonschema-rs reads them) allows a leap second,
    23:59:60; jsonschema's date-time checker refuses it. The project follows RFC 3339 (clock.parse_ts reads it as the
    next second's start)."""
    return error.validator == "format" and isinstance(error.instance, str) and "T23:59:60" in error.instance


def test_a_leap_second_is_a_date_time_as_rfc_3339_says() -> None:
    assert schema.strict_validator("transition").is_valid(
        {"ts": "2026-12-31T23:59:60Z", "deployment": "d", "from": "ready", "to": "running"})
    assert not schema.strict_validator("transition").is_valid(
        {"ts": "2026-12-31T12:00:60Z", "deployment": "d", "from": "ready", "to": "running"})


def _documents() -> list[tuple[str, object]]:

    root = ROOT / "fixtures" / "demo" / ".pi" / "gpu"
    docs: list[tuple[str, object]] = []
    for name in ("providers", "machines", "deployments", "models", "workflows", "connections", "policy"):
        docs.append((name, json.loads((root / f"{name}.json").read_text())))
    with open(root / "jobs.jsonl") as handle:
        docs += [("job", json.loads(next(handle))) for _ in range(3)]
    with open(root / "transitions.jsonl") as handle:
        docs.append(("transition", json.loads(next(handle))))
    return docs


def test_year_0000_is_refused_by_the_compiled_validator_as_by_jsonschema() -> None:
    line = {"ts": "0000-01-01T00:00:00Z", "deployment": "d", "from": "ready", "to": "running"}
    assert not schema.validator("transition").is_valid(line)
    assert not schema.strict_validator("transition").is_valid(line)
    assert not schema.fast_validator("transition").is_valid(line)


def test_the_compiled_validator_never_passes_what_jsonschema_reports() -> None:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    documents = _documents()

    @settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.data())
    def check(data: st.DataObject) -> None:
        name, document = data.draw(st.sampled_from(documents))
        values = (st.none() | st.booleans() | st.integers(-3, 10**20)
                  | st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from(_EDGE_STRINGS)
                  | st.text(max_size=6) | st.just({}) | st.just([]))
        keys = st.sampled_from(["extra", "status", "ts", "id", "cost_hr"])
        mutant = document
        for _ in range(data.draw(st.integers(1, 3))):
            mutant = data.draw(mutants.mutant(mutant, values, keys))
        if schema.strict_validator(name).is_valid(mutant):
            reported = [e.message for e in schema.validator(name).iter_errors(mutant) if not _leap_second(e)]
            assert reported == [], f"{name}: jsonschema reports {reported} on a document jsonschema-rs passes"

    check()
    for name, document in documents:  # and the fixtures themselves pass both
        assert schema.strict_validator(name).is_valid(document), name
        assert schema.check(name, document) == ([], [])
