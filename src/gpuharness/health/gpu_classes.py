"""GPU classes: the one table of what each GPU model is called and what it has, for the health rules, the
simulator's hosts and its provider catalog."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, final


@final
@dataclass(frozen=True, slots=True)
class GpuClass:
    """One GPU model.

    name: as nvidia-smi prints it; short: as providers list it when ordering (Vast gpu_name, RunPod
    displayName); aliases: other order names people use; memory_mib: memory.total as the driver reports it
    for the SKU (less than the marketed memory_gb where ECC reserves some); ecc: whether it has ECC memory.
    """

    name: str
    short: str
    memory_mib: int
    memory_gb: int
    ecc: bool
    aliases: tuple[str, ...] = ()

    @property
    def order_names(self) -> tuple[str, ...]:
        """Every name this class is ordered by (short name and aliases)."""
        return (self.short, *self.aliases)


GPU_CLASSES: Final[tuple[GpuClass, ...]] = (
    GpuClass("NVIDIA GeForce RTX 4090", "RTX 4090", 24564, 24, ecc=False),
    GpuClass("NVIDIA GeForce RTX 5090", "RTX 5090", 32607, 32, ecc=False),
    GpuClass("NVIDIA RTX A6000", "RTX A6000", 49140, 48, ecc=True, aliases=("A6000",)),
    GpuClass("NVIDIA L40S", "L40S", 46068, 48, ecc=True),
    GpuClass("NVIDIA A100-SXM4-80GB", "A100 SXM4", 81920, 80, ecc=True, aliases=("A100",)),
    GpuClass("NVIDIA A100 80GB PCIe", "A100 PCIe", 81920, 80, ecc=True),
    GpuClass("NVIDIA H100 80GB HBM3", "H100 SXM", 81559, 80, ecc=True, aliases=("H100",)),
    GpuClass("NVIDIA H100 PCIe", "H100 PCIe", 81559, 80, ecc=True),
    GpuClass("NVIDIA H200", "H200", 143771, 141, ecc=True),
)
_BY_NAME: Final = {g.name: g for g in GPU_CLASSES}
_BY_ORDER_NAME: Final = {n.lower(): g for g in GPU_CLASSES for n in g.order_names}

#: nvidia-smi name -> memory.total in MiB (the view the health rules read).
GPU_MEMORY_MIB: Final[dict[str, int]] = {g.name: g.memory_mib for g in GPU_CLASSES}
#: Order name (lower case) -> the nvidia-smi name.
ORDER_NAMES: Final[dict[str, str]] = {order: g.name for order, g in _BY_ORDER_NAME.items()}


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
