# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The engine's gate (see maintenance/state.py): one critical section across threads and replicas.

Cluster-scoped transitions (maxMaintenance, stagger, ...) are decided and committed inside it. It is
a process-wide lock plus `LeaseMutex` on the Lease `steward-maintenance-gate` in the controller's
namespace. While held, a thread renews the Lease every ttl/3, so a long trigger chain inside the gate
(a drain) keeps it; a holder that crashed blocks the others for at most `ttl`. If a renewal finds the
Lease taken by someone else (or could not renew for a whole ttl, so someone else may have taken it),
the hold is marked lost and the controller's commit refuses to write: the transition is retried.

Waiting is bounded (`wait`): a worker that cannot enter in time gives up, the engine keeps the node's
cluster-scoped transitions for the next reconcile, and the worker is free for other nodes. While one
worker has been inside for longer than `wait` (a drain), others give up at once instead of waiting.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from typing import Callable, Iterator, Optional

from ansible_collections.steward.cluster.plugins.module_utils.kube.client import KubeClient
from ansible_collections.steward.cluster.plugins.module_utils.kube.errors import KubeError
from ansible_collections.steward.cluster.plugins.module_utils.kube.lease import LeaseMutex, MutexTimeout

log = logging.getLogger('steward.maintenance')

GATE_LEASE = 'steward-maintenance-gate'
GATE_TTL = 30.0
GATE_WAIT = 10.0


class GateLost(Exception):
    """The cluster-wide mutex was lost while held: nothing decided inside may be committed."""


class GateHold:
    """One stay inside the gate."""

    def __init__(self) -> None:
        self.lost = ''        # why the mutex was lost ('' while held)
        self.renewals = 0


class MaintenanceGate:
    def __init__(self, client: KubeClient, namespace: str, identity: str, ttl: float = GATE_TTL, wait: float = GATE_WAIT,
                 lease: str = GATE_LEASE, clock: Callable[[], float] = time.time, poll: float = 0.1):
        self.client = client
        self.namespace = namespace
        self.identity = identity
        self.ttl = ttl
        self.wait = wait
        self.lease = lease
        self.clock = clock
        self.poll = poll
        self.lock = threading.Lock()
        self.held_since: Optional[float] = None   # monotonic time the current holder of `lock` got it
        self.entries = 0

    @contextlib.contextmanager
    def enter(self) -> Iterator[GateHold]:
        """Raises MutexTimeout when the gate cannot be entered within `wait`; KubeError when the API fails."""
        started = time.monotonic()
        held_since = self.held_since
        if held_since is not None and started - held_since > self.wait:
            # a long trigger chain (a drain) is inside: do not tie up one more worker for `wait` seconds
            raise MutexTimeout('the maintenance gate has been held by another worker of this replica for %.0fs' % (started - held_since))
        if not self.lock.acquire(timeout=self.wait):
            raise MutexTimeout('another worker of this replica held the maintenance gate for %ss' % self.wait)
        self.held_since = time.monotonic()
        try:
            remaining = max(0.0, self.wait - (time.monotonic() - started))
            mutex = LeaseMutex(self.client, self.namespace, self.lease, self.identity, ttl=self.ttl, wait=remaining,
                               poll=self.poll, clock=self.clock)
            mutex.__enter__()
            self.entries += 1
            hold = GateHold()
            stop = threading.Event()
            renewer = threading.Thread(target=self._renew, args=(mutex, hold, stop), name='maintenance-gate-renew', daemon=True)
            renewer.start()
            try:
                yield hold
            finally:
                stop.set()
                renewer.join(timeout=self.ttl)
                self._release(mutex)
        finally:
            self.held_since = None
            self.lock.release()

    def _renew(self, mutex: LeaseMutex, hold: GateHold, stop: threading.Event) -> None:
        last = self.clock()
        while not stop.wait(self.ttl / 3.0):
            try:
                held = mutex.lock.try_acquire()
                error = '' if held else 'the Lease %s/%s was written by someone else (now held by %r)' % (
                    self.namespace, self.lease, self._holder(mutex))
            except KubeError as exc:
                held, error = False, str(exc)
                if self.clock() - last < self.ttl:
                    log.warning('cannot renew the maintenance gate: %s', exc)
                    continue
            if held:
                last = self.clock()
                hold.renewals += 1
                continue
            hold.lost = 'lost the maintenance gate: %s' % error
            log.error(hold.lost)
            return

    def _holder(self, mutex: LeaseMutex) -> str:
        """Who holds the Lease now (best effort, for the message)."""
        try:
            lease = self.client.get_or_none(mutex.lock.path) or {}
        except KubeError:
            return mutex.lock.holder
        return str((lease.get('spec') or {}).get('holderIdentity') or '')

    def _release(self, mutex: LeaseMutex) -> None:
        """Never fails the section it closes: an unreleased Lease expires after `ttl`."""
        try:
            mutex.__exit__(None, None, None)
        except KubeError as exc:
            log.warning('cannot release the maintenance gate (it expires in %ss): %s', self.ttl, exc)
