"""The demo's 8-GPU pod: an 8x H100 SXM host of the simulator whose GPU 3 lost its NVLinks, probed (topo -m and
nvlink --status in the probe's one exec) and measured (every GPU, every pair) over SSH, then judged as the health
check judges it. The verdict names the pair and the likely cause."""

from __future__ import annotations

from pathlib import Path

from gpuharness import probe
from gpuharness.core.policy import PerformanceFloor
from gpuharness.gpu import measurement, peers, performance
from gpuharness.remote.connect import HostRoute, open_remote
from gpuharness.sim.host import POD_8X_H100, SimHost, with_fault

FAULT = "nvlink_down"


def check_pod(root: Path) -> tuple[str | None, str]:
    """(cause, verdict line) of the pod with GPU 3's NVLinks down."""
    with SimHost(with_fault(POD_8X_H100, FAULT), root=root, name="pod") as host:
        block = host.ssh_block()
        remote = open_remote(HostRoute(target="pod", host=block["host"], port=block["port"], user="root",
                                       key_file=block["key_file"], known_hosts=block["known_hosts"]))
        try:
            targets = probe.ProbeTargets(workspace=block["workspace"], service_port=host.service_port,
                                         log_path=str(host.log_path))
            _, facts = probe.run(remote, targets, deadline_s=60)
            _, measured = measurement.run(remote, facts.smoke.interpreter)
        finally:
            remote.close()
    floor = PerformanceFloor(measure=True)
    report = performance.judge(facts.gpus, measured, floor)
    report = peers.with_links(report, facts.gpus, measured, peers.links_of(facts.sections), floor)
    return performance.message(report)
