"""The source revision a command runs from: `git rev-parse HEAD` of its working directory, when that is a git
checkout (the operators' runbook: each transition records the source revision that froze the target)."""

from __future__ import annotations

import functools
import os
import re
import subprocess

_COMMIT = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")  # sha-1 or sha-256 object names


@functools.cache
def _revision_of(directory: str) -> str | None:
    try:
        found = subprocess.run(["git", "rev-parse", "--verify", "--quiet", "HEAD"], cwd=directory,
                               capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None  # no git here, or it did not answer: the entry says nothing rather than something wrong
    text = found.stdout.strip()
    return text if found.returncode == 0 and _COMMIT.fullmatch(text) else None


def source_revision() -> str | None:
    """HEAD of the working directory's checkout (asked once per directory and process), or None outside one."""
    try:
        directory = os.getcwd()
    except OSError:
        return None
    return _revision_of(directory)
