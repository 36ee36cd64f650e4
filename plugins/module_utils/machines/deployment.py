# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One MachineDeployment: its MachineSets, rollouts, scaling, pause, rollback, progress and status.

The order is the Deployment controller's (MCM keeps it): a deletion removes the sets; paused -> proportional
scaling only, and a pending `rollbackTo` waits for the resume (both check `spec.paused` first: a paused
deployment never rolls back); a pending rollback rewrites the template and clears `rollbackTo` (nothing else
happens until it is cleared); scaling (a set's `desired-replicas` annotation differs from `replicas`) ->
proportional scaling only; else the strategy (RollingUpdate or Recreate, see rollout.py). Then old sets beyond
`revisionHistoryLimit` are deleted once the rollout is complete, and status (counts, Available / Progressing
conditions, progress deadline).

A new MachineSet is named `<deployment>-<hash>`; the hash covers the template except the node template and
the per-machine timeouts (MCM: those change in place, no rollout), plus `collisionCount`.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
from typing import Any, Dict, List, Mapping, Optional, Sequence

from ansible_collections.steward.cluster.plugins.module_utils.kube.conditions import get_condition, set_condition
from ansible_collections.steward.cluster.plugins.module_utils.machines import objects as o
from ansible_collections.steward.cluster.plugins.module_utils.machines import rollout as r
from ansible_collections.steward.cluster.plugins.module_utils.machines.constants import (
    ANNOTATION_DESIRED_REPLICAS,
    ANNOTATION_MAX_REPLICAS,
    ANNOTATION_REVISION,
    COND_AVAILABLE,
    ANNOTATION_SCALER_CHANGE_TIME,
    COND_PROGRESSING,
    FINALIZER,
    IN_PLACE_FIELDS,
    LABEL_TEMPLATE_HASH,
    STRATEGY_IN_PLACE,
)
from ansible_collections.steward.cluster.plugins.module_utils.kube.mcm import (
    API_VERSION,
    KIND_DEPLOYMENT,
    KIND_SET,
)
from ansible_collections.steward.cluster.plugins.module_utils.machines.inplace import Transfer, plan_deployment_inplace
from ansible_collections.steward.cluster.plugins.module_utils.machines.plan import Event

Obj = Mapping[str, Any]
_SAFE_ALPHABET = 'bcdfghjklmnpqrstvwxz2456789'   # Kubernetes' rand.SafeEncodeString


@dataclasses.dataclass
class DeploymentPlan:
    key: str
    uid: str
    create_set: Optional[Dict[str, Any]] = None                 # a MachineSet to create
    set_patches: Dict[str, Dict[str, Any]] = dataclasses.field(default_factory=dict)   # set name -> merge patch
    delete_sets: List[str] = dataclasses.field(default_factory=list)
    adopt_sets: List[str] = dataclasses.field(default_factory=list)
    patch: Optional[Dict[str, Any]] = None                      # merge patch of the deployment (metadata/spec)
    status: Optional[Dict[str, Any]] = None
    remove_finalizer: bool = False
    events: List[Event] = dataclasses.field(default_factory=list)
    # InPlaceUpdate (inplace.py): machines moving to the new set, Machine and Node patches
    transfers: List[Transfer] = dataclasses.field(default_factory=list)
    machine_patches: Dict[str, Dict[str, Any]] = dataclasses.field(default_factory=dict)
    node_patches: Dict[str, Dict[str, Any]] = dataclasses.field(default_factory=dict)
    waiting: str = ''

    @property
    def has_work(self) -> bool:
        """Whether applying the plan writes anything (otherwise no job is started for the deployment)."""
        return bool(self.create_set or self.set_patches or self.delete_sets or self.adopt_sets or self.patch
                    or self.status or self.remove_finalizer or self.events or self.transfers or self.machine_patches
                    or self.node_patches)


@dataclasses.dataclass
class InPlaceView:
    """What an InPlaceUpdate deployment plans over besides its sets: each set's machines (by set name) and the
    Nodes (by name)."""
    machines_by_set: Mapping[str, Sequence[Obj]]
    nodes: Mapping[str, Obj]


def rollout_template(template: Mapping[str, Any]) -> Dict[str, Any]:
    """The template as far as a rollout cares: no hash label, no in-place fields."""
    out = copy.deepcopy(dict(template or {}))
    labels = dict((out.get('metadata') or {}).get('labels') or {})
    labels.pop(LABEL_TEMPLATE_HASH, None)
    out['metadata'] = dict(out.get('metadata') or {}, labels=labels)
    if not out['metadata'].get('annotations'):
        out['metadata'].pop('annotations', None)
    out['spec'] = {k: v for k, v in (out.get('spec') or {}).items() if k not in IN_PLACE_FIELDS}
    return out


def template_hash(template: Mapping[str, Any], collision_count: int = 0) -> str:
    data = json.dumps(rollout_template(template), sort_keys=True, separators=(',', ':'))
    digest = hashlib.sha256(('%s/%d' % (data, collision_count)).encode()).digest()
    return ''.join(_SAFE_ALPHABET[b % len(_SAFE_ALPHABET)] for b in digest[:10])


def _set_state(ms: Obj) -> r.SetState:
    st = o.status(ms)
    max_replicas = o.annotations_of(ms).get(ANNOTATION_MAX_REPLICAS)
    return r.SetState(name=o.name(ms), created=o.created_at(ms), replicas=o.replicas(ms),
                      available=o.int_field(st, 'availableReplicas'), status_replicas=o.int_field(st, 'replicas'),
                      max_replicas=int(max_replicas) if str(max_replicas or '').isdigit() else None)


def _revision(obj: Obj) -> int:
    return r.revision_of(dict(o.annotations_of(obj)), ANNOTATION_REVISION)


def find_new_set(md: Obj, sets: Sequence[Obj]) -> Optional[Obj]:
    wanted = rollout_template(o.spec(md).get('template') or {})
    matching = [s for s in sets if not o.deleting(s) and rollout_template(o.spec(s).get('template') or {}) == wanted]
    return o.sorted_by_age(matching)[0] if matching else None


def new_set_object(md: Obj, replicas: int, revision: int, surge: int, collision_count: int) -> Dict[str, Any]:
    template = copy.deepcopy(dict(o.spec(md).get('template') or {}))
    digest = template_hash(template, collision_count)
    tmeta = dict(template.get('metadata') or {})
    tmeta['labels'] = dict(tmeta.get('labels') or {}, **{LABEL_TEMPLATE_HASH: digest})
    template['metadata'] = tmeta
    selector = copy.deepcopy(dict(o.spec(md).get('selector') or {}))
    selector['matchLabels'] = dict(selector.get('matchLabels') or {}, **{LABEL_TEMPLATE_HASH: digest})
    spec = o.spec(md)
    return {
        'apiVersion': API_VERSION, 'kind': KIND_SET,
        'metadata': {
            'name': '%s-%s' % (o.name(md), digest), 'namespace': o.namespace(md),
            'labels': dict(tmeta['labels']),
            'annotations': {ANNOTATION_REVISION: str(revision), ANNOTATION_DESIRED_REPLICAS: str(o.replicas(md)),
                            ANNOTATION_MAX_REPLICAS: str(o.replicas(md) + surge)},
            'ownerReferences': [o.owner_reference(md, KIND_DEPLOYMENT)],
            'finalizers': [FINALIZER],
        },
        'spec': {'replicas': replicas, 'selector': selector, 'template': template,
                 'minReadySeconds': o.int_field(spec, 'minReadySeconds'),
                 'machineClass': dict((template.get('spec') or {}).get('class') or {})},
    }


def _scale_patch(ms: Obj, replicas: int, desired: int, surge: int) -> Optional[Dict[str, Any]]:
    """Replicas plus the desired/max-replicas annotations; None when nothing changes."""
    ann = o.annotations_of(ms)
    want_ann = {ANNOTATION_DESIRED_REPLICAS: str(desired), ANNOTATION_MAX_REPLICAS: str(desired + surge)}
    patch: Dict[str, Any] = {}
    if o.replicas(ms) != replicas:
        patch['spec'] = {'replicas': replicas}
    changed_ann = {k: v for k, v in want_ann.items() if ann.get(k) != v}
    if changed_ann:
        patch['metadata'] = {'annotations': changed_ann}
    return patch or None


def _merge(plan: DeploymentPlan, name: str, patch: Optional[Dict[str, Any]]) -> None:
    if not patch:
        return
    current = plan.set_patches.setdefault(name, {})
    for part, value in patch.items():
        if isinstance(value, dict):
            merged = dict(current.get(part) or {})
            for k, v in value.items():
                merged[k] = dict(merged.get(k) or {}, **v) if isinstance(v, dict) and isinstance(merged.get(k), dict) else v
            current[part] = merged
        else:
            current[part] = value


def plan_deployment(md: Obj, sets: Sequence[Obj], orphan_sets: Sequence[Obj], old_machines_left: int,
                    now: float, in_place: Optional[InPlaceView] = None) -> DeploymentPlan:
    """`sets`: the deployment's own MachineSets; `orphan_sets`: sets without a controller its selector matches;
    `old_machines_left`: machines of old sets still existing (Recreate waits for 0); `in_place`: the machines and
    Nodes an InPlaceUpdate deployment needs (inplace.py). Raises InvalidInput for a bad spec (strategy, selector),
    naming the field."""
    plan = DeploymentPlan(key=o.key(md), uid=o.uid(md))
    spec = o.spec(md)
    if o.deleting(md):
        plan.delete_sets = [o.name(s) for s in sets if not o.deleting(s)]
        plan.remove_finalizer = not sets and o.has_finalizer(md)
        return plan
    selector = spec.get('selector')
    plan.adopt_sets = [o.name(s) for s in orphan_sets if not o.deleting(s) and o.selector_matches(selector, o.labels(s))]
    kind, surge_value, unavailable_value = r.strategy_values(spec.get('strategy'))
    desired = o.replicas(md)
    surge = r.max_surge(kind, surge_value, unavailable_value, desired)
    max_unavail = r.max_unavailable(kind, surge_value, unavailable_value, desired)
    meta_patch: Dict[str, Any] = {}
    if not o.has_finalizer(md):
        meta_patch['finalizers'] = list(o.meta(md).get('finalizers') or []) + [FINALIZER]

    paused = bool(spec.get('paused'))
    rollback = spec.get('rollbackTo')
    if isinstance(rollback, dict) and not paused:
        _rollback(plan, md, sets, rollback, meta_patch)
        return plan

    live = [s for s in sets if not o.deleting(s)]
    new = find_new_set(md, live)
    old = [s for s in live if new is None or o.uid(s) != o.uid(new)]
    max_old_revision = max([_revision(s) for s in old] or [0])
    revision = _revision(new) if new is not None and _revision(new) > max_old_revision else max_old_revision + 1
    if new is not None and _revision(new) != revision:
        _merge(plan, o.name(new), {'metadata': {'annotations': {ANNOTATION_REVISION: str(revision)}}})
    if o.annotations_of(md).get(ANNOTATION_REVISION) != str(revision):
        meta_patch['annotations'] = {ANNOTATION_REVISION: str(revision)}
    if new is not None:
        _in_place(plan, md, new)
    states = [_set_state(s) for s in live]
    new_state = next((s for s in states if new is not None and s.name == o.name(new)), None)
    old_states = [s for s in states if new_state is None or s.name != new_state.name]
    scaling = kind != STRATEGY_IN_PLACE and any(o.annotations_of(s).get(ANNOTATION_DESIRED_REPLICAS) != str(desired)
                                                for s in live if o.replicas(s) > 0)

    if new is None and not paused and not scaling:
        collisions = o.int_field(o.status(md), 'collisionCount')
        first = r.SetState('', now, 0)
        replicas = desired if kind == 'Recreate' and not [s for s in old_states if s.replicas] and not old_machines_left \
            else (r.new_set_replicas(desired, surge, old_states, first) if kind == 'RollingUpdate' else 0)
        plan.create_set = new_set_object(md, replicas, revision, surge, collisions)
        plan.events.append(Event('NewMachineSetCreated', 'Created new machine set %s with %d replicas' % (
            plan.create_set['metadata']['name'], replicas)))
    elif paused or scaling:
        _scale(plan, live, states, new_state, desired, surge, kind == 'RollingUpdate', o.int_field(o.status(md), 'replicas'))
    elif kind == STRATEGY_IN_PLACE:
        if new is not None and in_place is not None:
            _in_place_update(plan, md, new, [s for s in live if o.uid(s) != o.uid(new)], in_place, desired, max_unavail)
    elif kind == 'Recreate':
        for name, count in r.recreate_plan(desired, old_states, new_state, old_machines_left).items():
            ms = next(s for s in live if o.name(s) == name)
            _merge(plan, name, _scale_patch(ms, count, desired, surge))
    else:
        _rolling(plan, live, states, old_states, new_state, desired, surge, max_unavail)
    if new is not None and not paused and _done(desired, states, new_state):
        _cleanup(plan, md, old)
    if meta_patch:
        plan.patch = {'metadata': meta_patch}
    plan.status = _status(md, live, new, states, desired, max_unavail, paused, now, plan)
    return plan


def _in_place_update(plan: DeploymentPlan, md: Obj, new: Obj, old: Sequence[Obj], view: InPlaceView, desired: int,
                     max_unavail: int) -> None:
    step = plan_deployment_inplace(md, old, new, view.machines_by_set, view.nodes, desired, max_unavail,
                                   r.orchestration(o.spec(md).get('strategy')))
    for name, patch in step.set_patches.items():
        _merge(plan, name, patch)
    plan.transfers = step.transfers
    plan.machine_patches = step.machine_patches
    plan.node_patches = step.node_patches
    plan.waiting = step.waiting
    if step.selected:
        plan.events.append(Event('SelectedForUpdate', 'nodes selected for an in-place update: %s'
                                 % ', '.join(step.selected)))
    if step.transfers:
        plan.events.append(Event('MachinesUpdatedInPlace', 'moved to machine set %s after an in-place update: %s'
                                 % (o.name(new), ', '.join(t.machine for t in step.transfers))))


def _in_place(plan: DeploymentPlan, md: Obj, new: Obj) -> None:
    """Node template and per-machine timeouts change in the new set's template without a rollout; the scaler's
    last change time follows the deployment's."""
    want = (o.spec(md).get('template') or {}).get('spec') or {}
    have = (o.spec(new).get('template') or {}).get('spec') or {}
    changed = {k: o.replacing_patch(have.get(k), want.get(k)) for k in IN_PLACE_FIELDS if want.get(k) != have.get(k)}
    if changed:
        _merge(plan, o.name(new), {'spec': {'template': {'spec': changed}}})
    scaled_at = o.annotations_of(md).get(ANNOTATION_SCALER_CHANGE_TIME)
    if scaled_at and o.annotations_of(new).get(ANNOTATION_SCALER_CHANGE_TIME) != scaled_at:
        # MCM copies the deployment's annotations to its new set; this is the one the set acts on (machineset.py)
        _merge(plan, o.name(new), {'metadata': {'annotations': {ANNOTATION_SCALER_CHANGE_TIME: scaled_at}}})


def _scale(plan: DeploymentPlan, live: Sequence[Obj], states: Sequence[r.SetState], new: Optional[r.SetState],
           desired: int, surge: int, rolling: bool, status_replicas: int) -> None:
    by_name = {o.name(s): s for s in live}
    active = [s for s in states if s.replicas > 0]
    if len(active) <= 1:
        target = active[0] if active else (new or (max(states, key=lambda s: s.created) if states else None))
        if target is not None:
            _merge(plan, target.name, _scale_patch(by_name[target.name], desired, desired, surge))
        return
    if r.saturated(new, desired):
        for s in states:
            if new is not None and s.name != new.name and s.replicas:
                _merge(plan, s.name, _scale_patch(by_name[s.name], 0, desired, surge))
        return
    sizes = r.proportional_scale(desired, surge, states, new, status_replicas) if rolling else {}
    for s in states:
        count = sizes.get(s.name, s.replicas)
        _merge(plan, s.name, _scale_patch(by_name[s.name], count, desired, surge))


def _rolling(plan: DeploymentPlan, live: Sequence[Obj], states: Sequence[r.SetState], old: Sequence[r.SetState],
             new: Optional[r.SetState], desired: int, surge: int, max_unavail: int) -> None:
    by_name = {o.name(s): s for s in live}
    if new is not None:
        if new.replicas > desired:
            target = desired
        elif new.replicas < desired:
            target = r.new_set_replicas(desired, surge, states, new)
        else:
            target = new.replicas
        _merge(plan, new.name, _scale_patch(by_name[new.name], target, desired, surge))
        new = dataclasses.replace(new, replicas=target)
        states = [new if s.name == new.name else s for s in states]
    for name, count in r.scale_down_old(desired, max_unavail, states, old, new).items():
        _merge(plan, name, _scale_patch(by_name[name], count, desired, surge))


def _done(desired: int, states: Sequence[r.SetState], new: Optional[r.SetState]) -> bool:
    if new is None:
        return False
    return r.complete(desired, new.status_replicas, sum(s.status_replicas for s in states),
                      sum(s.available for s in states)) and all(
        s.replicas == 0 for s in states if s.name != new.name)


def _cleanup(plan: DeploymentPlan, md: Obj, old: Sequence[Obj]) -> None:
    """Delete old, empty sets beyond revisionHistoryLimit (unset: keep all), oldest first."""
    limit = o.spec(md).get('revisionHistoryLimit')
    if not isinstance(limit, int) or isinstance(limit, bool):
        return
    empty = [s for s in o.sorted_by_age(old)
             if o.replicas(s) == 0 and o.int_field(o.status(s), 'replicas') == 0 and not o.deleting(s)]
    for s in empty[:max(0, len(empty) - limit)]:
        plan.delete_sets.append(o.name(s))


def _rollback(plan: DeploymentPlan, md: Obj, sets: Sequence[Obj], rollback: Mapping[str, Any],
              meta_patch: Dict[str, Any]) -> None:
    wanted = rollback.get('revision') or 0
    revisions = [_revision(s) for s in sets]
    if not wanted:
        wanted = r.last_revision(revisions)
    source = next((s for s in sets if _revision(s) == wanted), None) if wanted else None
    patch: Dict[str, Any] = {'spec': {'rollbackTo': None}}
    if source is None:
        plan.events.append(Event('DeploymentRollbackRevisionNotFound', 'Unable to find the revision to rollback to (%s)' % (
            rollback.get('revision') or 'last'), warning=True))
    else:
        template = copy.deepcopy(dict(o.spec(source).get('template') or {}))
        labels = dict((template.get('metadata') or {}).get('labels') or {})
        labels.pop(LABEL_TEMPLATE_HASH, None)
        template['metadata'] = dict(template.get('metadata') or {}, labels=labels)
        if rollout_template(template) != rollout_template(o.spec(md).get('template') or {}):
            patch['spec']['template'] = template
        plan.events.append(Event('DeploymentRollback', 'Rolled back deployment %s to revision %d' % (o.name(md), wanted)))
    if meta_patch:
        patch['metadata'] = meta_patch
    plan.patch = patch


def _status(md: Obj, live: Sequence[Obj], new: Optional[Obj], states: Sequence[r.SetState], desired: int,
            max_unavail: int, paused: bool, now: float, plan: DeploymentPlan) -> Optional[Dict[str, Any]]:
    def total(field: str) -> int:
        return sum(o.int_field(o.status(s), field) for s in live)
    available = total('availableReplicas')
    status: Dict[str, Any] = {
        'observedGeneration': o.generation(md),
        'replicas': total('replicas'),
        'updatedReplicas': o.int_field(o.status(new), 'replicas') if new is not None else 0,
        'readyReplicas': total('readyReplicas'),
        'availableReplicas': available,
        'unavailableReplicas': max(0, desired - available),
    }
    failed = [fm for s in live for fm in (o.status(s).get('failedMachines') or [])]
    status['failedMachines'] = failed or None
    conditions = list(o.status(md).get('conditions') or [])
    if available >= desired - max_unavail:
        conditions = _keep_or_set(conditions, COND_AVAILABLE, 'True', 'MinimumReplicasAvailable',
                                  'Deployment has minimum availability.', now)
    else:
        conditions = _keep_or_set(conditions, COND_AVAILABLE, 'False', 'MinimumReplicasUnavailable',
                                  'Deployment does not have minimum availability.', now)
    conditions = _progress(md, conditions, new, states, desired, paused, now, plan)
    status['conditions'] = conditions
    current = o.status(md)
    changed = {k: v for k, v in status.items() if current.get(k) != v and not (v is None and k not in current)}
    return changed or None


def _keep_or_set(conditions: List[Dict[str, Any]], kind: str, status: str, reason: str, message: str,
                 now: float) -> List[Dict[str, Any]]:
    cond = get_condition(conditions, kind)
    if cond is not None and cond.get('status') == status and cond.get('reason') == reason and cond.get('message') == message:
        return conditions
    return set_condition(conditions, kind, status, reason, message, now)


def _progress(md: Obj, conditions: List[Dict[str, Any]], new: Optional[Obj], states: Sequence[r.SetState],
              desired: int, paused: bool, now: float, plan: DeploymentPlan) -> List[Dict[str, Any]]:
    """Progressing: NewMachineSetCreated / MachineSetUpdated / NewMachineSetAvailable / ProgressDeadlineExceeded /
    DeploymentPaused; the deadline is not measured while paused."""
    deadline = o.spec(md).get('progressDeadlineSeconds')
    cond = get_condition(conditions, COND_PROGRESSING)
    if paused:
        return _keep_or_set(conditions, COND_PROGRESSING, 'Unknown', 'DeploymentPaused', 'Deployment is paused', now)
    if plan.create_set is not None:
        name = plan.create_set['metadata']['name']
        return set_condition(conditions, COND_PROGRESSING, 'True', 'NewMachineSetCreated', 'Created new machine set %s' % name, now)
    if new is None:
        return conditions
    new_state = next((s for s in states if s.name == o.name(new)), None)
    if _done(desired, states, new_state):
        return _keep_or_set(conditions, COND_PROGRESSING, 'True', 'NewMachineSetAvailable',
                            'Machine set %s has successfully progressed.' % o.name(new), now)
    if plan.set_patches:
        return set_condition(conditions, COND_PROGRESSING, 'True', 'MachineSetUpdated',
                             'Updated machine set %s' % o.name(new), now)
    if isinstance(deadline, int) and not isinstance(deadline, bool) and cond is not None and cond.get('status') == 'True':
        since = o.parse_time(cond.get('lastUpdateTime')) or o.parse_time(cond.get('lastTransitionTime'))
        if since is not None and now - since > deadline:
            plan.events.append(Event('ProgressDeadlineExceeded', 'Machine set %s has timed out progressing.' % o.name(new),
                                     warning=True))
            return set_condition(conditions, COND_PROGRESSING, 'False', 'ProgressDeadlineExceeded',
                                 'Machine set %s has timed out progressing.' % o.name(new), now)
    if cond is None:
        return set_condition(conditions, COND_PROGRESSING, 'True', 'FoundNewMachineSet',
                             'Found new machine set %s' % o.name(new), now)
    return conditions
