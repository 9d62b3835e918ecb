"""The simulator's GPU catalog: what each simulated provider rents, under its own names, at what price."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, final

from gpuharness.gpu.classes import GpuClass, by_name


def _gpu(name: str) -> GpuClass:
    found = by_name(name)
    if found is None:
        raise KeyError(f"{name} is not in gpuharness.gpu.classes")
    return found


@final
@dataclass(frozen=True, slots=True)
class CatalogGpu:
    """One GPU class as each provider names and prices it (None: that provider does not rent it)."""

    gpu: GpuClass
    runpod_secure: float | None
    runpod_community: float | None
    vast_prices: tuple[float, ...]
    massed_product: str | None
    massed_price: float | None

    @property
    def runpod_id(self) -> str:
        """RunPod's gpu type id: the nvidia-smi name."""
        return self.gpu.name

    @property
    def display(self) -> str:
        """The short name (RunPod displayName, Vast gpu_name)."""
        return self.gpu.short

    @property
    def vram_gb(self) -> int:
        return self.gpu.memory_gb


CATALOG: tuple[CatalogGpu, ...] = (
    CatalogGpu(_gpu("NVIDIA GeForce RTX 4090"), 0.69, 0.34, (0.35, 0.42), None, None),
    CatalogGpu(_gpu("NVIDIA GeForce RTX 5090"), 0.94, 0.69, (0.61,), None, None),
    CatalogGpu(_gpu("NVIDIA RTX A6000"), 0.76, 0.49, (0.45,), "gpu_1x_a6000", 0.57),
    CatalogGpu(_gpu("NVIDIA L40S"), 0.86, 0.79, (0.70,), "gpu_1x_l40s", 0.99),
    CatalogGpu(_gpu("NVIDIA A100-SXM4-80GB"), 1.89, 1.19, (1.05,), "gpu_1x_a100_80gb", 1.49),
    CatalogGpu(_gpu("NVIDIA H100 80GB HBM3"), 2.99, 2.69, (1.90, 2.10), "gpu_1x_h100", 2.49),
)
#: The card of a simulated host, runtime or provider instance made without one: the catalog's first row.
DEFAULT_GPU: Final[GpuClass] = CATALOG[0].gpu

#: Massed Compute VM images (GET /images).
MASSED_IMAGES: tuple[tuple[int, str], ...] = (
    (7, "Ubuntu Server 22.04 w/ drivers"),
    (12, "ComfyUI"),
    (15, "vLLM"),
)


def by_runpod_id(gpu_id: str) -> CatalogGpu | None:
    """The catalog row for a RunPod gpu type id."""
    return next((g for g in CATALOG if g.runpod_id == gpu_id), None)


def by_display(name: str) -> CatalogGpu | None:
    """The catalog row for a Vast-style short name ("RTX 4090")."""
    return next((g for g in CATALOG if g.display == name), None)


def by_massed_product(product: str) -> tuple[CatalogGpu, int] | None:
    """The catalog row and GPU count of a Massed product name (gpu_<N>x_<model>)."""
    for gpu in CATALOG:
        if gpu.massed_product is None:
            continue
        base = gpu.massed_product.split("_", 2)[2]
        for count in (1, 2, 4, 8):
            if product == f"gpu_{count}x_{base}":
                return gpu, count
    return None
