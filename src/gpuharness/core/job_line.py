"""A line of the job ledger as a typed record: `JobLine`, decoded straight from its bytes by msgspec.

The job schema (`core/schemas/job.schema.json`) stays the contract. The Structs accept a subset of what it
accepts, and `read_job_line` settles every line they refuse with orjson and the schema (jsonschema-rs), so that
the verdict is the schema's on every line (tests/core/test_job_line.py holds the two to it). What the Structs refuse and
the schema may accept: unknown fields (which the audit tolerates), integers written as 1.0 or beyond 64 bits,
inputs nested deeper than `INPUT_DEPTH`, and a duplicate key whose earlier value breaks the schema. Timestamps are
read as strings and checked against the schema's `date-time` format by `is_date_time`, which also refuses the few
the format admits that are no instant of the UTC calendar (year 0000): the one place where the audit is stricter
than the schema.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Final, Literal, final

import msgspec
import orjson
from msgspec import UNSET, Meta, UnsetType

from gpuharness.core import schema
from gpuharness.core.clock import format_ts, parse_ts
from gpuharness.core.json_text import count_keys, deep_message, too_deep

Status = Literal["queued", "running", "completed", "failed", "cancelled", "interrupted"]
NonEmpty = Annotated[str, Meta(min_length=1)]
NonNegative = Annotated[float, Meta(ge=0)]
#: Integers beyond 64 bits are left to orjson and the schema (orjson reads them as floats, or refuses them).
Int64 = Annotated[int, Meta(ge=-(2**63), le=2**63 - 1)]
Positive64 = Annotated[int, Meta(ge=1, le=2**63 - 1)]
Natural64 = Annotated[int, Meta(ge=0, le=2**63 - 1)]
#: A correction's digest of the line it corrects (core.ledger.line_digest).
Digest = Annotated[str, Meta(pattern="^sha256:[0-9a-f]{64}$")]
#: Container levels of `inputs` (itself included) that the Struct reads; deeper ones are settled by orjson and the
#: schema.
INPUT_DEPTH: Final = 4


def _input_value(depth: int) -> Any:
    """A JSON value of at most `depth` container levels, its integers within 64 bits."""
    scalar: Any = str | Int64 | float | bool | None
    if depth == 0:
        return scalar
    inner = _input_value(depth - 1)
    return scalar | list[inner] | dict[str, inner]  # type: ignore[valid-type]


if TYPE_CHECKING:
    InputValue = Any
else:
    InputValue = _input_value(INPUT_DEPTH - 1)


@final
class Artifact(msgspec.Struct, frozen=True, forbid_unknown_fields=True, gc=False):
    """An output of a job: where it is and whether it was synced off the instance (or discarded)."""

    name: NonEmpty
    uri: str | UnsetType = UNSET
    remote_path: str | UnsetType = UNSET
    sha256: str | UnsetType = UNSET
    size: Natural64 | UnsetType = UNSET
    synced_at: str | None = None
    discarded: bool = False


@final
class JobLine(msgspec.Struct, frozen=True, forbid_unknown_fields=True, gc=False):
    """One line of jobs.jsonl: a job's state as of `ts` (the last line of a job is its current state)."""

    id: NonEmpty
    deployment_id: NonEmpty
    status: Status
    ts: str
    provider: str | UnsetType = UNSET
    model: str | None = None
    workflow: str | None = None
    workflow_version: Int64 | None = None
    inputs: dict[str, InputValue] | None = None
    started_at: str | None = None
    completed_at: str | None = None
    duration_s: NonNegative | None = None
    cost_usd: NonNegative | None = None
    gpu: str | None = None
    artifacts: tuple[Artifact, ...] = ()
    error: str | None = None
    cause: str | None = None
    pid: Positive64 | None = None
    host: str | None = None
    attempt: Positive64 | UnsetType = UNSET
    correction: bool = False
    reason: str | UnsetType = UNSET
    digest: Digest | UnsetType = UNSET

    def times_valid(self) -> bool:
        """Whether every timestamp of the line is an RFC 3339 date-time as the schema's format reads it."""
        hours, minutes, tails = HOURS, MINUTES, TAILS  # the common case, inline: pieces seen valid before
        ts = self.ts
        if not (ts[:13] in hours and ts[13:19] in minutes and ts[19:] in tails) and not is_date_time(ts):
            return False
        started = self.started_at
        if started is not None and started != ts and not (
                started[:13] in hours and started[13:19] in minutes and started[19:] in tails) \
                and not is_date_time(started):
            return False
        completed = self.completed_at
        if completed is not None and not (
                completed[:13] in hours and completed[13:19] in minutes and completed[19:] in tails) \
                and not is_date_time(completed):
            return False
        return not self.artifacts or artifact_times_valid(self.artifacts)

    def keys_at_least(self) -> int:
        """How many keys the line named, at least: its fields that differ from their defaults, the keys of its inputs
        and of its artifacts. With core.json_text.key_bound (at least the keys written), equal counts prove that no
        key was repeated (a Struct, like orjson, keeps the last of a repeated key without a word)."""
        count = _set_fields(self, _JOB_DEFAULTS)
        if self.inputs:
            count += count_keys(self.inputs)
        for artifact in self.artifacts:
            count += _set_fields(artifact, _ARTIFACT_DEFAULTS)
        return count

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> JobLine:
        """The line of a parsed record that the job schema accepts (unknown fields are dropped)."""
        fields = {name: value for name, value in record.items() if name in _JOB_FIELDS}
        for name in ("duration_s", "cost_usd"):  # numbers, as the Struct reads them
            if isinstance(fields.get(name), int):
                fields[name] = float(fields[name])
        artifacts = fields.get("artifacts")
        if artifacts is not None:
            fields["artifacts"] = tuple(
                Artifact(**{k: v for k, v in item.items() if k in _ARTIFACT_FIELDS}) for item in artifacts)
        return cls(**fields)


def _set_fields(struct: msgspec.Struct, defaults: tuple[Any, ...]) -> int:
    return sum(map(operator.ne, msgspec.structs.astuple(struct), defaults))


def _defaults(kind: type[msgspec.Struct]) -> tuple[Any, ...]:
    """Each field's default; a required field's (always present) is a sentinel no value equals."""
    return tuple(field.default if field.default is not msgspec.NODEFAULT
                 else field.default_factory() if field.default_factory is not msgspec.NODEFAULT else object()
                 for field in msgspec.structs.fields(kind))


_JOB_DEFAULTS: Final = _defaults(JobLine)
_ARTIFACT_DEFAULTS: Final = _defaults(Artifact)
_JOB_FIELDS = frozenset(JobLine.__struct_fields__)
_ARTIFACT_FIELDS = frozenset(Artifact.__struct_fields__)
_DECODER = msgspec.json.Decoder(JobLine)
decode_job_line = _DECODER.decode
#: What msgspec raises for a line it refuses (RecursionError: nesting deeper than its stack allows).
DECODE_ERRORS = (msgspec.DecodeError, RecursionError)


@final
@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a ledger line is not a job line: not a JSON object (`record` is None), or a record the schema refuses."""

    problem: str
    record: dict[str, Any] | None = None
    column: int = 1


def read_job_line(raw: bytes) -> JobLine | Refusal:
    """The job line in `raw` (one line without its newline), or why it is none; the verdict is the job schema's."""
    try:
        line = decode_job_line(raw)
    except DECODE_ERRORS:
        return settle(raw)
    return line if line.times_valid() else settle(raw)


def decode_block(data: bytes, start: int, end: int, count: int) -> list[JobLine] | None:
    """The `count` lines of data[start:end] (each ending in a newline), decoded in one call: exactly what
    `decode_job_line` makes of each line on its own, or None when that cannot be shown (a line the Structs refuse,
    or one that is not a lone object between two newlines), and the lines must be read one by one.

    msgspec reads the block as a sequence of JSON values separated by whitespace. Each line holds exactly one of
    them when every newline stands between `}` and `{` (the block starts with `{` and ends with `}` and its newline)
    and the values are as many as the lines: a raw newline cannot be inside a string (JSON refuses control
    characters there), and one inside an object or array would follow a `}` that closes a nested value, where the
    `{` after it is a syntax error. So every newline ends a value, every line holds at least one, and as many
    values as lines means one each.
    """
    if count == 0 or data[start] != 0x7B or data[end - 2] != 0x7D or data[end - 1] != 0x0A \
            or data.count(b"}\n{", start, end) != count - 1:
        return None
    try:
        lines = _DECODER.decode_lines(memoryview(data)[start:end])
    except DECODE_ERRORS:
        return None
    return lines if len(lines) == count else None


def settle(raw: bytes) -> JobLine | Refusal:
    """Decide a line the Structs refused: orjson parses it and the job schema (unknown fields allowed) judges it."""
    if too_deep(raw):  # orjson stops only at 1,024 levels; the schema check and the rules after it recurse
        return Refusal(f"a ledger line with {deep_message()}")
    try:
        record = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        return Refusal(f"not valid JSON ({exc})", None, exc.colno)
    if not isinstance(record, dict):
        return Refusal("a ledger line must be a JSON object")
    if not schema.is_valid_fast("job", record):
        return Refusal("does not match the job schema", record)
    line = JobLine.from_record(record)
    if not line.times_valid():
        return Refusal("a timestamp is not an instant of the UTC calendar (years 0001 to 9999)", record)
    return line


def artifact_times_valid(artifacts: tuple[Artifact, ...]) -> bool:
    """Whether every synced_at of the artifacts is a date-time as the schema's format reads it."""
    hours, minutes, tails = HOURS, MINUTES, TAILS
    for artifact in artifacts:
        synced = artifact.synced_at
        if synced is not None and not (synced[:13] in hours and synced[13:19] in minutes and synced[19:] in tails) \
                and not is_date_time(synced):
            return False
    return True


#: Known-valid pieces of date-times: hours (`YYYY-MM-DDTHH`), minutes and seconds (`:MM:SS`, seconds below 60) and
#: tails (`[.frac](Z|±HH:MM)`). Validity of a date-time with seconds below 60 is that of its three pieces, each
#: checked once by the schema's format (a leap second depends on all of them, so it is never cached, nor are years
#: 0000, 0001 and 9999, where an offset can leave the calendar). Three small caches fill within a few thousand lines
#: (a month of ledger has about 700 hours, 3,600 minute-seconds and 1,000 millisecond tails), where one cache of
#: whole minutes and one of second tails would keep missing for a million lines. Bounded: past CACHE_LIMIT a new
#: piece is checked each time.
HOURS: set[str] = set()
MINUTES: set[str] = set()
TAILS: set[str] = set()
CACHE_LIMIT: Final = 200_000


def is_date_time(text: str) -> bool:
    """Whether `text` is a date-time by the job schema's `format: date-time` (jsonschema-rs) that names an instant
    of the UTC calendar (the schema's format admits year 0000, and offsets that leave years 0001 to 9999)."""
    if text[:13] in HOURS and text[13:19] in MINUTES and text[19:] in TAILS:
        return True
    if not _date_time_format().is_valid(text):
        return False
    inner_year = "0002" <= text[:4] <= "9998"
    if not inner_year or text[17:19] == "60":  # where an offset or a leap second can leave the calendar
        try:
            format_ts(parse_ts(text))
        except (ValueError, OverflowError):
            return False
    if text[13:14] == ":" and text[16:17] == ":" and text[17:19] != "60" and inner_year:
        for cache, piece in ((HOURS, text[:13]), (MINUTES, text[13:19]), (TAILS, text[19:])):
            if len(cache) < CACHE_LIMIT:
                cache.add(piece)
    return True


def _date_time_format() -> Any:
    global _DATE_TIME
    if _DATE_TIME is None:
        import jsonschema_rs

        _DATE_TIME = jsonschema_rs.Draft202012Validator({"type": "string", "format": "date-time"},
                                                        validate_formats=True)
    return _DATE_TIME


_DATE_TIME: Any = None
