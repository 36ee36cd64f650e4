# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""coordination.k8s.io Leases as leader election and as a cluster-wide mutex.

`decide` is pure: from the Lease as read, who we are and `now`, it says whether we hold it, may
take it, or must wait. `LeaseLock` applies the decision with a create (409 if someone was faster)
or a merge patch that carries the resourceVersion read (409 if someone wrote in between), so two
contenders can never both believe they hold the lease.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable, Dict, Mapping, Optional

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.common.times import format_rfc3339, parse_rfc3339
from ansible_collections.steward.cluster.plugins.module_utils.kube.client import KubeClient, api_path
from ansible_collections.steward.cluster.plugins.module_utils.kube.errors import AlreadyExists, Conflict, KubeError, NotFound

HOLD = 'hold'        # we hold it: renew
ACQUIRE = 'acquire'  # free or expired: take it
WAIT = 'wait'        # someone else holds a live lease


def format_micro(now: float) -> str:
    """metav1.MicroTime (Lease renewTime and acquireTime, Event times) of `now`, seconds since the epoch."""
    return format_rfc3339(now, 'us')


def parse_micro(text: Optional[str]) -> Optional[float]:
    """Seconds since the epoch of a MicroTime / RFC 3339 time; None when absent or unreadable (a Lease someone else
    wrote badly counts as never renewed, as client-go's leader election treats a time it cannot parse). A time
    without a zone is taken as UTC."""
    if not text:
        return None
    try:
        return parse_rfc3339(text, 'time', naive_utc=True).timestamp()
    except InvalidInput:
        return None


def lease_spec(holder: str, now: float, duration: float, transitions: Optional[int] = None,
               acquire: bool = True) -> Dict[str, Any]:
    """A Lease spec held by `holder` from `now` for `duration` seconds (acquireTime too when taking it)."""
    spec: Dict[str, Any] = {'holderIdentity': holder, 'renewTime': format_micro(now), 'leaseDurationSeconds': int(duration)}
    if acquire:
        spec['acquireTime'] = format_micro(now)
    if transitions is not None:
        spec['leaseTransitions'] = transitions
    return spec


def renewed_at(lease: Optional[Mapping[str, Any]]) -> Optional[float]:
    return parse_micro(((lease or {}).get('spec') or {}).get('renewTime'))


def held_for(lease: Optional[Mapping[str, Any]]) -> float:
    return float(((lease or {}).get('spec') or {}).get('leaseDurationSeconds') or 0)


def seconds_left(lease: Optional[Mapping[str, Any]], now: float) -> float:
    """How long the lease is still held (<= 0: free): renewTime + leaseDurationSeconds - now, as
    maintenance-controller's stagger and Slack-thread leases read it. A missing lease or renewTime is free."""
    renewed = renewed_at(lease)
    if lease is None or renewed is None:
        return -1.0
    return renewed + held_for(lease) - now


@dataclasses.dataclass(frozen=True)
class Decision:
    action: str
    holder: str
    expires: Optional[float]  # when the current holder's claim runs out (None: free)


def decide(lease: Optional[Dict[str, Any]], identity: str, now: float) -> Decision:
    """Hold, acquire or wait. An empty holder or a renewTime + leaseDurationSeconds in the past is free."""
    spec = (lease or {}).get('spec') or {}
    holder = spec.get('holderIdentity') or ''
    renewed = parse_micro(spec.get('renewTime')) or parse_micro(spec.get('acquireTime'))
    duration = float(spec.get('leaseDurationSeconds') or 0)
    expires = renewed + duration if renewed is not None else None
    if holder == identity and holder:
        return Decision(HOLD, holder, expires)
    if not holder or expires is None or now >= expires:
        return Decision(ACQUIRE, holder, expires)
    return Decision(WAIT, holder, expires)


class LeaseLock:
    """One Lease object; `try_acquire` takes or renews it, `release` gives it up."""

    def __init__(self, client: KubeClient, namespace: str, name: str, identity: str, duration: float = 15.0,
                 clock: Callable[[], float] = time.time):
        self.client = client
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.duration = duration
        self.clock = clock
        self.path = api_path('coordination.k8s.io/v1', 'leases', namespace, name)
        self.collection = api_path('coordination.k8s.io/v1', 'leases', namespace)
        self.held_since: Optional[float] = None
        self.holder = ''

    def _spec(self, now: float, acquiring: bool, transitions: int) -> Dict[str, Any]:
        return lease_spec(self.identity, now, self.duration, transitions if acquiring else None, acquire=acquiring)

    def try_acquire(self) -> bool:
        """True while we hold the lease (taken or renewed now); False when someone else does or we lost a race."""
        now = self.clock()
        lease = self.client.get_or_none(self.path)
        if lease is None:
            body = {'apiVersion': 'coordination.k8s.io/v1', 'kind': 'Lease',
                    'metadata': {'name': self.name, 'namespace': self.namespace},
                    'spec': self._spec(now, True, 0)}
            try:
                self.client.create(self.collection, body)
            except AlreadyExists:
                return False
            self.held_since, self.holder = now, self.identity
            return True
        decision = decide(lease, self.identity, now)
        self.holder = decision.holder
        if decision.action == WAIT:
            self.held_since = None
            return False
        transitions = int((lease.get('spec') or {}).get('leaseTransitions') or 0)
        acquiring = decision.action == ACQUIRE
        try:
            self.client.merge_patch(self.path, {'spec': self._spec(now, acquiring, transitions + (1 if acquiring else 0))},
                                    resource_version=lease['metadata'].get('resourceVersion'))
        except (Conflict, NotFound):
            self.held_since = None
            return False
        if acquiring or self.held_since is None:
            self.held_since = now
        self.holder = self.identity
        return True

    def release(self) -> None:
        """Give the lease up at once (a clean shutdown), so a standby need not wait for it to expire."""
        lease = self.client.get_or_none(self.path)
        if lease is None or (lease.get('spec') or {}).get('holderIdentity') != self.identity:
            return
        try:
            self.client.merge_patch(self.path, {'spec': {'holderIdentity': None, 'leaseDurationSeconds': 1}},
                                    resource_version=lease['metadata'].get('resourceVersion'))
        except (Conflict, NotFound):
            pass
        self.held_since = None


class MutexTimeout(KubeError):
    """The cluster-wide mutex could not be taken in time (a KubeError, the area's one base; `status` is 0: the
    server answered every request, another holder kept the Lease)."""


class LeaseMutex:
    """A short critical section across processes: `with LeaseMutex(...):` (a Lease with a TTL, so a
    crashed holder blocks others for at most `ttl` seconds)."""

    def __init__(self, client: KubeClient, namespace: str, name: str, identity: str, ttl: float = 30.0,
                 wait: float = 60.0, poll: float = 0.2, clock: Callable[[], float] = time.time,
                 sleep: Callable[[float], None] = time.sleep):
        self.lock = LeaseLock(client, namespace, name, identity, duration=ttl, clock=clock)
        self.wait = wait
        self.poll = poll
        self.sleep = sleep
        self.clock = clock

    def __enter__(self) -> 'LeaseMutex':
        deadline = self.clock() + self.wait
        while not self.lock.try_acquire():
            if self.clock() >= deadline:
                raise MutexTimeout('lease %s/%s is held by %r; gave up after %ss' % (
                    self.lock.namespace, self.lock.name, self.lock.holder, self.wait))
            self.sleep(self.poll)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.lock.release()
