"""A plan's provider calls: rehearsed against the simulator into a cassette, and replayed from it in mode none."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import httpx
from vcr.errors import CannotOverwriteExistingCassetteException

from gpuharness.core.errors import UserError
from gpuharness.core.json_text import loads_outside
from gpuharness.core.secrets import clip, secret_param
from gpuharness.plans.plan import MUTATIONS
from gpuharness.providers import cassette
from gpuharness.providers.base import Instance, InventorySource, LaunchSpec, Provider
from gpuharness.providers.factory import capabilities_of
from gpuharness.providers.inventory import Inventory, fetch_inventory

ProviderFactory = Callable[[dict[str, Any]], Provider]
#: Replayed calls go nowhere: vcrpy answers them; host and port are not matched, and port 9 refuses anyway.
NOWHERE = "http://127.0.0.1:9"


def launch_spec(step: Mapping[str, Any]) -> LaunchSpec:
    """The LaunchSpec of a launch step."""
    spec = step.get("spec") or {}
    return LaunchSpec(gpu=str(spec.get("gpu")), image=str(spec.get("image")),
                      idempotency_key=str(step["target"]["idempotency_key"]),
                      gpu_count=int(spec.get("gpu_count") or 1), region=spec.get("region"),
                      interruptible=bool(spec.get("interruptible")), disk_gb=int(spec.get("disk_gb") or 50),
                      bid_price=spec.get("bid_price"), offer_id=spec.get("offer_id"))


def perform(provider: Provider, step: Mapping[str, Any]) -> Instance | None:
    """Carry out one mutating step through the provider seam (exactly once; no retry here)."""
    action = step["action"]
    if action == "launch":
        return provider.launch(launch_spec(step))
    instance_id = str(step["target"]["instance_id"])
    if action == "stop":
        provider.stop(instance_id)
    elif action == "start":
        provider.start(instance_id)
    elif action == "terminate":
        provider.terminate(instance_id)
    else:
        raise ValueError(f"{action} is not a provider mutation")
    return None


def as_call(request: Any) -> dict[str, Any]:
    """A recorded vcrpy request (already scrubbed) as a plan call: method, path, query, body."""
    raw = request.body
    body: Any = None
    if raw:
        text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
        try:
            body = loads_outside(text, what="a recorded request body")
        except ValueError:
            body = text
    query = [[k, v] for k, v in request.query if not secret_param(k)]
    return {"method": request.method, "path": request.path, "query": query, "body": body}


def replay_calls(steps: Iterable[Mapping[str, Any]], path: Path) -> dict[str, str | None]:
    """Send every step's calls, in plan order, against the cassette in mode none: step id -> problem or None."""
    results: dict[str, str | None] = {}
    with cassette.use(path, cassette.Mode.OFFLINE), httpx.Client(base_url=NOWHERE) as client:
        for step in steps:
            if not step.get("calls"):
                continue
            problem: str | None = None
            for n, call in enumerate(step["calls"], 1):
                body = call.get("body")
                content = None if body is None else (body if isinstance(body, str) else json.dumps(body))
                headers = {"content-type": "application/json"} if isinstance(body, (dict, list)) else {}
                try:
                    response = client.request(str(call.get("method")), str(call.get("path")),
                                              params=[tuple(q) for q in call.get("query") or []],
                                              content=content, headers=headers)
                except CannotOverwriteExistingCassetteException as exc:
                    problem = f"call {n}: {cassette.missing_interaction(exc, path).what}"
                    break
                if response.status_code >= 400:
                    problem = (f"call {n}: {call.get('method')} {call.get('path')} was answered HTTP "
                               f"{response.status_code} when recorded: {clip(response.text, 160)}")
                    break
            results[str(step["id"])] = problem
    return results


def rehearse(plan: dict[str, Any], entries: Mapping[str, dict[str, Any]], factory: ProviderFactory,
             path: Path, *, api_bases: Mapping[str, str], recorded_against: str = cassette.SIMULATOR,
             secrets: Iterable[str] = ()) -> Inventory:
    """Record the plan cassette against a simulator (never a real provider): each provider's list, then each
    mutating step in order; each step's `calls` are set to what it sent. Returns the listed inventory.

    entries: providers.json entries by name; api_bases: the simulator's base per provider name.
    """
    for name, base in api_bases.items():
        host = httpx.URL(base).host
        if host not in ("127.0.0.1", "localhost", "::1"):
            raise UserError(f"refusing to rehearse against {base}: rehearsal mutates, so it only runs against "
                            "the loopback simulator", place=f"provider {name}")
    # every provider is listed, not only those the plan touches: the fingerprint covers the whole inventory
    names = sorted(set(api_bases) & set(entries))
    with cassette.use(path, cassette.Mode.RECORD, secrets=secrets, recorded_against=recorded_against,
                      metadata={"api_bases": {n: api_bases[n] for n in names}, "kinds":
                                {n: entries[n]["kind"] for n in names}}) as recording:
        providers = {n: factory({**entries[n], "api_base": api_bases[n]}) for n in names}
        try:
            inventory = fetch_inventory(providers, source=f"cassette:{path}")
            for step in plan["steps"]:
                if step["action"] not in MUTATIONS:
                    continue
                if step["provider"] not in providers:
                    raise UserError(f"no simulator base for provider {step['provider']!r}", place=f"step {step['id']}")
                before = len(recording.data)
                perform(providers[step["provider"]], step)
                step["calls"] = [as_call(request) for request, _ in recording.data[before:]]
        finally:
            for provider in providers.values():
                provider.close()
    return inventory


def mirror_into(sim: Any, inventory: Inventory, kinds: Mapping[str, str]) -> int:
    """Copy the listed instances into a simulator under their real ids, so stop/start/terminate steps can be
    rehearsed (through the simulator's mirror_instance). Returns the count."""
    from gpuharness.sim.mirror import mirror_instance  # the simulator: only when a plan is rehearsed

    copied = 0
    for name, items in inventory.instances.items():
        kind = kinds.get(name)
        if kind is None or not _listed(kind):
            continue
        for item in items:
            if item.status == "terminated":
                continue
            mirror_instance(sim.state, kind, item.id, label=item.idempotency_key or item.name or item.id,
                            name=item.name, gpu=item.gpu or "NVIDIA GeForce RTX 4090", gpu_count=item.gpu_count,
                            cost_hr=item.cost_hr or 0.0, region=item.region or "sim-1",
                            stopped=item.status == "stopped")
            copied += 1
    return copied


def _listed(kind: str) -> bool:
    """Whether instances of this provider kind come from the provider's list (so a plan mutates them there)."""
    return capabilities_of({"kind": kind}).inventory is InventorySource.API


def rehearse_with_mirror(plan: dict[str, Any], entries: Iterable[Mapping[str, Any]], found: Inventory,
                         path: Path, *, secrets: Iterable[str] = ()) -> int:
    """Rehearse the plan's mutations against an in-process simulator mirroring the inventory; record to path.

    Returns how many instances were mirrored. Nothing outside the loopback simulator is called.
    """
    from gpuharness.providers.inventory import adapter_factory
    from gpuharness.sim.server import Simulator

    by_name = {str(e["name"]): dict(e) for e in entries}
    kinds = {name: str(e["kind"]) for name, e in by_name.items()}
    with Simulator(ready_delay_s=0.0) as sim:
        copied = mirror_into(sim, found, kinds)
        bases = {name: sim.url(kind) for name, kind in kinds.items() if _listed(kind)}
        rehearse(plan, by_name, adapter_factory(offline=True), path, api_bases=bases, secrets=secrets)
    return copied
