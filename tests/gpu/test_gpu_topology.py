"""`nvidia-smi topo -m` and `nvidia-smi nvlink --status` read into pair connections and link states: the real
H200's single-GPU matrix (its header underlined with ANSI codes, as nvidia-smi prints it to a terminal), the
simulator's 8x H100 SXM pod, a pod whose GPU 3 lost its NVLinks, and outputs with no matrix."""

from __future__ import annotations

from checkout import ROOT

from gpuharness.gpu.topology import parse_nvlink_status, parse_topology
from gpuharness.sim import gpu_topology
from gpuharness.sim.gpu_figures import GpuBehaviour

H100 = "NVIDIA H100 80GB HBM3"


def test_the_real_h200_matrix_has_one_gpu_and_no_pairs():
    topology = parse_topology((ROOT / "tests" / "gpu" / "data" / "real-h200" / "topo-m.txt").read_text())
    assert topology is not None and topology.gpus == (0,) and dict(topology.links) == {}


def test_an_hgx_pod_joins_every_pair_by_18_nvlinks():
    topology = parse_topology(gpu_topology.topo_text(H100, 8, GpuBehaviour()))
    assert topology is not None and topology.gpus == tuple(range(8)) and len(topology.links) == 28
    assert {topology.nvlinks(a, b) for a in range(8) for b in range(8) if a != b} == {18}
    assert topology.between(5, 2) == "NV18"


def test_a_gpu_without_its_nvlinks_is_joined_by_pcie_across_or_within_its_numa_node():
    down = GpuBehaviour(nvlink_down=(3,))
    topology = parse_topology(gpu_topology.topo_text(H100, 8, down))
    assert topology is not None
    assert (topology.between(0, 3), topology.between(3, 6), topology.nvlinks(3, 7)) == ("NODE", "SYS", 0)
    states = parse_nvlink_status(gpu_topology.nvlink_text(H100, 8, down, []))
    assert (states[3].active, states[3].total, states[0].active, states[0].gbps_per_link) == (0, 18, 18, 26.562)


def test_outputs_without_a_matrix_or_links_say_nothing():
    assert parse_topology("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.") is None
    assert parse_topology("") is None
    assert parse_nvlink_status("") == {}
    assert parse_nvlink_status("GPU 0: NVIDIA GeForce RTX 4090 (UUID: GPU-1)\n")[0].total == 0
