"""Adding a runtime is its entry in the runtime table and one client module (plus an executor module for jobs):
the health and test-generation dispatch and the run phase's executors are looked up by the names the table holds,
never written out per runtime."""

from __future__ import annotations

import inspect
import json
import sys
import threading
import types
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from gpuharness import runtimes
from gpuharness.core.deployment import Deployment
from gpuharness.core.errors import UserError
from gpuharness.core.registry import Registry
from gpuharness.core.runtimes import RUNTIMES, Runtime
from gpuharness.operations import run
from gpuharness.operations.seams import executor_factory, executor_of
from gpuharness.runtimes.http import RuntimeHttp

TOY = "toy"


class _ToyServer(BaseHTTPRequestHandler):
    """A runtime of no kind the harness knows: a health route and a generation route."""

    seen: list[tuple[str, str, Any]]

    def do_GET(self) -> None:
        self.seen.append(("GET", self.path, None))
        if self.path == "/ready":
            self._answer(200, {"status": "warm"})
        else:
            self._answer(404, {"error": f"no route {self.path}"})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"null")
        self.seen.append(("POST", self.path, body))
        if self.path == "/make":
            self._answer(200, {"text": f"made for {body.get('model')}"})
        else:
            self._answer(404, {"error": f"no route {self.path}"})

    def _answer(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def toy_server() -> Iterator[tuple[str, list[tuple[str, str, Any]]]]:
    seen: list[tuple[str, str, Any]] = []
    handler = type("Handler", (_ToyServer,), {"seen": seen})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def _toy_client() -> types.ModuleType:
    """The toy runtime's client module, written as a new runtime's module would be."""
    module = types.ModuleType(f"gpuharness.runtimes.{TOY}")

    def health(client: httpx.Client | RuntimeHttp, **_: Any) -> runtimes.Outcome:
        answer = runtimes.get_health(RuntimeHttp.over(client), str(RUNTIMES[TOY].health_path))
        if isinstance(answer, runtimes.Outcome):
            return answer
        return runtimes.Outcome(True, f"toy is {answer.json()['status']}")

    def generate(client: httpx.Client | RuntimeHttp, workflow: Any,
                 request: runtimes.GenerationRequest) -> runtimes.Outcome:
        started = request.clock()
        body = {"model": request.model, "client_id": request.client_id, **workflow["test_generation"]["inputs"]}
        response = RuntimeHttp.over(client).post("/make", json=body, timeout=request.deadline_s)
        text = response.json()["text"]
        return runtimes.check_expected([runtimes.Artifact("made.txt", "text/plain", len(text))],
                                       workflow["test_generation"]["expected_outputs"], started=started,
                                       clock=request.clock)

    module.health = health
    module.generate = generate
    return module


@pytest.fixture
def toy_client_module(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    module = _toy_client()
    monkeypatch.setitem(sys.modules, module.__name__, module)
    return module


def test_a_runtime_defined_only_by_its_table_entry_and_client_is_dispatched(toy_server, toy_client_module,
                                                                           monkeypatch):
    url, seen = toy_server
    monkeypatch.setitem(RUNTIMES, TOY, Runtime(TOY, health_path="/ready", client=TOY))
    workflow = {"id": "toy-run", "runtime": TOY, "test_generation": {
        "inputs": {"prompt": "a cat"}, "expected_outputs": [{"type": "text/plain", "min_bytes": 5}],
        "timeout_s": 7}}
    with httpx.Client(base_url=url) as client:
        healthy = runtimes.health(TOY, client)
        made = runtimes.run_test_generation(TOY, client, workflow, model="toy-1", client_id="gpuharness-dep_toy")
    assert healthy.ok and healthy.message == "toy is warm"
    assert made.ok and made.outputs[0].name == "made.txt", made.message
    assert seen == [("GET", "/ready", None),
                    ("POST", "/make", {"model": "toy-1", "client_id": "gpuharness-dep_toy", "prompt": "a cat"})]


def test_a_client_module_without_its_table_entry_is_not_dispatched(toy_server, toy_client_module):
    url, seen = toy_server
    with httpx.Client(base_url=url) as client:
        outcome = runtimes.health(TOY, client)
        generation = runtimes.run_test_generation(TOY, client, {"id": "toy-run", "test_generation": {}})
    assert (outcome.ok, outcome.cause, generation.cause) == (False, "unsupported_runtime", "unsupported_runtime")
    assert "no health client for runtime 'toy'" in outcome.message
    assert seen == []  # nothing was asked of the server


def test_a_runtime_without_a_client_has_no_health_or_generation():
    native = next(name for name, entry in RUNTIMES.items() if entry.client is None)
    with httpx.Client(base_url="http://127.0.0.1:9") as client:
        assert runtimes.health(native, client).cause == "unsupported_runtime"
        assert runtimes.run_test_generation(native, client, {"test_generation": {}}).cause == "unsupported_runtime"


def test_every_client_the_table_names_has_the_one_pair_of_functions():
    expected = {name: list(inspect.signature(getattr(runtimes.RuntimeClient, name)).parameters)[1:]
                for name in ("health", "generate")}
    named = [entry for entry in RUNTIMES.values() if entry.client is not None]
    assert {entry.name for entry in named} == {entry.name for entry in RUNTIMES.values() if entry.generates}
    for entry in named:
        module = runtimes.client_of(entry.name)
        for function, parameters in expected.items():
            got = list(inspect.signature(getattr(module, function)).parameters)
            assert len(got) == len(parameters) and got[0] == "client", (entry.name, function, got)
            if function == "generate":
                assert got == parameters, (entry.name, got)


def test_every_executor_the_table_names_builds_from_the_seams():
    named = [entry for entry in RUNTIMES.values() if entry.executor is not None]
    assert named
    for entry in named:
        module = executor_of(entry.name)
        assert list(inspect.signature(module.build).parameters) == ["deployment", "seams"], entry.name


def _deployment(runtime: str) -> Deployment:
    return Deployment.from_json({"id": "dep_toy", "provider": "sim", "status": "ready", "runtime": runtime})


def test_the_run_phase_builds_a_table_runtimes_executor_and_lists_the_supported_ones(tmp_path, monkeypatch):
    built: list[tuple[Deployment, run.ExecutorSeams]] = []
    module = types.ModuleType("gpuharness.operations.toy_job")
    module.build = lambda deployment, seams: built.append((deployment, seams)) or "toy executor"
    monkeypatch.setitem(sys.modules, module.__name__, module)
    registry = Registry(tmp_path)
    executors = executor_factory(registry, {"TOY_KEY": "x"})
    with pytest.raises(UserError) as refused:
        executors(_deployment(TOY))
    assert refused.value.hint == "supported: " + ", ".join(
        name for name, entry in RUNTIMES.items() if entry.executor is not None)

    monkeypatch.setitem(RUNTIMES, TOY, Runtime(TOY, executor="toy_job"))
    assert executors(_deployment(TOY)) == "toy executor"
    (deployment, seams), = built
    assert (deployment.id, seams.registry, seams.env) == ("dep_toy", registry, {"TOY_KEY": "x"})
    with pytest.raises(UserError) as refused:
        executors(_deployment("native"))
    assert "running jobs on a 'native' runtime is not supported yet" in str(refused.value)
    assert refused.value.hint is not None and refused.value.hint.endswith(", toy")
