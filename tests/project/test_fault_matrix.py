"""The fault matrix: each fault injected in the simulator or on a simulated host, across the lifecycle.

Every cell must show 0 duplicate launches, 0 lost or rewritten ledger lines, 0 destroys with unsynced
artifacts, 0 deployments ready without a passing test generation, and a clear classified message.
`pytest tests/project/test_fault_matrix.py -s` prints one `MATRIX|` row per cell; bench/fault_matrix.py makes the table.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from gpuharness.core.errors import UserError
from gpuharness.core.ledger import Ledger
from gpuharness.demo.simulated_estate import MODEL, WORKFLOW, SimulatedEstate
from gpuharness.operations.destroy import destroy
from gpuharness.operations.install import configure, install
from gpuharness.operations.provision import ProvisionRequest, provision
from gpuharness.operations.retrieve import retrieve, unsynced
from gpuharness.operations.run import run_job

DEP = "dep_fault_01"


@dataclass
class Cell:
    lab: SimulatedEstate
    steps: list[str] = field(default_factory=list)
    ledger_snapshots: list[bytes] = field(default_factory=list)
    message: str = ""

    def snapshot(self):
        path = self.lab.registry.ledger_path
        self.ledger_snapshots.append(path.read_bytes() if path.exists() else b"")

    def step(self, name, action):
        """Run one lifecycle step; a refusal or failure is the message under test, never a traceback."""
        try:
            action()
            self.steps.append(f"{name} ok")
            return True
        except UserError as exc:
            self.steps.append(f"{name} refused")
            self.message = self.message or exc.line()
            return False
        finally:
            self.snapshot()

    # --- the invariants
    def duplicate_launches(self):
        keys = Counter(i.name for i in self.lab.sim.state.instances.values())
        return sum(n - 1 for n in keys.values() if n > 1)

    def rewritten_ledger_lines(self):
        broken = 0
        for before, after in zip(self.ledger_snapshots, self.ledger_snapshots[1:], strict=False):
            if not after.startswith(before):
                broken += 1
        return broken

    def unsynced_destroys(self):
        ledger = Ledger(self.lab.registry.ledger_path)
        return sum(len(unsynced(ledger, d.id)) for d in self.lab.registry.deployments()
                   if d.status == "destroyed")

    def false_ready(self):
        return sum(1 for d in self.lab.registry.deployments()
                   if (d.status == "ready" or d.ready_at)
                   and (d.health or {}).get("status") != "passed")


def request(provider="vast", gpu="RTX 4090"):
    return ProvisionRequest(provider=provider, gpu=gpu, image="comfyui:1", cost_hr=0.9, runtime="comfyui",
                            model=MODEL, workflow=WORKFLOW, idle_minutes=15, deployment_id=DEP)


def up(cell, provider="vast", gpu="RTX 4090"):
    ctx = cell.lab.ctx
    return (cell.step("provision", lambda: provision(ctx, request(provider, gpu), up_deadline_s=30, poll_s=0.1))
            and cell.step("install", lambda: install(ctx, DEP, deadline_s=30))
            and cell.step("configure", lambda: configure(ctx, DEP, deadline_s=30)))


def health(cell):
    code = cell.lab.suite("health", ["--gpu-mode", "live", "--deployment", DEP])
    cell.snapshot()
    dep = cell.lab.registry.deployment(DEP)
    if dep.status != "ready":
        info = dep.health or {}
        failed = ", ".join(info.get("failed_checks") or [str(info.get("check"))])
        cell.message = cell.message or f"never ready ({dep.status}): {failed} failed; cause {info.get('cause')}"
    cell.steps.append(f"health exit {code}")
    return dep.status == "ready"


# --- the cells -------------------------------------------------------------------------------------------------

def rate_limited_launch(cell, retry_after):
    cell.lab.sim.inject(provider="vast", fault="rate_limit", route="asks", retry_after=retry_after)
    up(cell)
    waited = max(cell.lab.slept or [0])
    cell.message = f"launch 429, waited {waited:.0f} s (max(Retry-After, backoff)) then launched once"
    return {"launch_calls": cell.lab.sim.stats()["launches"], "waited_s": waited}


def cell_429_retry_after(cell):
    facts = rate_limited_launch(cell, 7)
    assert facts["waited_s"] >= 7 and cell.lab.registry.deployment(DEP).status == "health-checking"


def cell_429_no_retry_after(cell):
    facts = rate_limited_launch(cell, None)
    assert facts["waited_s"] >= 5 and cell.lab.registry.deployment(DEP).status == "health-checking"


def cell_capacity_500(cell):
    cell.lab.sim.inject(provider="runpod", fault="capacity", count=5)  # outlasts the launch budget
    assert not cell.step("provision", lambda: provision(cell.lab.ctx, request("runpod", "NVIDIA GeForce RTX 4090"),
                                                        up_deadline_s=30, poll_s=0.1))
    assert "capacity" in cell.message and "nothing was created" in cell.message
    assert cell.lab.sim.state.instances == {}
    assert cell.lab.registry.deployment(DEP).status == "destroyed"


def cell_dropped_launch_response(cell):
    cell.lab.sim.inject(provider="vast", fault="drop_after_commit", route="asks")
    assert up(cell)
    assert len(cell.lab.sim.state.instances) == 1
    cell.message = "launch answer lost after commit: reconciled by idempotency key, not launched again"


def cell_dropped_terminate_response(cell):
    ctx = cell.lab.ctx
    assert up(cell) and health(cell)
    cell.step("run", lambda: run_job(ctx, DEP, inputs={"text": "a cat"}, poll_s=0.05))
    assert not cell.step("destroy before retrieve", lambda: destroy(ctx, DEP, confirm=DEP))
    refusal = cell.message
    cell.step("retrieve", lambda: retrieve(ctx, DEP, cell.lab.root / "out"))
    cell.lab.sim.inject(provider="vast", fault="drop_after_commit", route="instances")
    assert cell.step("destroy", lambda: destroy(ctx, DEP, confirm=DEP))
    assert [i.status for i in cell.lab.sim.state.instances.values()] == ["terminated"]
    assert "artifacts not synced" in refusal
    calls = sum(n for route, n in cell.lab.sim.stats()["requests"].items() if route.startswith("DELETE"))
    assert calls == 1
    cell.message = ("destroy refused while an artifact was unsynced; after retrieve, the lost terminate answer "
                    f"was reconciled by listing ({calls} terminate call)")


def cell_ssh_timeout(cell):
    ctx = cell.lab.ctx
    assert cell.step("provision", lambda: provision(ctx, request(), up_deadline_s=30, poll_s=0.1))
    assert not cell.step("install", lambda: install(ctx, DEP, deadline_s=0.5))
    assert "timeout" in cell.message or "timed out" in cell.message
    assert cell.lab.registry.deployment(DEP).status == "error"


def cell_oom_at_test_generation(cell):
    assert up(cell)
    assert not health(cell)
    assert "cuda_oom" in cell.message


def cell_oom_in_a_job(cell):
    ctx = cell.lab.ctx
    assert up(cell) and health(cell)
    from dataclasses import replace

    from gpuharness.sim.host import with_fault
    host = cell.lab.host_of(DEP)
    host.reconfigure(replace(with_fault(host.spec, "oom")))
    result = None

    def job():
        nonlocal result
        result = run_job(ctx, DEP, inputs={"text": "a cat"}, poll_s=0.05)

    cell.step("run", job)
    assert result is not None and result.status == "failed" and result.attempts == 1
    cell.message = f"job failed, not retried: {result.failure.message()}"
    assert "cuda_oom" in cell.message


def cell_hash_mismatch(cell):
    ctx = cell.lab.ctx
    with cell.lab.registry.update("models.json") as doc:
        doc["models"][0]["files"][0]["sha256"] = hashlib.sha256(b"not these weights").hexdigest()
    assert cell.step("provision", lambda: provision(ctx, request(), up_deadline_s=30, poll_s=0.1))
    assert not cell.step("install", lambda: install(ctx, DEP, deadline_s=30))
    assert "weights_corrupt" in cell.message and "after re-download" in cell.message


def cell_full_disk(cell):
    ctx = cell.lab.ctx
    assert cell.step("provision", lambda: provision(ctx, request(), up_deadline_s=30, poll_s=0.1))
    assert not cell.step("install", lambda: install(ctx, DEP, deadline_s=30))
    assert "disk_full" in cell.message


CELLS: dict[str, tuple[Callable[[Cell], None], dict[str, str]]] = {
    "429 with Retry-After (launch)": (cell_429_retry_after, {}),
    "429 without Retry-After (launch)": (cell_429_no_retry_after, {}),
    "capacity 500 (RunPod launch)": (cell_capacity_500, {}),
    "dropped response after launch commits": (cell_dropped_launch_response, {}),
    "dropped response after terminate commits": (cell_dropped_terminate_response, {}),
    "SSH timeout (install exec)": (cell_ssh_timeout, {"ssh_latency_3s": ""}),
    "CUDA OOM at test generation": (cell_oom_at_test_generation, {DEP: "oom"}),
    "CUDA OOM in a job": (cell_oom_in_a_job, {}),
    "hash mismatch (model file)": (cell_hash_mismatch, {}),
    "full disk (install)": (cell_full_disk, {DEP: "full_disk"}),
}


@pytest.mark.parametrize("name", list(CELLS))
def test_fault_cell_keeps_every_invariant(name, tmp_path):
    run, faults = CELLS[name]
    slept: list[float] = []
    changes = {DEP: {"latency_s": 3.0}} if "ssh_latency_3s" in faults else {}
    host_faults = {k: v for k, v in faults.items() if k == DEP}
    with SimulatedEstate(tmp_path / "lab", host_faults=host_faults, host_changes=changes, sleep=slept.append,
             say=lambda line: None) as lab:
        lab.slept = slept
        cell = Cell(lab)
        cell.snapshot()
        run(cell)
        row = {"cell": name, "duplicate_launches": cell.duplicate_launches(),
               "lost_or_rewritten_ledger_lines": cell.rewritten_ledger_lines(),
               "destroys_with_unsynced_artifacts": cell.unsynced_destroys(),
               "ready_without_passing_test_generation": cell.false_ready(),
               "launches": lab.sim.stats()["launches"], "message": " ".join(cell.message.split())[:200]}
    print("MATRIX|" + "|".join(str(v) for v in row.values()))
    assert row["duplicate_launches"] == 0
    assert row["lost_or_rewritten_ledger_lines"] == 0
    assert row["destroys_with_unsynced_artifacts"] == 0
    assert row["ready_without_passing_test_generation"] == 0
    assert row["message"], "every cell must end with a clear message"
