"""How a simulated pod's GPUs are joined, as nvidia-smi prints it (`topo -m`, `nvlink --status`) and as torch's peer
copies meet it: every pair of an SXM class over its NVLinks (an 8-GPU HGX board: NV18 through NVSwitch), a PCIe
class over the host's PCIe, two NUMA nodes of four GPUs each. With the pod's faults: a GPU whose NVLinks are down
(its pairs fall back to PCIe), peer-to-peer access off (copies staged through the host), one GPU on a degraded link.
Figures: the class table's (gpu.classes), at the fractions healthy cards reach."""

from __future__ import annotations

from typing import Final

from gpuharness.gpu import classes
from gpuharness.sim.gpu_figures import GpuBehaviour, SimFigures

#: A healthy peer copy reaches 0.99 of its class's figure; one staged through the host (peer access off) 0.7 of the
#: slower host copy (github.com/NVIDIA/nccl/issues/1264: 36-38 GB/s on an HGX H100 whose host copies reach ~52).
HEALTHY_PEER: Final = 0.99
STAGED: Final = 0.7
#: NVLink 4's speed per link as `nvlink --status` prints it (26.562 GB/s a link, 18 links: 478 GB/s a direction).
LINK_GBPS: Final = 26.562
_LEGEND: Final = """
Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing at most a single PCIe bridge
  NV#  = Connection traversing a bonded set of # NVLinks
"""


def _numa(index: int, count: int) -> int:
    return 0 if count <= 1 or index < (count + 1) // 2 else 1


def connection(gpu: str, count: int, behaviour: GpuBehaviour, a: int, b: int) -> str:
    """The connection of GPUs `a` and `b` as `topo -m` names it."""
    known = classes.by_name(gpu)
    if a == b:
        return "X"
    if known is not None and known.nvlinks and a not in behaviour.nvlink_down and b not in behaviour.nvlink_down:
        return f"NV{known.nvlinks}"
    return "NODE" if _numa(a, count) == _numa(b, count) else "SYS"


def topo_text(gpu: str, count: int, behaviour: GpuBehaviour) -> str:
    """`nvidia-smi topo -m` of the pod (its header underlined, as the real one is)."""
    cores = 56
    head = "\t" + "\t".join(f"GPU{i}" for i in range(count)) + "\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID"
    lines = [f"\x1b[4m{head}\x1b[0m"]
    for a in range(count):
        node = _numa(a, count)
        cells = [f" {connection(gpu, count, behaviour, a, b)} " if a == b else connection(gpu, count, behaviour, a, b)
                 for b in range(count)]
        cpus = f"{node * cores}-{node * cores + cores - 1},{(node + 2) * cores}-{(node + 2) * cores + cores - 1}"
        lines.append(f"GPU{a}\t" + "\t".join(cells) + f"\t{cpus}\t{node}\t\tN/A")
    return "\n".join(lines) + "\n" + _LEGEND


def nvlink_text(gpu: str, count: int, behaviour: GpuBehaviour, uuids: list[str]) -> str:
    """`nvidia-smi nvlink --status`: each GPU's links at their speed, or <inactive> where they are down."""
    known = classes.by_name(gpu)
    links = known.nvlinks if known is not None and known.nvlinks else 0
    out: list[str] = []
    for index in range(count):
        out.append(f"GPU {index}: {gpu} (UUID: {uuids[index] if index < len(uuids) else 'GPU-unknown'})")
        state = "<inactive>" if index in behaviour.nvlink_down else f"{LINK_GBPS} GB/s"
        out += [f"\t Link {link}: {state}" for link in range(links)]
    return "\n".join(out) + "\n"


def peers(gpu: str, count: int, behaviour: GpuBehaviour, cards: list[SimFigures]) -> dict[str, dict[str, object]]:
    """What torch's peer copies meet for each pair "a-b": whether peer access is on, and the rate one way."""
    known = classes.by_name(gpu)
    found: dict[str, dict[str, object]] = {}
    for a in range(count):
        for b in range(a + 1, count):
            pcie = min(cards[a].h2d_gbps, cards[b].h2d_gbps, cards[a].d2h_gbps, cards[b].d2h_gbps)
            if behaviour.p2p_off:
                found[f"{a}-{b}"] = {"access": False, "gbps": round(pcie * STAGED, 2)}
            elif connection(gpu, count, behaviour, a, b).startswith("NV") and known is not None \
                    and known.nvlink_p2p_gbps:
                found[f"{a}-{b}"] = {"access": True, "gbps": round(known.nvlink_p2p_gbps * HEALTHY_PEER, 2)}
            else:
                found[f"{a}-{b}"] = {"access": True, "gbps": round(pcie, 2)}
    return found
