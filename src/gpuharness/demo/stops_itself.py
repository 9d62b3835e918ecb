"""The demo's pod that stops itself: provisioned with a one-minute idle rule, configured (its guard started on the
pod), then left alone. With no gpuharness process connected, its guard stops it through the simulated provider's
in-pod route; `status --refresh` then journals why, and the billed interval ends where the guard stopped it."""

from __future__ import annotations

import time
from typing import Final

from gpuharness.core.billing import billed_intervals
from gpuharness.core.clock import utcnow
from gpuharness.core.deployment import DEFAULT_WORKSPACE
from gpuharness.core.journal import read_entries
from gpuharness.demo.simulated_estate import MODEL, WORKFLOW, SimulatedEstate
from gpuharness.operations.install import configure, install
from gpuharness.operations.provision import ProvisionRequest, provision

GUARDED: Final = "dep_h3_vast_idle"
#: the seconds its guard counts as a minute here, so that its one idle minute passes while the demo goes on
MINUTE_S: Final = 1.0
WAIT_S: Final = 120.0


def launch(estate: SimulatedEstate) -> str:
    """Provision, install and configure it (its guard armed); the demo's step line."""
    ctx = estate.ctx
    dep = provision(ctx, ProvisionRequest(
        provider="vast", gpu="RTX 4090", image="ghcr.io/example/comfyui-h3:1.0", cost_hr=0.40, runtime="comfyui",
        model=MODEL, workflow=WORKFLOW, idle_minutes=1, owner="demo", reason="shows a pod stopping itself",
        deployment_id=GUARDED, checkpoint_path=f"{DEFAULT_WORKSPACE}/output"), up_deadline_s=30, poll_s=0.1).deployment
    install(ctx, GUARDED, deadline_s=60)
    configure(ctx, GUARDED, deadline_s=60, guard_poll_s=0.2)
    return (f"provisioned {GUARDED} on vast (${dep.cost_hr:.2f}/hr, idle_minutes 1) and configured it: its guard "
            "runs on the pod; nothing of gpuharness touches it from here on")


def witness(estate: SimulatedEstate) -> tuple[str | None, str | None]:
    """Wait for the simulated provider to show it stopped, then `status --refresh`; (step line, problem)."""
    dep = estate.registry.deployment(GUARDED)
    instance = estate.sim.state.instances.get(("vast", str(dep.instance_id)))
    end = time.monotonic() + WAIT_S
    while instance is not None and instance.status != "stopped" and time.monotonic() < end:
        time.sleep(0.2)
    if instance is None or instance.status != "stopped":
        return None, f"{GUARDED}'s guard did not stop it within {WAIT_S:g} s"
    refreshed = estate.cli("status", "--refresh")
    said = [line.strip() for line in refreshed.stdout.splitlines() if f"{GUARDED} -> stopped" in line]
    if not said:
        return None, f"`status --refresh` did not read why {GUARDED} stopped: {refreshed.stdout[-300:]}"
    registry = estate.registry
    found = billed_intervals([registry.deployment(GUARDED)], read_entries(registry.journal_path),
                             utcnow()).get(GUARDED, [])
    billed = [i for i in found if i.kind == "instance"]
    last = billed[-1] if billed else None
    bill = (f"billed {last.start:%H:%M:%S}-{last.end:%H:%M:%S} UTC, ${sum(i.cost for i in billed):.5f}: the interval "
            "ends where its guard stopped it" if last else "nothing billed")
    return f"{GUARDED} stopped itself while no gpuharness process was connected; {said[0]}; {bill}", None
