"""Remote shell scripts, built in one place: code is the project's own text, every value is quoted, every path a
script writes is confined under the workspace.

A value that came from outside (a models.json path, a runtime's output name, a ledger's remote path) never becomes
code: it reaches the script as a quoted shell word (`shlex.quote`), as a variable's value or a function's argument,
and code reads it as "$name" or "$1". Paths are checked before the script exists (core.confinement), so a refused
value stops the phase before any exec.
"""

from __future__ import annotations

import re
import shlex
from typing import Final, LiteralString, final

from gpuharness.core.confinement import CONTROL, relative_parts, remote_path, remote_within
from gpuharness.core.errors import UserError

_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _workspace_value(workspace: str) -> str:
    """A workspace scripts may build paths on: no control character, no "..", and never read as an option."""
    if not workspace or CONTROL.search(workspace) or workspace.startswith("-") or ".." in workspace.split("/"):
        raise UserError(f"workspace {workspace!r} is not a path scripts may write under",
                        hint="set ssh.workspace to a plain absolute or home-relative directory")
    return workspace


def quote(value: object) -> str:
    """One shell word holding value exactly (None is the empty word)."""
    return shlex.quote("" if value is None else str(value))


@final
class ShellScript:
    """One POSIX shell script for one exec. `code` takes only the project's literal text; values go through `let`
    (a variable) or `call` (arguments), both quoted."""

    __slots__ = ("_lines", "workspace")

    def __init__(self, *, workspace: str | None = None, header: tuple[LiteralString, ...] = ("set -u",)) -> None:
        self._lines: list[str] = list(header)
        self.workspace = workspace
        if workspace is not None:
            self.let("ws", _workspace_value(workspace))

    def code(self, *lines: LiteralString) -> ShellScript:
        """Lines of the project's own shell, which read values only as variables or arguments."""
        self._lines.extend(lines)
        return self

    def trusted(self, line: str, *, why: str) -> ShellScript:
        """A line of shell the user wrote as shell (a workflow's setup step): sent as written. why names it."""
        if not why:
            raise ValueError("say whose shell this is")
        self._lines.append(line)
        return self

    def let(self, name: str, value: object) -> ShellScript:
        """name='value' (quoted)."""
        if not _NAME.fullmatch(name):
            raise ValueError(f"not a shell variable name: {name!r}")
        self._lines.append(f"{name}={quote(value)}")
        return self

    def let_path(self, name: str, value: object) -> ShellScript:
        """name='value' for a path a command will read: one that starts with "-" is made "./-..." so that no
        command takes it for an option."""
        self.let(name, value)
        self._lines.append(f'case "${name}" in -*) {name}="./${name}" ;; esac')
        return self

    def call(self, command: LiteralString, *args: object) -> ShellScript:
        """command 'arg' 'arg' ... (each argument quoted; the command is the project's own name)."""
        self._lines.append(" ".join([command, *(quote(arg) for arg in args)]))
        return self

    def under_workspace(self, *names: str, what: str) -> str:
        """workspace/names...: each name confined (relative, no "..", no control character)."""
        return remote_path(self._workspace(), *names, what=what)

    def relative(self, name: str, *, what: str) -> str:
        """A relative path, confined (joined by the script under a directory of the workspace)."""
        return "/".join(relative_parts(name, what=what))

    def within_workspace(self, path: str, *, what: str) -> str:
        """A recorded remote path, refused unless it lies under the workspace."""
        return remote_within(self._workspace(), path, what=what)

    def _workspace(self) -> str:
        if self.workspace is None:
            raise UserError("this script has no workspace to confine paths under")
        return self.workspace

    def text(self) -> str:
        return "\n".join(self._lines) + "\n"
