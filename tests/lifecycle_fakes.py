"""Small fakes of the provider, host and runtime seams for the lifecycle tests (the simulator replaces
them in the end-to-end tests). The host fake runs each script with a real /bin/sh in a sandbox directory."""

from __future__ import annotations

import hashlib
import os
import subprocess
import time
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from gpuharness.core.clock import utcnow
from gpuharness.core.registry import Registry
from gpuharness.operations.context import Context
from gpuharness.operations.run import JobProgress
from gpuharness.providers.base import Instance, LaunchSpec, ProviderError, SshEndpoint, UnknownOutcome
from gpuharness.remote import ExecResult, RemoteError


class FakeClock:
    def __init__(self) -> None:
        # starts at the product's clock: the journal stamps its own entries with it (core.clock.utcnow)
        self.now = utcnow().replace(microsecond=0)
        self.slept: list[float] = []

    def __call__(self) -> datetime:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += timedelta(seconds=seconds)


@dataclass
class FakeProvider:
    name: str = "vast"
    kind: str = "vast"
    supports_stop: bool = False
    instances: dict[str, Instance] = field(default_factory=dict)
    faults: list[str] = field(default_factory=list)  # consumed in order by launch/terminate
    launch_calls: int = 0
    terminate_calls: int = 0
    list_calls: int = 0
    polls_until_running: int = 1
    cost_hr: float = 0.5

    def list_instances(self) -> list[Instance]:
        self.list_calls += 1
        self._advance()
        return list(self.instances.values())

    def get_instance(self, instance_id: str) -> Instance | None:
        self._advance()
        return self.instances.get(instance_id)

    def _advance(self) -> None:
        for key, inst in list(self.instances.items()):
            if inst.status == "pending":
                if self.polls_until_running <= 0:
                    self.instances[key] = replace(inst, status="running", raw_status="running",
                                                  ssh=SshEndpoint("127.0.0.1", 2222, "root"))
                self.polls_until_running -= 1

    def _fault(self, op: str) -> str | None:
        if self.faults and self.faults[0].startswith(op):
            return self.faults.pop(0)
        return None

    def launch(self, spec: LaunchSpec) -> Instance:
        self.launch_calls += 1
        fault = self._fault("launch")
        if fault == "launch:capacity":
            raise ProviderError("capacity", "There are no longer any instances available", provider=self.name,
                                status=500)
        if fault == "launch:429":
            raise ProviderError("rate_limited", "too many requests", provider=self.name, status=429, retry_after=7)
        instance = Instance(provider=self.name, id=f"i-{len(self.instances) + 1}", status="pending",
                            raw_status="loading", name=spec.idempotency_key,
                            labels={"gh_key": spec.idempotency_key}, cost_hr=self.cost_hr, gpu=spec.gpu,
                            gpu_count=spec.gpu_count, region=spec.region or "us-east")
        self.instances[instance.id] = instance
        if fault == "launch:drop":
            raise UnknownOutcome("read timed out after the launch committed", provider=self.name)
        return instance

    def stop(self, instance_id: str) -> None:
        raise ProviderError("unsupported", "stop", provider=self.name)

    def start(self, instance_id: str) -> None:
        raise ProviderError("unsupported", "start", provider=self.name)

    def terminate(self, instance_id: str) -> None:
        self.terminate_calls += 1
        fault = self._fault("terminate")
        if instance_id not in self.instances:
            raise ProviderError("not_found", instance_id, provider=self.name, status=404)
        self.instances[instance_id] = replace(self.instances[instance_id], status="terminated",
                                              raw_status="exited")
        if fault == "terminate:drop":
            raise UnknownOutcome("read timed out after the terminate committed", provider=self.name)

    def close(self) -> None:
        pass


class SandboxHost:
    """A host whose shell is a real /bin/sh running in a sandbox directory."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.execs: list[str] = []
        self.connections = 0
        self.fail_next_exec: str | None = None  # "timeout"

    def connect(self, deployment: dict[str, Any]) -> SandboxRemote:
        self.connections += 1
        return SandboxRemote(self)


class SandboxRemote:
    def __init__(self, host: SandboxHost) -> None:
        self.host = host
        self.target = "sandbox"

    def exec(self, script: str, *, deadline_s: float, on_line=None) -> ExecResult:
        self.host.execs.append(script)
        if self.host.fail_next_exec == "timeout":
            self.host.fail_next_exec = None
            raise RemoteError("timeout", f"no answer within {deadline_s} s", target=self.target)
        start = time.monotonic()
        proc = subprocess.run(["/bin/sh", "-c", script], cwd=self.host.root, capture_output=True, text=True,
                              timeout=60)
        for line in proc.stdout.splitlines() if on_line is not None else ():
            on_line(line)
        return ExecResult(proc.stdout, proc.stderr, proc.returncode, False, time.monotonic() - start)

    def get_file(self, remote_path: str, sink, *, offset: int = 0, under: str | None = None, progress=None,
                 deadline_s: float | None = None) -> int:
        source = self.host.root / remote_path
        if source.is_symlink() or (source.exists() and not source.is_file()):
            raise RemoteError("refused", f"{remote_path} is not a regular file; nothing read", target=self.target)
        if not source.exists():
            raise RemoteError("closed", f"no such file {remote_path}", target=self.target)
        data = source.read_bytes()[offset:]
        sink.write(data)
        if progress is not None:
            progress(len(data))
        return len(data)

    def close(self) -> None:
        pass


class FakeExecutor:
    """Completes after `polls` polls writing an output under the sandbox, or fails with `fail_logs` in turn."""

    def __init__(self, host: SandboxHost, polls: int = 2, fail_logs: list[str] | None = None,
                 never_finishes: bool = False, clock: FakeClock | None = None) -> None:
        self.host = host
        self.clock = clock
        self.polls = polls
        self.fail_logs = list(fail_logs or [])
        self.never_finishes = never_finishes
        self.jobs: dict[str, dict[str, Any]] = {}
        self.cancelled: list[str] = []

    def submit(self, workflow: dict[str, Any], inputs: dict[str, Any], job_id: str) -> str:
        handle = f"p-{job_id}"
        self.jobs[handle] = {"job": job_id, "polls": 0, "fail": self.fail_logs.pop(0) if self.fail_logs else None}
        return handle

    def poll(self, handle: str) -> JobProgress:
        job = self.jobs[handle]
        job["polls"] += 1
        if self.never_finishes or job["polls"] < self.polls:
            return JobProgress("running", marker=job["polls"])
        if job["fail"]:
            return JobProgress("failed", log=job["fail"])
        rel = f"gh-workspace/outputs/{job['job']}.png"
        path = self.host.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        data = f"PNG image of {job['job']}".encode() * 100
        path.write_bytes(data)
        if self.clock is not None:  # the output appears at the test's time, not the machine's
            stamp = self.clock().timestamp()
            os.utime(path, (stamp, stamp))
        return JobProgress("completed", outputs=({"name": "out.png", "remote_path": rel,
                                                  "sha256": hashlib.sha256(data).hexdigest(), "size": len(data)},))

    def cancel(self, handle: str) -> None:
        self.cancelled.append(handle)

    def close(self) -> None:
        pass


def make_registry(root: Path, *, policy: dict[str, Any] | None = None) -> Registry:
    registry = Registry(root / ".pi" / "gpu")
    registry.init()
    with registry.update("providers.json") as doc:
        doc["providers"] = [{"name": "vast", "kind": "vast", "credential_env": "VAST_API_KEY"},
                            {"name": "runpod", "kind": "runpod", "credential_env": "RUNPOD_API_KEY"}]
    model_file = root / "weights.safetensors"
    model_file.write_bytes(b"weights" * 1000)
    with registry.update("models.json") as doc:
        doc["models"] = [{"name": "minimax-h3", "files": [
            {"path": "h3/weights.safetensors", "url": model_file.as_uri(),
             "sha256": hashlib.sha256(model_file.read_bytes()).hexdigest(), "size": model_file.stat().st_size}]}]
    with registry.update("workflows.json") as doc:
        doc["workflows"] = [{"id": "h3-text-to-video", "version": 1, "runtime": "comfyui", "model": "minimax-h3",
                             "setup": ["echo setting up > setup.log"], "graph": {"1": {"class_type": "Noop"}},
                             "test_generation": {"inputs": {"prompt": "a cat"}, "timeout_s": 60}}]
    if policy:
        with registry.update("policy.json") as doc:
            doc.update(policy)
    return registry


@dataclass
class World:
    registry: Registry
    provider: FakeProvider
    host: SandboxHost
    clock: FakeClock
    executor: FakeExecutor
    ctx: Context
    said: list[str]


def make_world(tmp_path: Path, *, policy: dict[str, Any] | None = None) -> World:
    registry = make_registry(tmp_path, policy=policy)
    provider = FakeProvider()
    host = SandboxHost(tmp_path / "host")
    clock = FakeClock()
    executor = FakeExecutor(host, clock=clock)
    said: list[str] = []
    world = World(registry, provider, host, clock, executor, None, said)  # type: ignore[arg-type]
    world.ctx = Context(registry=registry, providers=lambda entry: provider, remotes=host.connect,
                        executors=lambda deployment: world.executor, clock=clock, sleep=clock.sleep,
                        say=said.append)
    return world


def pin_clock(world: World, monkeypatch: Any, at: datetime) -> None:
    """Every clock the world reads at the test's time, from `at` on: its FakeClock, and the real clock by which the
    journal and the ledger stamp and bound their lines. For a test whose figures belong to one UTC day: a FakeClock
    that starts at the real time crosses midnight when the suite runs late in the day."""
    from gpuharness.core import clock, journal, ledger

    world.clock.now = at
    for module in (clock, journal, ledger):
        monkeypatch.setattr(module, "utcnow", world.clock)


def mark_ready(registry: Registry, deployment_id: str) -> None:
    """Stands in for the health suite (the only path to ready) in unit tests of later phases."""
    from gpuharness.core.clock import now_ts
    from gpuharness.core.lifecycle import transition
    transition(registry, deployment_id, "ready", ready_at=now_ts(),
               health={"test_generation": "passed"}, note="health suite passed (test stand-in)")


def provision_comfyui(lab: Any, deployment_id: str, *, cost_hr: float = 0.4, idle_minutes: float = 15) -> None:
    """Provision a ComfyUI deployment on the lab's simulated Vast (up, not yet installed)."""
    from gpuharness.demo.simulated_estate import MODEL, WORKFLOW
    from gpuharness.operations.provision import ProvisionRequest, provision

    provision(lab.ctx, ProvisionRequest(provider="vast", gpu="RTX 4090", image="comfyui:1", cost_hr=cost_hr,
                                        runtime="comfyui", model=MODEL, workflow=WORKFLOW, idle_minutes=idle_minutes,
                                        deployment_id=deployment_id), up_deadline_s=30, poll_s=0.1)


def wait_for(predicate: Any, what: str, limit_s: float = 60.0, poll_s: float = 0.02) -> None:
    """Poll until predicate() is true; fail the test naming `what` after limit_s."""
    import pytest

    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(poll_s)
    pytest.fail(f"gave up waiting for {what}")


#: where ready_with_output leaves the job's output, under the deployment's workspace
OUTPUT = "outputs/J-000001/out.png"


def ready_with_output(lab: Any, deployment_id: str, size: int = 256 * 1024) -> Path:
    """A ready ComfyUI deployment with one completed job whose output (size random bytes) is still on its host,
    recorded as the executor records it (under the workspace). Returns the file on the host."""
    from gpuharness.core.ledger import Ledger
    from gpuharness.core.lifecycle import transition

    provision_comfyui(lab, deployment_id)
    transition(lab.registry, deployment_id, "health-checking")
    mark_ready(lab.registry, deployment_id)
    data = os.urandom(size)
    target = Path(lab.registry.deployment(deployment_id).workspace) / OUTPUT
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    Ledger(lab.registry.ledger_path).append({
        "id": "J-000001", "deployment_id": deployment_id, "provider": "vast", "status": "completed",
        "started_at": "2026-11-30T20:00:00Z", "completed_at": "2026-11-30T20:01:00Z", "duration_s": 60.0,
        "cost_usd": 0.0067, "ts": "2026-11-30T20:01:00Z",
        "artifacts": [{"name": "out.png", "remote_path": str(target), "sha256": hashlib.sha256(data).hexdigest(),
                       "size": len(data)}]})
    return target
