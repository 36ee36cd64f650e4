"""Workloads in the lab's emulator: the `scale` subresource and a status mover standing in for the deployment,
statefulset and replicaset controllers. Pure functions over plain objects; the emulator (kube_api.py) stores.

Scale (autoscaling/v1, as the API server serves it):
* apps/v1 Deployments, StatefulSets, ReplicaSets and v1 ReplicationControllers: spec.replicas / status.replicas,
  status.selector is spec.selector in its string form;
* custom resources whose CRD version declares `subresources.scale`: specReplicasPath, statusReplicasPath and
  the optional labelSelectorPath (a string field) of the CRD; a missing value reads as 0.

Status mover: `status_delay` seconds (default 1) after the last write to a Deployment, StatefulSet or ReplicaSet,
its status follows spec: replicas, readyReplicas, availableReplicas, updatedReplicas (and the kind's other
counters), observedGeneration = metadata.generation, and the conditions the controller would set. Zero counters
are left out where the Go types say `omitempty`, as a real API server serializes them. An object annotated
`lab.steward.io/hold-status: "true"` keeps its status (a target that never becomes ready); removing the
annotation lets it move again.
"""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from lab.kube.selectors import SelectorError, selector_string

HOLD_STATUS = 'lab.steward.io/hold-status'
DEFAULT_STATUS_DELAY = 1.0
MOVED_KINDS = {('apps', 'deployments'), ('apps', 'statefulsets'), ('apps', 'replicasets')}


@dataclass(frozen=True)
class ScalePaths:
    """Where a kind keeps its replica counts (CRD `subresources.scale`, JSON paths without the leading dot)."""
    spec_replicas: Tuple[str, ...]
    status_replicas: Tuple[str, ...]
    label_selector: Optional[Tuple[str, ...]] = None  # a string field; None: built-ins derive it from spec.selector
    builtin: bool = False


BUILTIN_SCALE = ScalePaths(('spec', 'replicas'), ('status', 'replicas'), None, builtin=True)
BUILTIN_SCALED = {('apps', 'deployments'), ('apps', 'statefulsets'), ('apps', 'replicasets'),
                  ('', 'replicationcontrollers')}


def _json_path(path: Optional[str]) -> Optional[Tuple[str, ...]]:
    """`.spec.replicas` -> ('spec', 'replicas'); the CRD API allows only dotted field paths here."""
    if not path:
        return None
    return tuple(p for p in path.lstrip('.').split('.') if p)


def crd_scale_paths(scale: Dict[str, Any]) -> ScalePaths:
    return ScalePaths(_json_path(scale.get('specReplicasPath')) or ('spec', 'replicas'),
                      _json_path(scale.get('statusReplicasPath')) or ('status', 'replicas'),
                      _json_path(scale.get('labelSelectorPath')))


def _get(obj: Any, path: Tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def _set(obj: Dict[str, Any], path: Tuple[str, ...], value: Any) -> None:
    for key in path[:-1]:
        if not isinstance(obj.get(key), dict):
            obj[key] = {}
        obj = obj[key]
    obj[path[-1]] = value


def scale_of(obj: Dict[str, Any], paths: ScalePaths) -> Dict[str, Any]:
    """The autoscaling/v1 Scale of an object (metadata from the object, replica counts from its paths)."""
    md = obj.get('metadata') or {}
    spec_replicas = _get(obj, paths.spec_replicas)
    status_replicas = _get(obj, paths.status_replicas)
    if paths.builtin:
        try:
            selector = selector_string((obj.get('spec') or {}).get('selector'))
        except SelectorError:
            selector = ''
    else:
        selector = _get(obj, paths.label_selector) if paths.label_selector else ''
    scale: Dict[str, Any] = {
        'kind': 'Scale', 'apiVersion': 'autoscaling/v1',
        'metadata': {k: md[k] for k in ('name', 'namespace', 'uid', 'resourceVersion', 'creationTimestamp') if k in md},
        'spec': {}, 'status': {'replicas': int(status_replicas or 0)}}
    if spec_replicas:
        scale['spec']['replicas'] = int(spec_replicas)
    if selector:
        scale['status']['selector'] = str(selector)
    return scale


def with_replicas(obj: Dict[str, Any], paths: ScalePaths, replicas: int) -> Dict[str, Any]:
    after = copy.deepcopy(obj)
    _set(after, paths.spec_replicas, replicas)
    return after


def default_replicas(group: str, plural: str, obj: Dict[str, Any]) -> None:
    """The API server's defaulting: a workload without spec.replicas gets 1."""
    if (group, plural) in BUILTIN_SCALED and isinstance(obj.get('spec'), dict) and obj['spec'].get('replicas') is None:
        obj['spec']['replicas'] = 1


# --- status mover ------------------------------------------------------------------------------------------------
def holds_status(obj: Dict[str, Any]) -> bool:
    return str(((obj.get('metadata') or {}).get('annotations') or {}).get(HOLD_STATUS, '')).lower() == 'true'


def _template_hash(obj: Dict[str, Any]) -> str:
    """A stable stand-in for the pod-template hash the controllers put in ReplicaSet/revision names."""
    text = json.dumps((obj.get('spec') or {}).get('template') or {}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def _condition(previous: List[Dict[str, Any]], kind: str, status: str, reason: str, message: str,
               now: str) -> Dict[str, Any]:
    """A condition that keeps its lastTransitionTime while its status does not change."""
    old = next((c for c in previous if c.get('type') == kind), {})
    changed = old.get('status') != status
    return {'type': kind, 'status': status, 'reason': reason, 'message': message,
            'lastUpdateTime': now if changed or old.get('reason') != reason else old.get('lastUpdateTime', now),
            'lastTransitionTime': now if changed else old.get('lastTransitionTime', now)}


def _omit_zero(status: Dict[str, Any], keys: Tuple[str, ...]) -> Dict[str, Any]:
    return {k: v for k, v in status.items() if not (k in keys and v == 0)}


def desired_status(plural: str, obj: Dict[str, Any], now: str) -> Dict[str, Any]:
    """What the kind's controller would report once every replica is up to date and ready."""
    md = obj.get('metadata') or {}
    spec = obj.get('spec') or {}
    replicas = spec.get('replicas')
    replicas = 1 if replicas is None else int(replicas)
    generation = int(md.get('generation') or 1)
    name = md.get('name', '')
    previous = (obj.get('status') or {}).get('conditions') or []
    if plural == 'deployments':
        status = {'observedGeneration': generation, 'replicas': replicas, 'updatedReplicas': replicas,
                  'readyReplicas': replicas, 'availableReplicas': replicas}
        status = _omit_zero(status, ('replicas', 'updatedReplicas', 'readyReplicas', 'availableReplicas'))
        status['conditions'] = [
            _condition(previous, 'Available', 'True', 'MinimumReplicasAvailable', 'Deployment has minimum availability.',
                       now),
            _condition(previous, 'Progressing', 'True', 'NewReplicaSetAvailable',
                       'ReplicaSet "%s-%s" has successfully progressed.' % (name, _template_hash(obj)), now)]
        return status
    if plural == 'statefulsets':
        revision = '%s-%s' % (name, _template_hash(obj))
        status = {'observedGeneration': generation, 'replicas': replicas, 'readyReplicas': replicas,
                  'currentReplicas': replicas, 'updatedReplicas': replicas, 'availableReplicas': replicas,
                  'currentRevision': revision, 'updateRevision': revision, 'collisionCount': 0}
        return _omit_zero(status, ('readyReplicas', 'currentReplicas', 'updatedReplicas', 'collisionCount'))
    status = {'replicas': replicas, 'fullyLabeledReplicas': replicas, 'readyReplicas': replicas,
              'availableReplicas': replicas, 'observedGeneration': generation}
    return _omit_zero(status, ('fullyLabeledReplicas', 'readyReplicas', 'availableReplicas'))


def moved_status(plural: str, obj: Dict[str, Any], now: str) -> Optional[Dict[str, Any]]:
    """The status to write now, or None when the object holds its status or already shows the desired one."""
    if holds_status(obj):
        return None
    current = obj.get('status') or {}
    wanted = desired_status(plural, obj, now)
    return None if _same(current, wanted) else wanted


def _same(current: Dict[str, Any], wanted: Dict[str, Any]) -> bool:
    """Equal except for condition timestamps (a fresh `now` alone is no change)."""
    def strip(status: Dict[str, Any]) -> Dict[str, Any]:
        out = dict(status)
        out['conditions'] = [{k: v for k, v in c.items() if not k.endswith('Time')} for c in status.get('conditions') or []]
        return out
    return strip(current) == strip(wanted)
