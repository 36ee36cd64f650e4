# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The lifecycle of a loop that runs beside kopf on threads of its own (prober, weeder, anchor, maintenance,
machines) or as a server on kopf's event loop (the provisioning API).

Why not `@kopf.daemon` / `@kopf.timer`: kopf runs one per object, and these loops serve thousands of Nodes or
none at all (docs/controller.md). What they share is written once here:

* `BackgroundLoop`: named daemon threads (`spawn`), one stop event (`stopped`), a health beat (`beat`), a
  sleep that keeps beating and wakes on stop (`sleep`), a body repeated until stop whose unexpected exception is
  logged and retried instead of ending the loop (`repeat`), a nudge that ends the wait between two runs early
  (`wake`, for a loop that acts on events as they come, e.g. the machines scheduler), and a stop that joins
  every thread under one deadline and says which did not finish (`stop`);
* `register_background`: the kopf startup/cleanup pair that starts and stops it with the operator.
"""

from __future__ import annotations

import inspect
import logging
import threading
import time
from typing import Any, Callable, List, Optional

log = logging.getLogger('steward.background')
BEAT_SECONDS = 1.0   # a beating sleep wakes this often to beat /healthz


class BackgroundLoop:
    """Threads, stop event and health beat of one loop. `health` is core/metrics.Health (anything with
    `beat(key)`); `health_key` names the loop on /healthz; `clock` measures sleeps (injected in tests)."""

    def __init__(self, name: str, health: Any, health_key: str = '', clock: Callable[[], float] = time.monotonic):
        self.name = name
        self.health = health
        self.health_key = health_key or name + '-loop'
        self.clock = clock
        self.stopped = threading.Event()
        self.woken = threading.Event()      # set by `wake` and by `stop`; cleared by a `repeat(wakeable=True)`
        self.threads: List[threading.Thread] = []
        self._lock = threading.Lock()

    def spawn(self, target: Callable[..., None], name: str = '', *args: Any) -> threading.Thread:
        """Start `target(*args)` on a named daemon thread; an exception that ends it is logged with the thread's
        name (a thread that dies silently is a loop that stopped acting without a word)."""
        thread = threading.Thread(target=self._guarded, args=(target, args), name=name or self.name, daemon=True)
        with self._lock:
            self.threads = [t for t in self.threads if t.is_alive()] + [thread]
        thread.start()
        return thread

    def _guarded(self, target: Callable[..., None], args: Any) -> None:
        try:
            target(*args)
        except Exception:
            log.exception('%s: thread %s ended by an unexpected error', self.name, threading.current_thread().name)

    def beat(self) -> None:
        self.health.beat(self.health_key)

    def wake(self) -> None:
        """End the current wait of a `repeat(wakeable=True)` early (several calls during one run: one early run)."""
        self.woken.set()

    def sleep(self, seconds: float) -> bool:
        """Wait `seconds`, beating at least every BEAT_SECONDS; False as soon as the loop is stopping."""
        deadline = self.clock() + seconds
        while not self.stopped.is_set():
            self.beat()
            left = deadline - self.clock()
            if left <= 0:
                return True
            self.stopped.wait(min(left, BEAT_SECONDS))
        return False

    def repeat(self, step: Callable[[], float], failure: str, crash_wait: float, beating: bool = False,
               on_crash: Optional[Callable[[], None]] = None, wakeable: bool = False) -> None:
        """Run `step` until stop; it returns the seconds to wait before the next run. An unexpected exception is
        logged as `failure` (and `on_crash` called, e.g. to count it), then the next run comes after `crash_wait`:
        a bug must not end the loop. `beating`: beat /healthz while waiting (else `step` beats when it succeeds).
        `wakeable` (not with `beating`): `wake` ends the wait early (a step that must not run too often waits out
        its own gap)."""
        while not self.stopped.is_set():
            try:
                wait = step()
            except Exception:
                log.exception(failure)
                if on_crash is not None:
                    on_crash()
                wait = crash_wait
            if beating:
                if not self.sleep(wait):
                    return
            elif wakeable:
                self.woken.wait(max(0.0, wait))
                self.woken.clear()
                if self.stopped.is_set():
                    return
            elif self.stopped.wait(wait):
                return

    def alive(self) -> List[str]:
        """Names of the threads still running."""
        with self._lock:
            return [t.name for t in self.threads if t.is_alive()]

    def stop(self, timeout: float) -> List[str]:
        """Set the stop event (and wake a waiting `repeat`) and join every thread, all within `timeout`; returns
        the names still running."""
        self.stopped.set()
        self.woken.set()
        deadline = time.monotonic() + timeout
        with self._lock:
            threads = list(self.threads)
        for thread in threads:
            if thread is not threading.current_thread():
                thread.join(max(0.0, deadline - time.monotonic()))
        return [t.name for t in threads if t.is_alive()]


def register_background(registry: Any, loop_id: str, start: Callable[[], Any], stop: Callable[[], Any],
                        exiting_timeout: float = 0.0) -> None:
    """kopf's startup/cleanup pair (ids `<loop_id>-start` and `<loop_id>-stop`) calling `start` and `stop`, which
    may be coroutine functions (a server on kopf's event loop). `exiting_timeout`: seconds kopf must leave the
    cleanup before it kills its own process after a stop signal (raised, never lowered)."""
    import kopf

    def extend(settings: Any) -> None:
        if exiting_timeout:
            settings.process.ultimate_exiting_timeout = max(settings.process.ultimate_exiting_timeout or 0,
                                                            exiting_timeout)

    if inspect.iscoroutinefunction(start):
        @kopf.on.startup(registry=registry, id=loop_id + '-start')
        async def start_async(settings: kopf.OperatorSettings, **_: Any) -> None:
            extend(settings)
            await start()
    else:
        @kopf.on.startup(registry=registry, id=loop_id + '-start')
        def start_sync(settings: kopf.OperatorSettings, **_: Any) -> None:
            extend(settings)
            start()

    if inspect.iscoroutinefunction(stop):
        @kopf.on.cleanup(registry=registry, id=loop_id + '-stop')
        async def stop_async(**_: Any) -> None:
            await stop()
    else:
        @kopf.on.cleanup(registry=registry, id=loop_id + '-stop')
        def stop_sync(**_: Any) -> None:
            stop()
