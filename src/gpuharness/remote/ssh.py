"""The paramiko transport: one connection per target, one attempt, every exec bounded by a deadline."""

from __future__ import annotations

import contextlib
import os
import select
import stat
import threading
import time
from typing import BinaryIO, final

import paramiko

from gpuharness.core.confinement import remote_join, remote_parts
from gpuharness.core.errors import UserError
from gpuharness.remote import ByteSink, ExecResult, LineSink, RemoteError, StreamLines
from gpuharness.remote.hostkeys import FirstUsePolicy, changed_key_error, load_known_hosts
from gpuharness.remote.route import HostRoute

_CHUNK = 32768


def _client(route: HostRoute) -> tuple[paramiko.SSHClient, FirstUsePolicy]:
    client = paramiko.SSHClient()
    load_known_hosts(client, route.known_hosts)
    policy = FirstUsePolicy(route.target, route.known_hosts, trust_on_first_use=route.trust_on_first_use)
    client.set_missing_host_key_policy(policy)
    return client, policy


def _connect(route: HostRoute, timeout_s: float, sock: paramiko.Channel | paramiko.ProxyCommand | None,
             ) -> tuple[paramiko.SSHClient, FirstUsePolicy]:
    client, policy = _client(route)
    try:
        client.connect(route.host, port=route.port, username=route.user or os.environ.get("USER", "root"),
                       key_filename=route.key_file, timeout=timeout_s, banner_timeout=timeout_s,
                       auth_timeout=timeout_s, channel_timeout=timeout_s, sock=sock,
                       allow_agent=route.key_file is None, look_for_keys=route.key_file is None)
    except RemoteError:
        client.close()
        raise
    except paramiko.BadHostKeyException as exc:
        client.close()
        raise changed_key_error(route.target, route.known_hosts, exc) from None
    except paramiko.AuthenticationException as exc:
        client.close()
        raise RemoteError("auth", f"authentication failed for {route.label}: {exc} "
                          "(check ssh.user and ssh.key_file)", target=route.target) from None
    except TimeoutError as exc:
        client.close()
        raise RemoteError("timeout", f"connecting to {route.label} timed out after {timeout_s:g}s: {exc}",
                          target=route.target) from None
    except (OSError, EOFError, paramiko.SSHException) as exc:
        client.close()
        raise RemoteError("unreachable", f"cannot connect to {route.label}: {exc}", target=route.target) from None
    except Exception as exc:  # paramiko raises bare Exception on some key-type mismatches
        client.close()
        raise RemoteError("unreachable", f"cannot connect to {route.label}: {type(exc).__name__}: {exc}",
                          target=route.target) from None
    return client, policy


def _identity(attrs: paramiko.SFTPAttributes) -> tuple[int | None, int | None, int | None, int | None]:
    """What SFTP v3 tells of a file that a swap would change: type and mode, size, mtime, owner."""
    return attrs.st_mode, attrs.st_size, attrs.st_mtime, attrs.st_uid


def _close_quietly(sftp: paramiko.SFTPClient) -> None:
    """The deadline's watchdog: close the SFTP channel under a read that never answers. The reader reports the
    deadline; a close that races the read's own failure is not a second error (it would print a thread's
    traceback)."""
    with contextlib.suppress(OSError, EOFError, paramiko.SSHException):
        sftp.close()


@final
class SSHRemote:
    """One SSH connection to one target for one phase (the Remote protocol)."""

    __slots__ = ("_clients", "accepted_host_key", "client", "connections", "execs", "route", "target")

    def __init__(self, route: HostRoute, *, connect_timeout_s: float = 15.0) -> None:
        self.route = route
        self.target = route.target
        self.execs = 0
        self._clients: list[paramiko.SSHClient] = []
        sock: paramiko.Channel | paramiko.ProxyCommand | None = None
        if route.jump is not None:
            jump_client, _ = _connect(route.jump, connect_timeout_s, None)
            self._clients.append(jump_client)
            transport = jump_client.get_transport()
            assert transport is not None
            try:
                sock = transport.open_channel("direct-tcpip", (route.host, route.port), ("127.0.0.1", 0),
                                              timeout=connect_timeout_s)
            except (paramiko.SSHException, OSError) as exc:
                self.close()
                raise RemoteError("unreachable", f"jump host {route.jump.label} cannot reach "
                                  f"{route.host}:{route.port}: {exc}", target=route.target) from None
        elif route.proxy_command:
            sock = paramiko.ProxyCommand(route.proxy_command.replace("%h", route.host)
                                         .replace("%p", str(route.port)))
        try:
            self.client, policy = _connect(route, connect_timeout_s, sock)
        except RemoteError:
            self.close()
            raise
        self._clients.append(self.client)
        self.connections = 1
        self.accepted_host_key = policy.accepted

    def exec(self, script: str, *, deadline_s: float, on_line: LineSink | None = None) -> ExecResult:
        """Send the script on stdin of `/bin/sh -s`; drain both streams (stdout lines to on_line as they arrive);
        stop at the deadline."""
        self.execs += 1
        started = time.monotonic()
        end = started + deadline_s
        transport = self.client.get_transport()
        if transport is None or not transport.is_active():
            raise RemoteError("closed", "the connection is closed", target=self.target)
        try:
            chan = transport.open_session(timeout=max(0.1, end - time.monotonic()))
            chan.settimeout(max(0.1, end - time.monotonic()))
            chan.exec_command("/bin/sh -s")
            chan.sendall(script.encode())
            chan.shutdown_write()
        except TimeoutError:
            return ExecResult("", "", None, True, time.monotonic() - started)
        except (paramiko.SSHException, OSError, EOFError) as exc:
            raise RemoteError("closed", f"exec failed: {exc}", target=self.target) from None
        out, err = bytearray(), bytearray()
        lines = StreamLines(on_line)
        timed_out = False
        while True:
            while chan.recv_ready():
                chunk = chan.recv(_CHUNK)
                out += chunk
                lines.feed(chunk)
            while chan.recv_stderr_ready():
                err += chan.recv_stderr(_CHUNK)
            # never recv_exit_status(): it has no timeout. Poll the status with our own deadline.
            if chan.exit_status_ready() and not chan.recv_ready() and not chan.recv_stderr_ready():
                break
            if chan.closed and not chan.recv_ready():
                break
            remaining = end - time.monotonic()
            if remaining <= 0:
                timed_out = True
                break
            select.select([chan], [], [], min(remaining, 0.05))
        status = None if timed_out else chan.exit_status
        chan.close()
        return ExecResult(out.decode(errors="replace"), err.decode(errors="replace"), status, timed_out,
                          time.monotonic() - started)

    def get_file(self, remote_path: str, sink: BinaryIO, *, offset: int = 0, under: str | None = None,
                 progress: ByteSink | None = None, deadline_s: float | None = None) -> int:
        """SFTP download from byte offset into sink, never through a link: every folder below `under` and the file
        are lstat-ed, and the open file's own attributes must be the ones lstat saw (SFTP v3 has no O_NOFOLLOW).
        progress gets the bytes moved. With deadline_s, every wait is bounded by it (each read's timeout is the
        time left) and a watchdog closes the SFTP channel when it passes, so a read that never answers (or answers
        a byte at a time) ends by it."""
        end = None if deadline_s is None else time.monotonic() + max(deadline_s, 0.0)
        try:
            sftp = self.client.open_sftp()
        except (paramiko.SSHException, OSError) as exc:
            raise RemoteError("closed", f"sftp unavailable: {exc}", target=self.target) from None
        watchdog = None if end is None else threading.Timer(max(end - time.monotonic(), 0.0), _close_quietly,
                                                                   (sftp,))
        if watchdog is not None:
            watchdog.daemon = True
            watchdog.start()
        try:
            looked = self._looked_at(sftp, remote_path, under)
            return self._copy(sftp, remote_path, looked, sink, offset, end, progress)
        except FileNotFoundError:
            raise RemoteError("closed", f"no such remote file {remote_path}", target=self.target) from None
        except (OSError, EOFError, paramiko.SSHException) as exc:
            if end is not None and time.monotonic() >= end - 0.05:
                raise RemoteError("timeout", f"sftp get {remote_path} did not finish by its deadline "
                                  f"({deadline_s:g} s)", target=self.target) from None
            raise RemoteError("closed", f"sftp get {remote_path}: {exc}", target=self.target) from None
        finally:
            if watchdog is not None:
                watchdog.cancel()
            sftp.close()

    def _looked_at(self, sftp: paramiko.SFTPClient, remote_path: str, under: str | None) -> paramiko.SFTPAttributes:
        """The file's attributes by lstat, after every folder between `under` and it: refused unless those are
        folders and it is a regular file."""
        try:
            parts = remote_parts(under, remote_path, what="the remote file") if under is not None else ()
        except UserError as exc:
            raise RemoteError("refused", exc.what, target=self.target) from None
        folders = [remote_join(str(under), parts[:n]) for n in range(1, len(parts))]
        for folder in (*folders, remote_path):
            attrs = sftp.lstat(folder)
            mode = attrs.st_mode or 0
            if stat.S_ISDIR(mode) if folder != remote_path else stat.S_ISREG(mode):
                continue
            kind = "a symbolic link" if stat.S_ISLNK(mode) else "a folder" if stat.S_ISDIR(mode) else \
                "a FIFO" if stat.S_ISFIFO(mode) else "not a folder" if folder != remote_path else "not a regular file"
            raise RemoteError("refused", f"{folder} is {kind}; nothing read", target=self.target)
        return attrs

    def _copy(self, sftp: paramiko.SFTPClient, remote_path: str, looked: paramiko.SFTPAttributes, sink: BinaryIO,
              offset: int, end: float | None, progress: ByteSink | None) -> int:
        channel = sftp.get_channel()

        def bound() -> None:
            if end is not None and channel is not None:
                left = end - time.monotonic()
                if left <= 0:
                    raise TimeoutError("the deadline has passed")
                channel.settimeout(left)

        bound()
        moved = 0
        with sftp.open(remote_path, "rb") as src:
            bound()
            if _identity(src.stat()) != _identity(looked):
                raise RemoteError("refused", f"{remote_path} is not the file lstat saw once opened (a link swapped "
                                  "in?); nothing read", target=self.target)
            src.seek(offset)
            while True:
                bound()
                chunk = src.read(_CHUNK)
                if not chunk:
                    return moved
                sink.write(chunk)
                moved += len(chunk)
                if progress is not None:
                    progress(moved)

    def listdir(self, remote_dir: str) -> list[tuple[str, int]]:
        """Regular files in a remote directory, with sizes."""
        sftp = self.client.open_sftp()
        try:
            return [(a.filename, a.st_size or 0) for a in sftp.listdir_attr(remote_dir)
                    if a.st_mode is not None and stat.S_ISREG(a.st_mode)]
        finally:
            sftp.close()

    def close(self) -> None:
        for client in reversed(self._clients):
            client.close()
        self._clients.clear()
