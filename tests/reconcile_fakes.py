"""A small in-test Provider (the seam of providers/base.py) and registry builders for reconcile and plan tests."""

from __future__ import annotations

from collections import Counter
from typing import Any

from gpuharness.core.deployment import Deployment
from gpuharness.core.registry import Registry
from gpuharness.providers.base import Instance, LaunchSpec, ProviderError

TS = "2026-11-30T20:00:00.000Z"


class FakeProvider:
    """Counts calls; holds instances in memory."""

    supports_stop = True

    def __init__(self, name: str, instances: list[Instance] | None = None, kind: str | None = None) -> None:
        self.name = name
        self.kind = kind or name
        self.instances = {i.id: i for i in instances or []}
        self.calls: Counter[str] = Counter()
        self.launched: list[LaunchSpec] = []

    def list_instances(self) -> list[Instance]:
        self.calls["list"] += 1
        return list(self.instances.values())

    def get_instance(self, instance_id: str) -> Instance | None:
        self.calls["get"] += 1
        return self.instances.get(instance_id)

    def launch(self, spec: LaunchSpec) -> Instance:
        self.calls["launch"] += 1
        self.launched.append(spec)
        new = Instance(self.name, f"new{len(self.launched)}", "pending", name=spec.idempotency_key,
                       gpu=spec.gpu, cost_hr=0.69)
        self.instances[new.id] = new
        return new

    def _set(self, instance_id: str, status: str) -> None:
        self.calls[status] += 1
        old = self.instances.get(instance_id)
        if old is None:
            raise ProviderError("not_found", f"no instance {instance_id}", provider=self.name, status=404)
        self.instances[instance_id] = Instance(old.provider, old.id, status, name=old.name,  # type: ignore[arg-type]
                                               gpu=old.gpu, cost_hr=old.cost_hr)

    def stop(self, instance_id: str) -> None:
        self._set(instance_id, "stopped")

    def start(self, instance_id: str) -> None:
        self._set(instance_id, "running")

    def terminate(self, instance_id: str) -> None:
        self._set(instance_id, "terminated")

    def close(self) -> None:
        self.calls["close"] += 1


def instance(provider: str, iid: str, status: str = "running", name: str | None = None,
             cost_hr: float = 0.69) -> Instance:
    return Instance(provider, iid, status, raw_status=status.upper(), name=name if name is not None else f"gh-{iid}",  # type: ignore[arg-type]
                    gpu="NVIDIA GeForce RTX 4090", cost_hr=cost_hr)


def deployment(dep_id: str, provider: str, instance_id: str | None, status: str = "ready",
               cost_hr: float = 0.69, **extra: Any) -> Deployment:
    return Deployment.from_json({"id": dep_id, "provider": provider, "instance_id": instance_id, "status": status,
                                 "cost_hr": cost_hr, "created_at": TS, "gpu": "NVIDIA GeForce RTX 4090",
                                 "shutdown_rule": {"idle_minutes": 20}, **extra})


def make_registry(root: Any, deployments: list[Deployment],
                  providers: tuple[str, ...] = ("runpod",)) -> Registry:
    registry = Registry(root)
    registry.init()
    with registry.update("providers.json") as doc:
        doc["providers"] = [{"name": p, "kind": p, "credential_env": f"{p.upper()}_API_KEY"} for p in providers]
    with registry.update("deployments.json") as doc:
        doc["deployments"] = [d.to_json() for d in deployments]
    return registry
