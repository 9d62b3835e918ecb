"""How a pod's GPUs are joined: `nvidia-smi topo -m` (the connection of each GPU pair: NV# for a bonded set of
NVLinks, else the PCIe path PIX, PXB, PHB, NODE or SYS) and `nvidia-smi nvlink --status` (each GPU's links, active
with their speed or inactive). Pure parsers: text in, facts out; what nvidia-smi could not say is None."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final, final

_ANSI: Final = re.compile(r"\x1b\[[0-9;]*m")
_GPU_HEAD: Final = re.compile(r"GPU(\d+)$")
_NVLINK_GPU: Final = re.compile(r"^GPU (\d+):")
_NVLINK_LINK: Final = re.compile(r"^\s*Link (\d+):\s*(.*)$")
_SPEED: Final = re.compile(r"([\d.]+)\s*GB/s")
#: What each connection of `topo -m` means, for messages (its own legend's words).
CONNECTIONS: Final[Mapping[str, str]] = {
    "SYS": "PCIe and the interconnect between NUMA nodes", "NODE": "PCIe between host bridges of one NUMA node",
    "PHB": "PCIe through a host bridge (the CPU)", "PXB": "PCIe through several bridges", "PIX": "PCIe through at "
    "most one bridge",
}


@final
@dataclass(frozen=True, slots=True)
class Topology:
    """`nvidia-smi topo -m`: the connection of each GPU pair (by nvidia-smi index), e.g. {(0, 1): "NV18"}."""

    gpus: tuple[int, ...] = ()
    links: Mapping[tuple[int, int], str] = field(default_factory=dict)

    def between(self, a: int, b: int) -> str | None:
        """The connection of GPUs `a` and `b` (None: the matrix does not name both)."""
        return self.links.get((min(a, b), max(a, b)))

    def nvlinks(self, a: int, b: int) -> int | None:
        """How many NVLinks join `a` and `b` (0: the pair is joined by PCIe only; None: unknown)."""
        connection = self.between(a, b)
        if connection is None:
            return None
        match = re.fullmatch(r"NV(\d+)", connection)
        return int(match.group(1)) if match else 0

    def to_json(self) -> dict[str, object]:
        return {"gpus": list(self.gpus), "links": {f"{a}-{b}": c for (a, b), c in sorted(self.links.items())}}


@final
@dataclass(frozen=True, slots=True)
class NvLinkState:
    """One GPU's NVLinks as `nvidia-smi nvlink --status` lists them."""

    gpu: int
    active: int
    total: int
    gbps_per_link: float | None = None

    @property
    def inactive(self) -> int:
        return self.total - self.active


def parse_topology(text: str) -> Topology | None:
    """The GPU-to-GPU matrix of `nvidia-smi topo -m` (None: no matrix in the text: an error, or no GPU)."""
    rows = [_ANSI.sub("", line).rstrip("\n") for line in text.splitlines()]
    head = next((i for i, line in enumerate(rows) if line.split() and line.split()[0].startswith("GPU")
                 and line.startswith(("\t", " "))), None)
    if head is None:
        return None
    columns = [cell.strip() for cell in rows[head].split("\t") if cell.strip()]
    gpu_columns = [(i, int(m.group(1))) for i, cell in enumerate(columns) if (m := _GPU_HEAD.fullmatch(cell))]
    links: dict[tuple[int, int], str] = {}
    gpus: list[int] = []
    for line in rows[head + 1:]:
        cells = [cell.strip() for cell in line.split("\t")]
        match = _GPU_HEAD.fullmatch(cells[0]) if cells else None
        if match is None:
            if gpus:
                break
            continue
        gpu = int(match.group(1))
        gpus.append(gpu)
        values = cells[1:]
        for position, other in gpu_columns:
            if position < len(values) and other != gpu and values[position] not in ("", "X"):
                links[(min(gpu, other), max(gpu, other))] = values[position]
    return Topology(tuple(gpus), links) if gpus else None


def parse_nvlink_status(text: str) -> dict[int, NvLinkState]:
    """Each GPU's links from `nvidia-smi nvlink --status` ("Link 3: 26.562 GB/s", "Link 4: <inactive>"); a GPU with
    no NVLink lists none (total 0)."""
    found: dict[int, list[str]] = {}
    current: int | None = None
    for raw in text.splitlines():
        line = _ANSI.sub("", raw)
        gpu = _NVLINK_GPU.match(line)
        if gpu is not None:
            current = int(gpu.group(1))
            found[current] = []
            continue
        link = _NVLINK_LINK.match(line)
        if link is not None and current is not None:
            found[current].append(link.group(2).strip())
    return {gpu: _state(gpu, states) for gpu, states in found.items()}


def _state(gpu: int, states: Iterable[str]) -> NvLinkState:
    listed = list(states)
    speeds = [float(m.group(1)) for s in listed if (m := _SPEED.search(s)) and float(m.group(1)) > 0]
    return NvLinkState(gpu, len(speeds), len(listed), max(speeds) if speeds else None)
