# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The weeder's decisions, pure: when a service turns ready, which pods to delete, and how often.

**Trigger** (DWD-W-02): a configured service goes from not ready to ready. Its readiness is read from
both Endpoints (ready when a subset has an address; `notReadyAddresses` do not count) and EndpointSlices
(labelled `kubernetes.io/service-name`; ready when an endpoint's `conditions.ready` is true or unset, which
the API defines as "unknown, treat as ready"), and a service is ready when any of its objects says so, so
the two kinds of one service trigger once, not twice. Decisions written down (docs/watchdog.md):
* objects already there when the weeder starts set the baseline and trigger nothing (a restart of the
  weeder deletes no pods; DWD starts a weeder for every ready object it lists at start);
* an object created later that is ready at once is a transition (the service had no ready object);
* ready -> ready (another address), ready -> not ready and deletions trigger nothing.

**Pods** (DWD-W-04): a pod is deleted when it is not being deleted already and a container, or an init
container (`Init:CrashLoopBackOff` waits on the same upstream), is waiting with reason CrashLoopBackOff.

**Limit** (ours): a pod is deleted at most `maxDeletionsPerPod` times per `deletionWindow`. Pods of a
controller get new names when recreated, so they are counted by their controller (`ReplicaSet/kcm-7d4`)
with a budget of `maxDeletionsPerPod` x the number of that controller's pods the watcher sees; a pod
without a controller is counted by its name.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Any, Dict, List, Mapping, Optional, Set, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.watchdog import constants as c

ENDPOINTS = 'Endpoints'
ENDPOINT_SLICE = 'EndpointSlice'


def endpoints_ready(kind: str, obj: Mapping[str, Any]) -> bool:
    """At least one ready address in an Endpoints object or an EndpointSlice (`kind`: list items carry none)."""
    if kind == ENDPOINT_SLICE:
        for endpoint in obj.get('endpoints') or []:
            if ((endpoint.get('conditions') or {}).get('ready')) is not False and endpoint.get('addresses'):
                return True
        return False
    return any(subset.get('addresses') for subset in obj.get('subsets') or [])


def service_of(kind: str, obj: Mapping[str, Any]) -> Optional[str]:
    """The Service an Endpoints object (its own name) or an EndpointSlice (its label) belongs to."""
    meta = obj.get('metadata') or {}
    if kind == ENDPOINT_SLICE:
        return (meta.get('labels') or {}).get(c.SERVICE_NAME_LABEL)
    return meta.get('name')


class Readiness:
    """Per configured service, which of its objects are ready; `observe` returns the service that turned ready."""

    def __init__(self, services: Set[str]):
        self.services = set(services)
        self._ready: Dict[str, Dict[Tuple[str, str], bool]] = {s: {} for s in self.services}
        self._lock = threading.Lock()

    def ready(self, service: str) -> bool:
        with self._lock:
            return any(self._ready.get(service, {}).values())

    def observe(self, kind: str, event: str, obj: Mapping[str, Any], initial: bool = False) -> Optional[str]:
        """Record one event (ADDED, MODIFIED, DELETED; `initial` for the list at start). Returns the service
        name when this event turned it from not ready to ready, else None."""
        service = service_of(kind, obj)
        if service not in self.services:
            return None
        key = (kind, (obj.get('metadata') or {}).get('name') or '')
        with self._lock:
            objects = self._ready[service]
            before = any(objects.values())
            if event == 'DELETED':
                objects.pop(key, None)
                return None
            objects[key] = endpoints_ready(kind, obj)
            after = any(objects.values())
        if initial or before or not after:
            return None
        return service


def crash_looping(pod: Mapping[str, Any]) -> bool:
    """Waiting in CrashLoopBackOff (a container or an init container) and not being deleted already."""
    if (pod.get('metadata') or {}).get('deletionTimestamp'):
        return False
    status = pod.get('status') or {}
    for statuses in (status.get('containerStatuses'), status.get('initContainerStatuses')):
        for container in statuses or []:
            waiting = (container.get('state') or {}).get('waiting') or {}
            if waiting.get('reason') == c.CRASH_LOOP_BACK_OFF:
                return True
    return False


def pod_key(pod: Mapping[str, Any]) -> str:
    """What the deletion limit counts: the pod's controller (`ReplicaSet/x`), or `Pod/<name>` without one."""
    meta = pod.get('metadata') or {}
    for ref in meta.get('ownerReferences') or []:
        if ref.get('controller'):
            return '%s/%s' % (ref.get('kind'), ref.get('name'))
    return 'Pod/%s' % meta.get('name')


@dataclasses.dataclass(frozen=True)
class BudgetDecision:
    allowed: bool
    used: int       # deletions of this key within the window
    limit: int      # what the window allows for it now (0: no limit)


class DeletionBudget:
    """Deletions per key within a sliding window, shared by every weeder of the process (thread-safe)."""

    def __init__(self, max_per_pod: int, window: float):
        self.max_per_pod = max_per_pod
        self.window = window
        self._history: Dict[str, List[float]] = {}
        self._lock = threading.Lock()

    def take(self, key: str, now: float, pods: int = 1) -> BudgetDecision:
        """Record a deletion of `key` if the budget allows it (`pods`: that controller's pods in sight)."""
        with self._lock:
            recent = [t for t in self._history.get(key, []) if now - t < self.window]
            limit = 0 if self.max_per_pod == 0 else self.max_per_pod * max(1, pods)
            if limit and len(recent) >= limit:
                self._history[key] = recent
                return BudgetDecision(False, len(recent), limit)
            recent.append(now)
            self._history[key] = recent
            return BudgetDecision(True, len(recent), limit)

    def give_back(self, key: str, when: float) -> None:
        """Undo a `take` whose deletion did not happen (the pod was gone, or the API refused)."""
        with self._lock:
            history = self._history.get(key, [])
            if when in history:
                history.remove(when)
