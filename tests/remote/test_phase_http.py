"""The one HTTP seam (remote.http.PhaseHttp) carries the phase deadline: a real loopback server that drips its body
one byte at a time never trips a per-read timeout, yet a runtime's call and a provider's call both fail at the phase
deadline, named, however long their own request timeout is; and a phase's later call gets only what is left."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from gpuharness.providers.base import ProviderError
from gpuharness.providers.transport import ProviderHttp
from gpuharness.remote.deadline import AnswerPastDeadline
from gpuharness.remote.http import PhaseHttp

#: the phase deadline; each request's own timeout is far longer, so only the phase can end a drip
PHASE_S = 1.5
REQUEST_TIMEOUT_S = 60.0
#: how late past the phase deadline a cut-off may land
SLACK_S = 1.5
#: the drip: one byte every DRIP_S, for far longer than any deadline here
DRIP_S = 0.1
DRIP_FOR_S = 30.0


class Dripping(BaseHTTPRequestHandler):
    """/drip: a JSON body promised long and sent one byte at a time; /quick: a small answer at once."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        try:
            if self.path.startswith("/quick"):
                self._head(2)
                self.wfile.write(b"{}")
                return
            self._head(1_000_000)
            self.wfile.write(b"{")
            ends = time.monotonic() + DRIP_FOR_S
            while time.monotonic() < ends:
                time.sleep(DRIP_S)
                self.wfile.write(b" ")
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass
        self.close_connection = True

    def _head(self, length: int) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(length))
        self.end_headers()
        self.wfile.flush()


@pytest.fixture(scope="module")
def dripping() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Dripping)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def runtime_call(url: str) -> str:
    with PhaseHttp(url, timeout_s=REQUEST_TIMEOUT_S, deadline_s=PHASE_S) as http:
        with pytest.raises(AnswerPastDeadline) as caught:
            http.get("/drip")
        assert http.calls[-1].error == "AnswerPastDeadline"
    return str(caught.value)


def provider_call(url: str) -> str:
    with ProviderHttp("vast", url, "k" * 24, timeout_s=REQUEST_TIMEOUT_S, deadline_s=PHASE_S,
                      sleep=lambda _s: None) as http:
        with pytest.raises(ProviderError) as caught:
            http.read("GET", "/drip")
        assert isinstance(http.http, PhaseHttp), "a provider's client speaks through the one seam"
        assert [c.error for c in http.calls][:1] == ["AnswerPastDeadline"]
    assert caught.value.kind == "network"
    return str(caught.value)


@pytest.mark.parametrize("call", [runtime_call, provider_call], ids=["runtime", "provider"])
def test_a_dripping_answer_fails_at_the_phase_deadline(dripping, call):
    started = time.monotonic()
    said = call(dripping)
    elapsed = time.monotonic() - started
    assert PHASE_S - 0.2 <= elapsed <= PHASE_S + SLACK_S, f"took {elapsed:.1f} s: {said}"
    assert "deadline" in said and "cut off" in said, said


def test_a_later_call_of_the_phase_gets_only_what_is_left(dripping):
    with PhaseHttp(dripping, timeout_s=REQUEST_TIMEOUT_S, deadline_s=PHASE_S) as http:
        assert http.get("/quick").json() == {}
        time.sleep(PHASE_S / 2)
        started = time.monotonic()
        with pytest.raises(AnswerPastDeadline):
            http.get("/drip")
        assert time.monotonic() - started <= PHASE_S / 2 + SLACK_S
        with pytest.raises(httpx.ReadTimeout, match="phase deadline has passed"):
            http.get("/quick")
    assert [c.status for c in http.calls] == [200, None, None]


def test_without_a_phase_deadline_each_request_has_its_own_timeout(dripping):
    with PhaseHttp(dripping, timeout_s=PHASE_S) as http:
        assert http.phase_left() is None
        for _ in range(2):  # the second request starts its own clock
            started = time.monotonic()
            with pytest.raises(AnswerPastDeadline):
                http.get("/drip")
            assert time.monotonic() - started <= PHASE_S + SLACK_S
