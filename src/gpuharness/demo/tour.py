"""`gpuharness demo`: the whole lifecycle on the built-in simulator over loopback, then the three check suites."""

from __future__ import annotations

import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, final

from gpuharness.core import regular_file
from gpuharness.core.deployment import DEFAULT_WORKSPACE
from gpuharness.core.errors import UserError
from gpuharness.core.ledger import Ledger
from gpuharness.core.registry import Registry
from gpuharness.core.secrets import redact
from gpuharness.demo import stops_itself
from gpuharness.demo.pod import check_pod
from gpuharness.demo.simulated_estate import MODEL, WORKFLOW, SimulatedEstate
from gpuharness.demo.steps import Steps
from gpuharness.diagnose import REMEDIES
from gpuharness.operations.context import Context
from gpuharness.operations.destroy import destroy
from gpuharness.operations.install import configure, install
from gpuharness.operations.provision import ProvisionRequest, provision
from gpuharness.operations.reap import reap
from gpuharness.operations.retrieve import retrieve
from gpuharness.operations.run import run_job, spend_line
from gpuharness.pytest_plugin.suites import STEP_PREFIX

GOOD = "dep_h3_vast_01"
OOM = "dep_h3_runpod_01"
CAPPED = "dep_h3_vast_02"
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
    capped: str | None = None
    pod: str | None = None
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "workdir": str(self.workdir), "registry": str(self.registry), "steps": self.steps,
                "reports": self.reports, "suites": self.suites, "jobs": self.jobs, "artifacts": self.artifacts,
                "oom": self.oom, "capped": self.capped, "pod": self.pod, "problems": self.problems,
                "seconds": round(self.seconds, 1)}

    def text(self) -> str:
        lines = [f"gpuharness demo ({self.seconds:.1f} s) in {self.workdir}", *[f"  {s}" for s in self.steps]]
        if self.oom:
            lines.append(f"  {OOM} never became ready: {self.oom}")
        if self.capped:
            lines.append(f"  {CAPPED} never became ready: {self.capped}")
        if self.pod:
            lines.append(f"  an 8x H100 SXM pod with GPU 3's NVLinks down: {self.pod}")
        lines.append("  jobs: " + ", ".join(f"{j['id']} {j['status']} ${j['cost_usd']:.6f}" for j in self.jobs))
        lines += [f"  artifact: {a}" for a in self.artifacts]
        expected = {"health": f" (expected: {OOM} fails its test generation, {CAPPED} its GPU's performance)"}
        lines += [f"  {name} suite: exit {code}{expected.get(name, '') if code == 1 else ''}, "
                  f"report {self.reports.get(name, '-')}" for name, code in self.suites.items()]
        lines.append(f"  registry: {self.registry}")
        lines += [f"  PROBLEM: {p}" for p in self.problems]
        lines.append("demo OK" if self.ok else "demo FAILED")
        return "\n".join(lines)


def run_demo(*, workdir: str | Path | None = None, suites: bool = True, steps: Steps | None = None) -> Summary:
    """Provision three deployments on two simulated providers, take one through the whole lifecycle, let one fail
    its test generation with an injected CUDA OOM and one its GPU's performance (a power-capped card), then run the
    health, audit and plan suites. Each phase prints its step header as it starts (`steps`, on stderr)."""
    started = time.monotonic()
    steps = steps if steps is not None else Steps(7 if suites else 4)
    root = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="gpuharness-demo-"))
    registry = Registry(root / ".pi" / "gpu")
    if registry.path("deployments.json").exists() and registry.deployments():
        raise UserError("the demo needs a fresh workspace", path=registry.root, hint="pass another --workdir")
    summary = Summary(root, registry.root)
    reports = root / "reports"
    reports.mkdir(parents=True, exist_ok=True)
    with SimulatedEstate(root, host_faults={OOM: "oom", CAPPED: "power_capped"},
                         guard_minutes={stops_itself.GUARDED: stops_itself.MINUTE_S}) as estate:
        try:
            _lifecycle(estate, summary, reports, suites, steps)
        except UserError as exc:
            summary.problems.append(exc.line())
        finally:
            _cleanup(estate.ctx, summary)
    if suites and not summary.problems:
        for name, args in (("audit", []), ("plan", ["--plan", str(root / "plan.json"),
                                                    "--cassettes", str(root / "cassettes")])):
            report = reports / f"{name}.html"
            steps.begin(f"the {name} suite (pytest checks/{name})")
            summary.suites[name] = estate.suite(name, args, report, on_line=suite_progress(steps))
            summary.reports[name] = str(report)
            if summary.suites[name] not in (0, 1):
                summary.problems.append(f"the {name} suite did not run (exit {summary.suites[name]}); see "
                                        f"{reports / (name + '.log')}")
    steps.end()
    summary.seconds = time.monotonic() - started
    return summary


def suite_progress(steps: Steps) -> Callable[[str], None]:
    """A suite's own step headers (`gpuharness step N/M: ...`) as the progress of the demo's step."""
    def note(line: str) -> None:
        if line.startswith(STEP_PREFIX):
            steps.note(line.removeprefix(STEP_PREFIX).strip())
    return note


def _lifecycle(estate: SimulatedEstate, summary: Summary, reports: Path, suites: bool, steps: Steps) -> None:
    ctx, registry, root = estate.ctx, estate.registry, estate.root
    plan = ((GOOD, "vast", "RTX 4090", 0.40), (OOM, "runpod", "NVIDIA GeForce RTX 5090", 0.94),
            (CAPPED, "vast", "RTX 4090", 0.40))
    steps.begin(f"provision, install and configure {len(plan)} deployments on two simulated providers")
    for dep_id, provider, gpu, cost in plan:
        result = provision(ctx, ProvisionRequest(
            provider=provider, gpu=gpu, image="ghcr.io/example/comfyui-h3:1.0", cost_hr=cost, runtime="comfyui",
            model=MODEL, workflow=WORKFLOW, idle_minutes=15, owner="demo", deployment_id=dep_id,
            checkpoint_path=f"{DEFAULT_WORKSPACE}/output"), up_deadline_s=30, poll_s=0.1)
        dep = result.deployment
        summary.steps.append(f"provisioned {dep_id} on {provider} ({gpu}, ${dep.cost_hr:.2f}/hr), "
                             f"instance {dep.instance_id}")
        install(ctx, dep_id, deadline_s=60)
        configure(ctx, dep_id, deadline_s=60)
        summary.steps.append(f"installed (sha256-verified) and configured {dep_id}")
        steps.note(f"{dep_id} configured")
    summary.steps.append(stops_itself.launch(estate))
    health_report = reports / "health.html"
    steps.begin("the health suite, live: probe, test generation and GPU measurement of each deployment")
    summary.suites["health"] = estate.suite("health", ["--gpu-mode", "live", "--deployment", GOOD, "--deployment", OOM,
                                                    "--deployment", CAPPED], health_report,
                                            on_line=suite_progress(steps))
    summary.reports["health"] = str(health_report)
    if summary.suites["health"] not in (0, 1):
        raise UserError(f"the health suite did not run (pytest exit {summary.suites['health']})",
                        path=reports / "health.log", hint="read the log: an internal error, not a failed check")
    good, bad = registry.deployment(GOOD), registry.deployment(OOM)
    if good.status != "ready":
        raise UserError(f"{GOOD} did not pass the health suite (status {good.status})",
                        path=reports / "health.log", hint="read the health report")
    summary.steps.append(f"health suite: {GOOD} READY after a real test generation")
    if bad.status == "ready":
        summary.problems.append(f"{OOM} was marked ready although its test generation hit a CUDA OOM")
    health = bad.health or {}
    cause = str(health.get("cause") or "unknown")
    failed = ", ".join(health.get("failed_checks") or [str(health.get("check"))])
    remedy = {str(k): v for k, v in REMEDIES.items()}.get(cause, "read the log")
    summary.oom = f"status {bad.status}; failed checks: {failed}; cause {cause}; remedy: {remedy}"
    if cause != "cuda_oom":
        summary.problems.append(f"{OOM}'s failure was classified {cause!r}, expected cuda_oom")
    _capped(estate, summary)
    steps.note("the 8-GPU pod: every GPU and every pair")
    _pod(root, summary)
    steps.begin(f"run {len(PROMPTS)} jobs on {GOOD}, then retrieve their artifacts over SFTP")
    ctx.say(spend_line(ctx))
    for prompt in PROMPTS:
        job = run_job(ctx, GOOD, inputs={"text": prompt}, poll_s=0.05)
        summary.jobs.append({"id": job.job_id, "status": job.status, "cost_usd": job.cost_usd})
    synced = retrieve(ctx, GOOD, root / "outputs")
    summary.artifacts = [f"{a['uri']} sha256 {str(a['sha256'])[:16]}…" for a in synced.synced]
    summary.steps.append(f"ran {len(summary.jobs)} jobs on {GOOD}; retrieved {len(synced.synced)} artifact(s) "
                         f"over SFTP ({synced.bytes_transferred:,} bytes, checksummed)")
    steps.begin("reap (a dry run), then destroy every deployment")
    decisions = reap(ctx)  # a dry run: observes and explains, acts on nothing
    for d in decisions:
        why = [a for a in d.arithmetic if a.startswith(("idle ", "decision:"))]
        summary.steps.append(f"reap (dry run): {d.deployment} {d.action}: {'; '.join(why)}")
    stopped, problem = stops_itself.witness(estate)
    summary.steps += [stopped] if stopped else []
    summary.problems += [problem] if problem else []
    for dep_id in (GOOD, OOM, CAPPED, stops_itself.GUARDED):
        destroy(ctx, dep_id, confirm=dep_id)
    summary.steps.append(f"destroyed {GOOD}, {OOM}, {CAPPED} and {stops_itself.GUARDED} (verified by listing; all "
                         "kept as history)")
    if suites:
        steps.begin("make a plan for the next batch and rehearse it against the simulator")
        _make_plan(estate)
        summary.steps.append("made a plan for the next batch, rehearsed against the simulator into a cassette")
    lines = list(Ledger(registry.ledger_path).records())
    with regular_file.open_stream(registry.journal_path) as journal:
        transitions = sum(1 for _ in regular_file.lines(journal, registry.journal_path, what="journal line"))
    summary.steps.append(f"ledger: {len(lines)} lines, nothing rewritten; journal: {transitions} transitions")


def _capped(estate: SimulatedEstate, summary: Summary) -> None:
    """The power-capped card fails test_gpu_performs_like_its_class with its cause, and stands out among the
    deployments of its class at its provider (`gpuharness gpus --history`)."""
    capped = estate.registry.deployment(CAPPED)
    health = capped.health or {}
    if capped.status == "ready" or health.get("cause") != "power_cap":
        summary.problems.append(f"{CAPPED} (a power-capped card) ended {capped.status} with cause "
                                f"{health.get('cause')!r}, expected not ready with power_cap")
    figure = str((health.get("performance") or {}).get("message", "")).split("): ", 1)[0]  # up to the cause's fact
    summary.capped = (f"status {capped.status}; failed check: {health.get('check')}; cause {health.get('cause')}: "
                      f"{figure})")
    history = estate.cli("gpus", "--history", "--registry", str(estate.registry.root), "--gpu", "RTX 4090")
    (estate.root / "reports" / "gpus-history.txt").write_text(redact(history.stdout + history.stderr))
    stands_out = [line.strip() for line in history.stdout.splitlines() if line.strip().startswith(CAPPED)
                  and "stands out" in line]
    if history.returncode != 0 or not stands_out:
        summary.problems.append(f"`gpuharness gpus --history` did not single out {CAPPED}; see "
                                f"{estate.root / 'reports' / 'gpus-history.txt'}")
        return
    summary.steps.append(f"gpus --history (RTX 4090 at vast): {stands_out[0]}")


def _pod(root: Path, summary: Summary) -> None:
    """An 8-GPU pod whose GPU 3 lost its NVLinks: the verdict names the pair and the cause (demo.pod)."""
    cause, line = check_pod(root / "pod-host")
    summary.pod = f"cause {cause}: {line.split('): ', 1)[0]})"
    if cause != "nvlink_down" or not line.startswith("GPU 0 -> GPU 3 peer copy"):
        summary.problems.append(f"the pod with GPU 3's NVLinks down was judged {cause!r}: {line[:200]}")


def _make_plan(estate: SimulatedEstate) -> None:
    """A plan for the next batch (one more launch), rehearsed against the simulator into a cassette."""
    root = estate.root
    try:
        completed = estate.cli("plan", "make", "--registry", str(estate.registry.root), "--provider", "vast",
                            "--gpu", "RTX 4090", "--image", "ghcr.io/example/comfyui-h3:1.0", "--cost-hr", "0.40",
                            "--idle-minutes", "15", "-o", str(root / "plan.json"),
                            "--cassette", str(root / "cassettes" / "http" / "plan.yaml"))
    except subprocess.TimeoutExpired:
        raise UserError("`gpuharness plan make` did not finish", path=root / "reports") from None
    (root / "reports" / "plan-make.log").write_text(redact(completed.stdout + completed.stderr))
    if completed.returncode != 0:
        raise UserError("`gpuharness plan make` failed", path=root / "reports" / "plan-make.log")


def _cleanup(ctx: Context, summary: Summary) -> None:
    """Whatever happened, nothing is left running on the simulator: destroy every live deployment."""
    for dep in ctx.registry.deployments():
        if not dep.is_live:
            continue
        try:
            destroy(ctx, dep.id, confirm=dep.id, discard_artifacts=True)
            summary.steps.append(f"cleanup: destroyed {dep.id} (artifacts discarded, recorded)")
        except UserError as exc:
            summary.problems.append(f"cleanup of {dep.id}: {exc.line()}")
