"""A clock that moves only when the code under test sleeps (or a test sets `now`): for pacing logic - token
buckets, retries, backoffs - tested without waiting."""

from __future__ import annotations

from typing import List


class FakeClock:
    def __init__(self, now: float = 0.0) -> None:
        self.now = now
        self.slept: List[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(round(seconds, 6))
        self.now += seconds
