"""The pod `eviction` subresource's budget check, for the lab's emulator (kube_api.py serves the request).

There is no disruption controller, so a PodDisruptionBudget's budget is computed at request time from the pods
present: healthy = Ready condition True and not deleting; expected = the pod count, or for maxUnavailable / a
percentage the sum of `spec.replicas` of the pods' controllers (ReplicaSet, StatefulSet, ReplicationController)
when they all exist; desired healthy = minAvailable (percentages rounded up) or expected - maxUnavailable
(neither set: minAvailable 1). A Ready pod may go if healthy - 1 >= desired, an unready one if
healthy >= desired or `unhealthyPodEvictionPolicy: AlwaysAllow`. Pending/Succeeded/Failed or already deleting
pods are evicted without a budget check. Selectors are matched by the emulator's own selector code
(kube_selectors.py), never the engine's.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Dict, List, Optional, Tuple

from lab.kube.selectors import SelectorError, label_selector_from_spec

PODS = ('', 'v1', 'pods')
PDBS = ('policy', 'v1', 'poddisruptionbudgets')
SCALED_OWNERS = {'ReplicaSet': ('apps', 'v1', 'replicasets'), 'StatefulSet': ('apps', 'v1', 'statefulsets'),
                 'ReplicationController': ('', 'v1', 'replicationcontrollers')}

# live(resource, namespace) -> the objects; lookup(resource, namespace, name) -> the object or None.
Live = Callable[[Tuple[str, str, str], Optional[str]], List[Dict[str, Any]]]
Lookup = Callable[[Tuple[str, str, str], Optional[str], str], Optional[Dict[str, Any]]]


class SeveralBudgets(Exception):
    """More than one PodDisruptionBudget selects the pod: the API server answers 500."""


def selects(pdb: Dict[str, Any], labels: Dict[str, str]) -> bool:
    try:
        return label_selector_from_spec((pdb.get('spec') or {}).get('selector')).matches(labels)
    except SelectorError:  # refused at write time; an object stored around the checks selects nothing
        return False


def pod_healthy(pod: Dict[str, Any]) -> bool:
    """What the disruption controller counts as healthy: Ready condition True and not being deleted."""
    if (pod.get('metadata') or {}).get('deletionTimestamp'):
        return False
    return any(c.get('type') == 'Ready' and c.get('status') == 'True'
               for c in (pod.get('status') or {}).get('conditions') or [])


def scaled(value: Any, total: int) -> int:
    """intstr.GetScaledValueFromIntOrPercent(value, total, roundUp=true)."""
    if isinstance(value, str) and value.endswith('%'):
        return int(math.ceil(int(value[:-1]) * total / 100.0))
    return int(value)


def refusal(pod: Dict[str, Any], live: Live, lookup: Lookup) -> str:
    """'' if the pod may be evicted now, else the DisruptionBudget cause. Raises SeveralBudgets."""
    md = pod.get('metadata') or {}
    if (pod.get('status') or {}).get('phase') in ('Pending', 'Succeeded', 'Failed') or md.get('deletionTimestamp'):
        return ''
    namespace = md.get('namespace')
    labels = md.get('labels') or {}
    pdbs = [p for p in live(PDBS, namespace) if selects(p, labels)]
    if not pdbs:
        return ''
    if len(pdbs) > 1:
        raise SeveralBudgets(md.get('name'))
    pdb = pdbs[0]
    spec = pdb.get('spec') or {}
    pods = [p for p in live(PODS, namespace) if selects(pdb, (p.get('metadata') or {}).get('labels') or {})]
    healthy = sum(1 for p in pods if pod_healthy(p))
    desired = _desired_healthy(spec, pods, namespace, lookup)
    if pod_healthy(pod):
        allowed = healthy - 1 >= desired
    else:
        allowed = healthy >= desired or spec.get('unhealthyPodEvictionPolicy') == 'AlwaysAllow'
    if allowed:
        return ''
    return 'The disruption budget %s needs %d healthy pods and has %d currently' % (
        pdb['metadata']['name'], desired, healthy)


def _desired_healthy(spec: Dict[str, Any], pods: List[Dict[str, Any]], namespace: Optional[str],
                     lookup: Lookup) -> int:
    min_available = spec.get('minAvailable')
    max_unavailable = spec.get('maxUnavailable')
    if max_unavailable is None and min_available is None:
        min_available = 1
    if max_unavailable is None and isinstance(min_available, int):
        return min_available
    expected = _expected_pods(pods, namespace, lookup)
    if max_unavailable is None:
        return scaled(min_available, expected)
    return max(0, expected - scaled(max_unavailable, expected))


def _expected_pods(pods: List[Dict[str, Any]], namespace: Optional[str], lookup: Lookup) -> int:
    """Sum of the controllers' spec.replicas (the disruption controller's scale); the pod count if one is missing."""
    controllers: Dict[Tuple[str, str], int] = {}
    for pod in pods:
        owner = next((r for r in (pod.get('metadata') or {}).get('ownerReferences') or [] if r.get('controller')), None)
        res = SCALED_OWNERS.get((owner or {}).get('kind'))
        found = lookup(res, namespace, owner['name']) if res is not None and owner else None
        if found is None:
            return len(pods)
        replicas = (found.get('spec') or {}).get('replicas')
        controllers[(owner['kind'], owner['name'])] = 1 if replicas is None else int(replicas)
    return sum(controllers.values())
