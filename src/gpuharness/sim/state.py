"""The simulator's state: instances with a pending -> running delay, accrued cost, counters. Thread-safe."""

from __future__ import annotations

import random
import string
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, final

SimStatus = Literal["pending", "running", "stopped", "terminated"]


class HostHandle(Protocol):
    """A simulated host started for a running instance (gpuharness.sim.host.SimHost is one).

    ssh_host/ssh_port are reported as the instance's SSH route; http_ports maps a container port
    (8188, 8000...) to the loopback port of the runtime server answering for it.
    """

    @property
    def ssh_host(self) -> str: ...

    @property
    def ssh_port(self) -> int: ...

    @property
    def http_ports(self) -> Mapping[int, int]: ...

    def stop(self) -> None: ...


@final
@dataclass(slots=True)
class PlaceholderHost:
    """The default host: a loopback address where nothing listens."""

    ssh_host: str = "127.0.0.1"
    ssh_port: int = 22
    http_ports: Mapping[int, int] = field(default_factory=dict)

    def stop(self) -> None:
        return None


@final
@dataclass(slots=True)
class SimInstance:
    """One simulated instance. Times are seconds of the simulator's clocks."""

    provider: str
    id: str
    name: str
    gpu: str
    gpu_count: int
    cost_hr: float
    image: str
    region: str
    created_wall: float
    created_mono: float
    status: SimStatus = "pending"
    ready_at_mono: float = 0.0
    running_since: float | None = None
    accrued_usd: float = 0.0
    #: what accrued_usd is made of, per UTC day (YYYY-MM-DD) of the simulator's wall clock: the provider's bill
    accrued_by_day: dict[str, float] = field(default_factory=dict)
    #: what a stopped instance's volume bills per hour (RunPod charges it; 0: the provider does not), and its part
    #: of accrued_by_day
    storage_hr: float = 0.0
    stopped_since: float | None = None
    storage_by_day: dict[str, float] = field(default_factory=dict)
    host: HostHandle | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def live(self) -> bool:
        return self.status != "terminated"


HostFactory = Callable[[SimInstance], "HostHandle | None"]


def _by_utc_day(start: float, end: float) -> list[tuple[str, float]]:
    """Seconds of [start, end) (epoch seconds) per UTC day."""
    found: list[tuple[str, float]] = []
    while start < end:
        midnight = (start // 86_400 + 1) * 86_400
        upto = min(midnight, end)
        found.append((time.strftime("%Y-%m-%d", time.gmtime(start)), upto - start))
        start = upto
    return found


def _charge(instance: SimInstance, start: float, end: float, rate_hr: float, part: dict[str, float]) -> None:
    """Add rate_hr over [start, end) (monotonic seconds) to the instance's accrual, per UTC day (and to `part`)."""
    instance.accrued_usd += rate_hr * (end - start) / 3600.0
    offset = instance.created_wall - instance.created_mono  # monotonic seconds -> wall seconds
    for day, seconds in _by_utc_day(start + offset, end + offset):
        amount = rate_hr * seconds / 3600.0
        instance.accrued_by_day[day] = instance.accrued_by_day.get(day, 0.0) + amount
        part[day] = part.get(day, 0.0) + amount


def runpod_id() -> str:
    """A 14-char lowercase alphanumeric pod id, like RunPod's."""
    return "".join(random.choices(string.ascii_lowercase + string.digits, k=14))


@final
class SimState:
    """Instances of every simulated provider, plus request and event counters."""

    def __init__(self, *, ready_delay_s: float = 0.2, clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], float] = time.time) -> None:
        self.lock = threading.RLock()
        self.ready_delay_s = ready_delay_s
        self.clock = clock
        self.wall = wall
        self.host_factory: HostFactory | None = None
        #: gives a new host what its provider places in the pod (sim.in_pod), once the simulator serves
        self.in_pod: Callable[[SimInstance, HostHandle], None] | None = None
        #: hosts of pods stopped from inside, kept for their disk until the simulator stops
        self.kept_hosts: list[HostHandle | None] = []
        self.instances: dict[tuple[str, str], SimInstance] = {}
        self.requests: dict[str, int] = {}
        self.counters: dict[str, int] = {}
        self.launches = 0
        self._vast_next = 31_000_000
        self.jobs: dict[tuple[str, str], dict[str, Any]] = {}
        #: texts served at result URLs (Vast's logs and execute answers), by token
        self.results: dict[str, str] = {}

    # identifiers
    def new_id(self, provider: str) -> str:
        with self.lock:
            if provider == "vast":
                self._vast_next += 1
                return str(self._vast_next)
            if provider == "massed":
                return str(uuid.uuid4())
            while True:
                candidate = runpod_id()
                if (provider, candidate) not in self.instances:
                    return candidate

    # counting
    def count_request(self, route: str) -> None:
        with self.lock:
            self.requests[route] = self.requests.get(route, 0) + 1

    def increment(self, counter: str, amount: int = 1) -> None:
        """Bump a named counter (F counts ssh_connections / ssh_execs here); shown in /_sim/stats."""
        with self.lock:
            self.counters[counter] = self.counters.get(counter, 0) + amount

    # instances
    def create(self, provider: str, *, name: str, gpu: str, gpu_count: int, cost_hr: float, image: str,
               region: str, extra: dict[str, Any] | None = None, count_launch: bool = True,
               instance_id: str | None = None) -> SimInstance:
        """A new instance, pending until ready_delay_s has passed. instance_id: take this id (an instance copied
        from a real listing) instead of a new one; an id already there is refused."""
        with self.lock:
            if instance_id is not None and (provider, instance_id) in self.instances:
                raise ValueError(f"{provider} instance {instance_id} already exists in the simulator")
            now = self.clock()
            instance = SimInstance(provider=provider, id=instance_id or self.new_id(provider), name=name, gpu=gpu,
                                   gpu_count=gpu_count, cost_hr=round(cost_hr, 4), image=image, region=region,
                                   created_wall=self.wall(), created_mono=now,
                                   ready_at_mono=now + self.ready_delay_s, extra=dict(extra or {}))
            self.instances[(provider, instance.id)] = instance
            if count_launch:
                self.launches += 1
            self._advance(instance, now)
            return instance

    def get(self, provider: str, instance_id: str) -> SimInstance | None:
        """A live instance, advanced to now; None when unknown or terminated."""
        with self.lock:
            instance = self.instances.get((provider, instance_id))
            if instance is None or not instance.live:
                return None
            self._advance(instance, self.clock())
            return instance

    def live(self, provider: str) -> list[SimInstance]:
        """Every live instance of a provider, oldest first, advanced to now."""
        with self.lock:
            now = self.clock()
            found = [i for (p, _), i in self.instances.items() if p == provider and i.live]
            for instance in found:
                self._advance(instance, now)
            return found

    def stop(self, instance: SimInstance) -> None:
        with self.lock:
            self._advance(instance, self.clock())
            self._accrue(instance, self.clock())
            instance.status = "stopped"
            instance.running_since = None
            instance.stopped_since = self.clock()
            self._release_host(instance)

    def start(self, instance: SimInstance) -> None:
        with self.lock:
            now = self.clock()
            self._accrue(instance, now)  # the stopped volume's storage, up to now
            instance.stopped_since = None
            instance.status = "pending"
            instance.ready_at_mono = now + self.ready_delay_s
            self._advance(instance, now)

    def terminate(self, instance: SimInstance) -> None:
        with self.lock:
            self._accrue(instance, self.clock())
            instance.status = "terminated"
            instance.running_since = instance.stopped_since = None
            self._release_host(instance)

    def _advance(self, instance: SimInstance, now: float) -> None:
        if instance.status == "pending" and now >= instance.ready_at_mono:
            factory = self.host_factory
            host = factory(instance) if factory is not None else None  # raises: stays pending, retried later
            instance.host = host if host is not None else PlaceholderHost()
            if host is not None and self.in_pod is not None:
                self.in_pod(instance, host)
            instance.status = "running"
            instance.running_since = instance.ready_at_mono
        self._accrue(instance, now)

    @staticmethod
    def _accrue(instance: SimInstance, now: float) -> None:
        """Bill the instance up to now: its GPU while it runs, its volume while it is stopped."""
        if instance.status == "running" and instance.running_since is not None and now > instance.running_since:
            _charge(instance, instance.running_since, now, instance.cost_hr, {})
            instance.running_since = now
        elif instance.status == "stopped" and instance.stopped_since is not None and now > instance.stopped_since:
            if instance.storage_hr > 0:
                _charge(instance, instance.stopped_since, now, instance.storage_hr, instance.storage_by_day)
            instance.stopped_since = now

    def accruals(self, provider: str) -> list[SimInstance]:
        """Every instance the provider ever billed (terminated ones too), live ones accrued to now: its bill."""
        with self.lock:
            now = self.clock()
            found = [i for (p, _), i in self.instances.items() if p == provider]
            for instance in found:
                if instance.live:
                    self._advance(instance, now)
            return found

    @staticmethod
    def _release_host(instance: SimInstance) -> None:
        host, instance.host = instance.host, None
        if host is not None:
            host.stop()

    def stats(self) -> dict[str, Any]:
        """What /_sim/stats answers."""
        with self.lock:
            now = self.clock()
            for instance in self.instances.values():
                if instance.live:
                    self._advance(instance, now)
            live = [i for i in self.instances.values() if i.live]
            by_provider: dict[str, int] = {}
            for instance in live:
                by_provider[instance.provider] = by_provider.get(instance.provider, 0) + 1
            return {
                "requests": dict(sorted(self.requests.items())),
                "launches": self.launches,
                "instances": len(live),
                "instances_by_provider": by_provider,
                "running": sum(1 for i in live if i.status == "running"),
                "terminated": sum(1 for i in self.instances.values() if not i.live),
                "accrued_usd": round(sum(i.accrued_usd for i in self.instances.values()), 6),
                "counters": dict(sorted(self.counters.items())),
            }

    def shutdown(self) -> None:
        """Stop every simulated host."""
        with self.lock:
            for instance in self.instances.values():
                self._release_host(instance)
            for host in self.kept_hosts:
                if host is not None:
                    host.stop()
            self.kept_hosts.clear()
