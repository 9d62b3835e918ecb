"""Crash: kill -9 a writer at random moments; every state file still parses and nothing acknowledged is lost."""

from __future__ import annotations

import fcntl
import multiprocessing
import os
import random
import select
import signal
import time
from pathlib import Path

import orjson

from gpuharness.core.ledger import Ledger
from gpuharness.core.lifecycle import read_journal, transition
from gpuharness.core.registry import DOCUMENTS, Registry

ROUNDS = 50
FORK = multiprocessing.get_context("fork")
BIG_EVERY = 4  # every 4th ledger line is ~200 KB, so a kill can land inside its write


def ack(fd: int, text: str) -> None:
    os.write(fd, f"{text}\n".encode())  # written only after the call returned: an acknowledged update


def writer(root: str, rnd: int, ack_fd: int) -> None:
    """Append ledger lines, update deployments.json and journal transitions until killed."""
    registry = Registry(root)
    ledger = Ledger(registry.ledger_path)
    dep_id = f"dep_r{rnd:02d}"
    with registry.update("deployments.json") as doc:
        doc["deployments"].append({"id": dep_id, "provider": "vast", "status": "ready", "cost_hr": 0.7,
                                   "created_at": "2026-11-30T20:00:00Z", "gpu_count": 1})
    ack(ack_fd, f"A {dep_id}")
    status = "ready"
    for n in range(1, 1_000_000):
        job_id = f"J-r{rnd:02d}-{n:05d}"
        prompt = "p" * (200_000 if n % BIG_EVERY == 0 else 40)
        ledger.append({"id": job_id, "deployment_id": dep_id, "status": "queued", "ts": "2026-11-30T20:00:00Z",
                       "inputs": {"prompt": prompt}})
        ack(ack_fd, f"L {job_id}")
        with registry.update("deployments.json") as doc:
            mine = next(d for d in doc["deployments"] if d["id"] == dep_id)
            mine["gpu_count"] = n + 1
        ack(ack_fd, f"D {dep_id} {n + 1}")
        status = "running" if status == "ready" else "ready"
        transition(registry, dep_id, status)
        ack(ack_fd, f"T {dep_id} {n}")


def kill_writer_at_random(root: Path, rnd: int, rng: random.Random) -> list[list[str]]:
    read_end, write_end = os.pipe()
    process = FORK.Process(target=writer, args=(str(root), rnd, write_end), daemon=True)
    process.start()
    os.close(write_end)
    # A random moment: after a random number of acknowledged writes, plus a random fraction of one write.
    wanted = rng.randrange(0, 30)
    chunks: list[bytes] = []
    deadline = time.monotonic() + 30
    while b"".join(chunks).count(b"\n") < wanted:
        assert time.monotonic() < deadline, "the writer made no progress (a lock left held by a dead writer?)"
        if select.select([read_end], [], [], 1.0)[0]:
            chunks.append(os.read(read_end, 65536))
    time.sleep(rng.uniform(0, 0.004))
    os.kill(process.pid, signal.SIGKILL)
    process.join(timeout=30)
    assert process.exitcode == -signal.SIGKILL
    while chunk := os.read(read_end, 65536):
        chunks.append(chunk)
    os.close(read_end)
    return [line.split() for line in b"".join(chunks).decode().splitlines()]


def test_kill_9_at_random_moments_fifty_times_loses_nothing_acknowledged(tmp_path: Path) -> None:
    seed = random.SystemRandom().randrange(2**32)
    rng = random.Random(seed)
    registry = Registry(tmp_path / "r")
    registry.init()
    ledger = Ledger(registry.ledger_path)
    acked_jobs: set[str] = set()
    torn_seen = 0
    for rnd in range(ROUNDS):
        acks = kill_writer_at_random(registry.root, rnd, rng)
        where = f"(seed {seed}, round {rnd})"
        # Every state file still parses and validates.
        for file_name in DOCUMENTS:
            registry.load(file_name)
        deployments = {d.id: d for d in registry.deployments()}
        entries = list(ledger.scan())
        assert all(e.record is not None for e in entries[:-1]), f"a broken line in the middle {where}"
        if entries and entries[-1].record is None:
            assert entries[-1].torn, f"an unparseable complete last line {where}"
            torn_seen += 1
        job_ids = {r["id"] for r in ledger.checked_records()}
        journal = [e for e in read_journal(registry.journal_path) if e["deployment"] == f"dep_r{rnd:02d}"]
        # Every acknowledged update is present.
        for kind, *rest in acks:
            if kind == "A":
                assert rest[0] in deployments, f"acknowledged deployment {rest[0]} lost {where}"
            elif kind == "L":
                acked_jobs.add(rest[0])
            elif kind == "D":
                assert deployments[rest[0]].gpu_count >= int(rest[1]), f"acknowledged update lost {where}"
            elif kind == "T":
                assert len(journal) >= int(rest[1]), f"acknowledged transition not journaled {where}"
        missing = acked_jobs - job_ids
        assert not missing, f"acknowledged ledger lines lost: {sorted(missing)[:3]} {where}"
    # The next writer quarantined every torn tail instead of merging it: the ledger is clean throughout.
    Ledger(registry.ledger_path).append({"id": "J-final", "deployment_id": "dep_r00", "status": "queued"})
    entries = list(ledger.scan())
    assert all(e.record is not None and not e.torn for e in entries)
    quarantined = registry.ledger_path.with_name("jobs.jsonl.torn")
    quarantined_lines = len(quarantined.read_bytes().splitlines()) if quarantined.exists() else 0
    assert quarantined_lines == torn_seen
    assert len(acked_jobs) > ROUNDS  # the writers did make progress before they were killed


def die_mid_line(path: str, line: bytes) -> None:
    """A writer killed by SIGKILL after writing half its line, holding the ledger lock."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.write(fd, line[: len(line) // 2])
    os.kill(os.getpid(), signal.SIGKILL)


def test_writer_killed_mid_line_leaves_a_torn_tail_the_next_append_quarantines(registry: Registry,
                                                                               job_line) -> None:
    ledger = Ledger(registry.ledger_path)
    ledger.append(job_line("J-1"))
    half_written = orjson.dumps(job_line("J-2")) + b"\n"
    process = FORK.Process(target=die_mid_line, args=(str(ledger.path), half_written))
    process.start()
    process.join(timeout=30)
    assert process.exitcode == -signal.SIGKILL
    assert [r["id"] for r in ledger.records()] == ["J-1"]  # readers tolerate the torn tail
    warnings = ledger.append(job_line("J-3"))  # the dead writer's lock is gone; its fragment is not merged
    assert len(warnings) == 1 and "torn last line" in warnings[0]
    assert [r["id"] for r in ledger.checked_records()] == ["J-1", "J-3"]
    assert all(not e.torn for e in ledger.scan())
