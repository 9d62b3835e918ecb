"""Remote text is bounded: an answer from a runtime or a provider ends by its deadline (a server that drips one byte
at a time is cut off), holds at most its cap (a huge body is refused as it passes the cap, never read whole), and
its JSON is parsed under a depth bound (no RecursionError). Real loopback HTTP servers answer: a hostile one for the
paths under attack, proxying the rest to a simulated host's ComfyUI; the health run is the real suite in a
subprocess against a real simulated host over SSH."""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from health_world import HealthWorld
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuharness.providers.transport import ProviderHttp
from gpuharness.providers.vast import VastAi
from gpuharness.remote.http import PhaseHttp
from gpuharness.runtimes.comfyui.client import ComfyUI

HOSTILE_PATHS = ("/object_info", "/api/v1/instances/")
#: how long a drip goes on before the hostile server gives up (far past every deadline below)
DRIP_MAX_S = 90.0
#: the deadline the seam-level calls run under, and the slack a cut-off may take past it
DEADLINE_S = 2.0
SLACK_S = 3.0
#: what a named failure says for each kind of hostile answer
SAYS = {"drip": "deadline", "deep": "nested too deeply", "huge": "cap"}
MIB = 1 << 20


class Hostile:
    """A loopback HTTP server: HOSTILE_PATHS get `answer` ((kind, parameter)), anything else is proxied to
    `upstream` (or 404). `sent` counts the bytes of hostile bodies written."""

    def __init__(self, upstream: str | None = None) -> None:
        self.upstream = upstream.rstrip("/") if upstream else None
        self.answer: tuple[str, Any] = ("deep", 100)
        self.sent = 0
        hostile = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                hostile.handle(self, b"")

            def do_POST(self) -> None:
                hostile.handle(self, self.rfile.read(int(self.headers.get("Content-Length") or 0)))

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def handle(self, request: BaseHTTPRequestHandler, body: bytes) -> None:
        try:
            if request.path.split("?")[0] in HOSTILE_PATHS:
                self.hostile(request)
            else:
                self.proxy(request, body)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def hostile(self, request: BaseHTTPRequestHandler) -> None:
        kind, parameter = self.answer
        if kind == "deep":
            self.send(request, b'{"x": ' + b"[" * parameter + b"]" * parameter + b"}")
        elif kind == "huge":  # valid JSON: {, spaces, }
            self.head(request, parameter + 2)
            self.write(request, b"{")
            chunk = b" " * MIB
            left = parameter
            while left > 0:
                self.write(request, chunk[:left])
                left -= min(left, MIB)
            self.write(request, b"}")
        elif kind == "drip":  # one byte at a time: never a per-read timeout, never an end
            self.head(request, 1_000_000)
            self.write(request, b"{")
            ends = time.monotonic() + DRIP_MAX_S
            while time.monotonic() < ends:
                time.sleep(parameter)
                self.write(request, b" ")
            request.close_connection = True

    def head(self, request: BaseHTTPRequestHandler, length: int) -> None:
        request.send_response(200)
        request.send_header("Content-Type", "application/json")
        request.send_header("Content-Length", str(length))
        request.end_headers()

    def send(self, request: BaseHTTPRequestHandler, body: bytes) -> None:
        self.head(request, len(body))
        self.write(request, body)

    def write(self, request: BaseHTTPRequestHandler, data: bytes) -> None:
        request.wfile.write(data)
        request.wfile.flush()
        self.sent += len(data)

    def proxy(self, request: BaseHTTPRequestHandler, body: bytes) -> None:
        if self.upstream is None:
            request.send_error(404)
            return
        forwarded = urllib.request.Request(self.upstream + request.path, data=body or None, method=request.command,
                                           headers={"Content-Type": request.headers.get("Content-Type") or ""})
        try:
            with urllib.request.urlopen(forwarded, timeout=60) as answer:
                status, content, kind = answer.status, answer.read(), answer.headers.get("Content-Type")
        except urllib.error.HTTPError as exc:
            status, content, kind = exc.code, exc.read(), exc.headers.get("Content-Type")
        request.send_response(status)
        request.send_header("Content-Type", kind or "application/octet-stream")
        request.send_header("Content-Length", str(len(content)))
        request.end_headers()
        request.wfile.write(content)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def hostile() -> Iterator[Hostile]:
    server = Hostile()
    yield server
    server.close()


def answers() -> st.SearchStrategy[tuple[str, Any]]:
    return st.one_of(
        st.tuples(st.just("deep"), st.integers(min_value=65, max_value=3000) | st.sampled_from([10_000, 100_000])),
        st.tuples(st.just("huge"), st.integers(min_value=128, max_value=256).map(lambda mib: mib * MIB)),
        st.tuples(st.just("drip"), st.floats(min_value=0.05, max_value=0.5)))


def ask(side: str, url: str) -> Any:
    """The runtime's node catalog, or the provider's instance list, from the server at url, under DEADLINE_S."""
    if side == "runtime":
        with PhaseHttp(url, timeout_s=DEADLINE_S) as http:
            return ComfyUI(http).catalog()
    http = ProviderHttp("vast", url, "k" * 24, deadline_s=DEADLINE_S, sleep=lambda _s: None)
    try:
        return VastAi("vast", http).list_instances()
    finally:
        http.close()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(side=st.sampled_from(["runtime", "provider"]), answer=answers())
def test_an_answer_from_outside_ends_by_its_deadline_under_its_cap_and_depth_bound(hostile, side, answer):
    hostile.answer = answer
    hostile.sent = 0
    kind, parameter = answer
    started = time.monotonic()
    try:
        result = ask(side, hostile.url)
    except (RecursionError, MemoryError):
        raise
    except Exception as exc:  # the failure must be named, whatever its type
        said = str(exc)
    else:
        raise AssertionError(f"a hostile answer ({kind}) was taken for a good one: {str(result)[:200]}")
    elapsed = time.monotonic() - started
    assert elapsed <= DEADLINE_S + SLACK_S, f"{side} {kind}: took {elapsed:.1f} s: {said[:300]}"
    assert SAYS[kind] in said, f"{side} {kind}: {said[:400]}"
    if kind == "huge":
        assert hostile.sent < 100 * MIB, f"{hostile.sent // MIB} MiB of a {parameter // MIB} MiB body were read"


@pytest.fixture
def world(tmp_path):
    made = HealthWorld(tmp_path / "world")
    with made.registry.update("policy.json") as document:
        document["health_timeouts"] = {"nvidia_smi_s": 1, "probe_s": 4, "connect_s": 10}
    yield made
    made.close()


@pytest.mark.parametrize("answer", [("drip", 0.5), ("deep", 100_000), ("huge", 300 * MIB)], ids=lambda a: a[0])
def test_a_hostile_catalog_ends_the_health_run_within_its_deadline_with_a_named_failure(pytester, world, answer):
    host = world.add("dep_cat")
    server = Hostile(upstream=host.endpoint)
    server.answer = answer
    try:
        world.registry.update_deployment("dep_cat", endpoint=server.url)
        checks = world.install_checks(pytester.path)
        started = time.monotonic()
        result = pytester.runpytest_subprocess(str(checks), "--registry", str(world.registry.root), "--gpu-mode",
                                               "live", "-p", "no:cacheprovider", "-rA", timeout=240)
        elapsed = time.monotonic() - started
    finally:
        server.close()
    text = result.stdout.str() + result.stderr.str()
    assert "RecursionError" not in text and "MemoryError" not in text, text[-3000:]
    assert elapsed < 45, f"the health run took {elapsed:.0f} s against a probe deadline of 4 s"
    named = [line for line in result.outlines if "GET /object_info failed" in line and SAYS[answer[0]] in line]
    assert named, "no warning names the catalog's failure:\n" + text[-3000:]
