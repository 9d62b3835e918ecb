"""The simulator's GPU tables derive from the one class table (gpuharness.gpu.classes): a Vast offer, a RunPod
GpuType, and a simulated host or ComfyUI made without a GPU show each card as its class says, and no module of the
simulator writes a class's name or figure a second time (issue 22: the RTX 4090's 24,564 MiB was in 5 places)."""

from __future__ import annotations

import ast
import string
from collections.abc import Iterator
from secrets import token_hex

import httpx
import pytest
from checkout import ROOT
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuharness.gpu.classes import GPU_CLASSES, GpuClass
from gpuharness.sim import Simulator, catalog, vast_offers
from gpuharness.sim.catalog import CatalogGpu
from gpuharness.sim.host import HostSpec
from gpuharness.sim.runpod_graphql_records import gpu_type
from gpuharness.sim.runtimes import RuntimeServer

SIM = ROOT / "src" / "gpuharness" / "sim"
#: the one module of the simulator that names classes: its catalog picks the classes each provider rents
NAMES_CLASSES = "catalog.py"


def _vast_compute_cap(gpu: GpuClass) -> int:
    assert gpu.compute_capability is not None
    major, minor = gpu.compute_capability
    return major * 100 + minor * 10


def _written(gpu: GpuClass) -> tuple[set[str], set[int]]:
    """What of a class no simulator module may write: its names, and its figures that are no everyday number."""
    return {gpu.name, gpu.short, *gpu.aliases}, {n for n in (gpu.memory_mib, gpu.cuda_cores) if n is not None}


@pytest.mark.parametrize("path", sorted(SIM.glob("*.py")), ids=lambda p: p.name)
def test_no_simulator_module_writes_a_class_name_or_figure_again(path):
    if path.name == NAMES_CLASSES:
        pytest.skip("the catalog names the classes it rents")
    names = set().union(*(_written(g)[0] for g in GPU_CLASSES))
    figures = set().union(*(_written(g)[1] for g in GPU_CLASSES))
    found = [f"{path.name}:{node.lineno} {node.value!r}" for node in ast.walk(ast.parse(path.read_text("utf-8")))
             if isinstance(node, ast.Constant) and not isinstance(node.value, bool)
             and (node.value in names if isinstance(node.value, str) else node.value in figures)]
    assert found == [], f"read these from gpuharness.gpu.classes (or sim.catalog's rows): {found}"


def test_the_scan_finds_a_copied_memory_figure_and_name():
    tree = ast.parse('HARDWARE = {"RTX 4090": (890, 24564)}\n')
    names, figures = _written(GPU_CLASSES[1])
    constants = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)]
    assert "RTX 4090" in names and 24564 in figures and {"RTX 4090", 24564} <= set(constants)


@pytest.fixture
def vast(sim: Simulator) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=sim.url("vast"), headers={"Authorization": "Bearer sim-vast-key-" + token_hex(8)},
                      timeout=10) as client:
        yield client


def test_every_vast_offer_served_shows_its_class(vast: httpx.Client):
    answer = vast.post("/api/v0/bundles/", json={"limit": 1000})
    assert answer.status_code == 200, answer.text
    offers = answer.json()["offers"]
    assert {o["gpu_name"] for o in offers} == {row.display for row in catalog.CATALOG}
    for offer in offers:
        row = catalog.by_display(offer["gpu_name"])
        assert row is not None
        gpu, count = row.gpu, offer["num_gpus"]
        assert (offer["gpu_ram"], offer["gpu_total_ram"]) == (gpu.memory_mib, gpu.memory_mib * count)
        assert (offer["gpu_mem_bw"], offer["gpu_max_power"]) == (gpu.memory_bandwidth_gbps, gpu.power_w)
        assert gpu.fp32_tflops is not None
        assert (offer["compute_cap"], offer["total_flops"]) == (_vast_compute_cap(gpu),
                                                                round(gpu.fp32_tflops * count, 1))


def test_every_runpod_gpu_type_served_shows_its_class(sim: Simulator):
    query = "query { gpuTypes { id displayName memoryInGb cudaCores } }"
    with httpx.Client(base_url=sim.base_url, headers={"Authorization": "Bearer sim-graphql-key-" + token_hex(8)},
                      timeout=10) as client:
        answer = client.post("/runpod/graphql", json={"query": query})
    assert answer.status_code == 200, answer.text
    served = answer.json()["data"]["gpuTypes"]
    assert [t["id"] for t in served] == [row.gpu.name for row in catalog.CATALOG]
    for gpu_type_served, row in zip(served, catalog.CATALOG, strict=True):
        assert gpu_type_served == {"id": row.gpu.name, "displayName": row.gpu.short,
                                   "memoryInGb": row.gpu.memory_gb, "cudaCores": row.gpu.cuda_cores}


def test_every_class_the_simulator_rents_has_the_figures_its_providers_list():
    for row in catalog.CATALOG:
        gpu = row.gpu
        missing = [name for name in ("memory_bandwidth_gbps", "power_w", "compute_capability", "cuda_cores",
                                     "fp32_tflops") if getattr(gpu, name) is None]
        assert missing == [], f"{gpu.name} is rented by the simulator but has no {missing} in the class table"
        assert {"compute_capability", "cuda_cores", "fp32_tflops"} <= {figure for figure, _ in gpu.sources}


def test_a_card_made_without_a_gpu_is_the_catalogs_default_class(tmp_path):
    default = catalog.DEFAULT_GPU
    assert default is catalog.CATALOG[0].gpu and HostSpec().gpu == default.name
    server = RuntimeServer("comfyui", output_root=tmp_path).start()
    try:
        stats = httpx.get(f"{server.url}/system_stats", timeout=10).json()
    finally:
        server.stop()
    assert stats["devices"][0]["name"] == f"cuda:0 {default.name} : cudaMallocAsync"
    assert stats["devices"][0]["vram_total"] == default.memory_mib * 1024 * 1024


# Any class, however its figures fall: what the simulator lists of a card follows the class, never a table of its own.
_NAME = st.text(string.ascii_letters + string.digits + " -", min_size=1, max_size=30).map(str.strip).filter(bool)
_CLASSES = st.builds(
    GpuClass, name=_NAME.map("NVIDIA Test {}".format), short=_NAME.map("Test {}".format),
    memory_mib=st.integers(1024, 400_000), memory_gb=st.integers(1, 400), ecc=st.booleans(),
    memory_bandwidth_gbps=st.floats(100, 10_000).map(lambda v: round(v, 1)),
    power_w=st.floats(30, 1_500).map(lambda v: round(v, 1)),
    compute_capability=st.tuples(st.integers(5, 12), st.integers(0, 9)),
    cuda_cores=st.integers(128, 40_000), fp32_tflops=st.floats(1, 300).map(lambda v: round(v, 2)))


@settings(max_examples=100, deadline=None)
@given(gpu=_CLASSES, count=st.sampled_from([1, 2]), price=st.floats(0.05, 10).map(lambda v: round(v, 2)))
def test_any_class_is_listed_as_the_table_says(gpu: GpuClass, count: int, price: float):
    row = CatalogGpu(gpu, runpod_secure=price, runpod_community=None, vast_prices=(price,), massed_product=None,
                     massed_price=None)
    offer = vast_offers.offer_of(0, row, 0, price, count)
    assert (offer["gpu_name"], offer["gpu_ram"], offer["gpu_mem_bw"], offer["gpu_max_power"]) == (
        gpu.short, gpu.memory_mib, gpu.memory_bandwidth_gbps, gpu.power_w)
    assert gpu.fp32_tflops is not None
    assert offer["compute_cap"] == _vast_compute_cap(gpu)
    assert offer["total_flops"] == round(gpu.fp32_tflops * count, 1)
    assert vast_offers.gpu_ram(row) == gpu.memory_mib
    listed = gpu_type(row)
    assert (listed["id"], listed["displayName"], listed["memoryInGb"], listed["cudaCores"]) == (
        gpu.name, gpu.short, gpu.memory_gb, gpu.cuda_cores)
