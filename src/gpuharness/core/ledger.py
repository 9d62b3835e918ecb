"""The append-only job ledger `jobs.jsonl`: locked single-write appends, streaming reads."""

from __future__ import annotations

import gc
import hashlib
import math
import mmap
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, final

import orjson

from gpuharness.core import regular_file, schema
from gpuharness.core.clock import WallClock, format_ts, future_field, utcnow
from gpuharness.core.errors import UserError
from gpuharness.core.json_text import LineError, key_bound, line_duplicate, loads_line
from gpuharness.core.jsonl import append_record
from gpuharness.core.policy import exceeds

if TYPE_CHECKING:
    from gpuharness.core.job_line import JobLine

TERMINAL = frozenset({"completed", "failed", "cancelled", "interrupted"})
#: the times of a ledger line that may not lie in the future when it is written
TIMES = ("ts", "started_at", "completed_at")
ORDER = {"queued": 0, "running": 1}


@final
@dataclass(frozen=True, slots=True)
class Entry:
    """One physical line of the ledger. record is None when the line does not parse."""

    lineno: int
    offset: int
    raw: bytes
    record: dict[str, Any] | None
    problem: str | None = None
    column: int = 1

    @property
    def torn(self) -> bool:
        """A line without its newline: a writer died mid-write (only legal as the last line)."""
        return not self.raw.endswith(b"\n")


def line_digest(raw: bytes) -> str:
    """The digest a correction carries of the line it corrects: sha256 of the line's bytes, without its newline."""
    return "sha256:" + hashlib.sha256(raw.removesuffix(b"\n")).hexdigest()


def lowered_problem(previous: dict[str, Any], record: dict[str, Any], previous_digest: str | None) -> str | None:
    """Why a correction that lowers the job's cost may not follow previous: it must carry a reason and the digest of
    the line it corrects (previous_digest, when known, must match). None when the cost is not lowered, or it may."""
    before, after = float(previous.get("cost_usd") or 0.0), float(record.get("cost_usd") or 0.0)
    if not exceeds(before, after):
        return None
    what = f"job {record.get('id')}: a correction lowering cost_usd from ${before:.4f} to ${after:.4f}"
    missing = [f'"{name}"' for name in ("reason", "digest") if not record.get(name)]
    if missing:
        of = f" ({previous_digest})" if previous_digest else ""
        return f"{what} must carry {' and '.join(missing)} (the digest of the line it corrects{of})"
    if previous_digest is not None and record.get("digest") != previous_digest:
        return f"{what} carries digest {record.get('digest')}, not the one of the line it corrects ({previous_digest})"
    return None


def sequence_problem(previous: dict[str, Any] | None, record: dict[str, Any],
                     previous_digest: str | None = None) -> str | None:
    """Why record may not follow previous (the job's current line, whose line_digest is previous_digest when known),
    or None if it may."""
    if previous is None:
        if record.get("correction"):
            return "a correction needs an earlier line of the same job"
        return None
    if record.get("correction"):
        if not record.get("reason"):
            return "a correction must carry a reason"
        return lowered_problem(previous, record, previous_digest)
    if previous.get("status") in TERMINAL:
        return (f"job {record.get('id')} is already {previous['status']}; only a correction "
                "(\"correction\": true with a \"reason\") may follow a terminal line")
    if record.get("deployment_id") != previous.get("deployment_id"):
        return (f"job {record.get('id')} moved from deployment {previous.get('deployment_id')} "
                "without a correction")
    return None


def validate_record(record: Any, *, where: str) -> dict[str, Any]:
    """Schema-check one ledger record; raises UserError naming where."""
    if not isinstance(record, dict):
        raise UserError("a ledger line must be a JSON object", path=where)
    for key, value in record.items():  # orjson would silently write NaN or Infinity as null
        if isinstance(value, float) and not math.isfinite(value):
            raise UserError(f"{value} is not a finite number", path=where, place=f"$.{key}",
                            hint="nothing was appended")
    if schema.is_valid_fast("job", record):  # compiled check first; jsonschema only to explain a failure
        return record
    errors, _ = schema.check("job", record)
    if errors:
        raise UserError(errors[0].message, path=where, place=errors[0].json_path,
                        hint="nothing was appended")
    return record


@final
class Ledger:
    """jobs.jsonl. Appends never rewrite; reads stream in constant memory."""

    __slots__ = ("clock", "path")

    def __init__(self, path: str | Path, *, clock: WallClock = utcnow) -> None:
        self.path = Path(path)
        self.clock = clock  # what "now" is for the lines appended: none may lie in its future (core.clock)

    def append(self, record: dict[str, Any], *, check_sequence: bool = False) -> list[str]:
        """Append one validated record as one os.write under an exclusive lock.

        Returns warnings (a torn tail left by a crashed writer is quarantined, never merged).
        """
        if not isinstance(record, dict):
            raise UserError("a ledger line must be a JSON object", path=f"{self.path} (new line)",
                            hint="nothing was appended")
        record = dict(record)
        record.setdefault("ts", format_ts(self.clock()))
        validate_record(record, where=f"{self.path} (new line)")
        ahead = future_field(record, TIMES, self.clock())
        if ahead is not None:
            raise UserError(ahead[1], path=f"{self.path} (new line)", place=f"$.{ahead[0]}",
                            hint="check this machine's clock and the line's times; nothing was appended")

        def precheck() -> str | None:
            if not check_sequence:
                return None
            found = self.current_line(record["id"])
            if found is None:
                return sequence_problem(None, record)
            return sequence_problem(found[0], record, line_digest(found[1]))

        return append_record(self.path, record, precheck)

    def _open(self) -> BinaryIO | None:
        """The ledger for reading (a regular file: core.regular_file), or None when there is none yet."""
        try:
            return regular_file.open_stream(self.path, doing="cannot read the ledger")
        except FileNotFoundError:
            return None

    def scan(self, start_offset: int = 0, start_lineno: int = 1) -> Iterator[Entry]:
        """Stream every line from start_offset, parsing each; constant memory (a line over its cap is refused)."""
        handle = self._open()
        if handle is None:
            return
        with handle:
            handle.seek(start_offset)
            offset = start_offset
            lineno = start_lineno
            for raw in regular_file.lines(handle, self.path, what="ledger line", first=start_lineno):
                yield _entry(lineno, offset, raw)
                offset += len(raw)
                lineno += 1

    def torn_tail(self) -> Entry | None:
        """The torn last line left by a writer that died mid-write, if there is one (reads only the tail)."""
        handle = self._open()
        if handle is None:
            return None
        with handle:
            size = handle.seek(0, os.SEEK_END)
            if size == 0:
                return None
            handle.seek(size - 1)
            if handle.read(1) == b"\n":
                return None
        last: Entry | None = None
        for last in self.scan():  # noqa: B007 - only the last entry matters
            pass
        if last is None or last.record is not None:
            return None
        return last

    def broken(self, entry: Entry) -> UserError:
        """The error for a line that does not parse in the middle of the ledger."""
        return UserError(entry.problem or "unreadable line", path=self.path, place=f"{entry.lineno}:{entry.column}",
                         hint="a broken line in the middle of the ledger; nothing was changed")

    def records(self) -> Iterator[dict[str, Any]]:
        """Every parsed record; a torn or broken line raises a UserError naming its line."""
        for entry in self.scan():
            if entry.record is None:
                if entry.torn:
                    continue  # a torn final line is not history yet
                raise self.broken(entry)
            yield entry.record

    def lines(self) -> Iterator[JobLine]:
        """Every line as a typed JobLine (unknown fields dropped), for readers of what jobs cost and when; a torn
        or broken line raises as with records()."""
        from gpuharness.core.job_line import JobLine  # msgspec: loaded when a reader needs it

        for record in self.records():
            yield JobLine.from_record(record)

    def checked_records(self) -> Iterator[dict[str, Any]]:
        """Like records(), but every line must also match the job schema; a bad one raises naming its line."""
        for entry in self.scan():
            if entry.record is None:
                if entry.torn:
                    continue
                raise self.broken(entry)
            if not schema.is_valid_fast("job", entry.record):
                try:
                    errors, _ = schema.check("job", entry.record)
                except RecursionError:
                    raise UserError("a value is nested too deeply to check", path=self.path,
                                    place=f"{entry.lineno}:1", hint="nothing was changed") from None
                if errors:
                    first = errors[0]
                    raise UserError(first.message, path=self.path, place=f"{entry.lineno}:{first.json_path}",
                                    hint="that line breaks the job schema; repair it by hand, nothing was changed")
            yield entry.record

    def current(self, job_id: str | None = None, *, status: str | None = None) -> Any:
        """The current (last) line of one job, or of every job as a dict when job_id is None (only the jobs whose
        current status is `status`, when given).

        Every line is read and a broken one raises, as with records(). Each line is decoded into a `JobLine`;
        only a line the Struct refuses is parsed as a whole, and only the current lines become dicts."""
        collecting = gc.isenabled()
        gc.disable()  # a table of current lines makes no cycles; generational scans of it would dominate
        try:
            found = self._current_lines(job_id)
            if found is None:
                return None if job_id is not None else {}
            records = self._materialize(found, status if job_id is None else None)
        finally:
            if collecting:
                gc.enable()
        return records.get(job_id) if job_id is not None else records

    def current_line(self, job_id: str) -> tuple[dict[str, Any], bytes] | None:
        """The current line of one job, parsed and as written (its bytes, newline included); None when it has none."""
        found = (self._current_lines(job_id) or {}).get(job_id)
        if found is None:
            return None
        handle = self._open()
        if handle is None:  # removed since it was read
            raise UserError("the ledger vanished while it was read", path=self.path, hint="nothing was changed")
        with handle:
            handle.seek(found.offset)
            raw = handle.read(found.length)
        record = found.record if found.record is not None else loads_line(raw)
        return record, raw

    def _current_lines(self, job_id: str | None) -> dict[str, CurrentLine] | None:
        """Where each job's last line is (only `job_id`'s, when given); None when there is no ledger."""
        handle = self._open()
        if handle is None:
            return None
        from gpuharness.core.job_line import DECODE_ERRORS, decode_job_line  # msgspec: loaded when a lookup runs

        found: dict[str, CurrentLine] = {}
        decode = decode_job_line
        with handle:
            offset = 0
            lineno = 0
            for raw in regular_file.lines(handle, self.path, what="ledger line"):
                lineno += 1
                try:
                    line = decode(raw)
                except DECODE_ERRORS:
                    if not self._keep_parsed(_entry(lineno, offset, raw), job_id, found):
                        break  # a torn last line is not history yet
                else:
                    if key_bound(raw) != line.keys_at_least():  # maybe a repeated key, which the Struct hides
                        self._refuse_repeats(lineno, offset, raw)
                    if job_id is None or line.id == job_id:
                        found[line.id] = CurrentLine(offset, len(raw), line.status)
                offset += len(raw)
        return found

    def _refuse_repeats(self, lineno: int, offset: int, raw: bytes) -> None:
        """Raise, as for a broken line, when the line names a key twice (msgspec, like orjson, keeps the last)."""
        try:
            record = loads_line(raw)
        except LineError as exc:
            raise self.broken(Entry(lineno, offset, raw, None, exc.message, exc.column)) from None
        repeated = line_duplicate(raw, record)
        if repeated is not None:
            raise self.broken(Entry(lineno, offset, raw, None, repeated))

    def _keep_parsed(self, entry: Entry, job_id: str | None, found: dict[str, CurrentLine]) -> bool:
        """A line the Struct refused, parsed whole: kept if it is one of the wanted jobs; False for a torn last line.
        A broken line, or one without a string id when every job is wanted, raises."""
        if entry.record is None:
            if entry.torn:
                return False
            raise self.broken(entry)
        key = entry.record.get("id")
        if not isinstance(key, str):
            if job_id is None:
                raise UserError("a ledger line without a string \"id\"", path=self.path, place=f"{entry.lineno}:1",
                                hint="repair that line by hand; nothing was changed")
            return True
        if job_id is None or key == job_id:
            found[key] = CurrentLine(entry.offset, len(entry.raw), entry.record.get("status"), entry.record)
        return True

    def _materialize(self, found: dict[str, CurrentLine], status: str | None) -> dict[str, dict[str, Any]]:
        """The records of the current lines (of `status` only, when given)."""
        records: dict[str, dict[str, Any]] = {}
        if not found:
            return records
        handle = self._open()
        if handle is None:  # removed since it was read
            raise UserError("the ledger vanished while it was read", path=self.path, hint="nothing was changed")
        with handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as view:
            loads = orjson.loads
            for key, line in found.items():
                if status is not None and line.status != status:
                    continue
                records[key] = line.record if line.record is not None else loads(
                    view[line.offset:line.offset + line.length])
        return records


@final
@dataclass(frozen=True, slots=True)
class CurrentLine:
    """Where a job's last line is, its status, and its record when it was parsed whole."""

    offset: int
    length: int
    status: Any
    record: dict[str, Any] | None = None


def _entry(lineno: int, offset: int, raw: bytes) -> Entry:
    """One physical line, parsed."""
    try:
        record = loads_line(raw)  # depth bounded first (core.json_text)
    except LineError as exc:
        return Entry(lineno, offset, raw, None, exc.message, exc.column)
    if isinstance(record, dict):
        repeated = line_duplicate(raw, record)  # orjson keeps the last of a repeated key silently
        return Entry(lineno, offset, raw, record) if repeated is None else Entry(lineno, offset, raw, None, repeated)
    return Entry(lineno, offset, raw, None, "a ledger line must be a JSON object")
