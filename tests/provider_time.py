"""A fake monotonic clock whose sleep advances it: retry tests take no wall time."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta


class FakeTime:
    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []
        self.start_wall = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds

    def wall(self) -> datetime:
        return self.start_wall + timedelta(seconds=self.now - 1000.0)

    @staticmethod
    def rng() -> random.Random:
        return random.Random(7)
