"""The checkpoint's anchor outside the registry (issue 18 item 6): an HMAC-SHA256 keyed by GPUHARNESS_CHECKPOINT_KEY.

Whoever rewrites a cost in the audited prefix of jobs.jsonl and recomputes checkpoint.json's prefix digest fools
an unanchored checkpoint; with the key set, the audit fails naming the checkpoint.
"""

from __future__ import annotations

import json
import re
import secrets
from pathlib import Path

import hypothesis
import pytest
from hypothesis import strategies as st
from test_audit_checks import audit, failed, says

from gpuharness.audit import anchor
from gpuharness.audit import checkpoint as cp

KEY = "ck-" + secrets.token_hex(16)  # made at test time, never committed
APPEND_ONLY = "test_ledger_is_append_only_since_the_checkpoint"


def rewrite_a_cost(registry: Path) -> None:
    """Raise the first job's cost in the audited prefix (same length) and recompute checkpoint.json's digest."""
    ledger = registry / "jobs.jsonl"
    data = ledger.read_bytes()
    match = re.search(rb'"cost_usd":0\.(\d)', data)
    assert match is not None
    digit = b"9" if match.group(1) != b"9" else b"8"
    data = data[:match.start(1)] + digit + data[match.end(1):]
    ledger.write_bytes(data)
    path = registry / "audit" / "checkpoint.json"
    doc = json.loads(path.read_text())
    hasher = cp.PREFIX_HASHES[doc["ledger"]["prefix_hash"]]()
    hasher.update(data[:doc["ledger"]["byte_length"]])
    doc["ledger"]["prefix_digest"] = hasher.hexdigest()
    path.write_text(json.dumps(doc, indent=2))


def test_keyed_audit_signs_the_checkpoint_and_keeps_the_key_out(pytester, reg, monkeypatch):
    monkeypatch.setenv(anchor.KEY_ENV, KEY)
    result = audit(pytester, reg)
    assert failed(result) == []
    doc = json.loads((reg / "audit" / "checkpoint.json").read_text())
    assert doc["anchor"]["kind"] == "hmac-sha256"
    assert KEY not in (reg / "audit" / "checkpoint.json").read_text()
    assert KEY not in result.stdout.str()
    result = audit(pytester, reg)
    assert failed(result) == []
    says(result, ["gpuharness audit anchor: hmac"])


def test_rewritten_cost_and_digest_fail_the_keyed_audit_naming_the_checkpoint(pytester, reg, monkeypatch):
    monkeypatch.setenv(anchor.KEY_ENV, KEY)
    assert audit(pytester, reg).ret == 0
    rewrite_a_cost(reg)
    result = audit(pytester, reg)
    assert APPEND_ONLY in failed(result)
    says(result, ["*audit/checkpoint.json: its hmac-sha256 anchor does not match under GPUHARNESS_CHECKPOINT_KEY*"
                  "rewritten after it was signed*move checkpoint.json aside to re-baseline*"])


def test_rewritten_cost_and_digest_without_a_key_are_reported_unanchored(pytester, reg, monkeypatch):
    monkeypatch.delenv(anchor.KEY_ENV, raising=False)
    assert audit(pytester, reg).ret == 0
    rewrite_a_cost(reg)
    result = audit(pytester, reg)
    says(result, ["gpuharness audit anchor: none: unanchored",
                  "*audit/checkpoint.json: the checkpoint is unanchored*set GPUHARNESS_CHECKPOINT_KEY*"])


def test_a_stripped_anchor_fails_the_keyed_audit(pytester, reg, monkeypatch):
    monkeypatch.setenv(anchor.KEY_ENV, KEY)
    assert audit(pytester, reg).ret == 0
    path = reg / "audit" / "checkpoint.json"
    doc = json.loads(path.read_text())
    del doc["anchor"]
    path.write_text(json.dumps(doc))
    result = audit(pytester, reg)
    assert APPEND_ONLY in failed(result)
    says(result, ["*audit/checkpoint.json: it carries no hmac-sha256 anchor while GPUHARNESS_CHECKPOINT_KEY is set*"])


def test_a_checkpoint_signed_with_another_key_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(anchor.KEY_ENV, "another-key-0123456789abcdef")
    doc = anchor.signed({"version": 3, "ledger": {"line_count": 2}})
    assert anchor.verify(doc) == anchor.Verdict(anchor.HMAC)
    monkeypatch.setenv(anchor.KEY_ENV, KEY)
    assert anchor.verify(doc).problem is not None
    monkeypatch.delenv(anchor.KEY_ENV)
    assert anchor.verify(doc) == anchor.NO_ANCHOR


def test_a_short_key_is_called_weak(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(anchor.KEY_ENV, "abc123")
    assert anchor.weak_key() == f"{anchor.KEY_ENV} is 6 characters long; use a random key of at least 16"
    monkeypatch.setenv(anchor.KEY_ENV, KEY)
    assert anchor.weak_key() is None


_SCALARS = st.one_of(st.integers(-(2**63), 2**63 - 1), st.text(max_size=8), st.floats(allow_nan=False), st.booleans())


@hypothesis.settings(max_examples=60, deadline=None)
@hypothesis.given(doc=st.dictionaries(st.sampled_from(["version", "written_at", "job_count", "deployment_ids"]),
                                      _SCALARS, min_size=1),
                  field=st.sampled_from(["version", "written_at", "job_count", "deployment_ids"]), value=_SCALARS)
def test_any_changed_field_breaks_the_anchor(doc, field, value) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(anchor.KEY_ENV, KEY)
        signed = anchor.signed(doc)
        assert anchor.verify(signed) == anchor.Verdict(anchor.HMAC)
        hypothesis.assume(doc.get(field, object()) != value)
        assert anchor.verify(dict(signed, **{field: value})).problem is not None
