# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One token bucket for every client-side rate limit: `rate` tokens per second, holding at most `burst`.

Two ways to take a token, for the two kinds of caller:
* `take()` reserves the next token and sleeps until it is due (client-go's `flowcontrol` limiter behind
  `rest.Config{QPS, Burst}`, used for the Kubernetes API in `kube/ratelimit.py`): callers queue in order and none
  spins;
* `acquire(timeout)` waits for a token but gives up when it would not come within `timeout` (the cloud budget in
  `machines/ratelimit.py`, whose calls run under a deadline); `try_take()` never waits.

`pause(seconds)` empties the bucket and lets nobody take a token for `seconds`: the cloud said "slow down"
(RequestLimitExceeded), so every caller sharing the bucket backs off together instead of each finding out alone.
"""

from __future__ import annotations

import threading
import time
from typing import Callable, Optional

EPSILON = 1e-9       # float refills land a hair below a whole token
MIN_WAIT = 1e-4


class TokenBucket:
    def __init__(self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep):
        if not rate > 0 or int(burst) < 1:
            raise ValueError('rate must be > 0 and burst >= 1, got rate %r and burst %r' % (rate, burst))
        self.rate = float(rate)
        self.burst = int(burst)
        self.clock = clock
        self.sleep = sleep
        self._tokens = float(self.burst)
        self._stamp = clock()          # tokens are counted up to here; in the future while paused
        self._lock = threading.Lock()
        self.waited = 0.0              # total seconds callers spent waiting (for benchmarks)

    def _refill(self, now: float) -> None:
        if now > self._stamp:
            self._tokens = min(float(self.burst), self._tokens + (now - self._stamp) * self.rate)
            self._stamp = now

    def take(self) -> float:
        """Reserve one token and sleep until it is due; returns the seconds waited. A reservation made while the
        bucket is empty (or paused) is kept: the token count goes below zero and the next caller waits longer."""
        with self._lock:
            now = self.clock()
            self._refill(now)
            self._tokens -= 1.0
            wait = max(0.0, self._stamp - now) + (0.0 if self._tokens >= -EPSILON else -self._tokens / self.rate)
            self.waited += wait
        if wait > 0:
            self.sleep(wait)
        return wait

    def try_take(self) -> float:
        """Take a token if there is one (0.0); else the seconds until one is due (nothing is reserved)."""
        with self._lock:
            now = self.clock()
            if now < self._stamp:
                return self._stamp - now       # paused: ask again when the pause is over
            self._refill(now)
            if self._tokens >= 1.0 - EPSILON:
                self._tokens = max(0.0, self._tokens - 1.0)
                return 0.0
            return max(MIN_WAIT, (1.0 - self._tokens) / self.rate)

    def acquire(self, timeout: Optional[float] = None) -> bool:
        """Wait for a token; False (nothing taken) when it would not come within `timeout` seconds."""
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
        """Nobody takes a token for `seconds`, and the bucket restarts empty."""
        with self._lock:
            now = self.clock()
            self._tokens = min(self._tokens, 0.0)
            self._stamp = max(self._stamp, now + seconds)
