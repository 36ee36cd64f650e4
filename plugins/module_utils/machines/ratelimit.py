# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cloud API budget: one token bucket per account and region, shared by every caller in the process,
and full-jitter exponential backoff for throttled calls.

EC2 limits requests per account and region (a token bucket on its side). MCM's AWS driver has no client-
side limit: a scale-out of hundreds of machines runs into `RequestLimitExceeded`, which it then treats as
an internal error and retries after three minutes. Here every call takes a token first; a throttled answer
also pauses the bucket for the backoff, so all callers slow down together instead of each finding out alone.
"""

from __future__ import annotations

import random
import threading
import time
from typing import Callable, Dict, Hashable, Optional


EPSILON = 1e-9
MIN_WAIT = 1e-4


class TokenBucket:
    """`rate` tokens per second up to `burst`. `acquire` blocks until a token is free or `timeout` passes."""

    def __init__(self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep):
        if rate <= 0 or burst < 1:
            raise ValueError('rate must be > 0 and burst >= 1')
        self.rate = float(rate)
        self.burst = int(burst)
        self.clock = clock
        self.sleep = sleep
        self._tokens = float(burst)
        self._stamp = clock()
        self._paused_until = 0.0
        self._lock = threading.Lock()
        self.waited = 0.0           # total seconds callers spent waiting (for benchmarks)

    def _refill(self, now: float) -> None:
        if now > self._stamp:
            self._tokens = min(self.burst, self._tokens + (now - self._stamp) * self.rate)
            self._stamp = now

    def try_take(self) -> float:
        """Take a token if there is one (0.0); else the seconds until one is due."""
        with self._lock:
            now = self.clock()
            if now < self._paused_until:
                return self._paused_until - now
            self._refill(now)
            if self._tokens >= 1.0 - EPSILON:     # float refills land a hair below a whole token
                self._tokens = max(0.0, self._tokens - 1.0)
                return 0.0
            return max(MIN_WAIT, (1.0 - self._tokens) / self.rate)

    def acquire(self, timeout: Optional[float] = None) -> bool:
        deadline = None if timeout is None else self.clock() + timeout
        while True:
            wait = self.try_take()
            if wait <= 0:
                return True
            if deadline is not None and self.clock() + wait > deadline:
                return False
            self.waited += wait
            self.sleep(wait)

    def pause(self, seconds: float) -> None:
        """Nobody takes a token for `seconds` (the cloud said slow down), and the bucket restarts empty."""
        with self._lock:
            now = self.clock()
            self._paused_until = max(self._paused_until, now + seconds)
            self._tokens = 0.0
            self._stamp = self._paused_until


_BUCKETS: Dict[Hashable, TokenBucket] = {}
_BUCKETS_LOCK = threading.Lock()


def bucket_for(key: Hashable, rate: float, burst: int) -> TokenBucket:
    """The process-wide bucket of one account/region (created on first use with these limits)."""
    with _BUCKETS_LOCK:
        bucket = _BUCKETS.get(key)
        if bucket is None or (bucket.rate, bucket.burst) != (float(rate), int(burst)):
            bucket = TokenBucket(rate, burst)
            _BUCKETS[key] = bucket
        return bucket


def jittered_backoff(attempt: int, base: float = 0.5, cap: float = 20.0, rng: Optional[random.Random] = None) -> float:
    """Full jitter (AWS Architecture Blog): uniform in [base/2, min(cap, base * 2**attempt)]."""
    upper = min(cap, base * (2 ** max(0, attempt)))
    return (rng or random).uniform(min(base / 2, upper), upper)
