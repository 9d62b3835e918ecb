"""Adding a runtime is its own module declaring its entry in the runtime table with its client (plus an executor
module for jobs) and its simulator half: the health and test-generation dispatch, the run phase's executors, and the
simulated runtime server and host find a runtime by its name, never written out per runtime."""

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

from gpuharness import probe, runtimes
from gpuharness.core.deployment import Deployment
from gpuharness.core.errors import UserError
from gpuharness.core.registry import Registry
from gpuharness.core.runtimes import RUNTIMES, Runtime
from gpuharness.operations import run
from gpuharness.operations.seams import EXECUTOR_SUFFIX, executor_factory, executor_of
from gpuharness.remote.connect import HostRoute, open_remote
from gpuharness.sim.host import HostSpec, SimHost, host_factory
from gpuharness.sim.runtimes import RuntimeServer
from gpuharness.sim.simulated_runtime import (
    JSON,
    SERVICE_MAIN,
    UNHEALTHY,
    RuntimeSetting,
    ServiceProcess,
    SimulatedRuntime,
    half_of,
    runtime_for_image,
    simulated,
)

TOY = "toy"
TOY_PORT = 7860


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


#: the toy runtime's module, written as a new runtime's module is: its entry and its client, declared together
TOY_MODULE = """
from typing import Any
from gpuharness import runtimes
from gpuharness.core.runtimes import Runtime
from gpuharness.remote.http import PhaseHttp
from gpuharness.runtimes.outputs import Served

RUNTIME = Runtime("toy", port=PORT, health_path="/ready", process="toy_server", directory="toy")


def health(client, **_: Any) -> runtimes.Outcome:
    answer = runtimes.get_health(PhaseHttp.over(client), str(RUNTIME.health_path))
    if isinstance(answer, runtimes.Outcome):
        return answer
    return runtimes.Outcome(True, f"toy is {answer.json()['status']}")


def generate(client, workflow, request: runtimes.GenerationRequest) -> runtimes.Outcome:
    started = request.clock()
    body = {"model": request.model, "client_id": request.client_id, **workflow["test_generation"]["inputs"]}
    response = PhaseHttp.over(client).post("/make", json=body, timeout=request.deadline_s)
    return runtimes.check_expected([Served("made.txt", response.json()["text"].encode(), "text/plain")],
                                   workflow["test_generation"]["expected_outputs"], started=started,
                                   clock=request.clock)


runtimes.declare(RUNTIME, health=health, generate=generate)
"""


def _undeclare(name: str) -> None:
    RUNTIMES.pop(name, None)
    runtimes.CLIENTS.pop(name, None)


@pytest.fixture
def toy_client_module(monkeypatch: pytest.MonkeyPatch) -> Iterator[types.ModuleType]:
    """The toy runtime's module, imported: its entry is in the runtime table and its client in the dispatch."""
    module = types.ModuleType(f"gpuharness.runtimes.{TOY}")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    exec(compile(TOY_MODULE.replace("PORT", str(TOY_PORT)), f"<{module.__name__}>", "exec"), module.__dict__)
    try:
        yield module
    finally:
        _undeclare(TOY)


def test_a_runtime_defined_only_by_its_own_module_is_dispatched(toy_server, toy_client_module):
    url, seen = toy_server
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


def test_a_client_without_its_table_entry_is_not_dispatched(toy_server, toy_client_module):
    url, seen = toy_server
    del RUNTIMES[TOY]  # its client stays declared
    with httpx.Client(base_url=url) as client:
        outcome = runtimes.health(TOY, client)
        generation = runtimes.run_test_generation(TOY, client, {"id": "toy-run", "test_generation": {}})
    assert (outcome.ok, outcome.cause, generation.cause) == (False, "unsupported_runtime", "unsupported_runtime")
    assert "no health client for runtime 'toy'" in outcome.message
    assert seen == []  # nothing was asked of the server


def test_a_declaration_names_both_client_functions_or_neither():
    with pytest.raises(ValueError, match="both health and generate, or neither"):
        runtimes.declare(Runtime("half_declared"), health=lambda client, **_: runtimes.Outcome(True, "up"))
    assert "half_declared" not in RUNTIMES
    with pytest.raises(ValueError, match="lowercase letters, digits and _"):
        Runtime("Toy-Runtime")


def test_a_runtime_without_a_client_has_no_health_or_generation():
    native = next(name for name in RUNTIMES if runtimes.client_of(name) is None)
    with httpx.Client(base_url="http://127.0.0.1:9") as client:
        assert runtimes.health(native, client).cause == "unsupported_runtime"
        assert runtimes.run_test_generation(native, client, {"test_generation": {}}).cause == "unsupported_runtime"


def test_every_runtime_that_generates_declares_the_one_pair_of_functions():
    expected = {"health": ["client", "_"], "generate": ["client", "workflow", "request"]}
    assert {name for name in RUNTIMES if runtimes.client_of(name)} == {
        name for name, entry in RUNTIMES.items() if entry.generates}
    for name in RUNTIMES:
        client = runtimes.client_of(name)
        for function, parameters in expected.items() if client is not None else ():
            got = list(inspect.signature(getattr(client, function)).parameters)
            assert got == parameters, (name, function, got)


def test_every_executor_is_the_module_named_after_its_runtime_and_builds_from_the_seams():
    found = {name: executor_of(name) for name in RUNTIMES}
    assert any(found.values())
    for name, module in found.items():
        if module is not None:
            assert module.__name__ == f"gpuharness.operations.{name}{EXECUTOR_SUFFIX}"
            assert list(inspect.signature(module.build).parameters) == ["deployment", "seams"], name


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
    assert refused.value.hint == "supported: " + ", ".join(name for name in RUNTIMES if executor_of(name))

    monkeypatch.setitem(RUNTIMES, TOY, Runtime(TOY))
    assert executors(_deployment(TOY)) == "toy executor"
    (deployment, seams), = built
    assert (deployment.id, seams.registry, seams.env) == ("dep_toy", registry, {"TOY_KEY": "x"})
    with pytest.raises(UserError) as refused:
        executors(_deployment("native"))
    assert "running jobs on a 'native' runtime is not supported yet" in str(refused.value)
    assert refused.value.hint is not None and refused.value.hint.endswith(", toy")


# --- the simulator half: a made-up runtime's routes and service, picked up by the generic simulator



class _ToyRoutes:
    """The toy runtime's simulator half: its routes, as a new runtime's sim module would write them."""

    def __init__(self, setting: RuntimeSetting) -> None:
        self.setting = setting

    def respond(self, method: str, path: str, query: Any, body: Any) -> tuple[int, Any, str]:
        if self.setting.faults().health_down:
            return UNHEALTHY
        if (method, path) == ("GET", "/ready"):
            return 200, {"status": "warm"}, JSON
        if (method, path) == ("POST", "/make") and body.get("model") == self.setting.model:
            return 200, {"text": f"made for {body['model']}"}, JSON
        return 404, {"error": f"no route {path}"}, JSON


@pytest.fixture
def toy_runtime(toy_client_module, monkeypatch) -> Runtime:
    """The toy runtime: its own module (its entry and client) and its simulator half (the module of gpuharness.sim
    named after it, in sys.modules), and nothing else."""
    half = types.ModuleType(f"gpuharness.sim.{TOY}")
    half.SIMULATED = SimulatedRuntime(
        _ToyRoutes, service=ServiceProcess(("toy_server.py", "--port", str(TOY_PORT)),
                                           files={"toy_server.py": SERVICE_MAIN}),
        image_words=("toy-runtime",))
    monkeypatch.setitem(sys.modules, half.__name__, half)
    return RUNTIMES[TOY]


def _toy_workflow() -> dict[str, Any]:
    return {"id": "toy-run", "runtime": TOY, "test_generation": {
        "inputs": {"prompt": "a cat"}, "expected_outputs": [{"type": "text/plain", "min_bytes": 5}], "timeout_s": 7}}


def test_a_runtimes_simulator_half_is_served_by_the_simulated_runtime_server(toy_runtime):
    server = RuntimeServer(TOY, model="toy-1").start()
    try:
        with httpx.Client(base_url=server.url) as client:
            healthy = runtimes.health(TOY, client)
            made = runtimes.run_test_generation(TOY, client, _toy_workflow(), model="toy-1", client_id="gh-toy")
            wrong = client.post("/make", json={"model": "other"})
    finally:
        server.stop()
    assert healthy.ok and healthy.message == "toy is warm"
    assert made.ok and made.outputs[0].name == "made.txt", made.message
    assert wrong.status_code == 404
    assert server.requests == ["GET /ready", "POST /make", "POST /make"]


def test_a_runtimes_simulator_half_runs_its_service_on_a_simulated_host(toy_runtime):
    with SimHost(HostSpec(runtime=TOY, log_lines=())) as host:
        service = (host.service_pid, f"{host.service_python} toy_server.py --port {TOY_PORT}")
        assert host.service_port == TOY_PORT and host.runtime is not None
        assert host.http_ports == {TOY_PORT: host.runtime.port}
        assert host.service_python == host.workspace / "toy" / "venv" / "bin" / "python"
        with httpx.Client(base_url=str(host.endpoint)) as client:
            assert runtimes.health(TOY, client).message == "toy is warm"
        block = host.ssh_block()
        remote = open_remote(HostRoute(target="toy", host=block["host"], port=block["port"], user="root",
                                       key_file=block["key_file"], known_hosts=block["known_hosts"]))
        try:
            _, facts = probe.run(remote, probe.ProbeTargets(workspace=block["workspace"],
                                                            process_pattern=toy_runtime.process,
                                                            service_port=host.service_port), deadline_s=60)
        finally:
            remote.close()
    assert service[0] is not None and facts.processes[0] == service  # the real process the half declared
    assert facts.process_found_by == f"port {TOY_PORT} ss"


def test_a_provider_image_naming_a_runtime_gets_a_host_serving_it(toy_runtime):
    instance = types.SimpleNamespace(id="i-1", gpu="RTX 4090", gpu_count=1, image="example/toy-runtime:1")
    assert runtime_for_image(instance.image) == TOY
    assert runtime_for_image("runpod/pytorch:2.4") == next(iter(RUNTIMES))  # the table's first hosted runtime
    host = host_factory()(instance)
    try:
        assert (host.spec.runtime, host.service_port) == (TOY, TOY_PORT)
    finally:
        host.stop()


def test_a_runtime_without_a_simulator_half_is_refused_by_name():
    bare = next(name for name in RUNTIMES if half_of(name) is None)
    hostless = next(name for name, entry in RUNTIMES.items() if not entry.has_host and half_of(name))
    with pytest.raises(ValueError, match=f"the simulator has no runtime '{bare}'"):
        RuntimeServer(bare)
    with pytest.raises(ValueError, match=f"the simulator has no runtime '{TOY}'"):
        simulated(TOY)
    with pytest.raises(ValueError, match=f"no simulated host serves runtime '{hostless}'"):
        HostSpec(runtime=hostless)
