"""The probe's guard section: whether the shutdown guard configure started (operations.guard) runs on the host,
with its rule loaded and a recent heartbeat, and the last line of its log. Read in the one framed probe exec."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, final

#: where configure leaves the guard, under the workspace
GUARD_DIR: Final = ".gh-guard"

#: the section's shell (it reads "$GH_WS", the workspace)
GUARD_LINES: Final = (
    '_g="$GH_WS/.gh-guard"',
    'if [ -f "$_g/rule" ]; then printf \'rule loaded %s\\n\' "$(sed -n \'s/^poll_s=//p\' "$_g/rule" | tr -d "\'")"; '
    "else echo 'rule none'; fi",
    # alive: it answers kill -0, and where /proc tells, it is no zombie and still runs guard.sh (not a reused pid)
    'if [ -f "$_g/pid" ]; then _gp=$(cat "$_g/pid"); _ga=dead; if [ -n "$_gp" ] && kill -0 "$_gp" 2>/dev/null; then '
    '_ga=alive; if [ -r "/proc/$_gp/status" ]; then grep -q "^State:[[:space:]]*Z" "/proc/$_gp/status" && _ga=dead; '
    'tr "\\000" " " < "/proc/$_gp/cmdline" 2>/dev/null | grep -q guard.sh || _ga=dead; fi; fi; '
    "printf 'pid %s %s\\n' \"$_gp\" \"$_ga\"; else echo 'pid none'; fi",
    'if [ -f "$_g/heartbeat" ]; then printf \'heartbeat %s %s\\n\' "$(cat "$_g/heartbeat")" "$(date +%s)"; fi',
    'if [ -f "$_g/guard.log" ]; then printf \'last %s\\n\' "$(tail -n 1 "$_g/guard.log")"; fi',
)


@final
@dataclass(frozen=True, slots=True)
class GuardState:
    """What the probe saw of the guard: its rule (and poll interval), its pid and whether it lives, how old its
    last heartbeat was, and its log's last line."""

    rule_loaded: bool = False
    poll_s: float | None = None
    pid: int | None = None
    alive: bool = False
    heartbeat_age_s: int | None = None
    last_line: str | None = None

    @property
    def running(self) -> bool:
        """Alive with its rule loaded and a heartbeat within three polls (and a minute's slack)."""
        fresh = self.heartbeat_age_s is not None and self.heartbeat_age_s <= 3 * (self.poll_s or 30.0) + 60
        return self.rule_loaded and self.alive and fresh

    def words(self) -> str:
        beat = "no heartbeat" if self.heartbeat_age_s is None else f"last heartbeat {self.heartbeat_age_s} s ago"
        pid = "no pid" if self.pid is None else f"pid {self.pid} {'alive' if self.alive else 'dead'}"
        return f"rule {'loaded' if self.rule_loaded else 'none'}, {pid}, {beat}"

    def to_json(self) -> dict[str, Any]:
        return {"rule_loaded": self.rule_loaded, "poll_s": self.poll_s, "pid": self.pid, "alive": self.alive,
                "heartbeat_age_s": self.heartbeat_age_s, "last_line": self.last_line}


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def guard_state(lines: Sequence[str]) -> GuardState:
    """The guard section's lines, parsed."""
    rule_loaded, poll_s, pid, alive, age, last = False, None, None, False, None, None
    for line in lines:
        word, _, rest = line.partition(" ")
        if word == "rule":
            state, _, poll = rest.partition(" ")
            rule_loaded, poll_s = state == "loaded", _number(poll)
        elif word == "pid" and rest != "none":
            number, _, status = rest.partition(" ")
            pid, alive = (int(number) if number.isdigit() else None), status == "alive"
        elif word == "heartbeat":
            beat, _, now = rest.partition(" ")
            if beat.isdigit() and now.isdigit():
                age = max(int(now) - int(beat), 0)
        elif word == "last":
            last = rest or None
    return GuardState(rule_loaded, poll_s, pid, alive, age, last)
