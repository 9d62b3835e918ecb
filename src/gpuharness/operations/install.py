"""install and configure: each phase is one batched SSH exec with a deadline, journaled at each transition."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Final, LiteralString, final

from gpuharness.core.confinement import plain_name
from gpuharness.core.deployment import Deployment
from gpuharness.core.errors import UserError
from gpuharness.core.lifecycle import transition
from gpuharness.core.policy import Policy
from gpuharness.core.runtimes import DEFAULT_OUTPUTS
from gpuharness.health.gate import gate_command, next_step
from gpuharness.operations.context import Context
from gpuharness.operations.failure import Failure, classify, transport_failure
from gpuharness.operations.guard import DEFAULT_POLL_S, GuardPlan, guard_plan, install_guard
from gpuharness.operations.phase_output import PhaseOutput
from gpuharness.remote import Remote, RemoteError
from gpuharness.remote.lines import lines_of
from gpuharness.remote.script import ShellScript

EXIT_HASH = 3  # written in _INSTALL's shell
EXIT_DISK = 28
URL: Final = re.compile(r"(https?|file)://", re.IGNORECASE)


@final
@dataclass(frozen=True, slots=True)
class PhaseResult:
    deployment: Deployment
    lines: tuple[str, ...]
    duration_s: float


def _model(ctx: Context, name: str | None) -> dict[str, Any] | None:
    if not name:
        return None
    for model in ctx.registry.items("models.json"):
        if model["name"] == name:
            return model
    raise UserError(f"no model {name!r}", path=ctx.registry.path("models.json"),
                    hint="add its files (path, url, sha256, size) to models.json")


def workflow_manifest(ctx: Context, workflow_id: str | None) -> dict[str, Any] | None:
    """The workflow manifest from workflows.json (latest version when several)."""
    if not workflow_id:
        return None
    found = [w for w in ctx.registry.items("workflows.json") if w["id"] == workflow_id]
    if not found:
        raise UserError(f"no workflow {workflow_id!r}", path=ctx.registry.path("workflows.json"),
                        hint="add the workflow manifest (id, version, runtime, test_generation)")
    return max(found, key=lambda w: int(w["version"]))


#: The install script's own shell: reads the workspace as "$ws" and each file's values as arguments of `one`.
_INSTALL: tuple[LiteralString, ...] = (
    'mkdir -p "$ws/models" "$ws/$outputs" "$ws/jobs" || { printf \'GH-ERROR cannot create %s\\n\' "$ws"; exit 10; }',
    'free_kb=$(df -Pk "$ws" | awk \'NR==2 {print $4}\')',
    'if [ -n "$free_kb" ] && [ "$free_kb" -lt "$need_kb" ]; then',
    '  printf \'GH-ERROR OSError: [Errno 28] No space left on device: need %s KB in %s (model files + disk_margin_gb '
    '%s), free %s KB\\n\' "$need_kb" "$ws" "$margin_gb" "$free_kb"; exit 28',
    "fi",
    'sum() { sha256sum "$1" 2>/dev/null | cut -d" " -f1; }',
    # a watcher reports the download's byte count while it runs (so the bar moves during it) and is stopped
    # the moment the download ends; its sleep keeps no hold on stdout
    'bytes() { printf \'GH-BYTES %s %s\\n\' "$([ -f "$1" ] && wc -c < "$1" || echo 0)" "$1"; }',
    'fetch() { ( while :; do bytes "$2.part"; sleep 0.2 >/dev/null 2>&1 || sleep 1 >/dev/null 2>&1; done ) & '
    'watcher=$!; case "$1" in file://*) cp -- "${1#file://}" "$2.part" ;; *) curl -fsSL -o "$2.part" "$1" ;; esac; '
    'fetched=$?; kill "$watcher" 2>/dev/null; wait "$watcher" 2>/dev/null; '
    '[ "$fetched" -eq 0 ] || { printf \'GH-ERROR download failed: %s\\n\' "$1"; rm -f "$2.part"; return 1; }; '
    'bytes "$2.part"; mv "$2.part" "$2"; }',
    # one INDEX TOTAL PATH SHA256 URL: fetch and verify one file; a mismatch re-downloads once, then exits 3
    'one() {',
    '  f="$ws/models/$3"; mkdir -p "$(dirname "$f")"',
    '  if [ -f "$f" ] && [ "$(sum "$f")" = "$4" ]; then printf \'GH-PROGRESS %s/%s cached %s\\n\' "$1" "$2" "$3"; '
    'return 0; fi',
    '  fetch "$5" "$f" || exit 4',
    '  if [ "$(sum "$f")" != "$4" ]; then',
    '    printf \'GH-RETRY %s: checksum mismatch (expected %s, got %s); re-downloading once\\n\' "$3" "$4" '
    '"$(sum "$f")"',
    '    rm -f "$f"; fetch "$5" "$f" || exit 4',
    '    if [ "$(sum "$f")" != "$4" ]; then',
    '      printf \'GH-ERROR %s: checksum mismatch after re-download (expected %s, got %s)\\n\' "$3" "$4" '
    '"$(sum "$f")"',
    '      rm -f "$f"; exit 3',
    "    fi",
    "  fi",
    '  printf \'GH-PROGRESS %s/%s verified %s\\n\' "$1" "$2" "$3"',
    "}",
)


def install_script(ws: str, files: list[dict[str, Any]], margin_gb: float = 0.0, *,
                   outputs: str = DEFAULT_OUTPUTS) -> str:
    """One POSIX shell script: the workspace's folders made (`outputs`: the folder its jobs keep their outputs in),
    the disk check (the files plus policy disk_margin_gb), then each model file fetched and sha256-verified under
    <workspace>/models; a mismatch re-downloads once, then fails with exit 3. Every value is a quoted argument; a
    file path that would leave the models folder is refused before any exec."""
    need_kb = sum(int(f.get("size") or 0) for f in files) // 1024 + 1 + int(margin_gb * 1024 * 1024)
    script = ShellScript(workspace=ws).let("need_kb", need_kb).let("margin_gb", f"{margin_gb:g}")
    script.let("outputs", script.relative(outputs, what="the runtime's outputs folder")).code(*_INSTALL)
    for index, item in enumerate(files, 1):
        path = script.relative(str(item["path"]), what="models.json file path")
        url = str(item.get("url") or "")
        if not URL.match(url):  # a url is an argument of curl or cp: it may not read as an option
            raise UserError(f"the url of {path!r} is not http://, https:// or file://: {url!r}",
                            hint="fix models.json; nothing was sent to the host")
        script.call("one", index, len(files), path, item["sha256"], url)
    return script.code('echo "GH-DONE install"').text()


def configure_script(ws: str, workflow: dict[str, Any] | None, guard: GuardPlan | None = None,
                     rule_words: str = "") -> str:
    """One POSIX shell script: the workflow's setup steps (shell the user wrote, sent as written), then its graph
    written into <workspace>/workflows/<id>.json (the id confined to a plain file name, the graph quoted), then the
    shutdown guard started detached where the deployment has one (operations.guard)."""
    script = ShellScript(workspace=ws, header=("set -eu",)).code('mkdir -p "$ws/workflows"', 'cd "$ws"')
    if workflow is not None:
        steps = list(workflow.get("setup") or [])
        for index, step in enumerate(steps, 1):
            script.call("echo", f"GH-PROGRESS {index}/{len(steps)} setup")
            script.trusted(str(step), why="a setup step of workflows.json")
        graph = json.dumps({"id": workflow["id"], "version": workflow["version"],
                            "graph": workflow.get("graph") or {}}, sort_keys=True)
        name = plain_name(f"{workflow['id']}.json", what="workflow id")
        script.let("graph", graph).let("graph_file", f"workflows/{name}")
        script.code("printf '%s\\n' \"$graph\" > \"$graph_file\"")
    if guard is not None and guard.armed:
        install_guard(script, guard, rule_words)
    return script.code('echo "GH-DONE configure"').text()


def _run_phase(ctx: Context, deployment: Deployment, phase: str, script: str, deadline_s: float,
               files: list[dict[str, Any]] | None = None) -> tuple[tuple[str, ...], float, Failure | None]:
    """One exec on one connection for this phase; its progress is said (and its downloads' bytes shown) as the
    lines arrive. Returns (output lines, duration, classified failure)."""
    ctx.say(f"{phase}: {deployment.id} over {deployment.ssh_route} (one batched exec, deadline {deadline_s:g} s)")
    remote: Remote | None = None
    output = PhaseOutput(ctx, files or [])
    try:
        remote = ctx.remotes(deployment)
        result = remote.exec(script, deadline_s=deadline_s, on_line=output.line)
    except RemoteError as exc:
        return (), 0.0, transport_failure(exc, phase)
    finally:
        output.close()
        if remote is not None:
            remote.close()
    lines = tuple(lines_of(result.stdout))
    if result.timed_out:
        return lines, result.duration_s, Failure("timeout", f"{phase} timed out after {deadline_s:g} s",
                                                 "raise the deadline or check the host; no blind retry", False)
    if result.exit_status != 0:
        errors = [x for x in lines if x.startswith("GH-ERROR")]
        text = "\n".join([*errors, *lines, result.stderr])
        return lines, result.duration_s, classify(text)
    return lines, result.duration_s, None


def _fail(ctx: Context, deployment_id: str, phase: str, failure: Failure) -> UserError:
    transition(ctx.registry, deployment_id, "error", error=f"{phase} failed: {failure.message()}",
               marker={"cause": failure.cause}, next_action=f"fix, then gpuharness {phase} {deployment_id}")
    return UserError(f"{phase} failed: {failure.message()}", place=deployment_id,
                     hint=f"the deployment is marked error; fix the cause, then re-run `gpuharness {phase}`")


def install(ctx: Context, deployment_id: str, *, deadline_s: float = 1800.0) -> PhaseResult:
    """Download and verify the model files (one exec); provisioning -> installing -> configuring."""
    deployment = ctx.registry.deployment(deployment_id)
    if deployment.is_serverless or deployment.ssh_route is None:
        raise UserError(f"{deployment_id} has no SSH route" + (": its instance never came up" if
                        deployment.never_came_up else " (a serverless endpoint, or a host without one)"),
                        place=deployment_id, hint=next_step(deployment) if deployment.never_came_up else
                        f"nothing to install on it; next: `{gate_command(deployment_id)}`")
    model = _model(ctx, deployment.model)
    files = list(model["files"]) if model else []
    missing = [f["path"] for f in files if not f.get("url")]
    if missing:
        raise UserError(f"model files without a url: {', '.join(missing)}", path=ctx.registry.path("models.json"),
                        hint="give each file a url to download from")
    if deployment.status == "installing":  # an earlier install died mid-way: say so, then start over
        transition(ctx.registry, deployment_id, "error", error="a previous install did not finish",
                   note="install interrupted", next_action=f"gpuharness install {deployment_id}")
    deployment = transition(ctx.registry, deployment_id, "installing", route=deployment.ssh_route,
                            marker={"files": len(files)}, next_action="wait for install")
    margin = Policy(ctx.registry.policy_document()).disk_margin_gb
    script = install_script(deployment.workspace, files, margin, outputs=deployment.outputs_folder)
    lines, duration, failed = _run_phase(ctx, deployment, "install", script, deadline_s, files)
    if failed is not None:
        raise _fail(ctx, deployment_id, "install", failed)
    deployment = transition(ctx.registry, deployment_id, "configuring", route=deployment.ssh_route,
                            marker={"verified_files": len(files), "duration_s": round(duration, 3)},
                            next_action=f"gpuharness configure {deployment_id}", note="model files verified")
    return PhaseResult(deployment, lines, duration)


def configure(ctx: Context, deployment_id: str, *, deadline_s: float = 900.0,
              guard_poll_s: float = DEFAULT_POLL_S) -> PhaseResult:
    """Runtime setup from the workflow manifest and the shutdown guard (one exec); configuring -> health-checking.
    guard_poll_s: how often the guard looks at the runtime and the clock."""
    deployment = ctx.registry.deployment(deployment_id)
    if deployment.status != "configuring":
        raise UserError(f"{deployment_id} is {deployment.status}, configure needs `configuring`",
                        place=deployment_id, hint=f"next: {next_step(deployment)}")
    workflow = workflow_manifest(ctx, deployment.workflow)
    guard = guard_plan(deployment, ctx.registry.provider(deployment.provider), poll_s=guard_poll_s)
    if guard is not None and guard.warning:
        ctx.say(f"WARNING {guard.warning}")
    rule = deployment.shutdown_rule.words() if deployment.shutdown_rule else ""
    lines, duration, failed = _run_phase(ctx, deployment, "configure",
                                         configure_script(deployment.workspace, workflow, guard, rule), deadline_s)
    if failed is not None:
        raise _fail(ctx, deployment_id, "configure", failed)
    deployment = transition(ctx.registry, deployment_id, "health-checking", route=deployment.ssh_route,
                            marker={"workflow": workflow["id"] if workflow else None,
                                    "duration_s": round(duration, 3)},
                            next_action=gate_command(deployment_id),
                            note="runtime configured; only the health suite may mark it ready")
    return PhaseResult(deployment, lines, duration)
