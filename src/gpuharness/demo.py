"""`gpuharness demo`: the whole lifecycle on the built-in simulator over loopback, then the three check suites."""

from __future__ import annotations

import hashlib
import os
import secrets
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, final

from gpuharness.diagnose import REMEDIES
from gpuharness.errors import UserError
from gpuharness.ledger import Ledger
from gpuharness.operations.comfy_job import ComfyJobExecutor
from gpuharness.operations.context import Context
from gpuharness.operations.destroy import destroy
from gpuharness.operations.install import configure, install
from gpuharness.operations.provision import ProvisionRequest, provision
from gpuharness.operations.retrieve import retrieve
from gpuharness.operations.run import run_job, spend_line
from gpuharness.operations.wiring import remote_factory
from gpuharness.providers.base import Instance, Provider
from gpuharness.providers.factory import build_provider
from gpuharness.registry import Registry

GOOD = "dep_h3_vast_01"
OOM = "dep_h3_runpod_01"
WORKFLOW = "h3-text-to-image"
MODEL = "minimax-h3-mini"
KEY_ENVS = {"vast": "GH_DEMO_VAST_KEY", "runpod": "GH_DEMO_RUNPOD_KEY"}
GRAPH: dict[str, Any] = {
    "3": {"class_type": "KSampler", "inputs": {"seed": 1, "steps": 4, "cfg": 1.0}},
    "6": {"class_type": "CLIPTextEncode", "inputs": {"text": "a red cube"}},
    "9": {"class_type": "SaveImage", "inputs": {"filename_prefix": "h3", "images": ["3", 0]}},
}
PROMPTS = ("a red cube on a table", "a cat in the rain", "a lighthouse at dusk")


@final
@dataclass(slots=True)
class Summary:
    workdir: Path
    registry: Path
    steps: list[str] = field(default_factory=list)
    reports: dict[str, str] = field(default_factory=dict)
    suites: dict[str, int] = field(default_factory=dict)
    jobs: list[dict[str, Any]] = field(default_factory=list)
    artifacts: list[str] = field(default_factory=list)
    oom: str | None = None
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "workdir": str(self.workdir), "registry": str(self.registry), "steps": self.steps,
                "reports": self.reports, "suites": self.suites, "jobs": self.jobs, "artifacts": self.artifacts,
                "oom": self.oom, "problems": self.problems, "seconds": round(self.seconds, 1)}

    def text(self) -> str:
        lines = [f"gpuharness demo ({self.seconds:.1f} s) in {self.workdir}", *[f"  {s}" for s in self.steps]]
        if self.oom:
            lines.append(f"  {OOM} never became ready: {self.oom}")
        lines.append("  jobs: " + ", ".join(f"{j['id']} {j['status']} ${j['cost_usd']:.6f}" for j in self.jobs))
        lines += [f"  artifact: {a}" for a in self.artifacts]
        expected = {"health": f" (expected: {OOM} fails its test generation)"}
        lines += [f"  {name} suite: exit {code}{expected.get(name, '') if code else ''}, "
                  f"report {self.reports.get(name, '-')}" for name, code in self.suites.items()]
        lines.append(f"  registry: {self.registry}")
        lines += [f"  PROBLEM: {p}" for p in self.problems]
        lines.append("demo OK" if self.ok else "demo FAILED")
        return "\n".join(lines)


def _checks_root() -> Path:
    from gpuharness.cli.lifecycle_cmds import checks_root
    return checks_root()


def _seed(registry: Registry, root: Path, sim_urls: dict[str, str]) -> None:
    registry.init()
    with registry.update("providers.json") as doc:
        doc["providers"] = [
            {"name": name, "kind": name, "credential_env": env, "api_base": sim_urls[name],
             "notes": "the gpuharness simulator on loopback (demo)"} for name, env in KEY_ENVS.items()]
    store = root / "model-store"
    store.mkdir(parents=True, exist_ok=True)
    weights = store / "h3-mini.safetensors"
    weights.write_bytes(hashlib.sha256(b"h3").digest() * 8192)  # 256 KiB of deterministic weights
    with registry.update("models.json") as doc:
        doc["models"] = [{"name": MODEL, "min_vram_gb": 16, "files": [
            {"path": "h3/h3-mini.safetensors", "url": weights.as_uri(),
             "sha256": hashlib.sha256(weights.read_bytes()).hexdigest(), "size": weights.stat().st_size}]}]
    with registry.update("workflows.json") as doc:
        doc["workflows"] = [{
            "id": WORKFLOW, "version": 1, "runtime": "comfyui", "model": MODEL, "retryable": True,
            "setup": ["mkdir -p custom_nodes", "echo 'runtime configured' > configured.txt"], "graph": GRAPH,
            "test_generation": {"inputs": {"text": "a red cube"}, "graph": GRAPH, "timeout_s": 60,
                                "expected_outputs": [{"type": "png", "min_bytes": 50}]}}]
    with registry.update("policy.json") as doc:
        doc.update(per_job_usd=1.0, daily_usd=20.0, monthly_usd=200.0, max_cost_hr=5.0,
                   max_concurrent_deployments=4, max_idle_minutes=30)


def _suite(name: str, args: list[str], report: Path, env: dict[str, str], cwd: Path) -> int:
    root = _checks_root()
    command = [sys.executable, "-m", "pytest", str(root / name), f"--rootdir={root}", "-p", "no:cacheprovider",
               "-q", "--no-header", f"--html={report}", "--self-contained-html", *args]
    completed = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, timeout=300)
    (report.parent / f"{name}.log").write_text(completed.stdout + completed.stderr)
    return completed.returncode


def run_demo(*, workdir: str | Path | None = None, suites: bool = True) -> Summary:
    """Provision two deployments on two simulated providers, take one through the whole lifecycle, let the
    other fail its test generation with an injected CUDA OOM, then run the health, audit and plan suites."""
    from gpuharness.sim import Simulator
    from gpuharness.sim.host import HostSpec, SimHost, full_gpu_name, with_fault

    started = time.monotonic()
    root = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="gpuharness-demo-"))
    root.mkdir(parents=True, exist_ok=True)
    registry = Registry(root / ".pi" / "gpu")
    if registry.path("deployments.json").exists() and registry.deployments():
        raise UserError("the demo needs a fresh workspace", path=registry.root, hint="pass another --workdir")
    summary = Summary(root, registry.root)
    reports = root / "reports"
    reports.mkdir(exist_ok=True)
    env = dict(os.environ)
    for variable in KEY_ENVS.values():  # the simulator accepts any key; generated here, never stored
        env[variable] = os.environ[variable] = f"sim-{secrets.token_hex(16)}"
    env["GPUHARNESS_REGISTRY"] = str(registry.root)
    hosts: dict[str, SimHost] = {}

    def make_host(instance: Any) -> SimHost:
        spec = replace(HostSpec(), gpu=full_gpu_name(str(instance.gpu)), gpu_count=int(instance.gpu_count or 1),
                       runtime="comfyui")
        if instance.name == f"gh-{OOM}":
            spec = with_fault(spec, "oom")
        host = SimHost(spec, root=root / "hosts" / instance.id, name=f"host-{instance.id}").start()
        hosts[instance.id] = host
        return host

    def host_details(instance: Instance) -> dict[str, Any]:
        host = hosts.get(instance.id)
        if host is None:
            return {}
        return {"ssh": host.ssh_block(), "endpoint": host.endpoint, "service_port": host.service_port,
                "log_path": str(host.log_path)}

    def providers(entry: dict[str, Any]) -> Provider:
        return build_provider(entry, env=env, registry=registry)

    sim = Simulator(ready_delay_s=0.2, host_factory=make_host)
    sim.start()
    ctx = Context(registry=registry, providers=providers, remotes=remote_factory(registry),
                  executors=lambda deployment: ComfyJobExecutor(deployment), host_details=host_details,
                  say=lambda line: print(line, file=sys.stderr, flush=True))
    try:
        _seed(registry, root, {name: sim.url(name) for name in KEY_ENVS})
        _lifecycle(ctx, summary, root, reports, env, suites)
    except UserError as exc:
        summary.problems.append(exc.line())
    finally:
        _cleanup(ctx, summary)
        sim.stop()
        for host in hosts.values():
            host.stop()
    if suites and not summary.problems:
        for name, args in (("audit", ["--registry", str(registry.root)]),
                           ("plan", _plan_args(root, registry, env))):
            report = reports / f"{name}.html"
            summary.suites[name] = _suite(name, args, report, env, root)
            summary.reports[name] = str(report)
            if summary.suites[name] not in (0, 1):
                summary.problems.append(f"the {name} suite did not run (exit {summary.suites[name]}); see "
                                        f"{reports / (name + '.log')}")
    summary.seconds = time.monotonic() - started
    return summary


def _plan_args(root: Path, registry: Registry, env: dict[str, str]) -> list[str]:
    return ["--registry", str(registry.root), "--plan", str(root / "plan.json"), "--cassettes", str(root / "cassettes")]


def _lifecycle(ctx: Context, summary: Summary, root: Path, reports: Path, env: dict[str, str],
               suites: bool) -> None:
    registry = ctx.registry
    plan = ((GOOD, "vast", "RTX 4090", 0.40), (OOM, "runpod", "NVIDIA GeForce RTX 5090", 0.89))
    for dep_id, provider, gpu, cost in plan:
        result = provision(ctx, ProvisionRequest(
            provider=provider, gpu=gpu, image="ghcr.io/example/comfyui-h3:1.0", cost_hr=cost, runtime="comfyui",
            model=MODEL, workflow=WORKFLOW, idle_minutes=15, owner="demo", deployment_id=dep_id,
            checkpoint_path="/workspace/output"), up_deadline_s=30, poll_s=0.1)
        dep = result.deployment
        summary.steps.append(f"provisioned {dep_id} on {provider} ({gpu}, ${dep['cost_hr']:.2f}/hr), "
                             f"instance {dep['instance_id']}")
        install(ctx, dep_id, deadline_s=60)
        configure(ctx, dep_id, deadline_s=60)
        summary.steps.append(f"installed (sha256-verified) and configured {dep_id}")
    health_report = reports / "health.html"
    code = _suite("health", ["--registry", str(registry.root), "--gpu-mode", "live", "--deployment", GOOD,
                             "--deployment", OOM], health_report, env, root)
    summary.suites["health"] = code
    summary.reports["health"] = str(health_report)
    good, bad = registry.deployment(GOOD), registry.deployment(OOM)
    if good["status"] != "ready":
        raise UserError(f"{GOOD} did not pass the health suite (status {good['status']})",
                        path=reports / "health.log", hint="read the health report")
    summary.steps.append(f"health suite: {GOOD} READY after a real test generation")
    if bad["status"] == "ready":
        summary.problems.append(f"{OOM} was marked ready although its test generation hit a CUDA OOM")
    health = bad.get("health") or {}
    cause = str(health.get("cause") or "unknown")
    failed = ", ".join(health.get("failed_checks") or [str(health.get("check"))])
    remedy = {str(k): v for k, v in REMEDIES.items()}.get(cause, "read the log")
    summary.oom = f"status {bad['status']}; failed checks: {failed}; cause {cause}; remedy: {remedy}"
    if cause != "cuda_oom":
        summary.problems.append(f"{OOM}'s failure was classified {cause!r}, expected cuda_oom")
    ctx.say(spend_line(ctx))
    for prompt in PROMPTS:
        job = run_job(ctx, GOOD, inputs={"text": prompt}, poll_s=0.05)
        summary.jobs.append({"id": job.job_id, "status": job.status, "cost_usd": job.cost_usd})
    synced = retrieve(ctx, GOOD, root / "outputs")
    summary.artifacts = [f"{a['uri']} sha256 {str(a['sha256'])[:16]}…" for a in synced.synced]
    summary.steps.append(f"ran {len(summary.jobs)} jobs on {GOOD}; retrieved {len(synced.synced)} artifact(s) "
                         f"over SFTP ({synced.bytes_transferred:,} bytes, checksummed)")
    for dep_id in (GOOD, OOM):
        destroy(ctx, dep_id, confirm=dep_id)
    summary.steps.append(f"destroyed {GOOD} and {OOM} (verified by listing; both kept as history)")
    if suites:
        _make_plan(registry, root, env)
        summary.steps.append("made a plan for the next batch, rehearsed against the simulator into a cassette")
    lines = list(Ledger(registry.ledger_path).records())
    summary.steps.append(f"ledger: {len(lines)} lines, nothing rewritten; journal: "
                         f"{sum(1 for _ in open(registry.journal_path, 'rb'))} transitions")


def _make_plan(registry: Registry, root: Path, env: dict[str, str]) -> None:
    """A plan for the next batch (one more launch), rehearsed against the simulator into a cassette."""
    command = [sys.executable, "-m", "gpuharness", "plan", "make", "--registry", str(registry.root),
               "--provider", "vast", "--gpu", "RTX 4090", "--image", "ghcr.io/example/comfyui-h3:1.0",
               "--cost-hr", "0.40", "--idle-minutes", "15", "-o", str(root / "plan.json"),
               "--cassette", str(root / "cassettes" / "http" / "plan.yaml")]
    completed = subprocess.run(command, env=env, cwd=root, capture_output=True, text=True, timeout=120)
    (root / "reports" / "plan-make.log").write_text(completed.stdout + completed.stderr)
    if completed.returncode != 0:
        raise UserError("`gpuharness plan make` failed", path=root / "reports" / "plan-make.log")


def _cleanup(ctx: Context, summary: Summary) -> None:
    """Whatever happened, nothing is left running on the simulator: destroy every live deployment."""
    for dep in ctx.registry.deployments():
        if dep["status"] in ("destroyed",):
            continue
        try:
            destroy(ctx, dep["id"], confirm=dep["id"], discard_artifacts=True)
            summary.steps.append(f"cleanup: destroyed {dep['id']} (artifacts discarded, recorded)")
        except UserError as exc:
            summary.problems.append(f"cleanup of {dep['id']}: {exc.line()}")
