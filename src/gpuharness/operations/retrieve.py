"""retrieve: artifacts off the instance over the phase's SSH connection, resumable and sha256-verified,
recorded as new ledger lines (corrections: a terminal job's line is never rewritten)."""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, final

from gpuharness.core import regular_file
from gpuharness.core.confinement import local_path, remote_within
from gpuharness.core.errors import UserError
from gpuharness.core.ledger import Ledger
from gpuharness.operations import retrieving
from gpuharness.operations.context import Context
from gpuharness.remote import Remote, RemoteError
from gpuharness.remote.script import ShellScript

#: the retrieve phase's deadline by default: an hour of transfers
DEFAULT_DEADLINE_S = 3600.0


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
    with regular_file.open_stream(path) as handle:  # a FIFO or a device there is refused, not read
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


#: sums PATH...: "sha256 size path" of each remote file, or "MISSING 0 path".
_SUMS: Final = ('sums() { for f in "$@"; do if [ -f "$f" ]; then printf "%s %s %s\\n" '
                '"$(sha256sum "$f" | cut -d" " -f1)" "$(wc -c < "$f" | tr -d " ")" "$f"; '
                'else printf "MISSING 0 %s\\n" "$f"; fi; done; }')


def _remote_sums(remote: Remote, workspace: str, paths: list[str], deadline_s: float) -> dict[str, tuple[str, int]]:
    """sha256 and size of every remote file (each confined under the workspace), from one batched exec."""
    script = ShellScript(workspace=workspace).code(_SUMS).call("sums", *paths)
    result = remote.exec(script.text(), deadline_s=deadline_s)
    if result.timed_out:
        raise RemoteError("timeout", f"the checksums did not come back within {deadline_s:g} s",
                          target=remote.target)
    sums: dict[str, tuple[str, int]] = {}
    for line in result.stdout.splitlines():
        parts = line.split(" ", 2)
        if len(parts) == 3:
            sums[parts[2]] = (parts[0], int(parts[1]) if parts[1].isdigit() else 0)
    return sums


def retrieve(ctx: Context, deployment_id: str, to: str | Path, *,
             deadline_s: float = DEFAULT_DEADLINE_S) -> RetrieveResult:
    """Sync every unsynced artifact of the deployment into `to/<job>/<name>`; one connection for the phase, which
    ends by deadline_s however the host behaves (what is not synced by then stays pending)."""
    registry = ctx.registry
    deployment = registry.deployment(deployment_id)
    ledger = Ledger(registry.ledger_path)
    pending = unsynced(ledger, deployment_id)
    if not pending and deployment.status != "retrieving":
        ctx.say(f"{deployment_id}: nothing to retrieve (every artifact is synced or discarded)")
        return RetrieveResult()
    if pending and deployment.ssh_route is None:
        raise UserError(f"{deployment_id} has no SSH route to retrieve from", place=deployment_id)
    # a ready deployment shows `retrieving` while the transfers run; one a dead retrieve left there is taken over
    with retrieving.hold(registry, deployment, sorted(pending)) as held:
        if held.resumed:
            ctx.say(f"{deployment_id}: resuming: the retrieve that held it had died")
        if not pending:
            held.next_action = f"gpuharness destroy {deployment_id} --confirm {deployment_id}"
            return RetrieveResult()
        sync = _Sync(ctx, ctx.remotes(deployment), Path(to).resolve(), deployment.workspace,
                     time.monotonic() + deadline_s)
        try:
            sync.all(ledger, pending)
        except RemoteError as exc:
            sync.problems.append(f"retrieve over {deployment.ssh_route} failed: {exc}")
        finally:
            sync.remote.close()
            held.next_action = (f"gpuharness destroy {deployment_id} --confirm {deployment_id}" if not sync.problems
                                else f"gpuharness retrieve {deployment_id}")
    if sync.problems:
        raise UserError(f"{len(sync.problems)} artifact(s) not synced: " + "; ".join(sync.problems),
                        place=deployment_id, hint="synced ones are recorded; re-run retrieve (transfers resume)")
    return sync.result


@final
@dataclass(slots=True)
class _Sync:
    """One retrieve's transfers over its one connection: what was synced, and what was not and why."""

    ctx: Context
    remote: Remote
    destination: Path
    workspace: str
    end: float  # the phase deadline (time.monotonic())
    result: RetrieveResult = field(default_factory=RetrieveResult)
    problems: list[str] = field(default_factory=list)

    def left(self) -> float:
        """Seconds left of the phase (at least a sliver, so the last call says why it stopped)."""
        return max(self.end - time.monotonic(), 0.01)

    def all(self, ledger: Ledger, pending: dict[str, list[dict[str, Any]]]) -> None:
        """Every pending artifact, job by job; each job's synced artifacts are recorded as one new ledger line."""
        paths = [path for items in pending.values() for a in items if (path := self.remote_path(a))]
        sums = _remote_sums(self.remote, self.workspace, paths, min(120.0, self.left())) if paths else {}
        for job_id, items in sorted(pending.items()):
            synced_now: dict[str, dict[str, Any]] = {}
            for artifact in items:
                synced = self.one(job_id, artifact, sums)
                if synced is not None:
                    synced_now[str(artifact["name"])] = synced
            if synced_now:
                _record(ledger, job_id, synced_now, self.ctx.now())
                self.result.jobs.append(job_id)
                self.result.synced.extend({"job": job_id, "name": n, **v} for n, v in synced_now.items())

    def one(self, job_id: str, artifact: dict[str, Any], sums: dict[str, tuple[str, int]]) -> dict[str, Any] | None:
        """Sync one artifact to <destination>/<job>/<name>: its sync record, or None (the problem is kept)."""
        label = f"{job_id}/{artifact['name']}"
        try:  # the job id, the name and the remote path came from the ledger and the host: all confined
            local = local_path(self.destination, job_id, str(artifact["name"]), what="artifact")
            remote_path = self.remote_path(artifact, refuse=True)
        except UserError as exc:
            self.problems.append(f"{label}: {exc.what}")
            return None
        expected, size = sums.get(remote_path, ("MISSING", 0))
        problem = _not_syncable(artifact, expected)
        if problem is None and local.exists() and sha256_file(local) != expected:
            problem = f"{local} exists with other content; not overwritten (move it away, or retrieve --to another " \
                      "directory)"
        if problem is not None:
            self.problems.append(f"{label}: {problem}")
            return None
        local.parent.mkdir(parents=True, exist_ok=True)
        if not local.exists():
            moved, problem = self.transfer(remote_path, local, expected, label, size)
            if problem is not None:
                self.problems.append(f"{label}: {problem}")
                return None
            self.result.bytes_transferred += moved
        self.ctx.say(f"  {label} {local.stat().st_size:,} B sha256 {expected[:12]} ok")
        return {"uri": local.as_uri(), "sha256": expected, "size": local.stat().st_size, "synced_at": self.ctx.now()}

    def remote_path(self, artifact: dict[str, Any], *, refuse: bool = False) -> str:
        """The artifact's remote path if it lies under the workspace; else "" (or, with refuse, the UserError)."""
        if not artifact.get("remote_path"):
            return ""
        try:
            return remote_within(self.workspace, str(artifact["remote_path"]), what="remote_path")
        except UserError:
            if refuse:
                raise
            return ""

    def transfer(self, remote_path: str, local: Path, expected: str, label: str,
                 size: int) -> tuple[int, str | None]:
        """Fetch into <name>.part (resumed from its size), renamed once its sha256 is right; a mismatch is fetched
        again once from byte 0. The bytes show on ctx.transfers as they arrive. Returns (bytes moved, problem)."""
        partial = local.with_name(local.name + ".part")
        moved = 0
        meter = self.ctx.transfers
        for resume in (True, False):
            start = partial.stat().st_size if resume and partial.exists() and partial.stat().st_size <= size else 0
            meter.begin(label, size, start)

            def progress(n: int, start: int = start) -> None:
                meter.advance(label, start + n)

            try:
                moved += self.remote.get_file(remote_path, str(partial), resume=resume, progress=progress,
                                              deadline_s=self.left())
            except RemoteError as exc:
                return moved, f"transfer failed: {exc} (re-run retrieve: it resumes)"
            finally:
                meter.end(label)
            if sha256_file(partial) == expected:
                partial.replace(local)
                return moved, None
            self.ctx.say(f"  {label}: checksum mismatch after transfer; fetching again from byte 0")
            partial.unlink()
        return moved, "checksum mismatch after re-transfer"


def _not_syncable(artifact: dict[str, Any], expected: str) -> str | None:
    """Why the artifact cannot be synced before any transfer: no path recorded, gone, or not what was reported."""
    if not artifact.get("remote_path"):
        return "no remote_path recorded"
    if expected == "MISSING":
        return f"{artifact['remote_path']} is missing on the host"
    if artifact.get("sha256") and artifact["sha256"] != expected:
        return (f"the host's copy does not match the sha256 the runtime reported ({expected[:12]} != "
                f"{str(artifact['sha256'])[:12]})")
    return None


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
