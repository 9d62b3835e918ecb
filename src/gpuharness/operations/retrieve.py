"""retrieve: artifacts off the instance over the phase's SSH connection, resumable and sha256-verified,
recorded as new ledger lines (corrections: a terminal job's line is never rewritten)."""

from __future__ import annotations

import hashlib
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, final

from gpuharness.core.errors import UserError
from gpuharness.core.ledger import Ledger
from gpuharness.core.lifecycle import transition
from gpuharness.operations.context import Context
from gpuharness.remote import Remote, RemoteError

BAR_WIDTH = 24


@final
@dataclass(slots=True)
class RetrieveResult:
    synced: list[dict[str, Any]] = field(default_factory=list)  # {job, name, uri, sha256, size}
    bytes_transferred: int = 0
    jobs: list[str] = field(default_factory=list)


def unsynced(ledger: Ledger, deployment_id: str) -> dict[str, list[dict[str, Any]]]:
    """Per job of this deployment: artifacts that are neither synced nor explicitly discarded."""
    pending: dict[str, list[dict[str, Any]]] = {}
    for record in ledger.current().values():
        if record["deployment_id"] != deployment_id:
            continue
        waiting = [a for a in record.get("artifacts") or [] if not a.get("synced_at") and not a.get("discarded")]
        if waiting:
            pending[record["id"]] = waiting
    return pending


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def bar(done: int, total: int) -> str:
    filled = BAR_WIDTH if total <= 0 else min(BAR_WIDTH, done * BAR_WIDTH // total)
    return "[" + "#" * filled + "-" * (BAR_WIDTH - filled) + f"] {done:,}/{total:,} B"


def _remote_sums(remote: Remote, paths: list[str]) -> dict[str, tuple[str, int]]:
    """sha256 and size of every remote file, from one batched exec."""
    script = "for f in " + " ".join(shlex.quote(p) for p in paths) + (
        '; do if [ -f "$f" ]; then printf "%s %s %s\\n" "$(sha256sum "$f" | cut -d" " -f1)" '
        '"$(wc -c < "$f" | tr -d " ")" "$f"; else printf "MISSING 0 %s\\n" "$f"; fi; done\n')
    result = remote.exec(script, deadline_s=120.0)
    sums: dict[str, tuple[str, int]] = {}
    for line in result.stdout.splitlines():
        parts = line.split(" ", 2)
        if len(parts) == 3:
            sums[parts[2]] = (parts[0], int(parts[1]) if parts[1].isdigit() else 0)
    return sums


def retrieve(ctx: Context, deployment_id: str, to: str | Path) -> RetrieveResult:
    """Sync every unsynced artifact of the deployment into `to/<job>/<name>`; one connection for the phase."""
    registry = ctx.registry
    deployment = registry.deployment(deployment_id)
    ledger = Ledger(registry.ledger_path)
    pending = unsynced(ledger, deployment_id)
    result = RetrieveResult()
    if not pending:
        ctx.say(f"{deployment_id}: nothing to retrieve (every artifact is synced or discarded)")
        return result
    if deployment.ssh_route is None:
        raise UserError(f"{deployment_id} has no SSH route to retrieve from", place=deployment_id)
    status = deployment.status
    if status == "ready":
        transition(registry, deployment_id, "retrieving", route=deployment.ssh_route,
                   marker={"jobs": sorted(pending)}, next_action="wait for the transfers")
    destination = Path(to).resolve()
    remote = ctx.remotes(deployment)
    problems: list[str] = []
    try:
        paths = [str(a["remote_path"]) for items in pending.values() for a in items if a.get("remote_path")]
        sums = _remote_sums(remote, paths) if paths else {}
        for job_id, items in sorted(pending.items()):
            synced_now: dict[str, dict[str, Any]] = {}
            for artifact in items:
                name, remote_path = str(artifact["name"]), artifact.get("remote_path")
                if not remote_path:
                    problems.append(f"{job_id}/{name}: no remote_path recorded")
                    continue
                expected, size = sums.get(str(remote_path), ("MISSING", 0))
                if expected == "MISSING":
                    problems.append(f"{job_id}/{name}: {remote_path} is missing on the host")
                    continue
                if artifact.get("sha256") and artifact["sha256"] != expected:
                    problems.append(f"{job_id}/{name}: the host's copy does not match the sha256 the runtime "
                                    f"reported ({expected[:12]} != {str(artifact['sha256'])[:12]})")
                    continue
                local = destination / job_id / name
                local.parent.mkdir(parents=True, exist_ok=True)
                moved = 0
                if local.exists() and sha256_file(local) != expected:
                    problems.append(f"{job_id}/{name}: {local} exists with other content; not overwritten "
                                    "(move it away, or retrieve --to another directory)")
                    continue
                if not local.exists():
                    # transfers land in <name>.part (resumed from its size), and are renamed once verified
                    partial = local.with_name(local.name + ".part")
                    for resume in (True, False):
                        try:
                            moved += remote.get_file(str(remote_path), str(partial), resume=resume)
                        except RemoteError as exc:
                            problems.append(f"{job_id}/{name}: transfer failed: {exc} (re-run retrieve: it resumes)")
                            break
                        if sha256_file(partial) == expected:
                            partial.replace(local)
                            break
                        ctx.say(f"  {job_id}/{name}: checksum mismatch after transfer; fetching again from byte 0")
                        partial.unlink()
                    else:
                        problems.append(f"{job_id}/{name}: checksum mismatch after re-transfer")
                if not local.exists():
                    continue
                result.bytes_transferred += moved
                ctx.say(f"  {job_id}/{name} {bar(local.stat().st_size, size)} sha256 {expected[:12]} ok")
                synced_now[name] = {"uri": local.as_uri(), "sha256": expected, "size": local.stat().st_size,
                                    "synced_at": ctx.now()}
            if synced_now:
                _record(ledger, job_id, synced_now, ctx.now())
                result.jobs.append(job_id)
                result.synced.extend({"job": job_id, "name": n, **v} for n, v in synced_now.items())
    except RemoteError as exc:
        problems.append(f"retrieve over {deployment.ssh_route} failed: {exc}")
    finally:
        remote.close()
        if status == "ready":
            transition(registry, deployment_id, "ready", route=deployment.ssh_route,
                       marker={"synced": len(result.synced)}, next_action=(
                           f"gpuharness destroy {deployment_id} --confirm {deployment_id}" if not problems
                           else f"gpuharness retrieve {deployment_id}"))
    if problems:
        raise UserError(f"{len(problems)} artifact(s) not synced: " + "; ".join(problems), place=deployment_id,
                        hint="synced ones are recorded; re-run retrieve (transfers resume)")
    return result


def _record(ledger: Ledger, job_id: str, synced: dict[str, dict[str, Any]], now: str) -> None:
    """A new line for the job with its artifacts' uri and synced_at; the old lines stay as they are."""
    current = ledger.current(job_id)
    if current is None:
        return
    artifacts = [{**a, **synced[a["name"]]} if a["name"] in synced else a for a in current.get("artifacts") or []]
    line = {k: v for k, v in current.items() if k not in ("ts",)}
    line.update(artifacts=artifacts, ts=now)
    if current["status"] in ("completed", "failed", "cancelled", "interrupted"):
        line.update(correction=True, reason="artifacts synced")
    ledger.append(line, check_sequence=True)
