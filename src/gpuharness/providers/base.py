"""The provider seam: one narrow protocol, a normalized Instance, and classified errors; and the provider table,
which each adapter joins by declaring its kind and capabilities on its class (`@adapter`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import ClassVar, Final, Literal, Protocol, TypeVar, final, runtime_checkable

from gpuharness.core import tables
from gpuharness.core.bill import Charge
from gpuharness.core.errors import GpuharnessError, UserError
from gpuharness.core.json_fields import JsonFields
from gpuharness.core.tables import Table

Status = Literal["pending", "running", "stopped", "terminated", "error", "unknown"]
ErrorKind = Literal["capacity", "balance", "auth", "rate_limited", "not_found", "invalid", "server",
                    "unknown_outcome", "unsupported", "network"]

#: Label / name prefix that marks instances launched by gpuharness (orphan detection keys on it).
KEY_PREFIX = "gh-"


@final
@dataclass(frozen=True, slots=True)
class ProviderKind:
    """The kind of a providers.json entry: which adapter speaks to it. Each adapter declares its own on its class;
    the kinds there are are the provider table's (ADAPTERS)."""

    value: str

    def __str__(self) -> str:
        return self.value

    @classmethod
    def parse(cls, text: object, *, place: str = "kind") -> ProviderKind:
        """The kind called text; anything else is a one-line UserError naming the kinds there are."""
        found = ADAPTERS.get(text) if isinstance(text, str) else None
        if found is None:
            raise UserError(f"unknown kind {text!r}", path="providers.json", place=place,
                            hint=f"kind is one of {', '.join(ADAPTERS)}")
        return found.kind


@final
class InventorySource(Enum):
    """Where the instances of a provider are listed from."""

    API = "the provider's instance list (one call plus pages)"
    MACHINES_JSON = "machines.json (servers you own: the registry is their inventory)"
    NONE = "nothing (a serverless endpoint has workers, not instances)"


@final
@dataclass(frozen=True, slots=True)
class Capabilities:
    """What a provider offers, declared once on its adapter; the lifecycle asks these, never the kind's name.

    label: what is bought, in the disclosure; api_base: the real API host (None: no API);
    stop_start: instances can be stopped and started again; interruptible: spot/bid instances exist;
    bid_price: an interruptible launch is a bid (needs a price); serverless: a deployment is an endpoint, no
    instance and no SSH; ssh: its instances are reached over SSH; inventory: where instances are listed from;
    offers: it lists what can be rented now, with prices; rents: a launch rents a new instance billed by the
    hour (not serverless, billed per request, nor an owned server, already paid for); stopped_storage_usd_gb_month:
    what a stopped instance's volume bills.
    """

    label: str
    api_base: str | None
    stop_start: bool
    interruptible: bool
    bid_price: bool
    serverless: bool
    ssh: bool
    inventory: InventorySource
    offers: bool
    rents: bool
    #: $ per GB-month it charges for a stopped instance's volume (counted in the billed intervals)
    stopped_storage_usd_gb_month: float = 0.0
    #: how a pod stops itself with what the provider places in it (None: it places nothing; operations.guard)
    in_pod_stop: InPodStop | None = None


@final
@dataclass(frozen=True, slots=True)
class InPodStop:
    """A provider's in-pod stop: the environment variables it places in the pod (the instance's id, a key scoped to
    that instance), and the call that stops it: method, the API's base, the path with %s for the id, the body."""

    id_env: str
    key_env: str
    method: str
    api_base: str
    path: str
    body: str = ""


class Adapter(Protocol):
    """What the provider table holds of each adapter class: its kind and what it offers (the lifecycle asks these,
    never a kind's name). Built from a providers.json entry by providers.factory."""

    kind: ClassVar[ProviderKind]
    capabilities: ClassVar[Capabilities]


#: every adapter class, by its kind's name, in declaration order (filled by `@adapter`; core.tables loads them)
ADAPTERS: Final = Table[type[Adapter]](tables.PROVIDER_KINDS)
AdapterClass = TypeVar("AdapterClass", bound=type)


def adapter(cls: AdapterClass) -> AdapterClass:
    """Class decorator: the adapter's entry in the provider table, declared on its class (its `kind` and
    `capabilities`). A new provider is its adapter module (and its name in gpuharness.BUILTIN)."""
    kind, capabilities = getattr(cls, "kind", None), getattr(cls, "capabilities", None)
    if not isinstance(kind, ProviderKind) or not isinstance(capabilities, Capabilities):
        raise TypeError(f"{cls.__name__}: an adapter declares its kind (a ProviderKind) and its capabilities")
    ADAPTERS.register(kind.value, cls)
    return cls


@final
@dataclass(frozen=True, slots=True)
class SshEndpoint:
    host: str
    port: int = 22
    user: str = "root"


@final
@dataclass(frozen=True, slots=True)
class Instance(JsonFields):
    """An instance as the provider reports it, normalized. raw_status keeps the provider's word."""

    provider: str
    id: str
    status: Status
    raw_status: str | None = None
    name: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    cost_hr: float | None = None
    gpu: str | None = None
    gpu_count: int = 1
    region: str | None = None
    ssh: SshEndpoint | None = None
    endpoint: str | None = None
    created_at: str | None = None

    @property
    def idempotency_key(self) -> str | None:
        """The key carried in the label or name, if any."""
        key = self.labels.get("gh_key")
        if key:
            return key
        if self.name and self.name.startswith(KEY_PREFIX):
            return self.name
        return None


@final
@dataclass(frozen=True, slots=True)
class LaunchSpec:
    """What to launch. idempotency_key travels in the instance name/label so a lost response can be
    reconciled by listing."""

    gpu: str
    image: str
    idempotency_key: str
    gpu_count: int = 1
    region: str | None = None
    interruptible: bool = False
    disk_gb: int = 50
    ports: tuple[str, ...] = ("22/tcp",)
    env: dict[str, str] = field(default_factory=dict)
    bid_price: float | None = None
    offer_id: str | None = None
    #: the hourly price the launch may not exceed (disclosed and allowed); adapters that take a price limit send it
    max_cost_hr: float | None = None


class ProviderError(GpuharnessError):
    """A classified provider failure with a message a person can act on."""

    def __init__(self, kind: ErrorKind, message: str, *, provider: str, status: int | None = None,
                 retry_after: float | None = None) -> None:
        self.kind = kind
        self.provider = provider
        self.status = status
        self.retry_after = retry_after
        super().__init__(f"{provider}: {kind}: {message}")


class UnknownOutcome(ProviderError):
    """A mutation whose response was lost: it may or may not have happened. Reconcile, never retry blind."""

    def __init__(self, message: str, *, provider: str) -> None:
        super().__init__("unknown_outcome", message, provider=provider)


class Provider(Protocol):
    """One provider account. One instance of this (one HTTP client) per provider per phase."""

    name: str
    kind: ClassVar[ProviderKind]
    capabilities: ClassVar[Capabilities]

    def list_instances(self) -> list[Instance]:
        """Every instance of the account: one list call plus pages."""
        ...

    def get_instance(self, instance_id: str) -> Instance | None:
        """One instance by exact id, or None when the provider says it is gone."""
        ...

    def launch(self, spec: LaunchSpec) -> Instance:
        """Launch once. Raises UnknownOutcome when the response is lost."""
        ...

    def stop(self, instance_id: str) -> None: ...

    def start(self, instance_id: str) -> None: ...

    def terminate(self, instance_id: str) -> None:
        """Terminate once. Raises UnknownOutcome when the response is lost."""
        ...

    def close(self) -> None: ...


@final
@dataclass(frozen=True, slots=True)
class Offer(JsonFields):
    """Something rentable now, at an hourly price. `refused` says why the policy would refuse it."""

    provider: str
    gpu: str
    cost_hr: float
    gpu_count: int = 1
    offer_id: str | None = None
    region: str | None = None
    available: int | None = None
    vram_gb: float | None = None
    refused: str | None = None


@runtime_checkable
class OfferSource(Protocol):
    """A provider that can list what is rentable (RunPod GPU types, Vast offers, Massed inventory)."""

    def offers(self, gpu: str) -> list[Offer]:
        """Offers whose GPU matches `gpu` (case-insensitive; "RTX 4090" matches "NVIDIA GeForce RTX 4090")."""
        ...


@runtime_checkable
class BillSource(Protocol):
    """A provider whose own billing records can be read (RunPod pod billing history, Vast invoices)."""

    def charges(self, since: datetime, until: datetime) -> list[Charge]:
        """What the provider billed per instance and UTC day, for the days from since until until."""
        ...


@runtime_checkable
class Authenticating(Protocol):
    """A provider with one cheap authenticated read."""

    def check(self) -> None:
        """Raise ProviderError (kind auth when the key is refused); return when the key works."""
        ...

    def close(self) -> None: ...


def gpu_matches(query: str, *names: str | None) -> bool:
    """Loose GPU name matching across providers' spellings ("rtx 4090" ~ "NVIDIA GeForce RTX 4090")."""
    wanted = _gpu_words(query)
    return bool(wanted) and any(name and wanted <= _gpu_words(name) for name in names)


def _gpu_words(text: str) -> set[str]:
    words = set(text.lower().replace("-", " ").replace("_", " ").split())
    return words - {"nvidia", "geforce"}
