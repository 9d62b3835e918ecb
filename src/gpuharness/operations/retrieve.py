"""retrieve: artifacts off the instance over the phase's SSH connection, resumable and sha256-verified,
recorded as new ledger lines (corrections: a terminal job's line is never rewritten)."""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Final, final

from gpuharness.core.base_dir import BaseDir, Folder
from gpuharness.core.confinement import plain_name, relative_parts, remote_join, remote_parts
from gpuharness.core.errors import UserError
from gpuharness.core.ledger import Ledger
from gpuharness.operations import retrieving
from gpuharness.operations.context import Context
from gpuharness.remote import Remote, RemoteError, regular_files
from gpuharness.remote.regular_files import Listed

#: the retrieve phase's deadline by default: an hour of transfers
DEFAULT_DEADLINE_S = 3600.0
#: the folder under --to that holds unfinished transfers (a job id never names it)
PARTIAL: Final = ".gpuharness-partial"


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


def _sha256(handle: BinaryIO) -> str:
    """The sha256 of what handle holds from where it stands."""
    digest = hashlib.sha256()
    for chunk in iter(lambda: handle.read(1 << 20), b""):
        digest.update(chunk)
    return digest.hexdigest()


def partial_name(job_id: str, parts: tuple[str, ...]) -> str:
    """The name, in <to>/.gpuharness-partial, of an artifact's unfinished transfer (no output's name can be it)."""
    key = f"{job_id}/{'/'.join(parts)}".encode(errors="surrogatepass")
    return hashlib.sha256(key).hexdigest()[:32] + ".part"


def label(job_id: str, name: str) -> str:
    """job/name as one line shows it (a name that is not printable text is shown with escapes)."""
    text = f"{job_id}/{name}"
    return text if text.isprintable() else ascii(text)[1:-1]


def retrieve(ctx: Context, deployment_id: str, to: str | Path, *,
             deadline_s: float = DEFAULT_DEADLINE_S) -> RetrieveResult:
    """Sync every unsynced artifact of the deployment into `to/<job>/<name>`; one connection for the phase, which
    ends by deadline_s however the host behaves (what is not synced by then stays pending). Each refused artifact
    gets one line with its reason; the others still sync."""
    registry = ctx.registry
    deployment = registry.deployment(deployment_id)
    ledger = Ledger(registry.ledger_path, clock=ctx.clock)
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
        with BaseDir(Path(to).resolve()) as base:
            sync = _Sync(ctx, ctx.remotes(deployment), base, deployment.workspace, time.monotonic() + deadline_s)
            try:
                sync.all(ledger, pending)
            except RemoteError as exc:
                sync.problems.append(f"retrieve over {deployment.ssh_route} failed: {exc}")
            finally:
                sync.remote.close()
                with contextlib.suppress(OSError):  # the folder of unfinished transfers, once none is left
                    os.rmdir(PARTIAL, dir_fd=base.fd)
                held.next_action = (f"gpuharness destroy {deployment_id} --confirm {deployment_id}"
                                    if not sync.problems else f"gpuharness retrieve {deployment_id}")
    if sync.problems:
        raise UserError(f"{len(sync.problems)} artifact(s) not synced: " + "; ".join(sync.problems),
                        place=deployment_id, hint="synced ones are recorded; re-run retrieve (transfers resume)")
    return sync.result


@final
@dataclass(frozen=True, slots=True)
class _Artifact:
    """A pending artifact, its names confined: its path below <to>/<job> and below the workspace."""

    job: str
    name: str  # as the ledger names it: its path relative to the job's output folder
    parts: tuple[str, ...]
    recorded_path: str  # the remote_path as the ledger has it (with name, what marks it synced)
    remote_path: str  # the same, normalized
    remote: tuple[str, ...]
    reported: str | None  # the sha256 the runtime reported, if any

    @property
    def label(self) -> str:
        return label(self.job, self.name)


@final
@dataclass(slots=True)
class _Sync:
    """One retrieve's transfers over its one connection into one base: what was synced, and what was not and why."""

    ctx: Context
    remote: Remote
    base: BaseDir
    workspace: str
    end: float  # the phase deadline (time.monotonic())
    result: RetrieveResult = field(default_factory=RetrieveResult)
    problems: list[str] = field(default_factory=list)

    def left(self) -> float:
        """Seconds left of the phase (at least a sliver, so the last call says why it stopped)."""
        return max(self.end - time.monotonic(), 0.01)

    def refuse(self, shown: str, why: str) -> None:
        """One line for an artifact not synced, with its reason."""
        self.problems.append(f"{shown}: {why}")
        self.ctx.say(f"  {shown}: not synced: {why}")

    def all(self, ledger: Ledger, pending: dict[str, list[dict[str, Any]]]) -> None:
        """Every pending artifact, job by job; each job's synced artifacts are recorded as one new ledger line."""
        seen: dict[tuple[str, tuple[str, ...]], str] = {}
        staged: list[tuple[str, _Artifact]] = []
        for job_id, items in sorted(pending.items()):
            staged.extend((job_id, named) for item in items if (named := self.named(job_id, item, seen)) is not None)
        answers = regular_files.listed(self.remote, self.workspace, [a.remote for _, a in staged],
                                       min(120.0, self.left()))
        by_job = itertools.groupby(zip(staged, answers, strict=True), key=lambda pair: pair[0][0])
        for job_id, group in by_job:  # staged job by job, in the order of pending
            synced_now: dict[tuple[str, str], dict[str, Any]] = {}
            for (_, artifact), listed in group:
                if (synced := self.one(artifact, listed)) is not None:
                    synced_now[(artifact.name, artifact.recorded_path)] = synced
            if not synced_now:
                continue
            try:
                _record(ledger, job_id, synced_now, self.ctx.now())
            except UserError as exc:  # the files are here, but no mark says so: they stay pending
                self.refuse(label(job_id, ""), f"synced here, but the ledger refused the job's line: {exc.what}")
                continue
            self.result.jobs.append(job_id)
            self.result.synced.extend({"job": job_id, "name": n, **v} for (n, _), v in synced_now.items())

    def named(self, job_id: str, artifact: dict[str, Any], seen: dict[tuple[str, tuple[str, ...]], str]
              ) -> _Artifact | None:
        """The artifact with its names confined (the job id, its name, its remote path), or None: refused (one line
        says why), as is a second artifact of the job with the same path here but another on the host."""
        name = str(artifact["name"])
        try:
            job = plain_name(job_id, what="job id")
            if job == PARTIAL:
                raise UserError(f"job id {job!r} is the folder of unfinished transfers")
            parts = relative_parts(name, what="artifact")
            if not artifact.get("remote_path"):
                raise UserError("no remote_path recorded")
            remote = remote_parts(self.workspace, str(artifact["remote_path"]), what="remote_path")
        except UserError as exc:
            self.refuse(label(job_id, name), exc.what)
            return None
        path = remote_join(self.workspace, remote)
        if seen.setdefault((job, parts), path) != path:
            self.refuse(label(job_id, name), f"another artifact of {job} has the path {'/'.join(parts)}")
            return None
        return _Artifact(job, name, parts, str(artifact["remote_path"]), path, remote,
                         str(artifact["sha256"]) if artifact.get("sha256") else None)

    def one(self, artifact: _Artifact, listed: Listed) -> dict[str, Any] | None:
        """Sync one artifact to <base>/<job>/<its path>: its sync record, or None (the line says why not)."""
        why = listed.refused
        if why is None and listed.sha256 is None:
            why = f"{artifact.remote_path} is missing on the host"
        if why is None and artifact.reported and artifact.reported != listed.sha256:
            why = (f"the host's copy does not match the sha256 the runtime reported ({str(listed.sha256)[:12]} != "
                   f"{artifact.reported[:12]})")
        if why is not None:
            self.refuse(artifact.label, why)
            return None
        assert listed.sha256 is not None
        try:
            with self.base.folder((artifact.job, *artifact.parts[:-1])) as folder:
                local = self.land(folder, artifact, listed.sha256, listed.size)
        except UserError as exc:
            self.refuse(artifact.label, exc.what)
            return None
        size = listed.size
        self.ctx.say(f"  {artifact.label} {size:,} B sha256 {listed.sha256[:12]} ok")
        return {"uri": local.as_uri(), "sha256": listed.sha256, "size": size, "synced_at": self.ctx.now()}

    def land(self, folder: Folder, artifact: _Artifact, sha256: str, size: int) -> Path:
        """The artifact's file in folder, written unless an identical one is there; returns its path. Anything
        else at its name (a link, a file with other names or other content) is refused and left as it is."""
        leaf = self.base.fits(artifact.parts[-1])
        existing = folder.open_regular(leaf, outcome="not replaced")
        if existing is not None:
            with os.fdopen(existing, "rb") as handle:
                if _sha256(handle) != sha256:
                    raise UserError(f"{folder.path / leaf} exists with other content; not overwritten (move it "
                                    "away, or retrieve --to another directory)")
        else:
            with self.base.folder((PARTIAL,)) as partials:
                name = partial_name(artifact.job, artifact.parts)
                with os.fdopen(partials.resume(name), "r+b") as sink:
                    self.result.bytes_transferred += self.fetch(sink, artifact, sha256, size)
                    os.fsync(sink.fileno())
                    folder.place(leaf, sink.fileno(), partials, name)
        if not self.base.holds(folder):
            if existing is None:
                folder.remove(leaf)
            raise UserError(f"{folder.path} was moved or replaced by a link while the file was written; not synced")
        return folder.path / leaf

    def fetch(self, sink: BinaryIO, artifact: _Artifact, sha256: str, size: int) -> int:
        """Fetch into sink (resumed from its size), until its sha256 is right; a mismatch is fetched again once
        from byte 0. The bytes show on ctx.transfers as they arrive. Returns the bytes moved."""
        moved = 0
        meter, shown = self.ctx.transfers, artifact.label
        for resume in (True, False):
            here = os.fstat(sink.fileno()).st_size
            start = here if resume and here <= size else 0
            sink.seek(start)
            sink.truncate()
            meter.begin(shown, size, start)

            def progress(n: int, start: int = start) -> None:
                meter.advance(shown, start + n)

            try:
                moved += self.remote.get_file(artifact.remote_path, sink, offset=start, under=self.workspace,
                                              progress=progress, deadline_s=self.left())
            except RemoteError as exc:
                if exc.kind == "refused":
                    raise UserError(f"refused on the host: {exc.message}") from None
                raise UserError(f"transfer failed: {exc} (re-run retrieve: it resumes)") from None
            finally:
                meter.end(shown)
            sink.flush()
            sink.seek(0)
            if _sha256(sink) == sha256:
                return moved
            self.ctx.say(f"  {shown}: checksum mismatch after transfer; fetching again from byte 0")
        raise UserError("checksum mismatch after re-transfer")


def _record(ledger: Ledger, job_id: str, synced: dict[tuple[str, str], dict[str, Any]], now: str) -> None:
    """A new line for the job with its artifacts' uri and synced_at (each artifact known by its name and remote
    path: two of one name in two folders are two); the old lines stay as they are."""
    current = ledger.current(job_id)
    if current is None:
        return
    artifacts = [{**a, **synced[key]} if (key := (str(a["name"]), str(a.get("remote_path")))) in synced else a
                 for a in current.get("artifacts") or []]
    line = {k: v for k, v in current.items() if k not in ("ts",)}
    line.update(artifacts=artifacts, ts=now)
    if current["status"] in ("completed", "failed", "cancelled", "interrupted"):
        line.update(correction=True, reason="artifacts synced")
    ledger.append(line, check_sequence=True)
