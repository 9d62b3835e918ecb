"""The measured figures of past deployments, compared within each GPU class and provider, GPU by GPU, so that a bad
host, or a bad GPU of a pod, stands out. They come from each deployment's health evidence (`gpu.performance`,
written by the ready gate); a deployment without figures is listed as not measured, never guessed."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, final

from gpuharness.core.deployment import Deployment
from gpuharness.core.json_fields import JsonFields
from gpuharness.gpu import classes

#: The figures compared, in the order they are shown: (key, heading).
FIGURES: Final[tuple[tuple[str, str], ...]] = (
    ("matmul_tflops", "matmul TFLOP/s"), ("device_copy_gbps", "device copy GB/s"), ("h2d_gbps", "H2D GB/s"),
    ("d2h_gbps", "D2H GB/s"), ("pcie_width", "link width"), ("pcie_gen", "link gen"), ("peer_copy_gbps", "peer GB/s"),
)
#: A deployment whose figure is below this fraction of its peers' median stands out.
STANDS_OUT: Final = 0.8


@final
@dataclass(frozen=True, slots=True)
class HostFigures(JsonFields):
    """One GPU's recorded figures (`deployment` names the GPU where the deployment has several: "dep GPU 3"); its
    peer figure is the median of the copies of the pairs it is part of."""

    deployment: str
    status: str
    measured_at: str | None
    figures: Mapping[str, float]
    shortfalls: tuple[str, ...] = ()  # what its own health check found short against the class


@final
@dataclass(frozen=True, slots=True)
class Peers:
    """The deployments of one GPU class at one provider, with the median of each figure, and those that stand out:
    below STANDS_OUT of the median of the others."""

    gpu: str
    provider: str
    hosts: tuple[HostFigures, ...]
    not_measured: tuple[str, ...] = ()
    medians: Mapping[str, float] = field(default_factory=dict)
    stand_out: tuple[tuple[str, str, float, float], ...] = ()  # (deployment, figure, value, median of the others)

    def to_json(self) -> dict[str, Any]:
        return {"gpu": self.gpu, "provider": self.provider, "hosts": [h.to_json() for h in self.hosts],
                "not_measured": list(self.not_measured), "medians": dict(self.medians),
                "stand_out": [{"deployment": d, "figure": f, "value": v, "median": m}
                              for d, f, v, m in self.stand_out]}


def _gpu_figures(evidence: Mapping[str, Any]) -> dict[int, tuple[dict[str, float], list[str]]]:
    """GPU index -> (figure -> value, the figures found short), from the evidence's figures."""
    found: dict[int, tuple[dict[str, float], list[str]]] = {}
    pairs: dict[int, list[float]] = {}
    for figure in evidence.get("figures") or ():
        if not isinstance(figure, Mapping):
            continue
        key, value, gpu = figure.get("figure"), figure.get("measured"), figure.get("gpu")
        if key not in dict(FIGURES) or not isinstance(value, int | float) or isinstance(value, bool):
            continue
        ends = figure.get("pair") if key == "peer_copy_gbps" else [gpu]
        for end in ends if isinstance(ends, list) else []:
            index = end if isinstance(end, int) else 0
            values, short = found.setdefault(index, ({}, []))
            if key == "peer_copy_gbps":
                pairs.setdefault(index, []).append(float(value))
            else:
                values[str(key)] = min(float(value), values.get(str(key), float("inf")))
            if figure.get("short") and key not in short:
                short.append(str(key))
    for index, rates in pairs.items():
        found[index][0]["peer_copy_gbps"] = statistics.median(rates)
    return found


def host_figures(deployment: Deployment) -> list[HostFigures]:
    """The figures a deployment's health evidence recorded, one row per GPU (empty: none recorded)."""
    evidence = (deployment.health or {}).get("performance")
    if not isinstance(evidence, Mapping):
        return []
    per_gpu = {index: found for index, found in _gpu_figures(evidence).items() if found[0]}
    rows = []
    for index, (values, short) in sorted(per_gpu.items()):
        name = deployment.id if len(per_gpu) == 1 else f"{deployment.id} GPU {index}"
        rows.append(HostFigures(name, deployment.status, evidence.get("measured_at"), values, tuple(short)))
    return rows


def compare(deployments: Iterable[Deployment], *, gpu: str | None = None,
            provider: str | None = None) -> list[Peers]:
    """Every (GPU class, provider) with its deployments' figures, optionally only one class or provider."""
    groups: dict[tuple[str, str], list[Deployment]] = {}
    want_gpu = classes.nvidia_smi_name(gpu) if gpu else None
    for deployment in deployments:
        if not deployment.gpu or deployment.is_serverless:
            continue
        name = classes.nvidia_smi_name(deployment.gpu)
        if (want_gpu and name != want_gpu) or (provider and deployment.provider != provider):
            continue
        groups.setdefault((name, deployment.provider), []).append(deployment)
    return [_peers(name, where, members) for (name, where), members in sorted(groups.items())]


def _peers(gpu: str, provider: str, members: list[Deployment]) -> Peers:
    hosts: list[HostFigures] = []
    not_measured: list[str] = []
    for deployment in members:
        rows = host_figures(deployment)
        if not rows:
            not_measured.append(deployment.id)
        hosts += rows
    medians = {key: statistics.median(h.figures[key] for h in hosts if key in h.figures)
               for key, _ in FIGURES if any(key in h.figures for h in hosts)}
    stand_out: list[tuple[str, str, float, float]] = []
    for host in hosts:
        for key, _ in FIGURES:
            others = [h.figures[key] for h in hosts if h is not host and key in h.figures]
            if key in host.figures and others and host.figures[key] < STANDS_OUT * statistics.median(others):
                stand_out.append((host.deployment, key, host.figures[key], statistics.median(others)))
    return Peers(gpu, provider, tuple(hosts), tuple(not_measured), medians, tuple(stand_out))


def text(groups: list[Peers]) -> str:
    """The comparison as a table per class and provider, then the hosts that stand out."""
    if not groups:
        return "no deployments with a GPU in the registry"
    lines: list[str] = []
    for group in groups:
        known = classes.by_name(group.gpu)
        short = known.short if known is not None else group.gpu
        lines.append(f"{short} at {group.provider}: {len(group.hosts)} measured, {len(group.not_measured)} not")
        heads = [h for key, h in FIGURES if key in group.medians]
        lines.append("  " + f"{'deployment':<22}{'status':<16}" + "".join(f"{h:>18}" for h in heads))
        keys = [key for key, _ in FIGURES if key in group.medians]
        flagged = {(d, f) for d, f, _, _ in group.stand_out}
        for host in group.hosts:
            cells = [(f"{host.figures[k]:g}" + (" !" if (host.deployment, k) in flagged else "")) if k in host.figures
                     else "-" for k in keys]
            lines.append("  " + f"{host.deployment:<22}{host.status:<16}" + "".join(f"{c:>18}" for c in cells))
        lines.append("  " + f"{'median':<38}" + "".join(f"{group.medians[k]:>18g}" for k in keys))
        if group.not_measured:
            lines.append(f"  not measured: {', '.join(group.not_measured)}")
        for deployment, key, value, median in group.stand_out:
            lines.append(f"  {deployment} stands out: {dict(FIGURES)[key]} {value:g} is {value / median:.2f} of the "
                         f"median of its peers ({median:g})")
    return "\n".join(lines)
