"""The scale plan: levels in order, same level together, DWD's scale rules (ignore-scaling, optional vs
mandatory, restore the annotation or 1) and our ownership rules (two-step writes, resume, someone else's
change left alone), and the completion gate."""

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.watchdog import constants as c
from ansible_collections.steward.cluster.plugins.module_utils.watchdog import plan as p
from ansible_collections.steward.cluster.plugins.module_utils.watchdog.decision import SCALE_DOWN, SCALE_UP
from ansible_collections.steward.cluster.plugins.module_utils.watchdog.prober_config import parse_prober_config

OWNER = 'prober-a'
CONFIG = parse_prober_config('''
dependentResourceInfos:
  - ref: {apiVersion: apps/v1, kind: Deployment, name: kube-controller-manager}
    scaleUp: {level: 1}
    scaleDown: {level: 0}
  - ref: {apiVersion: apps/v1, kind: Deployment, name: machine-controller-manager}
    scaleUp: {level: 1}
    scaleDown: {level: 1, initialDelay: 5s, timeout: 10s}
  - ref: {apiVersion: apps/v1, kind: Deployment, name: cluster-autoscaler}
    optional: true
    scaleUp: {level: 0}
    scaleDown: {level: 2}
''')
KCM, MCM, CA = CONFIG.dependent_resources


def obs(replicas, **annotations):
    return p.Observation(exists=True, replicas=replicas, annotations=annotations, resource_version='7')


def ours(state, replicas, recorded=None, **more):
    ann = {c.OWNER_ANNOTATION: OWNER, c.STATE_ANNOTATION: state, **more}
    if recorded is not None:
        ann[c.REPLICAS_ANNOTATION] = str(recorded)
    return obs(replicas, **ann)


def test_levels_ascending_same_level_together_and_scale_up_levels_differ():
    observations = {KCM.ref: obs(3), MCM.ref: obs(2), CA.ref: obs(1)}
    down = p.build_plan(SCALE_DOWN, CONFIG.dependent_resources, observations, OWNER, 'test')
    assert [(level, [str(s.ref) for s in steps]) for level, steps in down.levels] == [
        (0, ['Deployment/kube-controller-manager']), (1, ['Deployment/machine-controller-manager']),
        (2, ['Deployment/cluster-autoscaler'])]
    assert [(s.replicas_before, s.replicas_after) for s in down.steps] == [(3, 0), (2, 0), (1, 0)]
    assert down.steps[1].initial_delay == 5.0 and down.steps[1].timeout == 10.0
    assert down.summary().startswith('scale down: level 0: Deployment/kube-controller-manager 3->0; level 1:')
    observations = {KCM.ref: ours(c.SCALED_DOWN, 0, 3), MCM.ref: ours(c.SCALED_DOWN, 0, 2), CA.ref: ours(c.SCALED_DOWN, 0, 1)}
    up = p.build_plan(SCALE_UP, CONFIG.dependent_resources, observations, OWNER, 'test')
    assert [(level, [s.ref.name for s in steps]) for level, steps in up.levels] == [
        (0, ['cluster-autoscaler']), (1, ['kube-controller-manager', 'machine-controller-manager'])]
    assert [s.replicas_after for s in up.steps] == [1, 3, 2]
    assert [s.annotations[c.STATE_ANNOTATION] for s in up.prepare] == [c.SCALING_UP] * 3


def test_scale_down_writes_intent_then_result():
    step = p.step_for(SCALE_DOWN, KCM, obs(3), OWNER)
    assert (step.action, step.kind, step.replicas_after) == (p.SCALE, p.K_SCALE, 0)
    assert step.annotations == {c.REPLICAS_ANNOTATION: '3', c.MELTDOWN_ANNOTATION: '', c.OWNER_ANNOTATION: OWNER,
                                c.STATE_ANNOTATION: c.SCALING_DOWN}
    assert step.after == {c.STATE_ANNOTATION: c.SCALED_DOWN}


@pytest.mark.parametrize('observation, action, kind, after', [
    # DWD's rules
    (obs(0), p.SKIP, p.K_ALREADY, 0),                                              # at 0, not ours: left
    (obs(3, **{c.IGNORE_SCALING_ANNOTATION: 'true'}), p.SKIP, p.K_IGNORED, 3),
    (obs(3, **{c.IGNORE_SCALING_ANNOTATION: 'True', c.MELTDOWN_ANNOTATION: ''}), p.ANNOTATE, p.K_IGNORED, 3),
    (obs(3, **{c.IGNORE_SCALING_ANNOTATION: 'yes'}), p.SCALE, p.K_SCALE, 0),        # not a Go bool: not set
    # ours: resume, done, someone else's change
    (ours(c.SCALING_DOWN, 3, 3), p.SCALE, p.K_RESUME, 0),                          # interrupted before the scale call
    (ours(c.SCALING_DOWN, 0, 3), p.ANNOTATE, p.K_RESUME, 0),                       # interrupted after it
    (ours(c.SCALED_DOWN, 0, 3), p.SKIP, p.K_ALREADY, 0),                           # and its pods are gone
    (p.Observation(exists=True, replicas=0, status_replicas=2, annotations={
        c.OWNER_ANNOTATION: OWNER, c.STATE_ANNOTATION: c.SCALED_DOWN}), p.DONE, p.K_ALREADY, 0),   # pods still going
    (ours(c.SCALED_DOWN, 2, 3), p.ANNOTATE, p.K_CHANGED, 2),                       # someone scaled it back up
    (ours(c.RELEASED, 2), p.SKIP, p.K_RELEASED, 2),
    (ours(c.SCALING_UP, 0, 3), p.ANNOTATE, p.K_RESUME, 0),                         # up decided, failing again
    (ours(c.SCALING_UP, 3, 3), p.SCALE, p.K_SCALE, 0),
    (obs(3, **{c.OWNER_ANNOTATION: 'another', c.STATE_ANNOTATION: c.SCALED_DOWN}), p.SKIP, p.K_OTHER_OWNER, 3),
])
def test_scale_down_rules(observation, action, kind, after):
    step = p.step_for(SCALE_DOWN, KCM, observation, OWNER)
    assert (step.action, step.kind, step.replicas_after) == (action, kind, after)


def test_someone_elses_change_is_released_and_reported():
    step = p.step_for(SCALE_DOWN, KCM, ours(c.SCALED_DOWN, 2, 3), OWNER)
    assert step.warning and 'changed to 2 by someone else' in step.reason
    assert step.annotations == {c.REPLICAS_ANNOTATION: None, c.MELTDOWN_ANNOTATION: None, c.STATE_ANNOTATION: c.RELEASED}


@pytest.mark.parametrize('observation, action, kind, after', [
    (obs(0, **{c.REPLICAS_ANNOTATION: '3'}), p.SCALE, p.K_SCALE, 3),               # DWD's annotation, not ours
    (obs(0), p.SCALE, p.K_SCALE, 1),                                              # no annotation: 1
    (obs(0, **{c.REPLICAS_ANNOTATION: '0'}), p.SCALE, p.K_SCALE, 1),               # annotation 0: 1
    (obs(0, **{c.REPLICAS_ANNOTATION: 'three'}), p.SCALE, p.K_SCALE, 1),           # unreadable: 1 and a warning
    (obs(2), p.SKIP, p.K_ALREADY, 2),
    (obs(2, **{c.MELTDOWN_ANNOTATION: ''}), p.ANNOTATE, p.K_CLEANUP, 2),            # DWD removes a leftover marker
    (obs(0, **{c.IGNORE_SCALING_ANNOTATION: '1'}), p.SKIP, p.K_IGNORED, 0),
    (ours(c.SCALED_DOWN, 0, 3), p.SCALE, p.K_SCALE, 3),
    (ours(c.SCALING_UP, 0, 3), p.SCALE, p.K_RESUME, 3),
    (ours(c.SCALING_UP, 3, 3), p.DONE, p.K_RESUME, 3),                             # restored, gate left
    (ours(c.SCALING_UP, 1), p.DONE, p.K_RESUME, 1),                                # restored the default 1
    (ours(c.SCALING_DOWN, 3, 3), p.ANNOTATE, p.K_CLEANUP, 3),                      # never got scaled: markers go
    (ours(c.SCALED_DOWN, 5, 3), p.ANNOTATE, p.K_CHANGED, 5),                       # someone else's 5 stays
    (ours(c.SCALING_UP, 4, 3), p.ANNOTATE, p.K_CHANGED, 4),
    (ours(c.RELEASED, 5), p.ANNOTATE, p.K_CLEANUP, 5),
])
def test_scale_up_rules(observation, action, kind, after):
    step = p.step_for(SCALE_UP, KCM, observation, OWNER)
    assert (step.action, step.kind, step.replicas_after) == (action, kind, after)
    if action == p.SCALE:
        assert c.REPLICAS_ANNOTATION not in step.after or step.after[c.REPLICAS_ANNOTATION] is None


def test_scale_up_removes_every_marker_after_the_gate():
    step = p.step_for(SCALE_UP, KCM, ours(c.SCALING_UP, 0, 3, **{c.MELTDOWN_ANNOTATION: ''}), OWNER)
    assert step.after == {c.REPLICAS_ANNOTATION: None, c.MELTDOWN_ANNOTATION: None, c.OWNER_ANNOTATION: None,
                          c.STATE_ANNOTATION: None}
    assert p.step_for(SCALE_UP, KCM, obs(0, **{c.REPLICAS_ANNOTATION: 'three'}), OWNER).warning


def test_missing_targets_optional_skip_mandatory_fail():
    missing = p.Observation(exists=False)
    assert p.step_for(SCALE_DOWN, CA, missing, OWNER).action == p.SKIP
    step = p.step_for(SCALE_DOWN, KCM, missing, OWNER)
    assert (step.action, step.kind, step.warning) == (p.FAIL, p.K_NOT_FOUND, True)
    unreadable = p.Observation(exists=True, error='HTTP 403 Forbidden')
    assert p.step_for(SCALE_UP, CA, unreadable, OWNER).action == p.FAIL


def test_held_down_marks_the_down_phase():
    assert p.held_down(ours(c.SCALED_DOWN, 0, 3), OWNER) and p.held_down(ours(c.SCALING_DOWN, 3, 3), OWNER)
    assert not p.held_down(ours(c.SCALING_UP, 0, 3), OWNER)
    assert not p.held_down(ours(c.SCALED_DOWN, 0, 3), 'another')


def deployment(generation, observed, replicas, ready):
    return {'metadata': {'generation': generation},
            'status': {'observedGeneration': observed, 'replicas': replicas, 'readyReplicas': ready}}


@pytest.mark.parametrize('direction, target, obj, reached', [
    (SCALE_DOWN, 0, deployment(2, 2, 0, 0), True),
    (SCALE_DOWN, 0, deployment(2, 2, 1, 0), False),
    (SCALE_DOWN, 0, deployment(3, 2, 0, 0), False),     # status not caught up with the scale call
    (SCALE_DOWN, 0, {'metadata': {}}, True),            # no status: no replicas
    (SCALE_UP, 3, deployment(4, 4, 3, 1), True),
    (SCALE_UP, 3, deployment(4, 4, 2, 2), False),
    (SCALE_UP, 3, deployment(4, 4, 3, 0), False),
    (SCALE_UP, 1, {'status': {'replicas': 1, 'readyReplicas': 1}}, True),
])
def test_completion_gate(direction, target, obj, reached):
    assert p.goal_reached(direction, target, obj)[0] is reached
