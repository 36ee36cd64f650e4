# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Lease reads for stagger and slackThread without one API call per node per requeue.

The stagger check reads its Leases every time a node in the checked state is reconciled (5,000
nodes x `parallel` Leases per requeue; the check chain evaluates every instance, so nodes that do
not want maintenance read them too). Reads are therefore served from memory:

* a *held* Lease until shortly before it expires: by the plugins' protocol nobody takes a live
  Lease (stagger refuses, slackThread only posts into the thread it names), so it stays as read;
* a free (expired) or missing Lease for FREE_TTL_SECONDS: every write of this process goes through
  this cache, so only another writer (a second replica during a hand-over, a human) can make such
  an answer stale, and for stagger that only makes a node a candidate: the decision is taken again
  inside the maintenance gate, where `fresh()` is true and every read goes to the API.

Writes always go to the API with the underlying store's resourceVersion compare-and-swap; their
answers are remembered. A Lease deleted by hand is seen only when its cached term runs out.
"""

from __future__ import annotations

import copy
import threading
import time
from typing import Any, Callable, Dict, Mapping, Optional, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.kube.lease import seconds_left
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.leases import LeaseStore

MARGIN_SECONDS = 2.0       # a held Lease is read again this long before it expires
FREE_TTL_SECONDS = 10.0    # a free or missing Lease is read again after this long


class LeaseCache:
    """Lease reads by (namespace, name) with the time they stay valid, shared by every reconcile."""

    def __init__(self, clock: Callable[[], float] = time.time, margin: float = MARGIN_SECONDS, free_ttl: float = FREE_TTL_SECONDS):
        self.clock = clock
        self.margin = margin
        self.free_ttl = free_ttl
        self.lock = threading.Lock()
        self.entries: Dict[Tuple[str, str], Tuple[Optional[Dict[str, Any]], float]] = {}
        self.api_reads = 0

    def lookup(self, namespace: str, name: str) -> Tuple[bool, Optional[Dict[str, Any]]]:
        """(hit, lease); a hit may be None (known missing)."""
        with self.lock:
            entry = self.entries.get((namespace, name))
            if entry is None or self.clock() >= entry[1]:
                return False, None
            return True, copy.deepcopy(entry[0])

    def remember(self, namespace: str, name: str, lease: Optional[Mapping[str, Any]]) -> None:
        now = self.clock()
        left = seconds_left(lease, now) if lease is not None else -1.0
        until = now + left - self.margin if left > self.margin else now + self.free_ttl
        if 0 <= left <= self.margin:
            until = now   # about to expire: read it again next time
        with self.lock:
            self.entries[(namespace, name)] = (copy.deepcopy(dict(lease)) if lease is not None else None, until)


class CachedLeaseStore(LeaseStore):
    """`store` (the API) behind `cache`; `fresh()` true (inside the gate) bypasses the cache for reads."""

    def __init__(self, store: LeaseStore, cache: LeaseCache, fresh: Callable[[], bool] = lambda: False):
        self.store = store
        self.cache = cache
        self.fresh = fresh

    def get(self, namespace: str, name: str) -> Optional[Dict[str, Any]]:
        if not self.fresh():
            hit, cached = self.cache.lookup(namespace, name)
            if hit:
                return cached
        lease = self.store.get(namespace, name)
        with self.cache.lock:
            self.cache.api_reads += 1
        self.cache.remember(namespace, name, lease)
        return lease

    def create(self, namespace: str, name: str, spec: Mapping[str, Any]) -> Dict[str, Any]:
        lease = self.store.create(namespace, name, spec)
        self.cache.remember(namespace, name, lease)
        return lease

    def update(self, namespace: str, name: str, spec: Mapping[str, Any], resource_version: str) -> Dict[str, Any]:
        lease = self.store.update(namespace, name, spec, resource_version)
        self.cache.remember(namespace, name, lease)
        return lease
