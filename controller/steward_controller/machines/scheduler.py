# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The machines loop's two threads and their pacing.

The **scheduler** thread relists until the caches are complete ("synced"), then loops: start due cloud listings,
collect orphans every `--machine-safety-orphan-vms-period`, run a pass (dispatch.py). A watch event, a finished
action or a due retry wakes it; passes are at least MIN_PASS_GAP apart, and further when passes take long
(`pass_gap`), so planning never takes more than PASS_SHARE of the time.

The **safety** thread probes the API server, looks for dependency-watchdog's scale-downs and relists every
`--machine-sync-period` (inputs.py); it has its own thread so that a slow or dead API server never delays a pass.

Both run on core/background.py's BackgroundLoop (`self.background`: threads, stop event, the wake event,
/healthz beat, a bug logged and retried, one stop deadline for both); the workers are a pool of their own
(controller.py), shut down without waiting at stop.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Dict, Mapping, Optional

log = logging.getLogger('steward.machines')
HEALTH_KEY = 'machines-loop'
MIN_PASS_GAP = 0.2           # seconds between passes however many events arrive
PASS_SHARE = 0.2             # at most this share of the scheduler's time goes to planning passes
MAX_TICK = 5.0               # the scheduler wakes at least this often (health beat)
FROZEN_PROBE_PERIOD = 6.0    # MCM re-checks a frozen API server every 6 s
STOP_SECONDS = 10.0


def pass_gap(pass_seconds: float) -> float:
    """Seconds from the end of one pass to the start of the next. A pass plans every machine, and during a
    scale every finished job wakes the scheduler: with a fixed gap, planning took 36% of the wall time of a
    1,000-machine scale-down (2.9 passes a second of 126 ms each), holding the interpreter against the workers,
    and its share grows with the fleet. Long passes get a proportionally longer gap."""
    return max(MIN_PASS_GAP, pass_seconds * (1.0 - PASS_SHARE) / PASS_SHARE)


class Scheduler:
    # A mixin of MachinesController (controller.py), whose __init__ holds the state these methods share.

    def start(self) -> None:
        log.info('machines loop starts', extra={'namespaces': self.namespaces or 'all', 'workers': self.settings.concurrent_syncs})
        self.background.beat()
        self.background.spawn(self._run, 'machines-scheduler')
        self.background.spawn(self._safety, 'machines-safety')

    def stop(self) -> None:
        busy = self.background.stop(STOP_SECONDS)
        self.pool.shutdown(wait=False, cancel_futures=True)
        if busy:
            log.warning('machines loop stopped with work in flight', extra={'threads': busy})
        else:
            log.info('machines loop stopped')

    def observe(self, kind: str, event_type: Optional[str], obj: Mapping[str, Any]) -> None:
        """A watch event: into the cache, and a pass soon."""
        md = obj.get('metadata') or {}
        if not md.get('name'):
            return
        if self.namespaces and kind != 'Node' and md.get('namespace') not in self.namespaces:
            return
        if event_type == 'DELETED':
            self.caches.remove(kind, md.get('namespace') or '', md['name'])
        else:
            self.caches.put(kind, dict(obj))
        self.wake.set()

    # --- the scheduler --------------------------------------------------------------------------
    def _safety(self) -> None:
        """Its own thread, so a slow or dead API server never delays a pass: the API probe, the watchdog check and
        the periodic full relist (the informers' resync; the first list is the scheduler's)."""
        due = {'probe': 0.0, 'watchdog': 0.0, 'relist': time.monotonic() + self.opts.sync_period}

        def step() -> float:
            now = time.monotonic()
            if now >= due['relist'] and self.synced:
                due['relist'] = now + (self.opts.sync_period if self.relist() else 1.0)
            if now >= due['probe']:
                self.probe_api()
                due['probe'] = now + (min(FROZEN_PROBE_PERIOD, self.settings.machine_safety_apiserver_statuscheck_period)
                                      if self.api.frozen or self.api.failing_since
                                      else self.settings.machine_safety_apiserver_statuscheck_period)
            if now >= due['watchdog']:
                self.check_watchdog()
                due['watchdog'] = now + self.settings.watchdog_check_period
            return max(0.05, min(due.values()) - time.monotonic())

        # a bug must show, not end the thread
        self.background.repeat(step, 'machines safety probe failed', crash_wait=1.0)

    def _run(self) -> None:
        due: Dict[str, float] = {'orphans': time.monotonic() + self.settings.machine_safety_orphan_vms_period, 'pass': 0.0}
        last = {'end': 0.0, 'seconds': 0.0}     # the last pass: when it ended, how long it took

        def tick() -> float:
            gap = pass_gap(last['seconds']) - (time.monotonic() - last['end'])
            if gap > 0 and self.stopping.wait(gap):
                return 0.0
            now = time.monotonic()
            self.background.beat()
            if not self.synced and not self.relist():
                self.stopping.wait(1.0)     # until the first complete list, once a second whatever the watches say
                return 0.0
            self.refresh_listings()
            if now >= due['orphans']:
                self.collect_orphans()
                due['orphans'] = now + self.settings.machine_safety_orphan_vms_period
            started = time.monotonic()
            wake_at = self.run_pass()
            last['end'] = time.monotonic()
            last['seconds'] = last['end'] - started
            due['pass'] = wake_at
            return min(MAX_TICK, *(t - time.monotonic() for t in due.values()))

        # a watch event, a finished action or a due retry ends the wait (`self.wake`); a bug must show, and not end
        # the loop: /healthz goes stale if it repeats
        self.background.repeat(tick, 'machines scheduler failed', crash_wait=1.0, wakeable=True)
