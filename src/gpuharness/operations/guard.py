"""The guard: a POSIX shell loop that `configure` leaves running on the pod, so a deployment's shutdown rule
(idle minutes, max hours, deadline) stops the pod even when no gpuharness process is connected.

It needs no Python and no package on the host (curl or wget, whichever exists), runs detached (setsid/nohup),
and stops the pod only through what the provider itself places in it, as its adapter declares
(Capabilities.in_pod_stop: the instance's id and an instance-scoped key in the pod's environment, and the call
that stops it). The operator's key never goes onto the pod. A provider without an in-pod stop gets the provider
entry's `guard_action` ("shutdown": `shutdown -h now`), else no guard, and configure says so in one line. What
counts as activity is the runtime's own (core.runtimes idle_probe).

Everything lives under <workspace>/.gh-guard: guard.sh (the project's own code), rule (the values, each one quoted
by the one remote-script builder), pid, heartbeat, and guard.log, whose last line says why it stopped the pod.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, LiteralString, final

from gpuharness.core.clock import parse_ts
from gpuharness.core.deployment import LIVE, Deployment
from gpuharness.core.errors import UserError
from gpuharness.core.runtimes import RUNTIMES
from gpuharness.operations.context import Context
from gpuharness.providers.base import ADAPTERS, InPodStop
from gpuharness.providers.factory import capabilities_of
from gpuharness.remote import RemoteError
from gpuharness.remote.lines import lines_of
from gpuharness.remote.script import ShellScript

#: the pod's environment may name another API base for the in-pod stop (the simulator places its own there)
API_ENV: Final = "GPUHARNESS_GUARD_API"
DEFAULT_POLL_S: Final = 30.0


@final
@dataclass(frozen=True, slots=True)
class GuardPlan:
    """What configure installs: the stop (`api`: the provider's in-pod call, `shutdown`, None: no guard), the
    rule's values, and the runtime whose routes the guard reads."""

    action: str | None
    idle_minutes: float | None
    max_hours: float | None
    deadline: str | None
    launch_epoch: int
    runtime: str
    port: int | None
    poll_s: float
    stop: InPodStop | None = None
    warning: str | None = None

    @property
    def armed(self) -> bool:
        return self.action is not None

    def rule_text(self) -> str:
        """The rule file: one quoted assignment per value, sourced by guard.sh."""
        deadline = int(parse_ts(self.deadline).timestamp()) if self.deadline else ""
        stop = self.stop
        rule = ShellScript(header=())
        for name, value in (("action", self.action), ("idle_minutes", _number(self.idle_minutes)),
                            ("max_hours", _number(self.max_hours)), ("deadline", self.deadline or ""),
                            ("deadline_end", deadline), ("launch", self.launch_epoch),
                            ("runtime", self.runtime), ("port", self.port or ""), ("poll_s", _number(self.poll_s)),
                            ("id_env", stop.id_env if stop else ""), ("key_env", stop.key_env if stop else ""),
                            ("method", stop.method if stop else ""), ("path", stop.path if stop else ""),
                            ("body", stop.body if stop else ""), ("api_default", stop.api_base if stop else "")):
            rule.let(name, value)
        return rule.text()

    def code(self) -> str:
        """guard.sh: its head, the runtime's own look at its service (core.runtimes idle_probe), its loop."""
        probe = RUNTIMES[self.runtime].idle_probe if self.runtime in RUNTIMES else ()
        return "\n".join((*_HEAD, "probe() {", "  busy=0; mark=", *("  " + line for line in probe), "}", *_LOOP))


def _number(value: float | None) -> str:
    return "" if value is None else f"{value:g}"


def guard_plan(deployment: Deployment, provider: dict[str, Any], *, poll_s: float = DEFAULT_POLL_S) -> GuardPlan | None:
    """The guard a deployment gets at configure, or None when it has no shutdown rule. A provider without an in-pod
    stop gets its entry's `guard_action` ("shutdown"), else no guard and a one-line warning."""
    rule = deployment.shutdown_rule
    if rule is None or (rule.idle_minutes is None and rule.max_hours is None and rule.deadline is None):
        return None
    stop = capabilities_of(provider).in_pod_stop if provider.get("kind") in ADAPTERS else None
    action: str | None = "api" if stop is not None else None
    warning = None
    if action is None:
        if provider.get("guard_action") == "shutdown":
            action = "shutdown"
        else:
            warning = (f"no guard on {deployment.id}: {provider.get('kind')} places no in-pod stop and providers.json "
                       f"gives no guard_action \"shutdown\"; only `gpuharness reap --apply` carries out its shutdown "
                       f"rule (`gpuharness providers add {provider.get('name')} --kind {provider.get('kind')}"
                       + (f" --key-env {provider['credential_env']}" if provider.get("credential_env") else "")
                       + " --guard-action shutdown --replace` gives one)")
    launch = int(parse_ts(deployment.created_at).timestamp()) if deployment.created_at else 0
    return GuardPlan(action, rule.idle_minutes, rule.max_hours, rule.deadline, launch, deployment.runtime or "",
                     deployment.service_port, poll_s, stop, warning)


#: guard.sh's head: reads its values from "$g/rule" only; `check` says whether the pod holds what its stop needs.
_HEAD: Final[tuple[LiteralString, ...]] = (
    "set -u",
    'g=$1; mode=${2:-run}',
    '. "$g/rule" || exit 3',
    'minute=${GPUHARNESS_GUARD_MINUTE_S:-60}',
    'api=${GPUHARNESS_GUARD_API:-$api_default}',
    'rt=${GPUHARNESS_GUARD_RUNTIME:-http://127.0.0.1:$port}',
    # what the provider placed in the pod: this shell's environment, else the container's first process's
    'ident() { eval "v=\\${$1:-}"; if [ -z "$v" ] && [ -r /proc/1/environ ]; then '
    'v=$(tr "\\000" "\\n" < /proc/1/environ 2>/dev/null | sed -n "s/^$1=//p" | head -n 1); fi; printf "%s" "$v"; }',
    'need() { [ "$action" = api ] || return 0; for n in "$id_env" "$key_env"; do [ -n "$(ident "$n")" ] || { '
    'printf "GH-GUARD refused: the pod holds no %s (the guard uses only what the provider places in the pod; '
    'the operator key never goes there)\\n" "$n"; return 1; }; done; '
    'if ! command -v curl >/dev/null 2>&1 && ! command -v wget >/dev/null 2>&1; '
    'then echo "GH-GUARD refused: neither curl nor wget on the pod"; return 1; fi; return 0; }',
    'if [ "$mode" = check ]; then need; exit $?; fi',
    'echo $$ > "$g/pid"',
    'get() { if command -v curl >/dev/null 2>&1; then curl -fsS -m 10 "$1" 2>/dev/null; '
    'elif command -v wget >/dev/null 2>&1; then wget -q -T 10 -O - "$1" 2>/dev/null; else return 127; fi; }',
    # URL METHOD BODY KEY: the key goes to curl on its stdin, never on a command line
    'send() { key=$4; if command -v curl >/dev/null 2>&1; then printf "Authorization: Bearer %s\\n" "$key" | '
    'curl -fsS -m 30 -X "$2" -H @- -H "Content-Type: application/json" --data "$3" "$1"; else '
    'wget -q -T 30 -O - --method="$2" --header="Authorization: Bearer $key" '
    '--header="Content-Type: application/json" --body-data="$3" "$1"; fi; }',
    'act() { case "$action" in '
    'api) send "$api$(printf "$path" "$(ident "$id_env")")" "$method" "$body" "$(ident "$key_env")" ;; '
    'shutdown) shutdown -h now || poweroff ;; *) return 1 ;; esac; }',
    'secs() { awk -v a="$1" -v b="$2" \'BEGIN {printf "%d", a * b}\'; }',
    'per() { awk -v a="$1" -v b="$2" \'BEGIN {printf "%d", a / b}\'; }',
    'iso() { date -u -d "@$1" +%Y-%m-%dT%H:%M:%SZ 2>/dev/null || date -u +%Y-%m-%dT%H:%M:%SZ; }',
)

#: guard.sh's loop: busy or a new activity mark resets the idle clock; the first rule that holds stops the pod.
_LOOP: Final[tuple[LiteralString, ...]] = (
    'idle_s=; [ -n "$idle_minutes" ] && idle_s=$(secs "$idle_minutes" "$minute")',
    'max_end=; [ -n "$max_hours" ] && max_end=$((launch + $(secs "$max_hours" "$(secs 60 "$minute")")))',
    'last=$(date +%s); probe; prev=$mark; tries=0',
    "while :; do",
    '  now=$(date +%s); echo "$now" > "$g/heartbeat"; probe',
    '  if [ "$busy" = 1 ] || [ "$mark" != "$prev" ]; then last=$now; prev=$mark; fi',
    '  idle=$((now - last)); why=',
    '  if [ -n "$deadline_end" ] && [ "$now" -ge "$deadline_end" ]; then why="deadline $deadline"',
    '  elif [ -n "$max_end" ] && [ "$now" -ge "$max_end" ]; then why="max_hours $max_hours h"',
    '  elif [ -n "$idle_s" ] && [ "$idle" -ge "$idle_s" ]; then why="idle $(per "$idle" "$minute") min"; fi',
    '  if [ -n "$why" ]; then',
    '    if [ "$tries" = 0 ]; then printf "GH-GUARD stop at=%s; why=%s; evidence=runtime %s, queue empty, no new '
    'activity since %s (%s s); rule idle %s min, max %s h, deadline %s\\n" "$(iso "$now")" "$why" "${runtime:-none}" '
    '"$(iso "$last")" "$idle" "${idle_minutes:--}" "${max_hours:--}" "${deadline:--}" >> "$g/guard.log"; fi',
    '    tries=$((tries + 1))',
    '    if act >/dev/null 2>&1; then echo "GH-GUARD stopped at=$(iso "$(date +%s)")" >> "$g/guard.log"; exit 0; fi',
    '    echo "GH-GUARD stop call failed (try $tries) at=$(iso "$(date +%s)")" >> "$g/guard.log"',
    "  fi",
    '  sleep "$poll_s"',
    "done",
)

#: the configure script's part: write guard.sh and the rule, stop an older guard, check, start detached.
_INSTALL: Final[tuple[LiteralString, ...]] = (
    'g="$PWD/.gh-guard"; mkdir -p "$g"',  # configure runs in the workspace; the guard gets an absolute path
    'if [ -f "$g/pid" ]; then kill "$(cat "$g/pid")" 2>/dev/null || true; rm -f "$g/pid"; fi',
    'printf "%s\\n" "$guard_code" > "$g/guard.sh"; printf "%s" "$guard_rule" > "$g/rule"',
    'if why=$(sh "$g/guard.sh" "$g" check); then',
    '  if command -v setsid >/dev/null 2>&1; then setsid nohup sh "$g/guard.sh" "$g" >> "$g/guard.out" 2>&1 '
    '< /dev/null &',
    '  else nohup sh "$g/guard.sh" "$g" >> "$g/guard.out" 2>&1 < /dev/null & fi',
    '  echo $! > "$g/pid"',  # at once, not when the guard first runs: a probe right after configure sees it
    '  echo "GH-GUARD armed: pid $! ($guard_words; checks every $guard_poll s)"',
    'else echo "$why"; rm -f "$g/rule"; fi',
)


def install_guard(script: ShellScript, plan: GuardPlan, words: str) -> ShellScript:
    """Add the guard's installation to a configure script (its workspace is "$ws")."""
    script.let("guard_code", plan.code()).let("guard_rule", plan.rule_text())
    script.let("guard_words", words).let("guard_poll", _number(plan.poll_s))
    return script.code(*_INSTALL)


def arm(ctx: Context, deployment_id: str, *, poll_s: float = DEFAULT_POLL_S, deadline_s: float = 120.0) -> list[str]:
    """(Re-)arm a live deployment's guard in one exec: the old one stopped, the rule written, the loop started.
    Its GH-GUARD lines (armed, or refused and why)."""
    deployment = ctx.registry.deployment(deployment_id)
    if deployment.ssh_route is None or deployment.status not in LIVE:
        raise UserError(f"{deployment_id} is {deployment.status} with no SSH route: no host to arm a guard on",
                        place=deployment_id, hint="a guard runs on a live pod reached over SSH")
    plan = guard_plan(deployment, ctx.registry.provider(deployment.provider), poll_s=poll_s)
    if plan is None or not plan.armed:
        raise UserError(plan.warning if plan is not None and plan.warning else
                        f"{deployment_id} has no shutdown rule: nothing for a guard to carry out",
                        place=deployment_id, hint="give it idle_minutes, max_hours or a deadline in deployments.json")
    rule = deployment.shutdown_rule.words() if deployment.shutdown_rule else ""
    script = ShellScript(workspace=deployment.workspace).code('mkdir -p "$ws" && cd "$ws" || exit 10')
    install_guard(script, plan, rule)
    remote = ctx.remotes(deployment)
    try:
        result = remote.exec(script.text(), deadline_s=deadline_s)
    except RemoteError as exc:
        raise UserError(f"could not reach {deployment_id}: {exc}", place=deployment_id,
                        hint="check the host, then `gpuharness guard` again; reap --apply is the second line") from exc
    finally:
        remote.close()
    lines = [line for line in lines_of(result.stdout) if line.startswith("GH-GUARD")]
    if not lines or result.exit_status != 0:
        raise UserError(f"the guard of {deployment_id} was not armed (exit {result.exit_status})",
                        place=deployment_id, hint=(result.stderr.strip().splitlines() or ["see the host"])[-1])
    return lines
