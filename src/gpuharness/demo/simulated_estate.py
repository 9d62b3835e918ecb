"""A simulated estate on loopback: the provider simulator, one simulated host per running instance, a seeded
registry and the lifecycle context wired to them. The demo and the end-to-end tests run on it."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, final

from gpuharness.core import secrets as core_secrets
from gpuharness.core import terminal
from gpuharness.core.registry import Registry
from gpuharness.gpu.classes import nvidia_smi_name
from gpuharness.operations.context import Context
from gpuharness.operations.seams import executor_factory, remote_factory
from gpuharness.providers.base import Instance, Provider
from gpuharness.providers.factory import PhaseOptions, build_provider
from gpuharness.pytest_plugin.suites import suite_command
from gpuharness.sim import Simulator, examples
from gpuharness.sim.examples import CHECKPOINT, GRAPH
from gpuharness.sim.host import HostSpec, SimHost, with_fault
from gpuharness.sim.simulated_runtime import runtime_for_image

WORKFLOW = "h3-text-to-image"
MODEL = "minimax-h3-mini"
KEY_ENVS = {"vast": "GH_DEMO_VAST_KEY", "runpod": "GH_DEMO_RUNPOD_KEY"}
__all__ = ["CHECKPOINT", "GRAPH", "KEY_ENVS", "MODEL", "WORKFLOW", "SimulatedEstate", "seed"]


def seed(registry: Registry, root: Path, sim_urls: dict[str, str]) -> None:
    """providers (the simulator's api_base), a model with sha256, a ComfyUI workflow, and a policy."""
    registry.init()
    with registry.update("providers.json") as doc:
        doc["providers"] = [
            {"name": name, "kind": name, "credential_env": env, "api_base": sim_urls[name],
             "notes": "the gpuharness simulator on loopback"} for name, env in KEY_ENVS.items()]
    with registry.update("models.json") as doc:
        doc["models"] = [examples.model_entry(root / "model-store", MODEL)]
    with registry.update("workflows.json") as doc:
        doc["workflows"] = [examples.workflow_entry(WORKFLOW, MODEL)]
    with registry.update("policy.json") as doc:
        doc.update(per_job_usd=1.0, daily_usd=20.0, monthly_usd=200.0, max_cost_hr=5.0,
                   max_concurrent_deployments=4, max_idle_minutes=30, disk_margin_gb=1,
                   performance_floor={"measure": True})


@final
class SimulatedEstate:
    """`with SimulatedEstate(root) as estate:` serves the simulator and its hosts; estate.ctx runs the
    operations against them.

    host_faults: deployment id -> a gpuharness.sim.host fault name (oom, full_disk, ...) for its host;
    host_changes: deployment id -> HostSpec fields. sleep: injected into retries so tests do not wait.
    guard_minutes: deployment id -> the seconds its shutdown guard counts as a minute (the demo's self-stopping pod).
    """

    def __init__(self, root: str | Path, *, host_faults: dict[str, str] | None = None,
                 host_changes: dict[str, dict[str, Any]] | None = None,
                 sleep: Callable[[float], None] | None = None, say: Callable[[str], None] | None = None,
                 ready_delay_s: float = 0.2, guard_minutes: dict[str, float] | None = None) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.registry = Registry(self.root / ".pi" / "gpu")
        self.host_faults = dict(host_faults or {})
        self.host_changes = dict(host_changes or {})
        self.guard_minutes = dict(guard_minutes or {})  # deployment id -> seconds in its guard's minute
        self.hosts: dict[str, SimHost] = {}
        self.env = dict(os.environ)
        for variable in KEY_ENVS.values():  # the simulator accepts any key: generated here, never stored
            self.env[variable] = f"sim-{secrets.token_hex(16)}"
            core_secrets.remember(self.env[variable])
        self.env["GPUHARNESS_REGISTRY"] = str(self.registry.root)
        self.sim = Simulator(ready_delay_s=ready_delay_s, host_factory=self._make_host)
        options = PhaseOptions(sleep=sleep) if sleep is not None else PhaseOptions()
        self._options = options

        def providers(entry: dict[str, Any]) -> Provider:
            return build_provider(entry, env=self.env, registry=self.registry, options=options)

        self.ctx = Context(registry=self.registry, providers=providers, remotes=remote_factory(self.registry),
                           executors=executor_factory(self.registry, self.env), host_details=self._details,
                           say=say or (lambda line: terminal.show(line, file=sys.stderr)))
        if sleep is not None:
            self.ctx.sleep = sleep

    def _make_host(self, instance: Any) -> SimHost:
        spec = replace(HostSpec(), gpu=nvidia_smi_name(str(instance.gpu)), gpu_count=int(instance.gpu_count or 1),
                       runtime=runtime_for_image(getattr(instance, "image", None)))
        deployment = str(instance.name or "").removeprefix("gh-")
        if deployment in self.host_faults:
            spec = with_fault(spec, self.host_faults[deployment])
        if deployment in self.host_changes:
            spec = replace(spec, **self.host_changes[deployment])
        host = SimHost(spec, root=self.root / "hosts" / str(instance.id), name=f"host-{instance.id}",
                       counter=self.sim.state.increment).start()
        host.guard_minute_s = self.guard_minutes.get(deployment)
        self.hosts[str(instance.id)] = host
        return host

    def _details(self, instance: Instance) -> dict[str, Any]:
        host = self.hosts.get(instance.id)
        if host is None:
            return {}
        return {"ssh": host.ssh_block(), "endpoint": host.endpoint, "service_port": host.service_port,
                "log_path": str(host.log_path)}

    def host_of(self, deployment_id: str) -> SimHost:
        return self.hosts[str(self.registry.deployment(deployment_id).instance_id)]

    def start(self) -> SimulatedEstate:
        self.sim.start()
        if not self.registry.path("providers.json").exists():
            seed(self.registry, self.root, {name: self.sim.url(name) for name in KEY_ENVS})
        return self

    def stop(self) -> None:
        self.sim.stop()
        for host in self.hosts.values():
            host.stop()

    def __enter__(self) -> SimulatedEstate:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def suite(self, name: str, args: list[str], report: Path | None = None, timeout_s: float = 300,
              on_line: Callable[[str], None] | None = None) -> int:
        """Run a check suite as a pytest subprocess (with an HTML report when asked); its output goes to
        <report dir>/<name>.log, and each of its lines to on_line as it is printed (the demo's progress)."""
        command = suite_command(name, ["-q", "--no-header", "--registry", str(self.registry.root), *args])
        if report is not None:
            command += [f"--html={report}", "--self-contained-html"]
        log = (report.parent if report is not None else self.root) / f"{name}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        lines: list[str] = []
        with subprocess.Popen(command, env=self.env, cwd=self.root, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, errors="replace") as process:
            expired = threading.Event()

            def expire() -> None:
                expired.set()
                process.kill()

            timer = threading.Timer(timeout_s, expire)
            timer.start()
            try:
                for line in process.stdout or ():
                    lines.append(line)
                    if on_line is not None:
                        on_line(line.rstrip("\n"))
                code = process.wait()
            finally:
                timer.cancel()
        killed = expired.is_set()
        log.write_text(core_secrets.redact("".join(lines) + (f"\nkilled after {timeout_s:g} s\n" if killed else "")))
        return 124 if killed else code

    def cli(self, *args: str, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
        """Run `gpuharness ARGS` against this estate's registry, as a subprocess."""
        return subprocess.run([sys.executable, "-m", "gpuharness", *args], env=self.env, cwd=self.root,
                              capture_output=True, text=True, timeout=timeout_s)
