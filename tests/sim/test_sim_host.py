"""The simulated host plugged into the provider simulator: the ordered GPU, counted connections and execs."""

from __future__ import annotations

import httpx

from gpuharness import probe
from gpuharness.gpu.classes import nvidia_smi_name
from gpuharness.remote.connect import HostRoute, open_remote
from gpuharness.sim.host import HostSpec, SimHost, host_factory, with_fault
from gpuharness.sim.server import Simulator


def probe_host(host: SimHost) -> probe.ProbeResult:
    block = host.ssh_block()
    remote = open_remote(HostRoute(target="t", host=block["host"], port=block["port"], user="root",
                               key_file=block["key_file"], known_hosts=block["known_hosts"]))
    _, facts = probe.run(remote, probe.ProbeTargets(workspace=block["workspace"], process_pattern="main.py"),
                         deadline_s=60)
    remote.close()
    return facts


def test_simulator_starts_a_host_with_the_ordered_gpu_and_counts_ssh_in_sim_stats():
    with Simulator(ready_delay_s=0.0) as sim:
        sim.host_factory = host_factory(counter=sim.state.increment)
        ids = sim.create_instances("vast", 1, gpu="RTX 4090")
        stats = httpx.get(sim.base_url + "/_sim/stats").json()  # advances the instance to running
        instance = next(i for i in sim.state.live("vast") if i.id == ids[0])
        host = instance.host
        assert isinstance(host, SimHost)
        assert host.service_port == 8188 and host.runtime is not None
        assert host.http_ports == {8188: host.runtime.port}
        facts = probe_host(host)
        assert [g.name for g in facts.gpus] == [nvidia_smi_name("RTX 4090")] == ["NVIDIA GeForce RTX 4090"]
        stats = httpx.get(sim.base_url + "/_sim/stats").json()
        counters = stats.get("counters", stats)
        assert (counters["ssh_connections"], counters["ssh_execs"]) == (1, 1)


def test_every_named_fault_changes_what_the_host_shows(tmp_path):
    healthy = HostSpec()
    for name in ("driver_mismatch", "full_disk", "hung_nvidia_smi", "ssh_latency", "oom", "missing_custom_node"):
        assert with_fault(healthy, name) != healthy, name


def test_reconfigure_changes_the_facts_of_a_running_host(tmp_path):
    with SimHost(HostSpec(), root=tmp_path / "h") as host:
        assert probe_host(host).gpus[0].temperature_c == 38
        host.reconfigure(HostSpec(temperature_c=91))
        assert probe_host(host).gpus[0].temperature_c == 91
        assert host.stats == {"ssh_connections": 2, "ssh_execs": 2}
