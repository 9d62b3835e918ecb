"""The `local` transport: the same probe script as a subprocess, for an owned host that is this machine."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import final

from gpuharness.remote import ExecResult, RemoteError


@final
class LocalRemote:
    """Runs scripts with /bin/sh on this machine; a deadline kills the whole process group."""

    __slots__ = ("execs", "target")

    def __init__(self, target: str = "local") -> None:
        self.target = target
        self.execs = 0

    def exec(self, script: str, *, deadline_s: float) -> ExecResult:
        self.execs += 1
        started = time.monotonic()
        proc = subprocess.Popen(["/bin/sh", "-s"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            stdout, stderr = proc.communicate(script, timeout=deadline_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            stdout, stderr = proc.communicate()
            return ExecResult(stdout, stderr, None, True, time.monotonic() - started)
        return ExecResult(stdout, stderr, proc.returncode, False, time.monotonic() - started)

    def get_file(self, remote_path: str, local_path: str, *, resume: bool = True,
                 deadline_s: float | None = None) -> int:
        source, dest = Path(remote_path), Path(local_path)
        if not source.is_file():
            raise RemoteError("closed", f"no such file {remote_path}", target=self.target)
        offset = dest.stat().st_size if resume and dest.exists() else 0
        if offset > source.stat().st_size:
            offset = 0
        with source.open("rb") as src, dest.open("ab" if offset else "wb") as out:
            src.seek(offset)
            before = out.tell()
            shutil.copyfileobj(src, out)
            return out.tell() - before

    def close(self) -> None:
        return None
