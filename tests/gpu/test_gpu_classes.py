"""One table of GPU classes: the health rules, the simulated hosts and the simulated providers' catalog all read
it, so an ordered name, what nvidia-smi prints and what the memory check expects cannot disagree."""

from __future__ import annotations

import pytest

from gpuharness import probe
from gpuharness.core.deployment import Deployment
from gpuharness.gpu import classes
from gpuharness.gpu.classes import GPU_CLASSES, nvidia_smi_name, ordered
from gpuharness.health import rules
from gpuharness.remote.connect import HostRoute, open_remote
from gpuharness.sim import catalog
from gpuharness.sim.host import HostSpec, SimHost


def ordering(gpu: str, count: int = 1) -> Deployment:
    """A deployment that ordered `count` of `gpu` (what gpu_matches_order reads)."""
    return Deployment(id="dep", provider="vast", status="health-checking", cost_hr=0.0, created_at="", gpu=gpu,
                      gpu_count=count)


@pytest.mark.parametrize("name", ["RTX 4090", "rtx 4090", " RTX 4090 ", "NVIDIA GeForce RTX 4090"])
def test_an_order_name_in_any_spelling_is_the_nvidia_smi_name(name):
    assert nvidia_smi_name(name) == "NVIDIA GeForce RTX 4090"


def test_an_unknown_gpu_is_passed_through_not_guessed():
    assert ordered("Quadro Z9") is None and nvidia_smi_name(" Quadro Z9") == "Quadro Z9"


def test_every_order_name_belongs_to_one_class_only():
    names = [n.lower() for g in GPU_CLASSES for n in g.order_names]
    assert len(names) == len(set(names))


def test_the_health_rules_read_the_table():
    assert rules.GPU_MEMORY_MIB is classes.GPU_MEMORY_MIB and rules.ORDER_NAMES is classes.ORDER_NAMES
    assert rules.ordered_name("h100") == "NVIDIA H100 80GB HBM3"


def test_every_catalog_gpu_is_a_class_with_its_names_and_memory():
    for row in catalog.CATALOG:
        assert row.gpu in GPU_CLASSES
        assert (row.runpod_id, row.display, row.vram_gb) == (row.gpu.name, row.gpu.short, row.gpu.memory_gb)


@pytest.fixture(scope="module")
def host(tmp_path_factory):
    with SimHost(HostSpec(), root=tmp_path_factory.mktemp("host")) as running:
        yield running


@pytest.mark.parametrize("gpu", GPU_CLASSES, ids=lambda g: g.short)
def test_a_simulated_host_of_each_class_passes_the_gpu_rule_ordered_by_its_short_name(host, gpu):
    host.reconfigure(HostSpec(gpu=nvidia_smi_name(gpu.short)))
    block = host.ssh_block()
    remote = open_remote(HostRoute(target="t", host=block["host"], port=block["port"], user="root",
                               key_file=block["key_file"], known_hosts=block["known_hosts"]))
    try:
        _, facts = probe.run(remote, probe.ProbeTargets(workspace=block["workspace"]), deadline_s=60)
    finally:
        remote.close()
    assert [g.memory_total_mib for g in facts.gpus] == [gpu.memory_mib]
    verdict = rules.gpu_matches_order(facts, ordering(gpu.short, 1))
    assert verdict.ok, verdict.message
