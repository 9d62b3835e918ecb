"""One secrets module (gpuharness.core.secrets) for errors, cassettes, health evidence and the audit: the same
minimum length everywhere, redaction before any cut, and configured credential values found without being shown."""

from __future__ import annotations

import json
from secrets import token_urlsafe

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from made_keys import private_key_pem, token

from gpuharness.core import secrets
from gpuharness.probe.transcripts import scrub
from gpuharness.providers import cassette
from gpuharness.providers.failures import classify, redact

KEY = "vk-" + token_urlsafe(23)[:31]  # made per run: no key is committed


def fragments(text: str, secret: str, size: int = 6) -> list[str]:
    """Every piece of `secret` at least `size` long that is in text."""
    return [secret[i:i + size] for i in range(len(secret) - size + 1) if secret[i:i + size] in text]


@pytest.mark.parametrize("offset", [0, 150, 270, 280, 285, 295, 299, 310])
def test_a_provider_error_quoting_the_key_shows_no_piece_of_it_wherever_the_message_is_cut(offset: int) -> None:
    body = json.dumps({"error": "x" * offset + KEY + " was refused"})
    message = str(classify("vast", 401, body, credential_env="VAST_API_KEY", secret=KEY))
    assert "$VAST_API_KEY" in message
    assert fragments(message, KEY) == []


@pytest.mark.parametrize("offset", [0, 280, 295])
def test_a_plain_text_error_body_is_redacted_before_it_is_cut(offset: int) -> None:
    message = str(classify("vast", 500, "y" * offset + KEY, secret=KEY))
    assert fragments(message, KEY) == []


def test_every_scrubber_has_the_same_minimum_length() -> None:
    short, long = "abcde", "abcdef"
    text = f"{short} and {long}"
    assert redact(text, short, long) == f"{short} and ***"
    assert cassette.Scrubber([short, long]).text(text) == f"{short} and REDACTED"
    assert scrub(text, (short, long)) == f"{short} and REDACTED"
    assert secrets.redact(text, [short, long]) == f"{short} and REDACTED"
    assert len(long) == secrets.MIN_VALUE_LENGTH


def test_configured_values_come_from_the_named_variables_and_the_planted_test_secret(monkeypatch) -> None:
    monkeypatch.setenv("VAST_API_KEY", KEY)
    monkeypatch.setenv(secrets.TEST_SECRET_ENV, "planted-secret-1234")
    monkeypatch.setenv("SHORT_KEY", "abc")
    monkeypatch.delenv("UNSET_KEY", raising=False)
    assert secrets.configured_values(["VAST_API_KEY", "SHORT_KEY", "UNSET_KEY", None]) == (KEY, "planted-secret-1234")
    assert cassette.secret_values(["VAST_API_KEY"]) == secrets.configured_values(["VAST_API_KEY"])
    names = [c.name for c in secrets.configured_credentials(["VAST_API_KEY", "SHORT_KEY", "UNSET_KEY"])]
    assert names == [secrets.TEST_SECRET_ENV, "VAST_API_KEY"]


def test_a_credential_is_found_as_written_in_json_and_named_never_shown(monkeypatch) -> None:
    quoted = 'k"ey\\with-escapes-0123456789'
    monkeypatch.setenv("ODD_KEY", quoted)
    monkeypatch.setenv("VAST_API_KEY", KEY)
    monkeypatch.delenv(secrets.TEST_SECRET_ENV, raising=False)
    odd, vast = secrets.configured_credentials(["ODD_KEY", "VAST_API_KEY"])
    data = (json.dumps({"error": f"refused {KEY}"}) + "\n" + json.dumps({"prompt": quoted}) + "\n").encode()
    hits = list(secrets.find_secrets(data, None, (odd, vast)))
    assert [(h.kind, secrets.line_of(data, h.offset)) for h in hits] == [("the value of $ODD_KEY", 2),
                                                                          ("the value of $VAST_API_KEY", 1)]
    assert all(KEY not in h.shown and quoted not in h.shown for h in hits)
    assert hits[1].shown == f"({len(KEY)} chars)"


def test_free_text_loses_private_keys_bearer_tokens_and_key_value_credentials() -> None:
    bearer, api_key, pem = f"{token(3)}.{token(3)}.{token(3)}", token(16), private_key_pem("rsa").decode()
    text = f"Authorization: Bearer {bearer}\napi_key={api_key}\n{pem}plain line"
    scrubbed = secrets.redact(text, [KEY])
    assert bearer not in scrubbed and api_key not in scrubbed
    assert not [line for line in pem.splitlines()[1:-1] if line in scrubbed]  # not one line of the key's body
    assert "Authorization: Bearer REDACTED" in scrubbed and "api_key=REDACTED" in scrubbed
    assert scrubbed.endswith("plain line")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([b"api_key=" + token(20).encode(), b"Bearer " + token(18).encode(), b"plain text",
                                 b"pass", b"", b"rpa_" + token(22).encode(), b'"seed": 7']),
                max_size=6).map(b"\n".join),
       st.data())
def test_secrets_before_a_limit_are_those_of_the_text_cut_there(data: bytes, draw: st.DataObject) -> None:
    # at a line start with one unfinished line after it, mid-line, or with whole lines after it
    limit = draw.draw(st.integers(0, len(data)))
    assert secrets.candidate_lines(data, limit) == secrets.candidate_lines(data[:limit])
    assert [(h.kind, h.offset) for h in secrets.find_secrets(data, limit)] == [
        (h.kind, h.offset) for h in secrets.find_secrets(data[:limit])]
