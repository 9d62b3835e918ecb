"""The simulator's HTTP server: loopback only, real wire formats under per-provider prefixes, control routes."""

from __future__ import annotations

import ipaddress
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any, final

from gpuharness.core.errors import UserError
from gpuharness.sim import host_faults, in_pod, wires
from gpuharness.sim.access import HostAccess
from gpuharness.sim.control import bulk_create, control
from gpuharness.sim.exchanges import RecordedRequest, RequestLog, kept_headers, kept_query
from gpuharness.sim.faults import FaultPlan, parse_fault
from gpuharness.sim.http_layer import SimHTTPServer
from gpuharness.sim.routing import InPodWire, ProviderWire, Route, SimRequest, SimResponse, bearer, json_response
from gpuharness.sim.state import HostFactory, SimState
from gpuharness.sim.wires import wire_for


def require_loopback(host: str) -> None:
    """Refuse to bind anything but a loopback address: the simulator accepts any key."""
    if host == "localhost":
        return
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise UserError(f"refusing to serve the simulator on non-loopback host {host!r}", place="sim serve",
                        hint="use --host 127.0.0.1")


def _in_pod_wire(provider: str) -> InPodWire | None:
    wire = wires.provider(provider)
    return wire.in_pod if wire is not None else None


@final
class Simulator:
    """The provider simulator. `with Simulator() as sim:` serves on a free loopback port (its base_url)."""

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0, ready_delay_s: float = 0.2,
                 api_keys: dict[str, str] | None = None, host_factory: HostFactory | None = None,
                 clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time,
                 log: Callable[[str], None] | None = None) -> None:
        require_loopback(host)
        self.host = host
        self.port = port
        self.state = SimState(ready_delay_s=ready_delay_s, clock=clock, wall=wall)
        self.faults = FaultPlan()
        #: every provider request as it arrived (GET /_sim/requests)
        self.requests = RequestLog()
        #: provider -> the only key accepted; providers not named accept any non-empty key
        self.api_keys = dict(api_keys or {})
        self.host_factory = host_factory
        self.state.in_pod = lambda instance, host: in_pod.placed(instance, host, self.base_url,
                                                                 _in_pod_wire(instance.provider))
        self.log = log
        self._server: SimHTTPServer | None = None
        self._thread: threading.Thread | None = None
        #: set by POST /_sim/shutdown (`gpuharness sim stop`); `sim serve` then stops
        self.shutdown_requested = threading.Event()

    @property
    def host_factory(self) -> HostFactory | None:
        """Called when an instance becomes running; returns its simulated host (or None for a placeholder)."""
        return self.state.host_factory

    @host_factory.setter
    def host_factory(self, factory: HostFactory | None) -> None:
        self.state.host_factory = factory

    @property
    def base_url(self) -> str:
        if self._server is None:
            raise RuntimeError("simulator not started")
        return f"http://{self.host}:{self._server.server_address[1]}"

    def url(self, provider: str) -> str:
        """The api_base of a provider kind on this simulator (each simulated provider: sim.wires)."""
        wire = wires.provider(provider)  # a nested wire (GraphQL under /runpod) shares its provider's base
        if wire is None:
            raise KeyError(provider)
        return self.base_url + wire.prefix

    def provider_entries(self, credential_env: str = "GPUHARNESS_SIM_KEY",
                         access: HostAccess | None = None) -> list[dict[str, Any]]:
        """providers.json entries pointing at this simulator (any key of 20+ characters works); with access,
        the providers that rent hosts name the client key and the known_hosts file their hosts are reached with."""
        ssh = {"ssh_key_file": str(access.key_file), "known_hosts": str(access.known_hosts)} if access else {}
        return [{"name": wire.provider, "kind": wire.provider, "credential_env": credential_env,
                 "api_base": self.url(wire.provider), **(ssh if wire.made is not None else {}), **wire.entry}
                for wire in wires.providers()]

    def start(self) -> str:
        """Start serving in a background thread; return the base URL."""
        if self._server is None:
            self._server = SimHTTPServer((self.host, self.port), self)
            self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,),
                                            name="gpuharness-sim", daemon=True)
            self._thread.start()
        return self.base_url

    def wait(self, timeout_s: float) -> None:
        """Block while serving (the CLI), up to timeout_s."""
        if self._thread is not None:
            self._thread.join(timeout_s)

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            if self._thread is not None:
                server.shutdown()
                self._thread.join(timeout=5)
                self._thread = None
            server.server_close()
        self.state.shutdown()

    def __enter__(self) -> Simulator:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    # Python API mirroring the control routes
    def stats(self) -> dict[str, Any]:
        stats = self.state.stats()
        stats["faults_fired"] = dict(self.faults.fired)
        return stats

    def inject(self, **fault: Any) -> None:
        """Arm a fault, same fields as POST /_sim/faults."""
        self.faults.arm(parse_fault(fault))

    def inject_host_fault(self, instance_id: str, fault: str, provider: str | None = None) -> dict[str, Any]:
        """Arm a fault on a running instance's simulated host, as POST /_sim/host-faults does; its answer."""
        status, answer = host_faults.arm(self.state, {"instance_id": instance_id, "fault": fault,
                                                      "provider": provider})
        if status != 200:
            raise ValueError(answer["error"])
        return answer

    def create_instances(self, provider: str, count: int, gpu: str | None = None,
                         name_prefix: str = "gh-bulk-") -> list[str]:
        """Create instances directly (no launch counted), as POST /_sim/instances does."""
        return bulk_create(self.state, {"provider": provider, "count": count, "gpu": gpu,
                                        "name_prefix": name_prefix})

    # request handling
    def handle(self, req: SimRequest) -> SimResponse:
        if req.path.startswith("/_sim/"):
            return control(self, req)
        wire = wire_for(req.path)
        if wire is None:
            return json_response(404, {"error": f"no simulated provider serves {req.path}"})
        found = wire.route(req.method, req.path)
        self.requests.add(RecordedRequest(req.method, req.path, kept_query(req.params), kept_headers(req.headers),
                                          req.body, found[0].key if found else None))
        if found is None:
            self.state.count_request(f"{req.method} (unmatched)")
            return wire.not_found()
        route, match = found
        req.match = match
        self.state.count_request(route.key)
        token = bearer(req.headers) or (req.param(wire.query_key) if wire.query_key else None)
        pod = in_pod.pod_of(self.state, token)
        if pod is not None:  # a key the provider placed in a pod: its own stop, nothing else
            return in_pod.answer(self.state, wire, route, req, pod)
        if not route.public:
            expected = self.api_keys.get(wire.provider)
            if not token or (expected is not None and token != expected):
                return wire.unauthorized()
        return self._answer(wire, route, req)

    def _answer(self, wire: ProviderWire, route: Route, req: SimRequest) -> SimResponse:
        response: SimResponse | None = None
        drop = False
        hold_s = drip_s = 0.0
        for fault in self.faults.take(wire.provider, route.kind_of(req), route.template):
            if fault.fault == "latency":
                time.sleep(fault.latency_ms / 1000)
            elif fault.fault == "rate_limit":
                response = wire.rate_limited(fault.retry_after)
                if fault.retry_after is not None:
                    response.headers["Retry-After"] = str(int(fault.retry_after) if fault.retry_after.is_integer()
                                                          else fault.retry_after)
            elif fault.fault == "capacity":
                response = wire.capacity()
            elif fault.fault == "server_error":
                response = wire.server_error()
            elif fault.fault == "drop_after_commit":
                drop = True
            elif fault.fault == "hold_after_commit":
                hold_s = fault.latency_ms / 1000
            elif fault.fault == "drip":
                drip_s = fault.latency_ms / 1000
        if response is not None:
            response.drip_s = drip_s
            return response
        with self.state.lock:
            response = route.handler(req, self.state)
        time.sleep(hold_s)  # committed above, answered only now (outside the state lock: others go on)
        response.drop = drop
        response.drip_s = drip_s
        return response

    def refuse(self, path: str, reason: str) -> SimResponse:
        """The answer to a request the parser refused, in the shape of the provider it was meant for."""
        wire = None if path.startswith("/_sim/") else wire_for(path)
        return wire.bad_request(reason) if wire is not None else json_response(400, {"error": reason})
