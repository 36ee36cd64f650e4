# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every timeout is a deadline: one clock started when the module (or the controller's step) starts, shared by
every attempt, so "gives up within twice its stated timeout, retries included" holds by construction. Each attempt
gets at most what is left (`remaining()`) as its own socket timeout, and a retry loop asks `expired()` before it
tries again. The error names what was being done, the endpoint and the time spent.
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
from typing import Any, Callable, Iterator, Optional, Tuple, Type, TypeVar

_T = TypeVar('_T')

# A socket timeout below this is useless (TLS alone takes longer); the last attempt gets at least this much.
MIN_ATTEMPT_SECONDS = 0.05


class DeadlineExceeded(TimeoutError):
    """The stated time ran out. `what` is the action, `endpoint` where it was waiting, `spent` the seconds used."""

    def __init__(self, what: str, endpoint: Optional[str], timeout: float, spent: float, cause: Any = None):
        self.what = what
        self.endpoint = endpoint
        self.timeout = timeout
        self.spent = spent
        where = ' at %s' % endpoint if endpoint else ''
        last = ' (last error: %s)' % cause if cause else ''
        super().__init__('%s%s gave up after %.1fs (timeout %ss)%s' % (what, where, spent, _fmt(timeout), last))


class Deadline:
    """A point in time `timeout` seconds from now, on the monotonic clock (or on `clock`, for tests)."""

    def __init__(self, timeout: float, what: str = 'the request', clock: Callable[[], float] = time.monotonic):
        self.timeout = float(timeout)
        self.what = what
        self.clock = clock
        self.started = clock()
        self.at = self.started + self.timeout

    def spent(self) -> float:
        return self.clock() - self.started

    def remaining(self, cap: Optional[float] = None) -> float:
        """Seconds left (never below MIN_ATTEMPT_SECONDS, so it can be a socket timeout), at most `cap`."""
        left = max(self.at - self.clock(), MIN_ATTEMPT_SECONDS)
        return min(left, cap) if cap is not None else left

    def expired(self) -> bool:
        return self.clock() >= self.at

    def exceeded(self, endpoint: Optional[str] = None, cause: Any = None) -> DeadlineExceeded:
        """The error to raise when it ran out (the caller raises it, possibly as its area's type)."""
        return DeadlineExceeded(self.what, endpoint, self.timeout, self.spent(), cause)

    def check(self, endpoint: Optional[str] = None, cause: Any = None) -> None:
        if self.expired():
            raise self.exceeded(endpoint, cause)

    def spending(self) -> 'contextlib.AbstractContextManager[None]':
        """The time of a plain deadline always runs (see Budget)."""
        return contextlib.nullcontext()

    def extend(self, seconds: float) -> None:
        """Move the deadline `seconds` later, and the stated timeout with it (time granted for work whose size is
        known: moving a snapshot's bytes). Errors then state the whole allowance."""
        self.at += seconds
        self.timeout += seconds


class Stopwatch:
    """A clock that runs only inside `running()` (nested or from several threads at once: while any is inside)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self._clock = clock
        self._total = 0.0
        self._since: Optional[float] = None
        self._inside = 0
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            return self._total + (self._clock() - self._since if self._since is not None else 0.0)

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        with self._lock:
            self._inside += 1
            if self._inside == 1:
                self._since = self._clock()
        try:
            yield
        finally:
            with self._lock:
                self._inside -= 1
                if self._inside == 0 and self._since is not None:
                    self._total += self._clock() - self._since
                    self._since = None


class Budget(Deadline):
    """A deadline over calls that lie far apart: its time runs only inside `spending()`. One module run's store
    requests share one (`store_timeout`), though an etcd snapshot stream of many minutes lies between them."""

    def __init__(self, timeout: float, what: str = 'the requests', clock: Callable[[], float] = time.monotonic):
        self.stopwatch = Stopwatch(clock)
        super().__init__(timeout, what, clock=self.stopwatch)

    def spending(self) -> 'contextlib.AbstractContextManager[None]':
        return self.stopwatch.running()


def retry_until(deadline: Deadline, attempt: Callable[[float], _T], retry_on: Tuple[Type[BaseException], ...],
                endpoint: Optional[str] = None, pause: float = 0.2, sleep: Callable[[float], None] = time.sleep, *,
                cap: float = 2.0, retryable: Optional[Callable[[Any], bool]] = None,
                give_up: Optional[Callable[[Any, int], BaseException]] = None) -> _T:
    """The one retry loop: call `attempt(seconds_left)` until it returns, retrying the `retry_on` errors (those
    `retryable(exc)` accepts, when given) while time is left; pauses double from `pause` up to `cap` (pause == cap:
    a fixed interval) and never outlast the deadline. When time runs out it raises `give_up(last_error, attempts)`,
    by default DeadlineExceeded naming the last error; an error that is not retried leaves at once."""
    attempts = 0
    last: Any = None
    while True:
        attempts += 1
        try:
            return attempt(deadline.remaining())
        except retry_on as exc:
            if retryable is not None and not retryable(exc):
                raise
            last = exc
            if deadline.expired():
                raise _given_up(deadline, endpoint, last, attempts, give_up) from exc
        sleep(min(pause, max(deadline.at - deadline.clock(), 0)))
        pause = min(pause * 2, cap)
        if deadline.expired():
            raise _given_up(deadline, endpoint, last, attempts, give_up) from last


def _given_up(deadline: Deadline, endpoint: Optional[str], last: Any, attempts: int,
              give_up: Optional[Callable[[Any, int], BaseException]]) -> BaseException:
    return give_up(last, attempts) if give_up is not None else deadline.exceeded(endpoint, last)


# --- retry pacing for loops that come back later (a controller's next pass) instead of waiting here --------

def doubled(previous: float, floor: float, cap: float) -> float:
    """The next delay of a doubling backoff: twice `previous`, at least `floor` (the first delay, when previous is
    0), at most `cap`."""
    return min(max(previous * 2, floor), cap)


def jittered_backoff(attempt: int, base: float = 0.5, cap: float = 20.0, rng: Optional[random.Random] = None) -> float:
    """Full jitter (AWS Architecture Blog): uniform in [base/2, min(cap, base * 2**attempt)], so callers throttled
    together do not come back together."""
    upper = min(cap, base * (2 ** max(0, attempt)))
    return (rng or random).uniform(min(base / 2, upper), upper)


def read_within(read_some: Callable[[], bytes], deadline: Deadline, endpoint: Optional[str] = None) -> bytes:
    """A response body, read piece by piece while the deadline allows. `read_some` returns what has arrived (a
    urllib3 response's `read1`), b'' at the end: a socket timeout bounds each read only, so a server answering a
    byte a second would otherwise hold the caller for as long as it likes."""
    chunks = []
    while True:
        chunk = read_some()
        if not chunk:
            return b''.join(chunks)
        chunks.append(chunk)
        deadline.check(endpoint)


def _fmt(value: float) -> str:
    return ('%d' % value) if float(value).is_integer() else ('%g' % value)
