"""Round trips of the health suite against simulated hosts with injected SSH latency.

1. One target, 50 ms SSH latency: our batched probe (one connection, one exec, every check reads the cached
   result) against a per-assertion baseline that, like Testinfra, sends one exec per check over one
   connection. Prints connections and execs per target and the wall-time ratio; then, apart, the probe with the
   GPU measurement a policy may ask for (`performance_floor.measure`): one more exec on the same connection.
2. The real suite (`pytest checks/health -n 2`) over 50 simulated targets against one target: wall-time
   ratio, and connections/execs per target counted by the simulated hosts; then the 50 targets again with the
   policy asking for the measurement (its exec counted apart from the probe's).

Run: python bench/health_roundtrips.py [--targets 50] [--latency-ms 50]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from health_world import MODEL, WORKFLOW, HealthWorld  # noqa: E402

from gpuharness import probe  # noqa: E402
from gpuharness.core.deployment import Deployment  # noqa: E402
from gpuharness.core.policy import Policy  # noqa: E402
from gpuharness.gpu.performance import PerformanceFloor  # noqa: E402
from gpuharness.health import rules  # noqa: E402
from gpuharness.probe import measuring  # noqa: E402
from gpuharness.remote.connect import HostRoute, open_remote  # noqa: E402
from gpuharness.sim.host import HostSpec, SimHost  # noqa: E402

#: the deployment the verdicts judge against: one RTX 4090 ordered
ORDERED = Deployment(id="bench", provider="vast", status="health-checking", cost_hr=0.0, created_at="",
                     gpu="RTX 4090", gpu_count=1)
Q = "nvidia-smi --format=csv,noheader,nounits --query-gpu="
#: One remote command per assertion, the Testinfra way (each is its own exec round trip).
BASELINE_COMMANDS = (
    ("gpu count", "nvidia-smi --query-gpu=index --format=csv,noheader | wc -l"),
    ("gpu name", Q + "name"),
    ("gpu memory", Q + "memory.total"),
    ("driver", Q + "driver_version"),
    ("cuda", "nvidia-smi | grep 'CUDA Version'"),
    ("ecc", Q + "ecc.errors.uncorrected.volatile.total"),
    ("throttle", Q + "clocks_event_reasons.active"),
    ("temperature", Q + "temperature.gpu"),
    ("pcie, power, clocks", Q + "pcie.link.gen.max,pcie.link.width.max,enforced.power.limit,power.default_limit,"
                                "clocks.max.sm"),
    ("compute apps", "nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader"),
    ("disk", "df -Pk /workspace /"),
    ("process", "ps -eo pid=,args="),
    ("port", "ss -Hltn"),
    ("log tail", "tail -n 200 {log}"),
    ("torch", "python3 -c 'import torch'"),
)


def route_for(host: SimHost) -> HostRoute:
    block = host.ssh_block()
    return HostRoute(target="bench", host=block["host"], port=block["port"], user="root", key_file=block["key_file"],
                 known_hosts=block["known_hosts"])


def batched(host: SimHost) -> float:
    started = time.perf_counter()
    remote = open_remote(route_for(host))
    targets = probe.ProbeTargets(workspace=str(host.workspace), process_pattern="main.py",
                                 service_port=host.service_port, log_path=str(host.log_path))
    _, facts = probe.run(remote, targets, deadline_s=60)
    remote.close()
    verdicts = [rules.gpu_matches_order(facts, ORDERED), rules.driver_and_cuda(facts, "550", "12.4"),
                rules.no_uncorrected_ecc(facts), rules.no_harmful_throttling(facts), rules.temperature_under(facts, 85),
                rules.no_foreign_compute(facts), rules.disk_has_room(facts, str(host.workspace), 7 * 2**30, 10),
                rules.service_up(facts, "main.py", host.service_port), rules.log_tail_clean(facts, None),
                rules.cuda_smoke(facts), rules.gpu_performs_like_its_class(facts, None, PerformanceFloor())[0]]
    assert all(v.ok for v in verdicts), [v.message for v in verdicts if not v.ok]
    return time.perf_counter() - started


def batched_and_measured(host: SimHost) -> float:
    """The probe, then the GPU measurement on the same connection (a policy with performance_floor.measure)."""
    started = time.perf_counter()
    remote = open_remote(route_for(host))
    targets = probe.ProbeTargets(workspace=str(host.workspace), process_pattern="main.py",
                                 service_port=host.service_port, log_path=str(host.log_path))
    _, facts = probe.run(remote, targets, deadline_s=60)
    record = measuring.take(remote, ORDERED, Policy({"performance_floor": {"measure": True}}),
                            facts, None)
    remote.close()
    floor = PerformanceFloor(measure=True)
    verdict = rules.gpu_performs_like_its_class(facts, record, floor)[0]
    assert verdict.ok and record is not None and record.stdout is not None, verdict.message
    return time.perf_counter() - started


def per_assertion(host: SimHost) -> float:
    started = time.perf_counter()
    remote = open_remote(route_for(host))
    for _, command in BASELINE_COMMANDS:
        remote.exec(command.format(log=host.log_path) + "\n", deadline_s=60)
    remote.close()
    return time.perf_counter() - started


def part_one(latency_s: float, rounds: int) -> None:
    print(f"== 1. one target, {latency_s * 1000:.0f} ms injected SSH latency, {rounds} rounds each")
    for name, method in (("batched probe (ours)", batched), ("per-assertion baseline", per_assertion)):
        with SimHost(replace(HostSpec(), latency_s=latency_s), name="bench") as host:
            times = [method(host) for _ in range(rounds)]
            per_target = {k: v / rounds for k, v in host.stats.items()}
        best = min(times)
        print(f"{name:26s} connections/target={per_target['ssh_connections']:.0f} "
              f"execs/target={per_target['ssh_execs']:.0f} wall(best)={best * 1000:.0f} ms")
        if name.startswith("batched"):
            ours = best
        else:
            baseline = best
    print(f"wall-time ratio baseline/ours = {baseline / ours:.1f}x  (checks covered: {len(BASELINE_COMMANDS)})")
    with SimHost(replace(HostSpec(), latency_s=latency_s), name="bench") as host:
        times = [batched_and_measured(host) for _ in range(rounds)]
        per_target = {k: v / rounds for k, v in host.stats.items()}
    print(f"{'probe + GPU measurement':26s} connections/target={per_target['ssh_connections']:.0f} "
          f"execs/target={per_target['ssh_execs']:.0f} (probe 1 + measurement {per_target['ssh_execs'] - 1:.0f}) "
          f"wall(best)={min(times) * 1000:.0f} ms, {min(times) / ours:.1f}x the probe alone")


def run_suite(world: HealthWorld, workdir: Path, workers: int) -> float:
    started = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "pytest", str(ROOT / "checks" / "health"), "-q",
                             "-p", "no:cacheprovider", "--registry", str(world.registry.root), "--gpu-mode", "live",
                             "-n", str(workers), "--junitxml", str(workdir / "r.xml")],
                            capture_output=True, text=True, cwd=workdir)
    elapsed = time.perf_counter() - started
    if result.returncode != 0:
        print(result.stdout[-3000:], result.stderr[-2000:])
        raise SystemExit("the health suite failed on healthy simulated hosts")
    return elapsed


def suite_over(count: int, latency_s: float, workers: int, *, measure: bool) -> float:
    """The real suite over `count` simulated targets; prints what the hosts counted. measure: the policy asks for
    the GPU measurement, whose exec is counted apart from the probe's."""
    root = Path(tempfile.mkdtemp(prefix=f"gh-bench-{count}-"))
    world = HealthWorld(root)
    try:
        if measure:
            with world.registry.update("policy.json") as doc:
                doc["performance_floor"] = {"measure": True}
        for index in range(count):
            world.add(f"dep_{index:03d}", replace(HostSpec(), latency_s=latency_s))
        wall = run_suite(world, root, workers)
        stats = [host.stats for host in world.hosts.values()]
        ready = sum(1 for d in world.registry.deployments() if d.status == "ready")
        execs = max(s["ssh_execs"] for s in stats)
        split = f" (probe 1 + measurement {execs - 1})" if measure else ""
        print(f"{count:3d} target(s){' measured' if measure else ''}: wall={wall:.2f} s ready={ready}/{count} "
              f"connections/target max={max(s['ssh_connections'] for s in stats)} execs/target max={execs}{split}")
        return wall
    finally:
        world.close()
        shutil.rmtree(root, ignore_errors=True)


def part_two(targets: int, latency_s: float, workers: int) -> None:
    print(f"== 2. pytest checks/health -n {workers}: {targets} simulated targets vs 1 "
          f"({latency_s * 1000:.0f} ms latency)")
    walls = {count: suite_over(count, latency_s, workers, measure=False) for count in (1, targets)}
    print(f"wall-time ratio {targets} targets / 1 target = {walls[targets] / walls[1]:.2f}x "
          f"(per target: {walls[targets] / targets:.3f} s vs {walls[1]:.2f} s)")
    measured = suite_over(targets, latency_s, workers, measure=True)
    print(f"with the GPU measurement: {measured / walls[targets]:.2f}x the wall time of the probe alone")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", type=int, default=50)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    assert MODEL and WORKFLOW
    part_one(args.latency_ms / 1000, args.rounds)
    part_two(args.targets, args.latency_ms / 1000, args.workers)


if __name__ == "__main__":
    main()
