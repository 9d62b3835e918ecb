"""The simulator's GPU catalog: what each simulated provider rents, under its own names, at what price."""

from __future__ import annotations

from dataclasses import dataclass
from typing import final


@final
@dataclass(frozen=True, slots=True)
class CatalogGpu:
    """One GPU model as each provider names and prices it (None: that provider does not rent it)."""

    runpod_id: str
    display: str
    vram_gb: int
    runpod_secure: float | None
    runpod_community: float | None
    vast_prices: tuple[float, ...]
    massed_product: str | None
    massed_price: float | None


CATALOG: tuple[CatalogGpu, ...] = (
    CatalogGpu("NVIDIA GeForce RTX 4090", "RTX 4090", 24, 0.69, 0.34, (0.35, 0.42), None, None),
    CatalogGpu("NVIDIA GeForce RTX 5090", "RTX 5090", 32, 0.94, 0.69, (0.61,), None, None),
    CatalogGpu("NVIDIA RTX A6000", "RTX A6000", 48, 0.76, 0.49, (0.45,), "gpu_1x_a6000", 0.57),
    CatalogGpu("NVIDIA L40S", "L40S", 48, 0.86, 0.79, (0.70,), "gpu_1x_l40s", 0.99),
    CatalogGpu("NVIDIA A100-SXM4-80GB", "A100 SXM4", 80, 1.89, 1.19, (1.05,), "gpu_1x_a100_80gb", 1.49),
    CatalogGpu("NVIDIA H100 80GB HBM3", "H100 SXM", 80, 2.99, 2.69, (1.90, 2.10), "gpu_1x_h100", 2.49),
)

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
