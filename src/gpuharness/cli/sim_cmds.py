"""The simulator's commands: `sim serve` (in the foreground, or detached once it is ready) and `sim stop`."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from typing import Any, Final
from urllib.parse import urlsplit

import httpx

from gpuharness.cli import existing_registry, show
from gpuharness.cli.arguments import non_negative, whole
from gpuharness.core.errors import EXIT_USAGE, UserError
from gpuharness.core.registry import Registry

#: How long `sim stop` waits for the simulator to stop answering.
STOP_WAIT_S = 10.0


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    sim = subparsers.add_parser("sim", help="the loopback provider simulator")
    sim_sub = sim.add_subparsers(dest="sim_command", metavar="ACTION", required=True)
    p = sim_sub.add_parser("serve", parents=[common], help="serve RunPod/Vast/Massed wire formats on loopback")
    p.add_argument("--host", default="127.0.0.1", help="loopback address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=whole(maximum=65535), default=8765, help="port (default 8765; 0 picks a free one)")
    p.add_argument("--ready-delay", type=non_negative, default=0.2, metavar="S",
                   help="seconds an instance stays pending before running (default 0.2)")
    p.add_argument("--verbose", action="store_true", help="log each request line (never headers)")
    p.add_argument("--configure", action="store_true",
                   help="point providers.json (runpod, vast, massed, runpod-serverless) at this simulator, with the "
                        "SSH key and known_hosts file its hosts are reached with, and add its example model "
                        "(sim-h3-mini) and workflow (sim-text-to-image)")
    p.add_argument("--detach", action="store_true",
                   help="return once the simulator is ready (and configured), leaving it serving in the background "
                        "until `gpuharness sim stop`")
    p.add_argument("--no-hosts", action="store_true",
                   help="do not start a simulated SSH host + runtime for each running instance")
    p.set_defaults(handler=cmd_sim_serve)

    p = sim_sub.add_parser("stop", parents=[common], help="stop a simulator started with `sim serve`")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--port", type=whole(minimum=1, maximum=65535), help="the simulator on 127.0.0.1:PORT")
    where.add_argument("--url", help="the simulator's base URL (default: the one providers.json points at)")
    p.set_defaults(handler=cmd_sim_stop)


def cmd_sim_serve(args: argparse.Namespace) -> int:
    if args.port < 0 or args.port > 65535:
        raise UserError(f"--port {args.port} is not a TCP port", place="sim serve")
    if args.configure:
        existing_registry(args)  # only init creates a registry: refused before anything starts
    if args.detach:
        return _detached(args)

    def announce(url: str) -> None:
        show(f"ready {url}")

    return _serve(args, announce)


def _serve(args: argparse.Namespace, ready: Callable[[str], None]) -> int:
    """Serve until Ctrl-C, SIGTERM or POST /_sim/shutdown; the hosts and their access files go with it, before the
    port closes (so `sim stop` returns once they are gone)."""
    from gpuharness.sim import Simulator  # the server is only needed by this command

    log = (lambda line: show(line, err=True)) if args.verbose else None
    sim = Simulator(host=args.host, port=args.port, ready_delay_s=args.ready_delay, log=log)
    made: list[Any] = []  # the HostAccess, once its files exist
    with _signals_stop():
        try:
            _start(args, sim, made)
            ready(sim.base_url)
            while not sim.shutdown_requested.wait(3600):
                pass
        except KeyboardInterrupt:
            pass
        finally:
            sim.host_factory = None  # no new host while the others go
            sim.state.shutdown()
            for access in made:
                access.close()
            sim.stop()
    return 0


def _start(args: argparse.Namespace, sim: Any, made: list[Any]) -> None:
    """Listen, give running instances hosts (reached with one HostAccess, kept in made), and configure if asked."""
    from gpuharness.sim.access import HostAccess
    from gpuharness.sim.host import host_factory

    try:
        sim.start()
    except OSError as exc:
        raise UserError(f"cannot listen on {args.host}:{args.port}: {exc.strerror}", place="sim serve",
                        hint="pick another --port, or 0 for a free one") from None
    access = None
    if not args.no_hosts:
        with _signals_held():  # a stop signal lands once the files are recorded for the cleanup, not between
            made.append(HostAccess())
        access = made[0]
        sim.host_factory = host_factory(counter=sim.state.increment, access=access)
    if args.configure:
        _configure(existing_registry(args), sim, access)
    elif access is not None:
        show(f"its hosts accept the key {access.key_file} and list their host keys in {access.known_hosts} "
             "(provision --ssh-key / --known-hosts, or --configure to record them)", err=True)


def _configure(registry: Registry, sim: Any, access: Any) -> None:
    """providers.json entries for the simulator (replacing entries of the same name); with hosts, the example
    model and workflow too. What was recorded is said on stderr."""
    from gpuharness.sim import examples

    entries = sim.provider_entries(access=access)
    names = {e["name"] for e in entries}
    with registry.update("providers.json") as document:
        document["providers"] = [p for p in document["providers"] if p["name"] not in names] + entries
    say = [f"providers.json points at {sim.base_url}; export {entries[0]['credential_env']}=<any 20+ characters>"]
    if access is not None:
        model = examples.model_entry(access.root / "models")
        with registry.update("models.json") as document:
            document["models"] = [m for m in document["models"] if m["name"] != model["name"]] + [model]
        workflow = examples.workflow_entry()
        with registry.update("workflows.json") as document:
            document["workflows"] = [w for w in document["workflows"] if w["id"] != workflow["id"]] + [workflow]
        say += [f"its hosts are reached with the key {access.key_file} and known_hosts {access.known_hosts} "
                "(named in providers.json; provision records them in each deployment)",
                f"example model {model['name']} and workflow {workflow['id']} added to models.json and "
                "workflows.json"]
    for line in say:
        show(line, err=True)


#: a stop that arrived while the access files were being made waits here until they are recorded for the cleanup
_STOP: Final[dict[str, int | bool]] = {"held": 0, "pending": False}


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """A stop signal (SIGTERM, SIGINT) that arrives in the block takes effect when the block is over. Python runs
    signal handlers in the main thread whichever thread the kernel picked, so blocking the signal in this thread
    alone (pthread_sigmask) is not enough: the server's threads can take it."""
    _STOP["held"] = int(_STOP["held"]) + 1
    try:
        yield
    finally:
        _STOP["held"] = int(_STOP["held"]) - 1
        if not _STOP["held"] and _STOP["pending"]:
            _STOP["pending"] = False
            raise KeyboardInterrupt


@contextlib.contextmanager
def _signals_stop() -> Iterator[None]:
    """SIGTERM stops the simulator as Ctrl-C does, from the first moment, so its hosts and files are removed; a
    second SIGTERM or Ctrl-C cannot cut that cleanup short (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(_signum: int, _frame: object) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        if _STOP["held"]:
            _STOP["pending"] = True  # raised when the held block ends (_signals_held)
            return
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, stop), signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous[0])
        signal.signal(signal.SIGINT, previous[1])


def _detached(args: argparse.Namespace) -> int:
    """Fork a server that leaves the terminal once it is ready; return when it is (or with its error)."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the server: its own session, so the shell's Ctrl-C and hang-up do not reach it
        os.close(read_fd)
        os.setsid()
        os._exit(_serve_detached(args, write_fd))
    os.close(write_fd)
    with os.fdopen(read_fd, encoding="utf-8") as pipe:
        line = pipe.read().strip()
    if line.startswith("ready "):
        show(f"{line} (pid {pid}; stop it with `gpuharness sim stop`)")
        return 0
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) or 1


def _serve_detached(args: argparse.Namespace, ready_fd: int) -> int:
    """The detached server's body: errors before ready are printed as the foreground command prints them."""

    def ready(url: str) -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):  # let go of the terminal (or the caller's pipes) before saying ready
            os.dup2(devnull, fd)
        os.close(devnull)
        os.write(ready_fd, f"ready {url}\n".encode())
        os.close(ready_fd)

    try:
        return _serve(args, ready)
    except UserError as exc:
        show(f"gpuharness: error: {exc.line()}", err=True)
        return EXIT_USAGE
    except BaseException:
        traceback.print_exc()
        sys.stderr.flush()
        return 1


def cmd_sim_stop(args: argparse.Namespace) -> int:
    if args.port is not None:
        url = f"http://127.0.0.1:{args.port}"
    elif args.url:
        url = args.url.rstrip("/")
    else:
        url = _configured_simulator(existing_registry(args))
    if urlsplit(url).hostname not in ("127.0.0.1", "localhost", "::1"):
        raise UserError(f"{url} is not a loopback address; the simulator only serves on loopback", place="sim stop")
    try:
        answer = httpx.post(f"{url}/_sim/shutdown", timeout=5.0)
    except httpx.HTTPError as exc:
        raise UserError(f"no simulator answers at {url}: {exc}", place="sim stop",
                        hint="it may have stopped already") from None
    if answer.status_code != 200:
        raise UserError(f"{url} answered {answer.status_code} to /_sim/shutdown; it is not a gpuharness simulator",
                        place="sim stop")
    end = time.monotonic() + STOP_WAIT_S
    while time.monotonic() < end:
        try:
            httpx.get(f"{url}/_sim/stats", timeout=1.0)
        except httpx.HTTPError:
            show(f"stopped the simulator at {url}")
            return 0
        time.sleep(0.1)
    raise UserError(f"the simulator at {url} still answers after {STOP_WAIT_S:g} s", place="sim stop")


def _configured_simulator(registry: Registry) -> str:
    """The base URL of the loopback simulator that providers.json points at."""
    bases = set()
    for entry in registry.providers():
        parts = urlsplit(str(entry.get("api_base") or ""))
        if parts.hostname in ("127.0.0.1", "localhost", "::1") and parts.port:
            bases.add(f"{parts.scheme}://{parts.netloc}")
    if len(bases) != 1:
        found = ", ".join(sorted(bases)) or "none"
        raise UserError(f"providers.json points at {len(bases)} loopback simulator(s) ({found})",
                        path=registry.path("providers.json"), hint="name one: gpuharness sim stop --port N")
    return bases.pop()
