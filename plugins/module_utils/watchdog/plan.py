# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The scale plan: for a direction and the targets as observed, what happens to each target, level by level.

Pure. `step_for` decides one target from its observation; `build_plan` orders the steps by the config's
levels (ascending; one level's targets act together). The executor (scaler.py) calls `step_for` again
with a fresh observation right before it acts, so a plan shown to a user and the writes made later obey
the same rules even when the target changed in between.

Ownership (docs/watchdog.md "Ownership"): a target we scale down carries DWD's
`dependency-watchdog.gardener.cloud/replicas` (what to restore) and `…/meltdown-protection-active` (the
machine controller's fleet freeze), plus our owner and state annotations. Writes go in two steps, intent
then result, so that after a restart a target in `scaling-down` is finished, while a `scaled-down` target
whose replicas are not 0 was changed by someone else: it is left alone (`released`) and reported, never
scaled again until the cluster is healthy and never overwritten on the way up.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.common.golang import parse_bool
from ansible_collections.steward.cluster.plugins.module_utils.watchdog import constants as c
from ansible_collections.steward.cluster.plugins.module_utils.watchdog.decision import SCALE_DOWN, SCALE_UP
from ansible_collections.steward.cluster.plugins.module_utils.watchdog.prober_config import DependentResource, TargetRef

# Step actions.
SCALE = 'scale'          # set replicas (annotations written before and after)
ANNOTATE = 'annotate'    # only our / DWD's annotations change
DONE = 'done'            # already where this direction leaves it (ours): only the completion gate
SKIP = 'skip'            # nothing to do, with the reason
FAIL = 'fail'            # cannot act: a mandatory target is missing or unreadable

# What a step means, for reports and metrics (`kind`).
K_SCALE = 'scale'
K_RESUME = 'resume'                  # finishing a step an interrupted run began
K_ALREADY = 'already'                # at the goal already
K_IGNORED = 'ignore-scaling'
K_NOT_FOUND = 'not-found'
K_UNREADABLE = 'unreadable'
K_OTHER_OWNER = 'other-owner'
K_CHANGED = 'changed-by-other'       # replicas changed by someone else while scaled down: released, reported
K_RELEASED = 'released'              # left alone for this outage
K_CLEANUP = 'cleanup'                # stale markers removed (no replicas change)


@dataclasses.dataclass(frozen=True)
class Observation:
    """One dependent resource as read: `replicas` from its scale subresource, the rest from the object."""
    exists: bool
    replicas: int = 0
    annotations: Mapping[str, str] = dataclasses.field(default_factory=dict)
    resource_version: str = ''
    status_replicas: int = 0
    ready_replicas: int = 0
    generation: Optional[int] = None
    observed_generation: Optional[int] = None
    error: str = ''   # the read failed for another reason than "not found"


@dataclasses.dataclass(frozen=True)
class Step:
    ref: TargetRef
    direction: str
    level: int
    action: str
    kind: str
    reason: str
    replicas_before: Optional[int] = None
    replicas_after: Optional[int] = None
    annotations: Mapping[str, Optional[str]] = dataclasses.field(default_factory=dict)  # written before the scale call
    after: Mapping[str, Optional[str]] = dataclasses.field(default_factory=dict)        # written after it
    initial_delay: float = 0.0
    timeout: float = c.DEFAULT_SCALE_TIMEOUT
    warning: bool = False

    def as_dict(self) -> Dict[str, Any]:
        return {'target': str(self.ref), 'level': self.level, 'action': self.action, 'kind': self.kind,
                'replicasBefore': self.replicas_before, 'replicasAfter': self.replicas_after, 'reason': self.reason}


@dataclasses.dataclass(frozen=True)
class Plan:
    direction: str
    reason: str
    levels: Tuple[Tuple[int, Tuple[Step, ...]], ...]
    prepare: Tuple[Step, ...] = ()   # intent writes before level 0 (scale-up: ours -> scaling-up)

    @property
    def steps(self) -> List[Step]:
        return [step for _level, steps in self.levels for step in steps]

    @property
    def changes(self) -> List[Step]:
        """The steps that write something (scale or annotations)."""
        return [s for s in self.steps if s.action in (SCALE, ANNOTATE)]

    def as_dict(self) -> Dict[str, Any]:
        return {'direction': self.direction, 'reason': self.reason,
                'levels': [{'level': level, 'steps': [s.as_dict() for s in steps]} for level, steps in self.levels]}

    def summary(self) -> str:
        """One line: `scale down: level 0: Deployment/kcm 3->0; level 1: Deployment/mcm 1->0 (…)`."""
        parts = []
        for level, steps in self.levels:
            words = []
            for s in steps:
                if s.action == SCALE:
                    words.append('%s %s->%s' % (s.ref, s.replicas_before, s.replicas_after))
                else:
                    words.append('%s %s (%s)' % (s.ref, s.action, s.kind))
            parts.append('level %d: %s' % (level, ', '.join(words)))
        return 'scale %s: %s (%s)' % (self.direction, '; '.join(parts) or 'no targets', self.reason)


def ignore_scaling(annotations: Mapping[str, str]) -> bool:
    return parse_bool(annotations.get(c.IGNORE_SCALING_ANNOTATION)) is True


def restore_replicas(annotations: Mapping[str, str]) -> Tuple[int, str]:
    """What a scale-up restores: the replicas annotation when it is a whole number > 0, else 1 (and why)."""
    text = annotations.get(c.REPLICAS_ANNOTATION)
    if text is None:
        return c.DEFAULT_SCALE_UP_REPLICAS, 'no %s annotation: default %d' % (c.REPLICAS_ANNOTATION, c.DEFAULT_SCALE_UP_REPLICAS)
    try:
        value = int(str(text).strip())
    except ValueError:
        return c.DEFAULT_SCALE_UP_REPLICAS, '%s=%r is not a number: default %d' % (
            c.REPLICAS_ANNOTATION, text, c.DEFAULT_SCALE_UP_REPLICAS)
    if value <= 0:
        return c.DEFAULT_SCALE_UP_REPLICAS, '%s=%r: default %d' % (c.REPLICAS_ANNOTATION, text, c.DEFAULT_SCALE_UP_REPLICAS)
    return value, 'restoring %s=%d' % (c.REPLICAS_ANNOTATION, value)


def recorded_replicas(annotations: Mapping[str, str]) -> Optional[int]:
    """The replicas annotation as a number (None when absent or not a number)."""
    try:
        return int(str(annotations[c.REPLICAS_ANNOTATION]).strip())
    except (KeyError, ValueError):
        return None


def is_ours(annotations: Mapping[str, str], owner: str) -> bool:
    return annotations.get(c.OWNER_ANNOTATION) == owner and annotations.get(c.STATE_ANNOTATION) in c.STATES


def held_down(observation: Observation, owner: str) -> bool:
    """True when this target says we scaled it down (or were scaling it down): the DOWN phase after a restart."""
    return (observation.exists and is_ours(observation.annotations, owner)
            and observation.annotations.get(c.STATE_ANNOTATION) in c.DOWN_STATES)


def _forget(annotations: Mapping[str, str], keep_replicas: bool = False) -> Dict[str, Optional[str]]:
    """A patch removing our markers and DWD's meltdown marker (and DWD's replicas annotation unless kept)."""
    keys = [c.MELTDOWN_ANNOTATION, c.OWNER_ANNOTATION, c.STATE_ANNOTATION]
    if not keep_replicas:
        keys.append(c.REPLICAS_ANNOTATION)
    return {k: None for k in keys if k in annotations}


def step_for(direction: str, resource: DependentResource, obs: Observation, owner: str) -> Step:
    """What to do with one target now (see the module docstring for the rules)."""
    info = resource.info(direction)
    base = dict(ref=resource.ref, direction=direction, level=info.level, initial_delay=info.initial_delay,
                timeout=info.timeout)
    if obs.error:
        return Step(action=FAIL, kind=K_UNREADABLE, reason='cannot read: %s' % obs.error, warning=True, **base)
    if not obs.exists:
        if resource.optional:
            return Step(action=SKIP, kind=K_NOT_FOUND, reason='not found; optional, skipped', **base)
        return Step(action=FAIL, kind=K_NOT_FOUND, reason='not found; the config marks it mandatory', warning=True, **base)
    ann = obs.annotations
    replicas = obs.replicas
    common = dict(base, replicas_before=replicas)
    if ignore_scaling(ann):
        stale = _forget(ann, keep_replicas=True)
        if stale:
            return Step(action=ANNOTATE, kind=K_IGNORED, annotations=stale, replicas_after=replicas,
                        reason='%s is set: not scaled; our markers removed' % c.IGNORE_SCALING_ANNOTATION, **common)
        return Step(action=SKIP, kind=K_IGNORED, replicas_after=replicas,
                    reason='%s is set: not scaled' % c.IGNORE_SCALING_ANNOTATION, **common)
    other = ann.get(c.OWNER_ANNOTATION)
    if other and other != owner:
        return Step(action=SKIP, kind=K_OTHER_OWNER, replicas_after=replicas,
                    reason='scaled by watchdog %r; left to it' % other, **common)
    state = ann.get(c.STATE_ANNOTATION) if other == owner else None
    if direction == SCALE_DOWN:
        return _down(obs, owner, state, common)
    return _up(obs, state, common)


def _down(obs: Observation, owner: str, state: Optional[str], common: Dict[str, Any]) -> Step:
    ann, replicas = obs.annotations, obs.replicas
    if state == c.RELEASED:
        return Step(action=SKIP, kind=K_RELEASED, replicas_after=replicas,
                    reason='released: its replicas were changed by someone else while scaled down', **common)
    if state == c.SCALED_DOWN and replicas != 0:
        return Step(action=ANNOTATE, kind=K_CHANGED, replicas_after=replicas, warning=True,
                    annotations={c.REPLICAS_ANNOTATION: None, c.MELTDOWN_ANNOTATION: None, c.STATE_ANNOTATION: c.RELEASED},
                    reason='replicas were changed to %d by someone else while scaled down: left alone and not scaled '
                           'again until the cluster is healthy' % replicas, **common)
    if state in (c.SCALED_DOWN, c.SCALING_DOWN, c.SCALING_UP) and replicas == 0:
        if state == c.SCALED_DOWN:
            if observed_goal(SCALE_DOWN, 0, obs):
                return Step(action=SKIP, kind=K_ALREADY, replicas_after=0, reason='scaled down already', **common)
            return Step(action=DONE, kind=K_ALREADY, replicas_after=0, reason='scaled down; waiting for its pods to go',
                        **common)
        return Step(action=ANNOTATE, kind=K_RESUME, replicas_after=0, annotations={c.STATE_ANNOTATION: c.SCALED_DOWN},
                    reason='at 0 replicas; recording it as scaled down', **common)
    if state == c.SCALING_DOWN:
        return Step(action=SCALE, kind=K_RESUME, replicas_after=0, after={c.STATE_ANNOTATION: c.SCALED_DOWN},
                    reason='finishing an interrupted scale-down (%s=%s)' % (c.REPLICAS_ANNOTATION,
                                                                            ann.get(c.REPLICAS_ANNOTATION)), **common)
    if replicas == 0:
        return Step(action=SKIP, kind=K_ALREADY, replicas_after=0, reason='at 0 replicas already (not scaled by us)',
                    **common)
    intent = {c.REPLICAS_ANNOTATION: str(replicas), c.MELTDOWN_ANNOTATION: '', c.OWNER_ANNOTATION: owner,
              c.STATE_ANNOTATION: c.SCALING_DOWN}
    return Step(action=SCALE, kind=K_SCALE, replicas_after=0, annotations=intent,
                after={c.STATE_ANNOTATION: c.SCALED_DOWN}, reason='scale down, remembering %d replicas' % replicas, **common)


def _up(obs: Observation, state: Optional[str], common: Dict[str, Any]) -> Step:
    ann, replicas = obs.annotations, obs.replicas
    if state == c.RELEASED:
        return Step(action=ANNOTATE, kind=K_CLEANUP, replicas_after=replicas, annotations=_forget(ann),
                    reason='released during the outage; markers removed, replicas left at %d' % replicas, **common)
    if replicas != 0:
        if state is not None:
            # Ours and up: our own restore (scaling-up at the restored count), a scale-down that never got to its
            # scale call (scaling-down at the recorded count), or else someone else's change.
            if state == c.SCALING_UP:
                expected: Optional[int] = restore_replicas(ann)[0]
            elif state == c.SCALING_DOWN:
                expected = recorded_replicas(ann)
            else:
                expected = None
            if expected != replicas:
                return Step(action=ANNOTATE, kind=K_CHANGED, replicas_after=replicas, annotations=_forget(ann),
                            warning=True, reason='replicas were changed to %d by someone else while scaled down: left '
                            'as they are, markers removed' % replicas, **common)
            if state == c.SCALING_UP:   # our restore went out; its gate (and then the markers) is what is left
                return Step(action=DONE, kind=K_RESUME, replicas_after=replicas, after=_forget(ann),
                            reason='restored to %d replicas; waiting for a ready replica' % replicas, **common)
            return Step(action=ANNOTATE, kind=K_CLEANUP, replicas_after=replicas, annotations=_forget(ann),
                        reason='up at %d replicas; markers removed' % replicas, **common)
        if c.MELTDOWN_ANNOTATION in ann:
            return Step(action=ANNOTATE, kind=K_CLEANUP, replicas_after=replicas,
                        annotations={c.MELTDOWN_ANNOTATION: None},
                        reason='up at %d replicas; leftover %s removed' % (replicas, c.MELTDOWN_ANNOTATION), **common)
        return Step(action=SKIP, kind=K_ALREADY, replicas_after=replicas, reason='up at %d replicas already' % replicas,
                    **common)
    target, why = restore_replicas(ann)
    warning = c.REPLICAS_ANNOTATION in ann and 'not a number' in why
    return Step(action=SCALE, kind=K_RESUME if state == c.SCALING_UP else K_SCALE, replicas_after=target,
                after=_forget(ann), warning=warning, reason='scale up: %s' % why, **common)


def build_plan(direction: str, resources: Sequence[DependentResource], observations: Mapping[TargetRef, Observation],
               owner: str, reason: str) -> Plan:
    """Steps grouped by level (ascending; config order within a level), plus the scale-up intent writes."""
    by_level: Dict[int, List[Step]] = {}
    prepare: List[Step] = []
    for resource in resources:
        obs = observations.get(resource.ref) or Observation(exists=False)
        step = step_for(direction, resource, obs, owner)
        by_level.setdefault(step.level, []).append(step)
        if direction == SCALE_UP and step.action == SCALE and held_down(obs, owner):
            prepare.append(dataclasses.replace(step, action=ANNOTATE, kind=K_RESUME,
                                               annotations={c.STATE_ANNOTATION: c.SCALING_UP}, after={},
                                               reason='scale-up decided'))
    levels = tuple((level, tuple(by_level[level])) for level in sorted(by_level))
    return Plan(direction=direction, reason=reason, levels=levels, prepare=tuple(prepare))


def observed_goal(direction: str, replicas_after: Optional[int], obs: Observation) -> bool:
    """goal_reached on an Observation (what the plan already read)."""
    obj = {'metadata': {'generation': obs.generation},
           'status': {'replicas': obs.status_replicas, 'readyReplicas': obs.ready_replicas,
                      'observedGeneration': obs.observed_generation}}
    return goal_reached(direction, replicas_after, obj)[0]


def goal_reached(direction: str, replicas_after: Optional[int], obj: Mapping[str, Any]) -> Tuple[bool, str]:
    """The completion gate, from the object as read: down when status.replicas is 0, up when status.replicas
    reached the restored count and at least one replica is ready. A status that has not observed the object's
    latest generation does not count yet."""
    meta, status = obj.get('metadata') or {}, obj.get('status') or {}
    generation, observed = meta.get('generation'), status.get('observedGeneration')
    seen = '(status.replicas %s, readyReplicas %s)' % (status.get('replicas', 0), status.get('readyReplicas', 0))
    if generation is not None and observed is not None and observed < generation:
        return False, 'status has not observed generation %s yet %s' % (generation, seen)
    current = int(status.get('replicas') or 0)
    ready = int(status.get('readyReplicas') or 0)
    if direction == SCALE_DOWN:
        return current == 0, seen
    return current >= (replicas_after or 1) and ready >= 1, seen
