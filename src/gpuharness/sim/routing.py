"""Requests, responses and routes of the simulator, independent of the HTTP server."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, final

from gpuharness.sim.faults import RequestKind

if TYPE_CHECKING:
    from gpuharness.sim.catalog import CatalogGpu
    from gpuharness.sim.state import SimState


@final
@dataclass(slots=True)
class SimRequest:
    method: str
    path: str
    params: Mapping[str, list[str]]
    headers: Mapping[str, str]
    body: Any
    match: dict[str, str] = field(default_factory=dict)

    def param(self, name: str, default: str | None = None) -> str | None:
        values = self.params.get(name)
        return values[0] if values else default


@final
@dataclass(slots=True)
class SimResponse:
    status: int
    body: Any = None
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)
    drop: bool = False
    drip_s: float = 0.0  # > 0: the answer leaves one byte every drip_s seconds (status line and headers too)

    def encode(self) -> bytes:
        if self.body is None:
            return b""
        if isinstance(self.body, str):
            return self.body.encode()
        return json.dumps(self.body).encode()


def json_response(status: int, body: Any) -> SimResponse:
    return SimResponse(status, body)


def text_response(status: int, text: str) -> SimResponse:
    return SimResponse(status, text, content_type="text/plain; charset=utf-8")


Handler = Callable[[SimRequest, "SimState"], SimResponse]


@final
@dataclass(frozen=True, slots=True)
class Route:
    """One endpoint: `template` names it in /_sim/stats ("GET /vast/api/v0/instances/{id}/")."""

    method: str
    template: str
    kind: RequestKind
    handler: Handler
    pattern: re.Pattern[str]
    #: the kind decided per request (GraphQL: a query reads, a mutation launches or mutates)
    classify: Callable[[SimRequest], RequestKind] | None = None
    #: answered without a key (Vast's GPU name list and result URLs are fetched without one)
    public: bool = False

    @classmethod
    def of(cls, method: str, template: str, kind: RequestKind, handler: Handler, *,
           classify: Callable[[SimRequest], RequestKind] | None = None, public: bool = False) -> Route:
        regex = re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/]+)", re.escape(template))
        return cls(method, template, kind, handler, re.compile(f"^{regex}$"), classify, public)

    @property
    def key(self) -> str:
        return f"{self.method} {self.template}"

    def kind_of(self, req: SimRequest) -> RequestKind:
        """What kind of request this is, for faults."""
        return self.classify(req) if self.classify is not None else self.kind


@final
@dataclass(frozen=True, slots=True)
class Made:
    """What the simulator keeps of an instance it makes directly (POST /_sim/instances): the GPU's name as the
    provider writes it, the price, and the provider's own fields."""

    gpu: str
    cost_hr: float
    extra: dict[str, Any] = field(default_factory=dict)


@final
@dataclass(frozen=True, slots=True)
class InPodWire:
    """What a simulated provider places in its pods (the id and key variables; the guard's API base under the
    simulator) and the one request that key may make: its own pod's stop (`route`, with `body` where it must be
    exactly that), answered by `stopped`."""

    id_env: str
    key_env: str
    base: str
    route: str
    stopped: Callable[[Any, Any], SimResponse]
    body: Any = None


@final
@dataclass(frozen=True, slots=True)
class ProviderWire:
    """How one provider's API looks on the wire: its routes and its error bodies; and, for a provider whose
    instances the simulator keeps, how it makes one directly and how it copies one in from elsewhere. A provider's
    simulator is one module, sim/providers_<name>.py, whose WIRE this is (sim.wires finds it)."""

    provider: str
    prefix: str
    routes: tuple[Route, ...]
    unauthorized: Callable[[], SimResponse]
    rate_limited: Callable[[float | None], SimResponse]
    capacity: Callable[[], SimResponse]
    server_error: Callable[[], SimResponse]
    not_found: Callable[[], SimResponse]
    #: a query parameter that may carry the key instead of the Authorization header (Vast: api_key)
    query_key: str | None = None
    #: the provider's answer to a request the parser refuses (body not JSON, bad Content-Length)
    bad_request: Callable[[str], SimResponse] = lambda reason: json_response(400, {"error": reason})
    #: an instance made directly, from a catalog row and its name (None: it has no instances, or it shares its
    #: provider's: a serverless endpoint, a second API over the same pods)
    made: Callable[[CatalogGpu, str], Made] | None = None
    #: the provider's own fields of an instance copied in under its own id, given its label (the same None)
    mirrored: Callable[[str], dict[str, Any]] | None = None
    #: what its providers.json entry holds besides name, kind, key and api_base (a serverless endpoint's id)
    entry: Mapping[str, Any] = field(default_factory=dict)
    #: the identity it places in its pods and the in-pod stop it honours with it (sim.in_pod; None: none)
    in_pod: InPodWire | None = None

    def route(self, method: str, path: str) -> tuple[Route, dict[str, str]] | None:
        for route in self.routes:
            if route.method == method:
                found = route.pattern.match(path)
                if found:
                    return route, found.groupdict()
        return None


def bearer(headers: Mapping[str, str]) -> str | None:
    """The bearer token of a request (or the bare key some RunPod docs send)."""
    value = headers.get("authorization", "").strip()
    if not value:
        return None
    if value.lower().startswith("bearer "):
        return value[7:].strip() or None
    return value
