# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Leader election on a Lease: one replica acts, the others wait.

The leader renews every `retry_period`; when it cannot renew for `renew_deadline` (shorter than
the lease duration) it stops acting, so by the time a standby may take the expired lease the old
leader has already stopped: a killed or cut-off leader is replaced without two acting at once.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable, Optional

from ansible_collections.steward.cluster.plugins.module_utils.kube.errors import KubeError
from ansible_collections.steward.cluster.plugins.module_utils.kube.lease import LeaseLock

log = logging.getLogger('steward.leader')


class LeaderElector:
    def __init__(self, lock: LeaseLock, renew_deadline: float, retry_period: float,
                 on_change: Optional[Callable[[bool], None]] = None, on_contact: Optional[Callable[[], None]] = None,
                 on_tick: Optional[Callable[[], None]] = None, clock: Callable[[], float] = time.time):
        self.lock = lock
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.on_change = on_change
        self.on_contact = on_contact  # the API answered (readiness of standbys too)
        self.on_tick = on_tick
        self.clock = clock
        self.leading = threading.Event()
        self.lost = threading.Event()
        self._stop = threading.Event()
        self._last_renew: Optional[float] = None
        self._thread = threading.Thread(target=self._run, name='leader-election', daemon=True)

    def start(self) -> 'LeaderElector':
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                held = self.lock.try_acquire()
                error = ''
                if self.on_contact is not None:
                    self.on_contact()
            except KubeError as exc:
                held, error = False, str(exc)
            if self.on_tick is not None:
                self.on_tick()  # liveness: this thread still turns, API or not
            now = self.clock()
            if held:
                self._last_renew = now
                if not self.leading.is_set():
                    log.info('acquired the leader lease', extra={'lease': self.lock.name, 'identity': self.lock.identity})
                    self.leading.set()
                    self._notify(True)
            elif self.leading.is_set():
                if self.lock.holder and self.lock.holder != self.lock.identity or \
                        now - (self._last_renew or now) >= self.renew_deadline:
                    log.error('lost the leader lease; stopping', extra={
                        'lease': self.lock.name, 'holder': self.lock.holder, 'error': error})
                    self.leading.clear()
                    self.lost.set()
                    self._notify(False)
                    return
            self._stop.wait(self.retry_period)

    def _notify(self, leading: bool) -> None:
        if self.on_change is not None:
            self.on_change(leading)

    def stop(self, release: bool = True) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=self.retry_period + 5)
        if release and self.leading.is_set():
            try:
                self.lock.release()
                log.info('released the leader lease', extra={'lease': self.lock.name})
            except KubeError as exc:
                log.warning('could not release the leader lease: %s', exc)
        self.leading.clear()
