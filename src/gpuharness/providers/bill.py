"""The providers' own bills: one billing read per provider, live, recorded to a cassette, or replayed from one.

Offline, the bill is a recorded provider call like any other: the cassette's metadata keeps the window it was read
for (its query must match) and the registry it was recorded for. Providers that publish no billing records
(Massed Compute, owned servers, serverless endpoints) are skipped, with why.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Final, final

from gpuharness.core.bill import DAY_LEN, BillLine, Charge, compare
from gpuharness.core.billing import Interval
from gpuharness.core.clock import format_ts, parse_ts
from gpuharness.core.deployment import Deployment
from gpuharness.core.errors import UserError
from gpuharness.core.registry import Registry
from gpuharness.providers import cassette
from gpuharness.providers.base import BillSource, Provider
from gpuharness.providers.inventory import ProviderFactory, adapter_factory, recorded_for

#: where `gpuharness bill --gpu-mode record` writes the bill, and the audit replays it from
DEFAULT_BILL_CASSETTE: Final = Path("cassettes/http/bill.yaml")
#: how far back a live audit reads the bills
AUDIT_WINDOW: Final = timedelta(days=30)


@final
@dataclass(frozen=True, slots=True)
class Bill:
    """What the providers billed, per instance and UTC day, from `since` to `until` (RFC 3339)."""

    charges: tuple[Charge, ...]
    providers: tuple[str, ...]
    since: str
    until: str
    source: str = "live"
    skipped: Mapping[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"since": self.since, "until": self.until, "source": self.source, "providers": list(self.providers),
                "skipped": dict(self.skipped), "charges": [c.to_json() for c in self.charges]}


def bills(entry: Mapping[str, Any]) -> bool:
    """Whether the entry's adapter reads the provider's own billing records."""
    from gpuharness.providers.factory import adapter_of

    return issubclass(adapter_of(entry), BillSource)


def billed_entries(entries: Iterable[Mapping[str, Any]], only: str | None = None) -> tuple[list[dict[str, Any]],
                                                                                          dict[str, str]]:
    """The entries whose bill can be read, and why each other one is skipped. `only` names one provider: unknown,
    or one that publishes no bill, is a one-line UserError naming providers.json (exit 2)."""
    chosen, skipped = [], {}
    listed = [dict(e) for e in entries if only is None or e.get("name") == only]
    if only is not None and not listed:
        raise UserError(f"no provider {only!r}", path="providers.json", place="--provider",
                        hint="`gpuharness providers add` adds one")
    for entry in listed:
        name = str(entry.get("name"))
        try:
            readable = bills(entry)
        except UserError as exc:  # an unknown kind: `validate` names it
            skipped[name] = exc.what
            continue
        if readable:
            chosen.append(entry)
        elif only is not None:
            raise UserError(f"provider {name!r} ({entry.get('kind')}) publishes no billing records gpuharness can "
                            "read; bill compares RunPod and Vast.ai", path="providers.json", place=name)
        else:
            skipped[name] = f"kind {entry.get('kind')} publishes no billing records gpuharness can read"
    return chosen, skipped


def _read_all(entries: list[dict[str, Any]], factory: ProviderFactory, since: datetime, until: datetime, *,
              source: str, skipped: Mapping[str, str]) -> Bill:
    providers: dict[str, Provider] = {}
    found: list[Charge] = []
    try:
        for entry in entries:
            providers[str(entry["name"])] = factory(entry)
        for provider in providers.values():
            if isinstance(provider, BillSource):
                found += provider.charges(since, until)
    finally:
        for provider in providers.values():
            provider.close()
    return Bill(tuple(found), tuple(providers), format_ts(since), format_ts(until), source, dict(skipped))


def current_bill(registry: Registry, mode: cassette.Mode, path: Path, since: datetime, until: datetime, *,
                 only: str | None = None, deadline_s: float = 300.0) -> Bill:
    """The providers' bills for the registry: read live, read live and recorded to path, or replayed from path
    (offline: no network, no credentials; the window is the recorded one)."""
    entries = registry.providers()
    if mode is cassette.Mode.OFFLINE:
        return recorded_bill(path, entries, only=only)
    since, until = since.replace(microsecond=0), until.replace(microsecond=0)  # what the metadata keeps exactly
    chosen, skipped = billed_entries(entries, only)
    factory = adapter_factory(deadline_s=deadline_s)
    if mode is cassette.Mode.LIVE:
        return _read_all(chosen, factory, since, until, source="live", skipped=skipped)
    names = [e.get("credential_env") for e in entries]
    metadata = {"api_bases": {str(e["name"]): str(e.get("api_base") or "") for e in chosen},
                "since": format_ts(since), "until": format_ts(until), "registry": recorded_for(registry.root, path)}
    with cassette.use(path, cassette.Mode.RECORD, secrets=cassette.secret_values(names), metadata=metadata):
        return _read_all(chosen, factory, since, until, source=f"cassette:{path}", skipped=skipped)


def recorded_bill(path: Path, entries: Iterable[Mapping[str, Any]], *, only: str | None = None,
                  factory: ProviderFactory | None = None) -> Bill:
    """Replay a recorded bill through the adapters (mode none: no network, no credentials)."""
    metadata = cassette.read_metadata(path)
    bases: dict[str, str] = dict(metadata.get("api_bases") or {})
    chosen, skipped = billed_entries(entries, only)
    missing = [str(e["name"]) for e in chosen if e["name"] not in bases]
    if missing or not metadata.get("since") or not metadata.get("until"):
        raise UserError(f"no recorded bill for provider(s) {', '.join(missing) or '(no window recorded)'}",
                        path=path, hint="re-record it: `gpuharness bill --gpu-mode record --cassette PATH`")
    try:
        since, until = parse_ts(str(metadata["since"])), parse_ts(str(metadata["until"]))
    except ValueError as exc:
        raise UserError(f"the recorded window is unreadable: {exc}", path=path, place="metadata") from None
    with cassette.use(path, cassette.Mode.OFFLINE):
        return _read_all([{**e, "api_base": bases[str(e["name"])]} for e in chosen],
                         factory or adapter_factory(offline=True), since, until, source=f"cassette:{path}",
                         skipped=skipped)


def bill_lines(bill: Bill, intervals: Mapping[str, list[Interval]],
               deployments: Iterable[Deployment]) -> list[BillLine]:
    """The billed intervals (as of the bill's end: `until`) against the bill, per deployment and UTC day."""
    return compare(bill.charges, intervals, deployments, bill.providers, bill.since[:DAY_LEN], parse_ts(bill.until))
