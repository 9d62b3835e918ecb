"""What `status --refresh` learns from a pod its guard stopped: the last line of the guard's log (why, when, the idle
evidence), journaled as the deployment's verified stop, whose `stopped_at` is when the guard stopped it, so the
billed interval ends there (core.billing)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, final

from gpuharness.core import lifecycle
from gpuharness.core.billing import STOPPED_AT
from gpuharness.core.deployment import BILLING, Deployment
from gpuharness.core.journal import JournalEntry, read_entries
from gpuharness.operations.context import Context
from gpuharness.probe.guard_state import GUARD_DIR
from gpuharness.providers.inventory import Inventory
from gpuharness.remote import RemoteError
from gpuharness.remote.lines import lines_of
from gpuharness.remote.script import ShellScript

#: the journal marker's `event` for a stop its guard made
GUARD_STOP: Final = "guard-stop"
_LINE: Final = re.compile(r"GH-GUARD stop at=(?P<at>\S+); why=(?P<why>[^;]+); evidence=(?P<evidence>.*)$")


@final
@dataclass(frozen=True, slots=True)
class GuardStop:
    """One stop the guard logged: when (UTC), why ("idle 16 min", "max_hours 2 h", "deadline ..."), the evidence."""

    deployment: str
    at: str
    why: str
    evidence: str

    def words(self) -> str:
        return f"stopped by its guard: {self.why}"

    def marker(self) -> dict[str, Any]:
        return {"event": GUARD_STOP, STOPPED_AT: self.at, "why": self.why, "evidence": self.evidence}


def last_stop(deployment_id: str, text: str) -> GuardStop | None:
    """The last stop line of a guard's log, if it has one."""
    for line in reversed(lines_of(text)):
        found = _LINE.search(line.strip())
        if found:
            return GuardStop(deployment_id, found["at"], found["why"].strip(), found["evidence"].strip())
    return None


def read_log(ctx: Context, deployment: Deployment, *, deadline_s: float = 20.0) -> str | None:
    """The guard log's last lines (one exec), or None when the host does not answer (a stopped pod usually)."""
    script = ShellScript(workspace=deployment.workspace).let("log", f"{GUARD_DIR}/guard.log").code(
        'cd "$ws" 2>/dev/null && [ -f "$log" ] && tail -n 5 "$log"; true')
    try:
        remote = ctx.remotes(deployment)
    except RemoteError:
        return None
    try:
        return remote.exec(script.text(), deadline_s=deadline_s).stdout
    except RemoteError:
        return None
    finally:
        remote.close()


def journal_guard_stops(ctx: Context, inventory: Inventory) -> list[GuardStop]:
    """Every billing deployment with a shutdown rule whose instance the provider now lists stopped: its guard's
    last stop line, journaled as the transition to `stopped` (before reconcile journals the provider's word)."""
    found: list[GuardStop] = []
    for deployment in ctx.registry.deployments():
        instance = inventory.find(deployment.provider, str(deployment.instance_id))
        if (instance is None or instance.status != "stopped" or deployment.status not in BILLING
                or deployment.shutdown_rule is None or deployment.ssh_route is None
                or not lifecycle.allowed(deployment.status, "stopped")):
            continue
        text = read_log(ctx, deployment)
        stop = last_stop(deployment.id, text) if text else None
        if stop is None:
            continue
        lifecycle.transition(ctx.registry, deployment.id, "stopped", route="guard-log", observed_at=stop.at,
                             marker=stop.marker(), note=stop.words(), next_action="start, then health-check")
        found.append(stop)
    return found


def guard_notes(journal: Iterable[JournalEntry], stopped: set[str]) -> dict[str, str]:
    """For each stopped deployment whose last stop its guard made: "stopped by its guard: idle 16 min"."""
    notes: dict[str, str] = {}
    for entry in journal:
        dep = entry.deployment
        if dep not in stopped or entry.to_state != "stopped" or entry.from_state == "stopped":
            continue
        marker = entry.marker
        if isinstance(marker, Mapping) and marker.get("event") == GUARD_STOP:
            notes[dep] = f"stopped by its guard: {marker.get('why')}"
        else:
            notes.pop(dep, None)
    return notes


def notes_of(ctx_registry: Any, deployments: Iterable[Deployment]) -> dict[str, str]:
    """guard_notes over the registry's journal (one pass), for its stopped deployments."""
    stopped = {d.id for d in deployments if d.status == "stopped"}
    if not stopped or not ctx_registry.journal_path.exists():
        return {}
    return guard_notes(read_entries(ctx_registry.journal_path), stopped)
