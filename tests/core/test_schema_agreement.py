"""The two validators agree on a pattern: jsonschema-rs (the verdict) reads a JSON Schema pattern as ECMAScript
does, where `$` matches only at the very end; jsonschema (the explanation) uses Python's `re.search`, where `$` also
matches before a trailing newline. A document the compiled validator refuses is refused by `schema.check` with its
place, whatever jsonschema makes of it; and a requested deployment id (`core.deployment.id_refusal`) is refused
exactly where the record holding it would be."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from gpuharness.core import schema
from gpuharness.core.deployment import id_refusal

ID_ALPHABET = "AZaz09_.-\n\r\t é/\u0660\u2028\ud800"


def deployments(dep_id: str) -> dict[str, Any]:
    """A deployments.json holding one valid record but for its id (built here: a `from conftest import` collides
    with tests/audit/conftest.py under xdist)."""
    return {"schema_version": 1, "deployments": [{"id": dep_id, "provider": "vast", "status": "ready",
                                                  "cost_hr": 0.7, "created_at": "2026-11-02T09:00:00Z"}]}


def test_an_id_ending_in_a_newline_is_refused_where_its_record_is_checked():
    errors, _ = schema.check("deployments", deployments("dep_a\n"))
    assert [issue.json_path for issue in errors] == ["$.deployments[0].id"], errors
    assert "does not match" in errors[0].message
    assert id_refusal("dep_a\n") is not None


@settings(max_examples=300, deadline=None, database=None)
@given(st.text(alphabet=ID_ALPHABET, max_size=12) | st.from_regex(r"\A[A-Za-z0-9_.-]{1,8}\n?\Z"))
def test_the_id_refusal_the_check_and_the_compiled_validator_agree(dep_id):
    document = deployments(dep_id)
    errors, _ = schema.check("deployments", document)
    refused_by_check = any(issue.json_path == "$.deployments[0].id" for issue in errors)
    assert refused_by_check == (id_refusal(dep_id) is not None), (dep_id, errors)
    if "\ud800" not in dep_id:  # a lone surrogate is not text the compiled validator can take at all
        assert refused_by_check == (not schema.fast_validator("deployments").is_valid(document)), (dep_id, errors)
