# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Cordon, uncordon and drain a node the way `kubectl drain` (and kubernetes.core's k8s_drain, MCM's drain) do.

A Kubernetes operation, not a concept of one area: the maintenance triggers (`cordon`, `uncordon`, `drain`,
`eviction`: the seed's maintenance-controller leaves draining to other controllers), the machines area's
drain (which takes `classify_pods` and `eviction_body` and paces the evictions itself) and provisioning's
node removal all use it.

* `classify_pods` is pure: which pods of a node to evict, which to leave (DaemonSet, mirror/static,
  terminated, protected namespace) and which to refuse (no controller: nothing would recreate them,
  so they are only evicted with `force`).
* `drain` cordons first, evicts through the Eviction API (`policy/v1`), which the API server refuses
  with HTTP 429 while a PodDisruptionBudget would be violated; those evictions are retried with
  backoff until `eviction_timeout` per pod and `timeout` overall. It then waits until every evicted pod
  is gone (or replaced by a pod of the same name with another uid). A drain that cannot finish raises
  `DrainError` (with the partial `DrainResult`), naming each pod left and why; the node stays cordoned,
  as after a failed `kubectl drain`.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.common.deadline import doubled
from ansible_collections.steward.cluster.plugins.module_utils.kube.client import KubeClient, api_path
from ansible_collections.steward.cluster.plugins.module_utils.kube.errors import KubeError, NotFound
from ansible_collections.steward.cluster.plugins.module_utils.kube.selectors import selector_matches

MIRROR_ANNOTATION = 'kubernetes.io/config.mirror'
EVICTION_API_VERSION = 'policy/v1'
TERMINATED_PHASES = ('Succeeded', 'Failed')

# Retry pacing: evictions refused by a PDB (kubectl retries every 5 s), and polls for evicted pods to go.
EVICT_BACKOFF_START = 0.2
EVICT_BACKOFF_MAX = 5.0
POLL_START = 0.1
POLL_MAX = 2.0


class DrainError(KubeError):
    """The node could not be drained (missing node, refused pods, timeout); `result` holds what was done. A KubeError
    so that whoever handles the API's failures handles this one too; `status` is 0, as nothing the server said
    decided it (callers match on the type, not on the status)."""

    def __init__(self, message: str, result: Optional['DrainResult'] = None):
        super().__init__(message)
        self.result = result


@dataclasses.dataclass
class DrainResult:
    """Pod references are `namespace/name`; skipped and forced entries carry the reason: `ns/name (reason)`."""

    evicted: List[str]
    skipped: List[str]
    complete: bool
    message: str
    forced: List[str] = dataclasses.field(default_factory=list)   # unmanaged pods evicted only because of force
    cordoned: bool = False                                         # this drain cordoned the node (it was schedulable)


@dataclasses.dataclass
class PodClassification:
    """`evict` holds the pod dicts; the other lists hold `(ref, reason)`."""

    evict: List[Dict[str, Any]]
    skipped: List[Tuple[str, str]]
    refused: List[Tuple[str, str]]
    forced: List[Tuple[str, str]]


# --- pure helpers -----------------------------------------------------------------------------

def pod_ref(pod: Mapping[str, Any]) -> str:
    md = pod.get('metadata') or {}
    return '%s/%s' % (md.get('namespace') or 'default', md.get('name'))


def controller_of(pod: Mapping[str, Any]) -> Optional[Dict[str, Any]]:
    """The ownerReference with `controller: true` (metav1.GetControllerOf): what recreates the pod."""
    for ref in (pod.get('metadata') or {}).get('ownerReferences') or []:
        if ref.get('controller'):
            return ref
    return None


def is_mirror_pod(pod: Mapping[str, Any]) -> bool:
    """A static pod's API mirror: deleting it does nothing, the kubelet owns the pod."""
    return MIRROR_ANNOTATION in ((pod.get('metadata') or {}).get('annotations') or {})


def is_daemonset_pod(pod: Mapping[str, Any]) -> bool:
    ref = controller_of(pod)
    return ref is not None and ref.get('kind') == 'DaemonSet'


def is_terminated(pod: Mapping[str, Any]) -> bool:
    return (pod.get('status') or {}).get('phase') in TERMINATED_PHASES


def classify_pods(pods: Sequence[Mapping[str, Any]], node_name: Optional[str] = None,
                  protected_namespaces: Sequence[str] = (), force: bool = False) -> PodClassification:
    """Sort a node's pods into evict / skip / refuse, with kubectl drain's rules.

    Pods bound to another node are dropped (when `node_name` is given): the server-side field selector
    is a hint, not a contract. The first matching rule gives the reason.
    """
    result = PodClassification(evict=[], skipped=[], refused=[], forced=[])
    protected = set(protected_namespaces or ())
    for pod in pods:
        if node_name is not None and (pod.get('spec') or {}).get('nodeName') != node_name:
            continue
        ref = pod_ref(pod)
        namespace = (pod.get('metadata') or {}).get('namespace') or 'default'
        if is_mirror_pod(pod):
            result.skipped.append((ref, 'mirror pod'))
        elif is_daemonset_pod(pod):
            result.skipped.append((ref, 'DaemonSet pod'))
        elif is_terminated(pod):
            result.skipped.append((ref, 'terminated (%s)' % pod['status']['phase']))
        elif namespace in protected:
            result.skipped.append((ref, 'protected namespace %s' % namespace))
        elif controller_of(pod) is None:
            if force:
                result.forced.append((ref, 'no controller, evicted because of force'))
                result.evict.append(dict(pod))
            else:
                result.refused.append((ref, 'no controller'))
        else:
            result.evict.append(dict(pod))
    return result


def eviction_body(pod: Mapping[str, Any]) -> Dict[str, Any]:
    md = pod.get('metadata') or {}
    return {'apiVersion': EVICTION_API_VERSION, 'kind': 'Eviction',
            'metadata': {'name': md.get('name'), 'namespace': md.get('namespace') or 'default'}}


# --- cordon / uncordon --------------------------------------------------------------------------

def _set_unschedulable(client: KubeClient, node_name: str, unschedulable: bool) -> bool:
    path = api_path('v1', 'nodes', name=node_name)
    try:
        node = client.get(path)
        if bool((node.get('spec') or {}).get('unschedulable')) == unschedulable:
            return False
        # kubectl uncordon removes the field (null in the merge patch) rather than writing false.
        client.merge_patch(path, {'spec': {'unschedulable': True if unschedulable else None}})
    except NotFound:
        raise DrainError('node %s does not exist' % node_name) from None
    return True


def cordon(client: KubeClient, node_name: str) -> bool:
    """Mark the node unschedulable; True if it was schedulable. A missing node raises DrainError."""
    return _set_unschedulable(client, node_name, True)


def uncordon(client: KubeClient, node_name: str) -> bool:
    """Make the node schedulable again; True if it was cordoned. A missing node raises DrainError."""
    return _set_unschedulable(client, node_name, False)


# --- drain ----------------------------------------------------------------------------------------

@dataclasses.dataclass
class _Pending:
    pod: Dict[str, Any]
    deadline: float
    reason: str = ''


def _blocking_budgets(client: KubeClient, pod: Mapping[str, Any]) -> str:
    """Name the PodDisruptionBudgets that select the pod, for the error message (best effort)."""
    md = pod.get('metadata') or {}
    try:
        pdbs = client.list(api_path(EVICTION_API_VERSION, 'poddisruptionbudgets', md.get('namespace') or 'default'))
    except KubeError:
        return ''
    names = []
    for pdb in pdbs:
        spec = pdb.get('spec') or {}
        if selector_matches(spec.get('selector'), md.get('labels') or {}):
            limit = ('minAvailable=%s' % spec['minAvailable'] if 'minAvailable' in spec
                     else 'maxUnavailable=%s' % spec.get('maxUnavailable'))
            names.append('%s/%s (%s)' % (md.get('namespace') or 'default', pdb['metadata']['name'], limit))
    return ', '.join(names)


def plan_drain(client: KubeClient, node_name: str, protected_namespaces: Sequence[str] = (),
               force: bool = False) -> PodClassification:
    """What `drain` would do, read-only (check mode): the node's pods, classified."""
    if client.get_or_none(api_path('v1', 'nodes', name=node_name)) is None:
        raise DrainError('node %s does not exist' % node_name)
    pods = client.list(api_path('v1', 'pods'), field_selector='spec.nodeName=%s' % node_name)
    return classify_pods(pods, node_name, protected_namespaces, force)


def drain(client: KubeClient, node_name: str, *, timeout: float, eviction_timeout: float,
          protected_namespaces: Sequence[str], force: bool,
          clock: Callable[[], float] = time.time, sleep: Callable[[float], None] = time.sleep) -> DrainResult:
    """Cordon the node, evict its pods (respecting PodDisruptionBudgets) and wait until they are gone.

    Returns a complete DrainResult, or raises DrainError whose `result` has complete=False. Evictions answered
    429 (a PDB) or not reached (API down) are retried; other API errors fail that pod. Errors outside the
    evictions (cordon, listing) propagate as KubeError.
    """
    deadline = clock() + timeout
    cordoned = cordon(client, node_name)
    plan = plan_drain(client, node_name, protected_namespaces, force)
    skipped = ['%s (%s)' % item for item in plan.skipped]
    forced = ['%s (%s)' % item for item in plan.forced]
    result = DrainResult(evicted=[], skipped=skipped, complete=False, message='', forced=forced, cordoned=cordoned)
    if plan.refused:
        result.message = 'cannot drain node %s: pods without a controller (set force to evict them anyway): %s' % (
            node_name, ', '.join(ref for ref, _unused in plan.refused))
        raise DrainError(result.message, result)

    failed: Dict[str, str] = {}
    waiting = _evict_all(client, plan.evict, deadline, eviction_timeout, clock, sleep, result, failed)
    still = _wait_gone(client, waiting, deadline, clock, sleep)
    for ref in still:
        failed[ref] = 'evicted but still terminating after the drain timeout of %ss' % _fmt(timeout)
    if failed:
        result.message = 'drain of node %s did not finish: %d pod(s) left: %s' % (
            node_name, len(failed), '; '.join('%s: %s' % item for item in sorted(failed.items())))
        raise DrainError(result.message, result)
    result.complete = True
    result.message = 'node %s drained: %d pod(s) evicted, %d skipped' % (node_name, len(result.evicted), len(result.skipped))
    return result


def _fmt(seconds: float) -> str:
    return ('%.1f' % seconds).rstrip('0').rstrip('.')


def _evict_all(client: KubeClient, pods: List[Dict[str, Any]], deadline: float, eviction_timeout: float,
               clock: Callable[[], float], sleep: Callable[[float], None], result: DrainResult,
               failed: Dict[str, str]) -> Dict[str, Dict[str, Any]]:
    """Evict every pod, in rounds, until each is accepted, gone or past its deadline; returns ref -> pod to wait for."""
    now = clock()
    pending = {pod_ref(p): _Pending(p, min(now + eviction_timeout, deadline)) for p in pods}
    patience = _fmt(max(0.0, min(eviction_timeout, deadline - now)))
    waiting: Dict[str, Dict[str, Any]] = {}
    backoff = EVICT_BACKOFF_START
    while pending:
        for ref in list(pending):
            item = pending[ref]
            md = item.pod['metadata']
            path = api_path('v1', 'pods', md.get('namespace') or 'default', md['name'], 'eviction')
            try:
                client.create(path, eviction_body(item.pod))
            except NotFound:
                result.evicted.append(ref)   # already gone
                del pending[ref]
                continue
            except KubeError as exc:
                if exc.status not in (429, 0):   # 429: a PDB refuses for now; 0: API server not reached
                    failed[ref] = 'eviction failed: %s' % exc
                    del pending[ref]
                    continue
                item.reason = str(exc)
                if clock() >= item.deadline:
                    budgets = _blocking_budgets(client, item.pod) if exc.status == 429 else ''
                    failed[ref] = ('eviction refused for %ss by PodDisruptionBudget %s' % (patience, budgets) if budgets
                                   else 'eviction not accepted within %ss: %s' % (patience, item.reason))
                    del pending[ref]
                continue
            result.evicted.append(ref)
            waiting[ref] = item.pod
            del pending[ref]
        if pending:
            earliest = min(p.deadline for p in pending.values())
            sleep(max(0.0, min(backoff, earliest - clock())))
            backoff = doubled(backoff, EVICT_BACKOFF_START, EVICT_BACKOFF_MAX)
    return waiting


def _wait_gone(client: KubeClient, waiting: Dict[str, Dict[str, Any]], deadline: float,
               clock: Callable[[], float], sleep: Callable[[float], None]) -> List[str]:
    """Poll until each evicted pod is gone or replaced (other uid); returns the refs still there at the deadline."""
    interval = POLL_START
    remaining = dict(waiting)
    while remaining:
        for ref in list(remaining):
            md = remaining[ref]['metadata']
            current = client.get_or_none(api_path('v1', 'pods', md.get('namespace') or 'default', md['name']))
            if current is None or (current.get('metadata') or {}).get('uid') != md.get('uid'):
                del remaining[ref]
        if not remaining or clock() >= deadline:
            break
        sleep(max(0.0, min(interval, deadline - clock())))
        interval = doubled(interval, POLL_START, POLL_MAX)
    return sorted(remaining)
