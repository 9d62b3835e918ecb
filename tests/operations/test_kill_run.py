"""`kill -9` of `gpuharness run` mid-job: status --refresh and the audit see a consistent state, the job is
visible as interrupted (a new line: `running` is not terminal), and nothing is lost or rewritten."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import replace

import pytest
from lifecycle_fakes import provision_comfyui, wait_for

from gpuharness.core.ledger import Ledger
from gpuharness.demo.simulated_estate import SimulatedEstate
from gpuharness.operations.install import configure, install
from gpuharness.sim.runtimes import RuntimeFaults

DEP = "dep_kill_01"




@pytest.mark.slow
def test_kill_9_of_run_mid_job_leaves_a_consistent_state_with_the_job_interrupted(tmp_path):
    with SimulatedEstate(tmp_path / "lab", say=lambda line: None) as lab:
        registry = lab.registry
        provision_comfyui(lab, DEP, cost_hr=0.5)
        install(lab.ctx, DEP, deadline_s=30)
        configure(lab.ctx, DEP, deadline_s=30)
        assert lab.suite("health", ["--gpu-mode", "live", "--deployment", DEP]) == 0
        host = lab.host_of(DEP)
        host.reconfigure(replace(host.spec, runtime_faults=RuntimeFaults(never_finishes=True)))

        runner = subprocess.Popen([sys.executable, "-m", "gpuharness", "run", DEP, "--registry", str(registry.root),
                                   "--inputs", '{"text": "a long video"}', "--poll", "0.1"],
                                  env=lab.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        ledger = Ledger(registry.ledger_path)
        wait_for(lambda: any(r["status"] == "running" for r in ledger.records()), "the running line")
        wait_for(lambda: registry.deployment(DEP).status == "running", "the deployment to be running")
        os.kill(runner.pid, signal.SIGKILL)
        runner.wait(timeout=30)
        assert runner.returncode == -signal.SIGKILL
        before = registry.ledger_path.read_bytes()
        [running] = [r for r in ledger.records()]
        assert running["status"] == "running" and running["pid"] == runner.pid

        refresh = lab.cli("status", "--refresh", "--registry", str(registry.root), "--json")
        payload = json.loads(refresh.stdout)
        assert [s["job_id"] for s in payload["stale_jobs"]] == [running["id"]], refresh.stdout + refresh.stderr
        assert "is gone" in payload["stale_jobs"][0]["reason"]

        # the next lifecycle command marks it interrupted, with a new line
        reap = lab.cli("reap", "--apply", "--registry", str(registry.root))
        assert reap.returncode == 0, reap.stdout + reap.stderr
        after = registry.ledger_path.read_bytes()
        assert after.startswith(before)
        lines = list(ledger.records())
        assert [(r["id"], r["status"]) for r in lines] == [(running["id"], "running"),
                                                          (running["id"], "interrupted")]
        assert "process died" in lines[-1]["error"]
        assert registry.deployment(DEP).status == "ready"

        audit = lab.suite("audit", [])
        assert audit == 0, (lab.root / "audit.log").read_text()
