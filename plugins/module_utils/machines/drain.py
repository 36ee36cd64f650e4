# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The drain of a deleting machine's Node, one round at a time (a pass never blocks on it).

Which pods go is decided by kubectl drain's rules (`kube/drain.classify_pods`: DaemonSet,
mirror and finished pods stay; MCM also drains pods without a controller, so those are evicted too).
A round returns what to do now:

* normal drain: every pod without volumes is evicted in parallel through the Eviction API (PodDisruption-
  Budgets honoured: a refused eviction is retried next round); pods with persistent volumes go one at a time,
  each waiting until its volumes have left the Node's `status.volumesAttached` (at most the PV detach
  timeout); a refused pod names the PodDisruptionBudget that refuses it;
* forced drain (force-deletion label, drain timeout, NotReady past the limit, or the cloud reports the VM
  stopped or gone): pods are deleted without eviction; after FORCED_GRACE seconds the drain counts as done
  even if some are still terminating (the VM is deleted next, which ends them).

`DrainMemory` carries what earlier rounds did (eviction times, refusals, counted attempts); the shell keeps
it per machine. Losing it (a restart) only restarts the serial wait, never the drain timeout, which counts
from the machine's deletionTimestamp.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Mapping, Optional, Sequence, Set, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.machines.config import EVICTION_RETRY_INTERVAL
from ansible_collections.steward.cluster.plugins.module_utils.kube.drain import classify_pods, pod_ref
from ansible_collections.steward.cluster.plugins.module_utils.kube.selectors import selector_matches

FORCED_GRACE = 60.0       # MCM: a forced drain gets one minute, then the VM is deleted anyway


@dataclasses.dataclass
class DrainMemory:
    # ref -> (uid, when, has volumes, its PV volume IDs): the IDs are kept from the eviction, since the serial wait
    # for them to detach runs after the pod (and what leads to them) is gone
    evicted: Dict[str, Tuple[str, float, bool, Tuple[str, ...]]] = dataclasses.field(default_factory=dict)
    refused: Dict[str, str] = dataclasses.field(default_factory=dict)                 # ref -> refusal message
    attempts: Dict[str, int] = dataclasses.field(default_factory=dict)                # ref -> counted attempts
    counted_at: Dict[str, float] = dataclasses.field(default_factory=dict)            # ref -> last counted attempt
    forced_at: Optional[float] = None


@dataclasses.dataclass(frozen=True)
class DrainInputs:
    node_name: str
    pods: Sequence[Mapping[str, Any]]
    pdbs: Sequence[Mapping[str, Any]]
    force: bool
    now: float
    pv_detach_timeout: float
    max_evict_retries: int
    volume_ids: Mapping[str, Sequence[str]] = dataclasses.field(default_factory=dict)   # pod ref -> its PV volume IDs
    attached: Sequence[str] = ()                                                       # node.status.volumesAttached names


@dataclasses.dataclass
class DrainPlan:
    evict: List[Mapping[str, Any]] = dataclasses.field(default_factory=list)
    delete: List[Mapping[str, Any]] = dataclasses.field(default_factory=list)
    waiting: List[str] = dataclasses.field(default_factory=list)
    blocked: List[str] = dataclasses.field(default_factory=list)      # `pod: PodDisruptionBudget ns/name (rule)`
    exhausted: List[str] = dataclasses.field(default_factory=list)    # pods past maxEvictRetries
    done: bool = False
    message: str = ''


def has_volumes(pod: Mapping[str, Any]) -> bool:
    return any('persistentVolumeClaim' in (v or {}) for v in (pod.get('spec') or {}).get('volumes') or [])


def budgets_for(pod: Mapping[str, Any], pdbs: Sequence[Mapping[str, Any]]) -> List[str]:
    """`namespace/name (minAvailable=1)` of each PodDisruptionBudget selecting the pod."""
    md = pod.get('metadata') or {}
    out = []
    for pdb in pdbs:
        pmd = pdb.get('metadata') or {}
        if (pmd.get('namespace') or 'default') != (md.get('namespace') or 'default'):
            continue
        spec = pdb.get('spec') or {}
        if selector_matches(spec.get('selector'), md.get('labels') or {}):
            rule = ('minAvailable=%s' % spec['minAvailable'] if 'minAvailable' in spec
                    else 'maxUnavailable=%s' % spec.get('maxUnavailable'))
            out.append('%s/%s (%s)' % (pmd.get('namespace') or 'default', pmd.get('name'), rule))
    return out


def plan_round(inputs: DrainInputs, memory: DrainMemory) -> DrainPlan:
    """One drain round. Mutates `memory` only in the bookkeeping the next round needs (attempt counters)."""
    plan = DrainPlan()
    drainable = classify_pods(inputs.pods, inputs.node_name, (), force=True).evict
    present = {pod_ref(p): p for p in drainable}
    if inputs.force:
        if memory.forced_at is None:
            memory.forced_at = inputs.now
        plan.delete = [p for p in drainable if not (p.get('metadata') or {}).get('deletionTimestamp')]
        plan.waiting = sorted(present)
        plan.done = not present or inputs.now - memory.forced_at >= FORCED_GRACE
        plan.message = ('forced drain done' if plan.done else
                        'forced drain: %d pod(s) deleted, waiting up to %ds for them to go' % (len(present), FORCED_GRACE))
        return plan
    volume_pods = []
    for ref, pod in sorted(present.items()):
        deleting = bool((pod.get('metadata') or {}).get('deletionTimestamp'))
        if deleting:
            plan.waiting.append(ref)
        elif has_volumes(pod):
            volume_pods.append(pod)
        else:
            plan.evict.append(pod)
    # Pods with volumes: one at a time, each until its volumes are detached (or the PV detach timeout).
    attached = set(inputs.attached)
    serial_busy = False
    for ref, (uid, when, volumes, ids) in sorted(memory.evicted.items()):
        if volumes and inputs.now - when < inputs.pv_detach_timeout:
            pod = present.get(ref)
            still_there = pod is not None and (pod.get('metadata') or {}).get('uid') == uid
            still_attached = _attached(ids or tuple(inputs.volume_ids.get(ref, ())), attached)
            if still_there or still_attached:
                serial_busy = True
                plan.waiting.append('%s (volumes detaching)' % ref)
    if volume_pods and not serial_busy:
        plan.evict.append(volume_pods[0])
    elif volume_pods:
        plan.waiting.extend(pod_ref(p) for p in volume_pods)
    for pod in plan.evict:
        ref = pod_ref(pod)
        if ref in memory.refused:
            last = memory.counted_at.get(ref)
            if last is None or inputs.now - last >= EVICTION_RETRY_INTERVAL:
                memory.attempts[ref] = memory.attempts.get(ref, 0) + 1
                memory.counted_at[ref] = inputs.now
            if memory.attempts.get(ref, 0) > inputs.max_evict_retries:
                plan.exhausted.append(ref)
            names = budgets_for(pod, inputs.pdbs)
            plan.blocked.append('%s: PodDisruptionBudget %s' % (ref, ', '.join(names)) if names
                                else '%s: %s' % (ref, memory.refused[ref]))
    plan.done = not present and not serial_busy       # MCM waits for the last volume pod's volumes to detach too
    if plan.done:
        plan.message = 'drain complete'
    elif not present:
        plan.message = 'waiting for the volumes of %s to detach from node %s' % (
            ', '.join(w.split(' ')[0] for w in plan.waiting), inputs.node_name)
    elif plan.blocked:
        plan.message = 'eviction refused: %s' % '; '.join(plan.blocked)
    else:
        plan.message = '%d pod(s) left on node %s' % (len(present), inputs.node_name)
    return plan


def _attached(volume_ids: Sequence[str], attached: Set[str]) -> bool:
    """A Node lists attached volumes as `kubernetes.io/csi/<driver>^<handle>` or `kubernetes.io/aws-ebs/<id>`."""
    return any(vid and any(name.endswith(vid) or ('^' + vid) in name or ('/' + vid) in name for name in attached)
               for vid in volume_ids)


def record_eviction(memory: DrainMemory, pod: Mapping[str, Any], accepted: bool, now: float, message: str = '',
                    volume_ids: Sequence[str] = ()) -> None:
    """What an eviction did; `volume_ids`: the pod's PV volume IDs (GetVolumeIDs), which the next rounds wait for
    to leave the Node's volumesAttached."""
    ref = pod_ref(pod)
    if accepted:
        memory.evicted[ref] = ((pod.get('metadata') or {}).get('uid') or '', now, has_volumes(pod), tuple(volume_ids))
        memory.refused.pop(ref, None)
    else:
        memory.refused[ref] = message or 'eviction refused'
