"""install and configure: each phase is one batched SSH exec with a deadline, journaled at each transition."""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from typing import Any, final

from gpuharness.core.deployment import Deployment
from gpuharness.core.errors import UserError
from gpuharness.core.lifecycle import transition
from gpuharness.health.gate import gate_command
from gpuharness.operations.context import Context
from gpuharness.operations.failure import Failure, classify, transport_failure
from gpuharness.operations.phase_output import PhaseOutput
from gpuharness.remote import Remote, RemoteError

EXIT_HASH = 3
EXIT_DISK = 28


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


def install_script(ws: str, files: list[dict[str, Any]], margin_gb: float = 0.0) -> str:
    """One POSIX shell script: disk check (the files plus policy disk_margin_gb), then each model file fetched
    and sha256-verified; a mismatch re-downloads once, then fails with exit 3."""
    q = shlex.quote
    need_kb = sum(int(f.get("size") or 0) for f in files) // 1024 + 1 + int(margin_gb * 1024 * 1024)
    lines = [
        "set -u",
        f"ws={q(ws)}",
        'mkdir -p "$ws/models" "$ws/outputs" "$ws/jobs" || { echo "GH-ERROR cannot create $ws"; exit 10; }',
        'free_kb=$(df -Pk "$ws" | awk \'NR==2 {print $4}\')',
        f'if [ -n "$free_kb" ] && [ "$free_kb" -lt {need_kb} ]; then',
        f'  echo "GH-ERROR OSError: [Errno 28] No space left on device: need {need_kb} KB in $ws '
        f'(model files + disk_margin_gb {margin_gb:g}), free ${{free_kb}} KB"; exit 28',
        "fi",
        'sum() { sha256sum "$1" 2>/dev/null | cut -d" " -f1; }',
        # a watcher reports the download's byte count while it runs (so the bar moves during it) and is stopped
        # the moment the download ends; its sleep keeps no hold on stdout
        'bytes() { echo "GH-BYTES $([ -f "$1" ] && wc -c < "$1" || echo 0) $1"; }',
        'fetch() { ( while :; do bytes "$2.part"; sleep 0.2 >/dev/null 2>&1 || sleep 1 >/dev/null 2>&1; done ) & '
        'watcher=$!; case "$1" in file://*) cp "${1#file://}" "$2.part" ;; *) curl -fsSL -o "$2.part" "$1" ;; esac; '
        'fetched=$?; kill "$watcher" 2>/dev/null; wait "$watcher" 2>/dev/null; '
        '[ "$fetched" -eq 0 ] || { echo "GH-ERROR download failed: $1"; rm -f "$2.part"; return 1; }; '
        'bytes "$2.part"; mv "$2.part" "$2"; }',
    ]
    total = len(files)
    for index, item in enumerate(files, 1):
        path, sha, url = str(item["path"]), str(item["sha256"]), str(item.get("url") or "")
        dest = f'"$ws/models/"{q(path)}'
        lines += [
            f'f={dest}; mkdir -p "$(dirname "$f")"',
            f'if [ -f "$f" ] && [ "$(sum "$f")" = {q(sha)} ]; then echo "GH-PROGRESS {index}/{total} cached {path}";',
            f'else fetch {q(url)} "$f" || exit 4',
            f'  if [ "$(sum "$f")" != {q(sha)} ]; then',
            f'    echo "GH-RETRY {path}: checksum mismatch (expected {sha}, got $(sum "$f")); re-downloading once"',
            f'    rm -f "$f"; fetch {q(url)} "$f" || exit 4',
            f'    if [ "$(sum "$f")" != {q(sha)} ]; then',
            f'      echo "GH-ERROR {path}: checksum mismatch after re-download (expected {sha}, got $(sum "$f"))"',
            f'      rm -f "$f"; exit {EXIT_HASH}',
            "    fi",
            "  fi",
            f'  echo "GH-PROGRESS {index}/{total} verified {path}"',
            "fi",
        ]
    lines.append('echo "GH-DONE install"')
    return "\n".join(lines) + "\n"


def configure_script(ws: str, workflow: dict[str, Any] | None) -> str:
    """One POSIX shell script: the workflow's setup steps, then its graph written into the workspace."""
    q = shlex.quote
    lines = ["set -eu", f"ws={q(ws)}", 'mkdir -p "$ws/workflows"', 'cd "$ws"']
    if workflow is not None:
        steps = list(workflow.get("setup") or [])
        for index, step in enumerate(steps, 1):
            lines.append(f'echo "GH-PROGRESS {index}/{len(steps)} setup"')
            lines.append(step)
        graph = json.dumps({"id": workflow["id"], "version": workflow["version"],
                            "graph": workflow.get("graph") or {}}, sort_keys=True)
        lines.append(f"printf '%s\\n' {q(graph)} > workflows/{q(str(workflow['id']))}.json")
    lines.append('echo "GH-DONE configure"')
    return "\n".join(lines) + "\n"


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
    lines = tuple(result.stdout.splitlines())
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
        raise UserError(f"{deployment_id} has no SSH route (serverless endpoint?)", place=deployment_id,
                        hint="serverless endpoints are health-checked directly: pytest checks/health")
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
    margin = float(ctx.registry.policy_document().get("disk_margin_gb") or 0.0)
    script = install_script(deployment.workspace, files, margin)
    lines, duration, failed = _run_phase(ctx, deployment, "install", script, deadline_s, files)
    if failed is not None:
        raise _fail(ctx, deployment_id, "install", failed)
    deployment = transition(ctx.registry, deployment_id, "configuring", route=deployment.ssh_route,
                            marker={"verified_files": len(files), "duration_s": round(duration, 3)},
                            next_action=f"gpuharness configure {deployment_id}", note="model files verified")
    return PhaseResult(deployment, lines, duration)


def configure(ctx: Context, deployment_id: str, *, deadline_s: float = 900.0) -> PhaseResult:
    """Runtime setup from the workflow manifest (one exec); configuring -> health-checking."""
    deployment = ctx.registry.deployment(deployment_id)
    if deployment.status != "configuring":
        raise UserError(f"{deployment_id} is {deployment.status}, configure needs `configuring`",
                        place=deployment_id, hint=f"run `gpuharness install {deployment_id}` first")
    workflow = workflow_manifest(ctx, deployment.workflow)
    lines, duration, failed = _run_phase(ctx, deployment, "configure",
                                         configure_script(deployment.workspace, workflow), deadline_s)
    if failed is not None:
        raise _fail(ctx, deployment_id, "configure", failed)
    deployment = transition(ctx.registry, deployment_id, "health-checking", route=deployment.ssh_route,
                            marker={"workflow": workflow["id"] if workflow else None,
                                    "duration_s": round(duration, 3)},
                            next_action=gate_command(deployment_id),
                            note="runtime configured; only the health suite may mark it ready")
    return PhaseResult(deployment, lines, duration)
