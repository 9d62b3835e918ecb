"""Owned servers: no cloud API; the inventory is what machines.json says about this provider."""

from __future__ import annotations

from typing import Any, ClassVar, final

from gpuharness.core.registry import Registry
from gpuharness.providers.base import (
    Capabilities,
    Instance,
    InventorySource,
    LaunchSpec,
    ProviderError,
    ProviderKind,
    SshEndpoint,
    Status,
    adapter,
)
from gpuharness.providers.fields import number

_STATUSES: tuple[Status, ...] = ("pending", "running", "stopped", "terminated", "error", "unknown")


def _ssh(value: Any) -> SshEndpoint | None:
    if isinstance(value, dict) and value.get("host"):
        return SshEndpoint(str(value["host"]), int(value.get("port") or 22), str(value.get("user") or "root"))
    if isinstance(value, str) and value:
        user, _, rest = value.rpartition("@")
        host, _, port = rest.partition(":")
        return SshEndpoint(host, int(port) if port.isdigit() else 22, user or "root")
    return None


@final
@adapter
class OwnedServers:
    """Servers you own. Listing reads machines.json; launching or terminating is refused (nothing to rent)."""

    kind: ClassVar[ProviderKind] = ProviderKind("owned")
    capabilities = Capabilities(label="owned server", api_base=None, stop_start=False, interruptible=False,
                                bid_price=False, serverless=False, ssh=True, inventory=InventorySource.MACHINES_JSON,
                                offers=False, rents=False)

    def __init__(self, name: str, registry: Registry) -> None:
        self.name = name
        self.registry = registry

    def _rows(self) -> list[dict[str, Any]]:
        return [m for m in self.registry.items("machines.json") if m.get("provider") == self.name]

    def list_instances(self) -> list[Instance]:
        found: list[Instance] = []
        for row in self._rows():
            raw = row.get("status") or "running"
            found.append(Instance(
                provider=self.name, id=str(row["instance_id"]),
                status=raw if raw in _STATUSES else "unknown", raw_status=str(raw), name=row.get("name"),
                labels=dict(row.get("labels") or {}), cost_hr=number(row.get("cost_hr")) or 0.0,
                gpu=row.get("gpu"), gpu_count=int(row.get("gpu_count") or 1), region=row.get("region"),
                ssh=_ssh(row.get("ssh")), created_at=row.get("created_at")))
        return found

    def get_instance(self, instance_id: str) -> Instance | None:
        return next((i for i in self.list_instances() if i.id == instance_id), None)

    def _refuse(self, what: str) -> ProviderError:
        return ProviderError("unsupported", f"owned servers cannot be {what} by gpuharness; edit machines.json "
                             "by hand", provider=self.name)

    def launch(self, spec: LaunchSpec) -> Instance:
        raise self._refuse("launched")

    def stop(self, instance_id: str) -> None:
        raise self._refuse("stopped")

    def start(self, instance_id: str) -> None:
        raise self._refuse("started")

    def terminate(self, instance_id: str) -> None:
        raise self._refuse("terminated")

    def check(self) -> None:
        self._rows()

    def close(self) -> None:
        return None
