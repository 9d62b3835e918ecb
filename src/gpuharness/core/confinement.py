"""Paths made from names that came from outside (a host's output name, a ledger's job id): confined under a base.

A remote name is data. It may name a file under a base directory, never the base's parent, an absolute path, or a
name a terminal would act on. Every local writer and every remote script checks such names here; a local file is
then written under its base by core.base_dir, which follows no link.
"""

from __future__ import annotations

import posixpath
import re
from typing import Final

from gpuharness.core.errors import UserError

#: NUL, the C0 and C1 control characters, DEL and the Unicode line and paragraph separators: never part of a name
#: this harness writes or sends.
CONTROL: Final = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
#: what str.splitlines() cuts a line at: a name holding one would split the line that names it.
LINE_BREAK: Final = re.compile("[\n\r\v\f\x1c-\x1e\x85\u2028\u2029]")


def _refuse(what: str, name: str, why: str, hint: str) -> UserError:
    return UserError(f"{what} {name!r} {why}", hint=hint)


def relative_parts(name: str, *, what: str) -> tuple[str, ...]:
    """The parts of a relative name ("a/b.png" -> ("a", "b.png")); refused when it is empty, absolute, climbs
    with "..", or holds NUL, a control character or a backslash."""
    hint = "a remote name is data: nothing was written for it"
    if not isinstance(name, str) or not name:
        raise _refuse(what, str(name), "is empty", hint)
    if LINE_BREAK.search(name):
        raise _refuse(what, name, "holds a line separator", hint)
    if CONTROL.search(name) or "\\" in name:
        raise _refuse(what, name, "holds a control character or a backslash", hint)
    if name.startswith("/"):
        raise _refuse(what, name, "is an absolute path", hint)
    parts = tuple(part for part in name.split("/") if part not in ("", "."))
    if ".." in parts:
        raise _refuse(what, name, "climbs out of its directory (..)", hint)
    if not parts:
        raise _refuse(what, name, "names no file", hint)
    return parts


def plain_name(name: str, *, what: str) -> str:
    """A name that must be one path component (a job id, an artifact's file name)."""
    parts = relative_parts(name, what=what)
    if len(parts) != 1 or parts[0] != name:
        raise _refuse(what, name, "is not a plain file name", "a remote name is data: nothing was written for it")
    return name


def remote_path(workspace: str, *names: str, what: str) -> str:
    """workspace/names... on a remote host, joined from confined names (the host's file system is not ours to
    resolve: the check is on the names)."""
    parts = [part for name in names for part in relative_parts(name, what=what)]
    return posixpath.join(workspace.rstrip("/") or "/", *parts)


def remote_within(workspace: str, path: str, *, what: str) -> str:
    """A recorded remote path, refused unless it lies under workspace (both written the same way: absolute, or
    relative to the login directory)."""
    if not isinstance(path, str) or not path or CONTROL.search(path):
        raise _refuse(what, str(path), "is empty or holds a control character", "nothing was read from it")
    base = posixpath.normpath(workspace)
    if ".." in path.split("/"):
        raise _refuse(what, path, "climbs out of its directory (..)", "nothing was read from it")
    normal = posixpath.normpath(path)
    if (base == "/" and normal.startswith("/")) or (base == "." and not normal.startswith(("/", "."))):
        return normal
    if not normal.startswith(base.rstrip("/") + "/"):
        raise _refuse(what, path, f"is not under the workspace {workspace}", "nothing was read from it")
    return normal


def remote_parts(workspace: str, path: str, *, what: str) -> tuple[str, ...]:
    """The parts of a recorded remote path below the workspace ("ws/output/a/x.png" -> ("output", "a", "x.png")),
    refused unless it lies under it."""
    normal = remote_within(workspace, path, what=what)
    base = posixpath.normpath(workspace)
    rest = normal[len(base):] if base not in (".", "/") and normal.startswith(base + "/") else normal
    return relative_parts(rest.lstrip("/"), what=what)


def remote_join(workspace: str, parts: tuple[str, ...]) -> str:
    """workspace/parts..., written as remote_within writes a path under it (the inverse of remote_parts)."""
    base = posixpath.normpath(workspace)
    return "/".join(parts) if base == "." else posixpath.join(base, *parts)

