"""GPU classes: the one table of what each GPU model is called, what it has and what it should perform, for the
health rules, the simulator's hosts and its provider catalog. Every figure cites where it comes from; a figure
no public source gave is None, and the checks say they have no expectation for it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, final


@final
@dataclass(frozen=True, slots=True)
class GpuClass:
    """One GPU model.

    name: as nvidia-smi prints it; short: as providers list it when ordering (Vast gpu_name, RunPod
    displayName); aliases: other order names people use; memory_mib: memory.total as the driver reports it
    for the SKU (less than the marketed memory_gb where ECC reserves some); ecc: whether it has ECC memory.
    pcie_gen / pcie_width: the host link the card is built for; memory_bandwidth_gbps: device memory bandwidth
    (GB/s, datasheet); dense_tflops: dense fp16/bf16 tensor throughput with fp32 accumulation (TFLOP/s,
    datasheet; what torch's fp16 and bf16 matmuls use; fp16 only where `bf16` is False); power_w: its default power
    limit (the health check compares a card with its own default; the simulator's cards are rated by it);
    compute_capability: (major, minor), as torch.cuda.get_device_capability() gives it; cuda_cores and fp32_tflops:
    the FP32 cores and their non-tensor throughput (TFLOP/s), as providers list them; sm_max_mhz: clocks.max.sm as
    nvidia-smi prints it. healthy_tflops / healthy_memory_gbps / healthy_host_copy_gbps: what a healthy card reaches
    with the project's measurement (gpu/measurement.py), where a measurement of it was published or taken; otherwise
    `expected_*` derive it from the datasheet figure by a stated, sourced factor. The datasheet figures stay the
    peak column. `sources` names where each figure comes from.
    """

    name: str
    short: str
    memory_mib: int
    memory_gb: int
    ecc: bool
    aliases: tuple[str, ...] = ()
    pcie_gen: int | None = None
    pcie_width: int | None = None
    memory_bandwidth_gbps: float | None = None
    dense_tflops: float | None = None
    bf16: bool = True  # has bf16 tensor cores (dense_tflops holds for fp16 only where not)
    power_w: float | None = None  # the board's default power limit (power.default_limit where a capture shows it)
    compute_capability: tuple[int, int] | None = None
    cuda_cores: int | None = None
    fp32_tflops: float | None = None
    sm_max_mhz: int | None = None
    healthy_tflops: float | None = None
    healthy_memory_gbps: float | None = None
    healthy_host_copy_gbps: float | None = None
    nvlinks: int | None = None  # NVLinks per GPU where the class is joined by NVLink (SXM boards); None: PCIe peers
    nvlink_p2p_gbps: float | None = None  # a healthy peer copy over them, one direction
    sources: tuple[tuple[str, str], ...] = ()

    @property
    def order_names(self) -> tuple[str, ...]:
        """Every name this class is ordered by (short name and aliases)."""
        return (self.short, *self.aliases)

    def source(self, figure: str) -> str | None:
        """Where a figure of this class comes from ("pcie", "memory_bandwidth", "dense_tflops")."""
        return dict(self.sources).get(figure)

    def expected_tflops(self) -> tuple[float | None, str | None]:
        """The dense matmul figure a healthy card reaches with the measurement, and where it comes from."""
        if self.healthy_tflops is not None:
            return self.healthy_tflops, self.source("healthy_tflops")
        if self.dense_tflops is None:
            return None, None
        return round(self.dense_tflops * HEALTHY_MATMUL, 1), f"{HEALTHY_MATMUL:g} x datasheet {self.dense_tflops:g} " \
            f"({HEALTHY_MATMUL_SOURCE}; datasheet: {self.source('dense_tflops')})"

    def expected_memory_gbps(self) -> tuple[float | None, str | None]:
        """The device memory copy a healthy card reaches with the measurement, and where it comes from."""
        if self.healthy_memory_gbps is not None:
            return self.healthy_memory_gbps, self.source("healthy_memory_gbps")
        if self.memory_bandwidth_gbps is None:
            return None, None
        return round(self.memory_bandwidth_gbps * HEALTHY_DEVICE_COPY, 1), \
            f"{HEALTHY_DEVICE_COPY:g} x datasheet {self.memory_bandwidth_gbps:g} ({HEALTHY_DEVICE_COPY_SOURCE}; " \
            f"datasheet: {self.source('memory_bandwidth')})"


# Abbreviations of the sources cited below (each row says which figure comes from where):
MLE: Final = "github.com/stas00/ml-engineering compute/accelerator/README.md (tables citing nvidia.com)"
NANOCHAT: Final = "github.com/karpathy/nanochat harness/runtime.py get_peak_flops/get_peak_bandwidth"
TORCHTITAN: Final = "github.com/pytorch/torchtitan torchtitan/tools/utils.py get_peak_flops"
K8S: Final = "github.com/NVIDIA/k8s-test-infra tests/e2e/go/assertions/nvidiasmi/testdata/hardware"
UKO: Final = "github.com/utkuozdemir/nvidia_gpu_exporter internal/captures"
CUDA_GPUS: Final = "developer.nvidia.com/cuda-gpus (NVIDIA's compute capability table)"

#: The fraction of the datasheet's dense bf16 figure a healthy card reaches in a careful torch matmul, for classes
#: without a published measurement of their own: the median of the H100 SXM, A100 SXM, A100 PCIe and H200 figures
#: below (0.80, 0.87, 0.81, 0.79).
HEALTHY_MATMUL: Final = 0.80
HEALTHY_MATMUL_SOURCE: Final = ("the factor a careful bf16 matmul reaches on the H100 SXM (794.5 of 989: MAMF table, "
                                "github.com/stas00/ml-engineering compute/accelerator/README.md) and on the real "
                                "H200 (783.8 of 989: docs/gpu-calibration.md)")
#: The fraction of the datasheet's memory bandwidth a device copy reaches (read + write counted).
HEALTHY_DEVICE_COPY: Final = 0.88
HEALTHY_DEVICE_COPY_SOURCE: Final = ("the factor a device copy reaches on the H100 SXM (2959 of 3350 GB/s: "
                                     "github.com/NVIDIA/cuda-samples/issues/392) and on the real H200 (4222 of 4800 "
                                     "GB/s: docs/gpu-calibration.md)")
MAMF: Final = ("github.com/stas00/ml-engineering compute/accelerator/README.md, Maximum Achievable Matmul FLOPS "
               "(bf16, mean of 100 after 50 warm-ups, best shape)")
NVLINK4_LINKS: Final = "github.com/open-mpi/hwloc/issues/574 (an H100 has 18 NVLinks, 900 GB/s)"
NVLINK4_P2P: Final = ("github.com/NVIDIA/nccl/issues/1264 (HGX H100 SXM p2pBandwidthLatencyTest: unidirectional "
                      "P2P=Enabled 371-377 GB/s, P2P=Disabled 36-38 GB/s)")
#: Peer copies over PCIe reach what host copies reach on the same link: 26.34 GB/s between RTX A6000s on Gen4
#: (github.com/NVIDIA/nvbandwidth/issues/50), where a Gen4 host copy reaches 25.13 (HOST_LINKS).
PCIE_PEER_SOURCE: Final = "github.com/NVIDIA/nvbandwidth/issues/50 (RTX A6000 Gen4 peers 21.8-26.34 GB/s)"
REAL_H200: Final = "the real H200 run of 2026-12-04 (docs/gpu-calibration.md, cassettes/ssh/real-h200.json)"

GPU_CLASSES: Final[tuple[GpuClass, ...]] = (
    GpuClass("NVIDIA GeForce RTX 3090", "RTX 3090", 24576, 24, ecc=False, pcie_gen=4, pcie_width=16,
             memory_bandwidth_gbps=936, dense_tflops=71, power_w=350, compute_capability=(8, 6), sources=(
                 ("compute_capability", CUDA_GPUS),
                 ("power", "github.com/noonghunna/club-3090/issues/642 (nvidia-smi report: default=350.00 W)"),
                 ("memory", "github.com/noonghunna/club-3090/issues/1127 ('22591MiB /  24576MiB')"),
                 ("pcie", "github.com/noonghunna/club-3090/issues/642 (nvidia-smi report: 'GPU max x16, Gen up "
                          "to 4')"),
                 ("memory_bandwidth", f"holynerdvana.blogspot.com (2022/10, RTX 3090 specifications); {NANOCHAT}"),
                 ("dense_tflops", f"{NANOCHAT} (bf16, fp32 accumulate: 71e12)"))),
    GpuClass("NVIDIA GeForce RTX 4090", "RTX 4090", 24564, 24, ecc=False, pcie_gen=4, pcie_width=16,
             memory_bandwidth_gbps=1008, dense_tflops=165.2, power_w=450, compute_capability=(8, 9),
             cuda_cores=16384, fp32_tflops=82.6, sources=(
                 ("compute_capability", CUDA_GPUS),
                 ("cuda_cores", "holynerdvana.blogspot.com (2022/10, RTX 4090 specifications: 16384 GPU cores)"),
                 ("fp32_tflops", "holynerdvana.blogspot.com (2022/10, RTX 4090 specifications: FP32 82.6)"),
                 ("power", "github.com/RLinf/RLinf/issues/255 (nvidia-smi table: '/ 450W')"),
                 ("memory", "github.com/RLinf/RLinf/issues/255 ('507MiB /  24564MiB')"),
                 ("pcie", "lspci LnkCap 16GT/s Width x16 of an RTX 4090: github.com/janhq/jan/issues/183"),
                 ("memory_bandwidth", f"waredb.com/processor/nvidia-geforce-rtx-4090; {NANOCHAT} (1.01e12)"),
                 ("dense_tflops", f"{NANOCHAT} (bf16, fp32 accumulate); hmc-tech.com 'Tensor FP16-32 165.2'"))),
    GpuClass("NVIDIA GeForce RTX 5090", "RTX 5090", 32607, 32, ecc=False, pcie_gen=5, pcie_width=16,
             memory_bandwidth_gbps=1792, dense_tflops=209.5, power_w=575, compute_capability=(12, 0),
             cuda_cores=21760, fp32_tflops=104.8, healthy_tflops=234, sources=(
                 ("compute_capability", CUDA_GPUS),
                 ("cuda_cores", "spheron.network/blog/nvidia-rtx-5090-specs (21,760 CUDA cores)"),
                 ("fp32_tflops", "pcspecchart.com/pc_parts/gpu/21 (21760 cores at a 2407 MHz boost: 2 x 21760 x "
                                 "2.407 GHz = 104.8 TFLOP/s)"),
                 ("power", "github.com/noonghunna/club-3090/issues/707 (nvidia-smi report: default=575.00 W)"),
                 ("memory", "github.com/noonghunna/club-3090/issues/707 (nvidia-smi report: 32607 MiB)"),
                 ("pcie", "spheron.network/blog/nvidia-rtx-5090-specs ('PCIe Generation Gen 5 x16')"),
                 ("memory_bandwidth", f"spheron.network/blog/nvidia-rtx-5090-specs; {NANOCHAT} (1.79e12)"),
                 # public torch runs exceed it (234-240 TFLOP/s bf16 at 8192^2: github.com/zzc0721/
                 # torch-performance-test-data issues 96, 124): a floor under it is conservative, never unfair
                 ("dense_tflops", f"{NANOCHAT} (bf16, fp32 accumulate)"),
                 ("healthy_tflops", "github.com/zzc0721/torch-performance-test-data issues 96, 124 (torch bf16 "
                                    "matmul at 8192: 234-240 TFLOP/s; the lower end)"))),
    # memory: no public nvidia-smi capture of an A6000 was found (the one seen is of unclear provenance)
    GpuClass("NVIDIA RTX A6000", "RTX A6000", 49140, 48, ecc=True, aliases=("A6000",), pcie_gen=4, pcie_width=16,
             memory_bandwidth_gbps=768, dense_tflops=154.8, power_w=300, compute_capability=(8, 6), cuda_cores=10752,
             fp32_tflops=38.7, sources=(
                 ("compute_capability", CUDA_GPUS),
                 ("cuda_cores", "sysrqmts.com/gpus/compare/nvidia-rtx-a6000-vs-nvidia-tesla-p40 (10752 shading units)"),
                 ("fp32_tflops", "sysrqmts.com/gpus/compare/nvidia-rtx-a6000-vs-nvidia-tesla-p40 (FP32 38.71)"),
                 ("power", "servethehome.com/nvidia-rtx-a6000-48gb-gpu-drops-quadro-designation"),
                 ("pcie", "servethehome.com/nvidia-rtx-a6000-48gb-gpu-drops-quadro-designation (PCIe 4.0 x16)"),
                 ("memory_bandwidth", "servethehome.com/nvidia-rtx-a6000-48gb-gpu-drops-quadro-designation"),
                 ("dense_tflops", "llmperf.net/categories/gpu/Nvidia-A6000-GPUs (FP16/BF16 dense, citing Microway)"))),
    GpuClass("NVIDIA L40S", "L40S", 46068, 48, ecc=True, pcie_gen=4, pcie_width=16,
             memory_bandwidth_gbps=864, dense_tflops=362.05, power_w=350, compute_capability=(8, 9), cuda_cores=18176,
             fp32_tflops=91.6, sm_max_mhz=2520, sources=(
                 ("compute_capability", CUDA_GPUS),
                 ("cuda_cores", "mullet.se/product.html?product_id=355414 (L40S datasheet table: 18,176)"),
                 ("fp32_tflops", "mullet.se/product.html?product_id=355414 (L40S datasheet table: FP32 91.6)"),
                 ("sm_max_mhz", f"{UKO} (L40S: clocks.max.sm 2520 MHz)"),
                 ("power", f"{K8S}/qx-l40s.xml and {UKO} (power.default_limit 350.00 W)"),
                 ("memory", f"{K8S}/qx-l40s.xml and {UKO} (46068 MiB)"),
                 ("pcie", f"{K8S}/qx-l40s.xml and {UKO} (max_link_gen 4, max width 16x)"),
                 ("memory_bandwidth", f"mullet.se/product.html?product_id=355414 (L40S datasheet table); {MLE}"),
                 ("dense_tflops", f"mullet.se/product.html?product_id=355414 (362.05 dense, 733 sparse); {MLE}; "
                                  f"{TORCHTITAN}"))),
    GpuClass("NVIDIA A100-SXM4-80GB", "A100 SXM4", 81920, 80, ecc=True, aliases=("A100",), pcie_gen=4,
             pcie_width=16, memory_bandwidth_gbps=2039, dense_tflops=312, power_w=400, compute_capability=(8, 0),
             cuda_cores=6912, fp32_tflops=19.5, healthy_tflops=271.2, sources=(
                 ("healthy_tflops", f"{MAMF}: A100 SXM 271.2"),
                 ("compute_capability", CUDA_GPUS),
                 ("cuda_cores", "notes.haroldbenoit.com/ML/Engineering/GPUs/Hardware (A100-80GB: 6912 CUDA cores)"),
                 ("fp32_tflops", "glennklockwood.com/garden/processors/A100 (FP32 19.5, citing NVIDIA's A100 "
                                 "datasheet)"),
                 ("power", f"{MLE} (power table)"),
                 ("memory", "github.com/modal-labs/modal-client/pull/2797 (nvidia-smi total of an A100 80GB: "
                            "81920 MiB)"),
                 ("pcie", f"techpowerup.com A100 SXM4 80 GB page (PCIe 4.0 x16); {K8S}/qx-a100.xml (SXM4, Gen4, 16x)"),
                 ("memory_bandwidth", "thundercompute.com/blog/nvidia-a100-specs-full-guide; "
                                      "glennklockwood.com/garden/processors/A100"),
                 ("dense_tflops", f"{MLE}; {TORCHTITAN}"))),
    GpuClass("NVIDIA A100 80GB PCIe", "A100 PCIe", 81920, 80, ecc=True, pcie_gen=4, pcie_width=16,
             memory_bandwidth_gbps=1935, dense_tflops=312, power_w=300, compute_capability=(8, 0),
             healthy_tflops=252.9, sources=(
                 ("healthy_tflops", f"{MAMF}: A100 PCIe 252.9"),
                 ("compute_capability", CUDA_GPUS),
                 ("power", "thundercompute.com/blog/nvidia-a100-specs-full-guide (nvplay.ru says 250 W)"),
                 ("memory", "github.com/modal-labs/modal-client/pull/2797 ('A100 80GB': 81920 MiB, form factor "
                            "unstated)"),
                 ("pcie", "thundercompute.com/blog/nvidia-a100-specs-full-guide (PCIe Gen4 x16)"),
                 ("memory_bandwidth", "thundercompute.com/blog/nvidia-a100-specs-full-guide"),
                 ("dense_tflops", MLE))),
    GpuClass("NVIDIA H100 80GB HBM3", "H100 SXM", 81559, 80, ecc=True, aliases=("H100",), pcie_gen=5, pcie_width=16,
             memory_bandwidth_gbps=3350, dense_tflops=989, power_w=700, compute_capability=(9, 0), cuda_cores=16896,
             fp32_tflops=66.9, sm_max_mhz=1980, healthy_tflops=794.5, healthy_memory_gbps=2959, nvlinks=18,
             nvlink_p2p_gbps=376, sources=(
                 ("nvlinks", NVLINK4_LINKS),
                 ("nvlink_p2p", NVLINK4_P2P),
                 ("healthy_tflops", f"{MAMF}: H100 SXM 794.5"),
                 ("healthy_memory_gbps", "github.com/NVIDIA/cuda-samples/issues/392 (H100 SXM device-to-device "
                                         "2959 GB/s)"),
                 ("compute_capability", CUDA_GPUS),
                 ("cuda_cores", "glennklockwood.com/garden/processors/h100 (H100 SXM5: 16,896 FP32 cores)"),
                 ("fp32_tflops", "glennklockwood.com/garden/processors/h100 (FP32 66.9)"),
                 ("sm_max_mhz", f"{UKO}/linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.txt (1980 MHz)"),
                 ("power", f"{UKO}/linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.txt (power.default_limit 700.00 W)"),
                 ("memory", f"{K8S}/qx-h100.xml and {UKO} (81559 MiB)"),
                 ("pcie", f"{K8S}/qx-h100.xml and {UKO} (max_link_gen 5, max width 16x)"),
                 ("memory_bandwidth", MLE),
                 ("dense_tflops", f"{MLE}; {TORCHTITAN}"))),
    # the product brief says "PCI Express Gen5 card" without a width: no width expectation; memory: no public
    # nvidia-smi capture of an H100 PCIe was found (the SXM's figure)
    GpuClass("NVIDIA H100 PCIe", "H100 PCIe", 81559, 80, ecc=True, pcie_gen=5, memory_bandwidth_gbps=2000,
             dense_tflops=756, power_w=350, compute_capability=(9, 0), sources=(
                 ("compute_capability", CUDA_GPUS),
                 ("power", "NVIDIA H100 PCIe product brief PB-11133 (350 W max TDP)"),
                 ("pcie", "NVIDIA H100 PCIe product brief PB-11133 ('PCI Express Gen5 card')"),
                 ("memory_bandwidth", f"{MLE} ('2.00 TBps'); product brief PB-11133"),
                 ("dense_tflops", f"{MLE}; {TORCHTITAN}"))),
    GpuClass("NVIDIA H200", "H200", 143771, 141, ecc=True, pcie_gen=5, pcie_width=16, memory_bandwidth_gbps=4800,
             dense_tflops=989, power_w=700, compute_capability=(9, 0), sm_max_mhz=1980, healthy_tflops=783.8,
             healthy_memory_gbps=4222.3, healthy_host_copy_gbps=55.0, nvlinks=18, nvlink_p2p_gbps=376, sources=(
                 ("nvlinks", NVLINK4_LINKS),
                 ("nvlink_p2p", f"{NVLINK4_P2P} (the H200's NVLink 4 is the H100's)"),
                 ("healthy_tflops", f"{REAL_H200}: bf16 8192^3, mean of 10 after 3 warm-ups, CUDA events"),
                 ("healthy_memory_gbps", f"{REAL_H200}: device copy of 512 MiB (4058-4212 GB/s carefully)"),
                 ("healthy_host_copy", f"{REAL_H200}: pinned host<->device copies of 256 MiB, Gen5 x16"),
                 ("compute_capability", CUDA_GPUS),
                 ("sm_max_mhz", f"{UKO}/linux-x86_64__nvidia-h200__590.48.01.txt (1980 MHz)"),
                 ("power", f"{UKO}/linux-x86_64__nvidia-h200__590.48.01.txt (power.default_limit 700.00 W)"),
                 ("memory", f"{UKO}/linux-x86_64__nvidia-h200__590.48.01.txt (FB Memory Usage Total 143771 MiB)"),
                 ("pcie", f"{UKO}/linux-x86_64__nvidia-h200__590.48.01.txt (max gen 5, max width 16x)"),
                 ("memory_bandwidth", MLE),
                 ("dense_tflops", f"{MLE}; {TORCHTITAN}"))),
    # Turing: no bf16 tensor cores (a bf16 matmul runs at ~5 TFLOP/s there: github.com/zzc0721/
    # torch-performance-test-data issues 98, 127), so its figure is for fp16
    GpuClass("Tesla T4", "T4", 15360, 16, ecc=True, pcie_gen=3, pcie_width=16, memory_bandwidth_gbps=320,
             dense_tflops=65.13, bf16=False, power_w=70, compute_capability=(7, 5), sources=(
                 ("compute_capability", CUDA_GPUS),
                 ("power", f"{K8S}/qx-t4.xml (default_power_limit 70.00 W)"),
                 ("memory", f"{K8S}/qx-t4.xml (15360 MiB); github.com/modal-labs/modal-client/pull/2797"),
                 ("pcie", f"{K8S}/qx-t4.xml (max_link_gen 3, max width 16x)"),
                 ("memory_bandwidth", "sysrqmts.com/gpus/compare/nvidia-tesla-t4-vs-nvidia-tesla-v100-sxm3-32-gb"),
                 ("dense_tflops", "hmc-tech.com/gpu/nvidia-t4-vs-nvidia-v100-sxm (FP16 tensor, fp32 accumulate)"))),
)
_BY_NAME: Final = {g.name: g for g in GPU_CLASSES}
_BY_ORDER_NAME: Final = {n.lower(): g for g in GPU_CLASSES for n in g.order_names}

#: nvidia-smi name -> memory.total in MiB (the view the health rules read).
GPU_MEMORY_MIB: Final[dict[str, int]] = {g.name: g.memory_mib for g in GPU_CLASSES}
#: Order name (lower case) -> the nvidia-smi name.
ORDER_NAMES: Final[dict[str, str]] = {order: g.name for order, g in _BY_ORDER_NAME.items()}


@final
@dataclass(frozen=True, slots=True)
class HostLink:
    """What pinned host<->device copies reach, per direction, over a healthy x16 link of one PCIe generation."""

    gen: int
    copy_gbps: float
    source: str


#: Published pinned-copy figures of healthy x16 links (scaled by width for narrower classes). Azure's node health
#: checks fail a host below 10 / 23-24 / 52 GB/s on Gen3 / Gen4 / Gen5 (github.com/Azure/azurehpc-health-checks
#: conf/nd40rs_v2.conf, nc24ads_a100_v4.conf, nd96asr_v4.conf, nd96isr_h100_v5.conf: check_gpu_bw / check_cuda_bw).
HOST_LINKS: Final[Mapping[int, HostLink]] = {
    3: HostLink(3, 12.15, "github.com/mpicbg-scicomp/gearshifft/pull/82 (P100 bandwidthTest, H2D 12.15, "
                          "D2H 12.89 GB/s on the GPU's NUMA node)"),
    4: HostLink(4, 25.13, "github.com/NVIDIA/nvbandwidth/issues/42 (A100-SXM4-40GB host_to_device 25.13 GB/s "
                          "at 0.5-1 GiB)"),
    5: HostLink(5, 52.0, "github.com/Azure/azurehpc-health-checks conf/nd96isr_h100_v5.conf (check_cuda_bw 52: "
                         "the H2D/D2H copy-engine minimum of a healthy H100 host); github.com/NVIDIA/nvbandwidth/"
                         "issues/24 (H100 D2H 52.8 GB/s)"),
}


def by_name(name: str) -> GpuClass | None:
    """The class an nvidia-smi name belongs to."""
    return _BY_NAME.get(name)


def ordered(name: str) -> GpuClass | None:
    """The class of what was ordered: an nvidia-smi name, or an order name in any case ("rtx 4090")."""
    text = name.strip()
    return _BY_NAME.get(text) or _BY_ORDER_NAME.get(text.lower())


def nvidia_smi_name(name: str) -> str:
    """The nvidia-smi name of what was ordered ("RTX 4090" -> "NVIDIA GeForce RTX 4090"); unknown names as given."""
    found = ordered(name)
    return found.name if found is not None else name.strip()


def host_copy_gbps(gpu: GpuClass) -> tuple[float, str] | None:
    """What pinned host<->device copies of this class should reach per direction, and its source (None where the
    class's link or its generation's figure is unknown)."""
    if gpu.healthy_host_copy_gbps is not None:
        return gpu.healthy_host_copy_gbps, gpu.source("healthy_host_copy") or ""
    link = HOST_LINKS.get(gpu.pcie_gen) if gpu.pcie_gen is not None else None
    if link is None or gpu.pcie_width is None:
        return None
    return link.copy_gbps * gpu.pcie_width / 16, link.source


def peer_copy_gbps(gpu: GpuClass) -> tuple[float, str, str] | None:
    """What a healthy peer copy between two GPUs of this class reaches one way, its source, and over what ("NVLink" or
    "PCIe"); None where neither is known."""
    if gpu.nvlink_p2p_gbps is not None:
        return gpu.nvlink_p2p_gbps, gpu.source("nvlink_p2p") or "", "NVLink"
    link = HOST_LINKS.get(gpu.pcie_gen) if gpu.pcie_gen is not None else None
    if link is None or gpu.pcie_width is None:
        return None
    return link.copy_gbps * gpu.pcie_width / 16, f"{PCIE_PEER_SOURCE}; {link.source}", "PCIe"
