"""The transition journal (transitions.jsonl): one typed entry (written by the lifecycle, read by the audit), its
one constructor, append and read."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, final

from gpuharness.core import schema
from gpuharness.core.clock import future_field, now_ts, utcnow
from gpuharness.core.deployment import Deployment
from gpuharness.core.errors import UserError
from gpuharness.core.jsonl import append_record, read_numbered, read_records
from gpuharness.core.revision import source_revision

_SAME: Any = object()
#: a journal line's keys, in transition.schema.json's order, each with the JournalEntry field it holds
LINE_KEYS: dict[str, str] = {"ts": "ts", "deployment": "deployment", "provider": "provider", "target_id": "target_id",
                             "from": "from_state", "to": "to_state", "route": "route", "observed_at": "observed_at",
                             "marker": "marker", "next_action": "next_action", "note": "note",
                             "source_revision": "source_revision"}


@final
@dataclass(frozen=True, slots=True)
class JournalEntry:
    """One line of the journal: what moved (or was seen) from which state to which, by which route."""

    deployment: str
    from_state: str | None
    to_state: str
    provider: str | None = None
    target_id: str | None = None
    route: str | None = None
    observed_at: str | None = None
    marker: Any = None
    next_action: str | None = None
    note: str | None = None
    ts: str = field(default_factory=now_ts)
    source_revision: str | None = None  # what froze the target: git HEAD of the working directory

    @classmethod
    def of(cls, deployment: Deployment, *, from_state: str | None = _SAME, route: str | None = None,
           observed_at: str | None = None, marker: Any = None, next_action: str | None = None,
           note: str | None = None) -> JournalEntry:
        """The entry for a deployment as it is now: it moved from from_state to its status, or, without
        from_state, was only observed (from and to are its status). It records the source revision the command
        runs from (git HEAD of the working directory, when there is one)."""
        return cls(deployment=deployment.id, from_state=deployment.status if from_state is _SAME else from_state,
                   to_state=deployment.status, provider=deployment.provider, target_id=deployment.instance_id,
                   route=route, observed_at=observed_at or now_ts(), marker=marker, next_action=next_action,
                   note=note, source_revision=source_revision())

    @classmethod
    def from_json(cls, line: Mapping[str, Any]) -> JournalEntry:
        """The entry a journal line holds (one transition.schema.json accepts: `ts`, `deployment` and `to` are
        there; a key it lacks keeps its field's default)."""
        return cls(**{name: line[key] for key, name in LINE_KEYS.items() if key in line})

    def to_json(self) -> dict[str, Any]:
        """The journal line."""
        return {key: getattr(self, name) for key, name in LINE_KEYS.items()}


def append_entry(path: Path, entry: JournalEntry) -> None:
    """Append one entry to the journal at path (checked against transition.schema.json: a bad one is a bug)."""
    line = entry.to_json()
    errors, _ = schema.check("transition", line)
    if errors:
        raise ValueError(f"bad journal entry {errors[0].json_path}: {errors[0].message}")
    ahead = future_field(line, ("ts",), utcnow())
    if ahead is not None:
        raise UserError(ahead[1], path=f"{path} (new line)", place="$.ts",
                        hint="check this machine's clock; nothing was appended")
    append_record(path, line)


def read_journal(path: Path) -> Iterator[dict[str, Any]]:
    """Stream the journal's lines as written (what a test or a tool that shows the file reads); a torn final line
    is skipped, a broken one is a one-line error. The product reads the typed entries: read_entries."""
    return read_records(path, what="journal line")


def read_entries(path: Path) -> Iterator[JournalEntry]:
    """Stream the journal as JournalEntry, each line checked against transition.schema.json first (a line it
    refuses is a one-line error naming the file and the line; `gpuharness audit` lists every one); a torn final
    line is skipped."""
    for lineno, line in read_numbered(path, what="journal line"):
        errors, _ = schema.check("transition", line)
        if errors:
            raise UserError(f"a journal line transition.schema.json refuses: {errors[0].message}", path=path,
                            place=f"{lineno}:{errors[0].json_path}",
                            hint="`gpuharness audit` lists every such line; move it out or mend it")
        yield JournalEntry.from_json(line)
