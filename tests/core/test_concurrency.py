"""Concurrency: real processes appending to the ledger and updating deployments.json lose nothing."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path
from typing import Any

from gpuharness.core.ledger import Ledger
from gpuharness.core.registry import Registry

WORKERS = 8
LINES_EACH = 2_000
UPDATES_EACH = 60
ADD_EVERY = 12

# fork: the workers start at once with gpuharness already imported; each is still its own process.
FORK = multiprocessing.get_context("fork")


def append_lines(path: str, worker: int, barrier: Any) -> None:
    ledger = Ledger(path)
    barrier.wait()
    for n in range(LINES_EACH):
        ledger.append({"id": f"J-w{worker}-{n:05d}", "deployment_id": f"dep_w{worker}", "status": "queued",
                       "ts": "2026-11-30T20:00:00Z", "inputs": {"prompt": f"worker {worker} line {n}"}})


def update_deployments(root: str, worker: int, barrier: Any) -> None:
    registry = Registry(root)
    dep_id = f"dep_w{worker}"
    with registry.update("deployments.json") as doc:
        doc["deployments"].append({"id": dep_id, "provider": "vast", "status": "ready", "cost_hr": 0.7,
                                   "created_at": "2026-11-30T20:00:00Z", "gpu_count": 1})
    barrier.wait()
    for n in range(1, UPDATES_EACH + 1):
        with registry.update("deployments.json") as doc:
            mine = next(d for d in doc["deployments"] if d["id"] == dep_id)
            mine["gpu_count"] += 1  # a read-modify-write: lost if another writer's save overtakes it
            if n % ADD_EVERY == 0:
                doc["deployments"].append({"id": f"{dep_id}_{n}", "provider": "vast", "status": "destroyed",
                                           "cost_hr": 0.7, "created_at": "2026-11-30T20:00:00Z"})


def run_workers(target: Any, arg: str) -> None:
    barrier = FORK.Barrier(WORKERS)
    processes = [FORK.Process(target=target, args=(arg, worker, barrier)) for worker in range(WORKERS)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=120)
    assert [p.exitcode for p in processes] == [0] * WORKERS


def test_eight_processes_appending_two_thousand_lines_each_leave_sixteen_thousand_intact_lines(
        tmp_path: Path) -> None:
    path = tmp_path / "jobs.jsonl"
    run_workers(append_lines, str(path))
    raw_lines = path.read_bytes().split(b"\n")
    assert raw_lines[-1] == b""  # the file ends with a complete line
    records = [json.loads(line) for line in raw_lines[:-1]]  # every line parses on its own
    assert len(records) == WORKERS * LINES_EACH
    ids = [r["id"] for r in records]
    assert len(set(ids)) == WORKERS * LINES_EACH
    for worker in range(WORKERS):  # each writer's lines keep their order
        mine = [i for i in ids if i.startswith(f"J-w{worker}-")]
        assert mine == sorted(mine) and len(mine) == LINES_EACH
    assert sum(1 for _ in Ledger(path).checked_records()) == WORKERS * LINES_EACH
    assert not path.with_name("jobs.jsonl.torn").exists()


def test_eight_processes_updating_deployments_concurrently_lose_no_update(tmp_path: Path) -> None:
    registry = Registry(tmp_path / "r")
    registry.init()
    run_workers(update_deployments, str(registry.root))
    deployments = {d.id: d for d in registry.deployments()}
    for worker in range(WORKERS):
        assert deployments[f"dep_w{worker}"].gpu_count == 1 + UPDATES_EACH
        for n in range(ADD_EVERY, UPDATES_EACH + 1, ADD_EVERY):
            assert f"dep_w{worker}_{n}" in deployments
    assert len(deployments) == WORKERS * (1 + UPDATES_EACH // ADD_EVERY)
    assert not [p for p in registry.root.iterdir() if p.name.endswith(".tmp")]
