"""Recorded provider HTTP: vcrpy set up to replay offline (mode none) and to record scrubbed of secrets."""

from __future__ import annotations

import contextlib
import copy
import json
from collections.abc import Iterable, Iterator, Mapping
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, final
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import yaml

if TYPE_CHECKING:  # vcrpy is slow to import: loaded on first use, the audit suite rarely needs it
    import vcr
    from vcr.errors import CannotOverwriteExistingCassetteException

from gpuharness.core import json_text, regular_file
from gpuharness.core import secrets as core_secrets
from gpuharness.core.clock import now_ts
from gpuharness.core.errors import UserError

#: The secrets' names as the recorder's callers know them; their one owner is gpuharness.core.secrets.
TEST_SECRET_ENV = core_secrets.TEST_SECRET_ENV
REDACTED = core_secrets.REDACTED
secret_values = core_secrets.configured_values
SIMULATOR = "the gpuharness simulator"
MATCH_ON = ("method", "path", "gh_query", "gh_body")


@final
class Mode(Enum):
    """How provider HTTP flows: replayed from cassettes, live, or live and recorded."""

    OFFLINE = "offline"
    LIVE = "live"
    RECORD = "record"

    @classmethod
    def parse(cls, text: str) -> Mode:
        """The mode called text; a typo is a UserError, never a silent default."""
        try:
            return cls(text)
        except ValueError:
            raise UserError(f"unknown gpu mode {text!r}", place="--gpu-mode",
                            hint="use offline, live or record") from None

    @property
    def vcr_record_mode(self) -> str | None:
        """vcrpy's record mode: none offline (a missing interaction fails, never the network), all when recording."""
        return {Mode.OFFLINE: "none", Mode.RECORD: "all", Mode.LIVE: None}[self]


@final
class Scrubber:
    """Removes secrets from recorded requests and responses through the one redactor (core.secrets): the configured
    values and these in any form, bodies in any encoding, every header, secret fields by name, and the URI."""

    __slots__ = ("secrets",)

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self.secrets = tuple(s for s in secrets if s)

    def text(self, value: str) -> str:
        """value with every secret replaced by REDACTED."""
        return core_secrets.redact(value, self.secrets)

    def data(self, value: Any) -> Any:
        """Scrub a decoded JSON value: secret fields are replaced, strings are scrubbed by value."""
        if isinstance(value, dict):
            return {self.text(str(k)): (REDACTED if core_secrets.secret_field(k) and v not in (None, "")
                                        else self.data(v)) for k, v in value.items()}
        if isinstance(value, list):
            return [self.data(v) for v in value]
        if isinstance(value, str):
            return self.text(value)
        return value

    def body(self, raw: bytes | str | None) -> bytes | str | None:
        """Scrub a body; JSON bodies are scrubbed structurally, anything else (text or bytes in any encoding) by the
        redactor's byte forms."""
        if raw is None or raw in (b"", ""):
            return raw
        if isinstance(raw, bytes):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:  # not UTF-8 (or compressed beyond what vcrpy decodes): redacted as bytes
                return core_secrets.redact(raw, self.secrets)
        else:
            text = raw
        try:
            parsed = json_text.loads_outside(text, what="a recorded body")
        except ValueError:
            scrubbed = self.text(text)
        else:
            scrubbed = json.dumps(self.data(parsed)) if isinstance(parsed, (dict, list)) else self.text(text)
        return scrubbed.encode("utf-8") if isinstance(raw, bytes) else scrubbed

    def uri(self, uri: str) -> str:
        """uri with credential query parameters and secret values replaced."""
        parts = urlsplit(uri)
        query = [(k, REDACTED if core_secrets.secret_param(k) else v)
                 for k, v in parse_qsl(parts.query, keep_blank_values=True)]
        return self.text(urlunsplit(parts._replace(query=urlencode(query))))

    def headers(self, headers: Mapping[str, Any], dropped: frozenset[str] = frozenset()) -> dict[str, Any]:
        """Headers without secrets: a credential header's value is REDACTED, those named in dropped are left out,
        every other value is redacted (a header may carry base64 of `Bearer <key>`)."""
        kept: dict[str, Any] = {}
        for name, value in headers.items():
            if name.lower() in dropped:
                continue
            if name.lower() in core_secrets.CREDENTIAL_HEADERS:
                kept[self.text(name)] = REDACTED if not isinstance(value, list) else [REDACTED] * len(value)
            elif isinstance(value, list):
                kept[self.text(name)] = [self.text(str(v)) for v in value]
            else:
                kept[self.text(name)] = self.text(str(value))
        return kept

    def request(self, request: Any) -> Any:
        """vcrpy before_record_request hook."""
        request.uri = self.uri(request.uri)
        scrubbed = self.headers(dict(request.headers))
        for name in list(request.headers):
            del request.headers[name]
        for name, value in scrubbed.items():
            request.headers[name] = value
        request.body = self.body(request.body)
        return request

    def response(self, response: dict[str, Any]) -> dict[str, Any]:
        """vcrpy before_record_response hook (runs after decode_compressed_response)."""
        response = copy.deepcopy(response)
        headers = response["headers"] = self.headers(response.get("headers") or {}, core_secrets.SESSION_HEADERS)
        status = response.get("status")
        if isinstance(status, dict) and isinstance(status.get("message"), str):
            status["message"] = self.text(status["message"])
        body = response.get("body") or {}
        if "string" in body:
            body["string"] = self.body(body["string"])
            length = len(body["string"].encode() if isinstance(body["string"], str) else body["string"] or b"")
            for name in headers:
                if name.lower() == "content-length":
                    headers[name] = [str(length)]
        return response


def _query_without_keys(request: Any) -> list[tuple[str, str]]:
    return [(k, v) for k, v in request.query if not core_secrets.secret_param(k)]


def gh_query(r1: Any, r2: Any) -> None:
    """Match the query string, ignoring credential parameters (recorded as REDACTED, absent offline)."""
    q1, q2 = _query_without_keys(r1), _query_without_keys(r2)
    if q1 != q2:
        raise AssertionError(f"{q1} != {q2}")


def _masked(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: REDACTED if core_secrets.secret_field(k) else _masked(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_masked(v) for v in value]
    return value


def _json_body(request: Any) -> Any:
    raw = request.body
    if not raw:
        return None
    try:
        return json_text.loads_outside(raw, what="a request body")
    except (ValueError, TypeError):
        return _NOT_JSON


_NOT_JSON = object()


def gh_body(r1: Any, r2: Any) -> None:
    """Match bodies; JSON is compared parsed, with secret fields masked (recorded REDACTED, offline blank)."""
    b1, b2 = _json_body(r1), _json_body(r2)
    if b1 is _NOT_JSON or b2 is _NOT_JSON:
        import vcr.matchers

        vcr.matchers.body(r1, r2)
        return
    if _masked(b1) != _masked(b2):
        raise AssertionError(f"{b1!r} != {b2!r}")


def recorder(mode: Mode, *, secrets: Iterable[str] = ()) -> vcr.VCR:
    """A vcrpy VCR for mode: matches method, path, query and body; scrubs secrets when recording."""
    record_mode = mode.vcr_record_mode
    if record_mode is None:
        raise ValueError("live mode uses no cassette")
    import vcr

    scrubber = Scrubber(secrets)
    machine = vcr.VCR(
        record_mode=record_mode,
        match_on=MATCH_ON,
        filter_headers=[(name, REDACTED) for name in sorted(core_secrets.CREDENTIAL_HEADERS)],
        filter_query_parameters=[(name, REDACTED) for name in sorted(core_secrets.SECRET_PARAMS)],
        decode_compressed_response=True,
        before_record_request=scrubber.request,
        before_record_response=scrubber.response,
    )
    machine.register_matcher("gh_query", gh_query)
    machine.register_matcher("gh_body", gh_body)
    return machine


def read_metadata(path: Path) -> dict[str, Any]:
    """The metadata block of a cassette; a missing or unreadable cassette is a UserError."""
    try:
        raw = regular_file.read_bytes(path, regular_file.RECORDING, what="a cassette")
    except FileNotFoundError:
        raise UserError("cassette not found", path=path,
                        hint="record it against the simulator: `python -m gpuharness.plans.recorded_world`") from None
    try:
        document = yaml.safe_load(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise UserError(f"not UTF-8 (byte offset {exc.start})", path=path, hint="re-record it; nothing was replayed") \
            from None
    except RecursionError:
        raise UserError("nested too deeply to read", path=path, hint="re-record it; nothing was replayed") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        place = f"{mark.line + 1}:{mark.column + 1}" if mark is not None else None
        raise UserError(f"not a readable cassette: {getattr(exc, 'problem', exc)}", path=path, place=place,
                        hint="re-record it; nothing was replayed") from None
    if not isinstance(document, dict) or not isinstance(document.get("interactions"), list):
        raise UserError("not a vcrpy cassette (no interactions list)", path=path,
                        hint="re-record it; nothing was replayed")
    metadata = document.get("metadata") or {}
    return dict(metadata) if isinstance(metadata, dict) else {}


def describe(request: Any) -> str:
    """METHOD path?query of a vcrpy request, secrets already absent."""
    query = urlencode(_query_without_keys(request))
    return f"{request.method} {request.path}{'?' + query if query else ''}"


def missing_interaction(exc: CannotOverwriteExistingCassetteException, path: Path) -> UserError:
    """Translate vcrpy's refusal into one line naming the call and the cassette."""
    request = exc.failed_request
    what = describe(request) if request is not None else "a request"
    closest = ""
    if exc.similar_requests:
        similar, _, failed = exc.similar_requests[0]
        reasons = "; ".join(f"{name.removeprefix('gh_')} differs" for name, _ in failed) or "already played"
        closest = f"; closest recorded: {describe(similar)} ({reasons})"
    return UserError(f"no recorded interaction for {what} ({exc.reason}){closest}", path=path,
                     hint="offline replay never touches the network; re-record the cassette against the simulator")


@contextlib.contextmanager
def use(path: Path, mode: Mode, *, secrets: Iterable[str] = (), recorded_against: str = SIMULATOR,
        metadata: Mapping[str, Any] | None = None, repeats: bool = False) -> Iterator[Any]:
    """Replay (offline) or record (record mode) provider HTTP inside the block; yields the vcrpy cassette.

    In record mode the cassette's metadata says what it was recorded against and when. A missing
    interaction offline is a UserError naming the call.
    """
    if mode is Mode.OFFLINE:
        read_metadata(path)
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        regular_file.size_of(path)  # vcrpy loads what is there first: a FIFO or a device is refused, not opened
    machine = recorder(mode, secrets=secrets)
    from vcr.errors import CannotOverwriteExistingCassetteException

    try:
        with machine.use_cassette(str(path), allow_playback_repeats=repeats,
                                  drop_unused_requests=mode is Mode.RECORD) as cassette:
            if mode is Mode.RECORD:
                # get_metadata only adds missing keys; a re-recording must replace the old values.
                cassette._metadata.update({
                    "recorded_against": recorded_against, "recorded_at": now_ts(),
                    "note": f"recorded against {recorded_against}; secrets scrubbed", **(metadata or {})})
                cassette.dirty = True
            yield cassette
    except CannotOverwriteExistingCassetteException as exc:
        raise missing_interaction(exc, path) from None
