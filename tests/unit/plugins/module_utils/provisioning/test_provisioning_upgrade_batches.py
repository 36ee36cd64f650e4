# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The workers' batches of a Kubernetes upgrade: max_unavailable, the profile's maxMaintenance, PodDisruptionBudgets,
nodes under way first; and how the plan and its status show them."""

from __future__ import annotations

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.maintenance.config import load_config
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.upgrade import (
    batches, entry, record, run, versions,
)
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.upgrade.plan import (
    KUBELET, Installed, NodeInstalled, plan_upgrade,
)

V = versions.parse
WORKERS = ['w1', 'w2', 'w3', 'w4', 'w5']


def pod(name, node, labels=None, namespace='default', ready=True, owner=True, mirror=False):
    meta = {'name': name, 'namespace': namespace, 'labels': labels or {}}
    if owner:
        meta['ownerReferences'] = [{'kind': 'ReplicaSet', 'name': 'rs', 'controller': True}]
    if mirror:
        meta['annotations'] = {'kubernetes.io/config.mirror': 'x'}
    return {'metadata': meta, 'spec': {'nodeName': node},
            'status': {'phase': 'Running', 'conditions': [{'type': 'Ready', 'status': 'True' if ready else 'False'}]}}


def pdb(name, selector, namespace='default', status=None, **spec):
    out = {'metadata': {'name': name, 'namespace': namespace}, 'spec': dict(spec, selector=selector)}
    if status is not None:
        out['status'] = status
    return out


def test_batches_of_max_unavailable_in_order():
    groups, info = batches.batches(WORKERS, batches.Limits(2))
    assert groups == [('w1', 'w2'), ('w3', 'w4'), ('w5',)]
    assert info['size'] == 2 and info['limited_by'] == 'max_unavailable' and info['splits'] == []


def test_max_maintenance_bounds_the_batch_below_max_unavailable():
    groups, info = batches.batches(WORKERS, batches.Limits(3, max_maintenance=2))
    assert groups == [('w1', 'w2'), ('w3', 'w4'), ('w5',)]
    assert info['limited_by'] == 'maxMaintenance' and info['size'] == 2
    assert batches.batches(WORKERS, batches.Limits(1, max_maintenance=4))[0] == [(w,) for w in WORKERS]


def test_a_budget_closes_a_batch_before_it_would_evict_more_than_allowed():
    # one pod of app=db on w1, w2 and w3; the budget allows one disruption: each of them in a batch of its own,
    # w4 and w5 (no db pod) join the batch they follow
    pods = [pod('db-%d' % i, 'w%d' % i, {'app': 'db'}) for i in (1, 2, 3)] + [pod('web', 'w4', {'app': 'web'})]
    budget = batches.Budget('default', 'db', {'matchLabels': {'app': 'db'}}, 1)
    limits = batches.Limits(3, budgets=(budget,), pods=batches.evictable_pods(pods, WORKERS))
    groups, info = batches.batches(WORKERS, limits)
    assert groups == [('w1',), ('w2',), ('w3', 'w4', 'w5')]
    assert [s['node'] for s in info['splits']] == ['w2', 'w3']
    assert info['splits'][0]['budget'] == 'default/db' and 'allows 1 disruption' in info['splits'][0]['message']


def test_a_budget_in_another_namespace_or_not_matching_does_not_split():
    pods = [pod('db-1', 'w1', {'app': 'db'}), pod('db-2', 'w2', {'app': 'db'})]
    other = batches.Budget('other', 'db', {'matchLabels': {'app': 'db'}}, 0)
    limits = batches.Limits(2, budgets=(other,), pods=batches.evictable_pods(pods, ['w1', 'w2']))
    groups, _info = batches.batches(['w1', 'w2'], limits)
    assert groups == [('w1', 'w2')]


def test_a_node_whose_pods_alone_exceed_a_budget_is_a_batch_of_its_own():
    pods = [pod('db-1', 'w1', {'app': 'db'}), pod('db-2', 'w1', {'app': 'db'}), pod('db-3', 'w2', {'app': 'db'})]
    budget = batches.Budget('default', 'db', {'matchLabels': {'app': 'db'}}, 1)
    names = ['w1', 'w2', 'w3']
    groups, _info = batches.batches(names, batches.Limits(3, budgets=(budget,),
                                                          pods=batches.evictable_pods(pods, names)))
    assert groups == [('w1',), ('w2', 'w3')]   # w3 has no pod of the budget: it joins


def test_nodes_under_way_are_batched_first():
    groups, info = batches.batches(WORKERS, batches.Limits(2), in_flight=['w4'])
    assert groups == [('w4', 'w1'), ('w2', 'w3'), ('w5',)]
    assert info['in_flight'] == ['w4']


def test_evictable_pods_leave_mirror_and_other_nodes_pods_out():
    pods = [pod('a', 'w1', {'x': '1'}), pod('m', 'w1', mirror=True), pod('b', 'w2')]
    assert batches.evictable_pods(pods, ['w1']) == {'w1': (('default', {'x': '1'}),)}


@pytest.mark.parametrize('spec, status, allowed', [
    ({'minAvailable': 2}, None, 1),                  # 3 healthy, 2 must stay
    ({'minAvailable': '50%'}, None, 1),              # ceil(1.5) = 2 must stay
    ({'maxUnavailable': 1}, None, 1),
    ({'maxUnavailable': '50%'}, None, 2),            # ceil(1.5) = 2 may go
    ({'minAvailable': 3}, None, 0),
    ({'minAvailable': 'lots'}, None, 0),             # unreadable: nothing allowed
    ({'minAvailable': 1}, {'disruptionsAllowed': 0, 'observedGeneration': 1}, 0),   # the controller's word wins
])
def test_budget_of_as_the_disruption_controller_computes_it(spec, status, allowed):
    pods = [pod('db-%d' % i, 'w%d' % i, {'app': 'db'}) for i in (1, 2, 3)] + [pod('x', 'w1', {'app': 'x'})]
    assert batches.budget_of(pdb('db', {'matchLabels': {'app': 'db'}}, status=status, **spec), pods).allowed == allowed


def test_an_unready_pod_counts_against_the_budget():
    pods = [pod('db-1', 'w1', {'app': 'db'}), pod('db-2', 'w2', {'app': 'db'}, ready=False)]
    assert batches.budget_of(pdb('db', {'matchLabels': {'app': 'db'}}, minAvailable=1), pods).allowed == 0


PROFILE = '''
intervals:
  requeue: 1s
instances:
  check:
  - {type: hasAnnotation, name: requested, config: {key: r, value: "true"}}
  - {type: maxMaintenance, name: two, config: {max: 2}}
  - {type: maxMaintenance, name: five, config: {max: 5}}
  - {type: maxMaintenance, name: one, config: {max: 1}}
profiles:
- name: kubelet-upgrade
  operational:
    transitions: [{check: requested, next: maintenance-required}]
  maintenance-required:
    transitions: [{check: "requested && two && five", next: in-maintenance}]
  in-maintenance:
    transitions: [{check: "!requested && one", next: operational}]
- name: free
  operational:
    transitions: [{check: requested, next: in-maintenance}]
'''


def test_max_maintenance_of_a_profile_reads_its_ways_into_in_maintenance():
    config = load_config(PROFILE)
    assert batches.max_maintenance_of(config, 'kubelet-upgrade') == 2     # not the way out's max 1
    assert batches.max_maintenance_of(config, 'free') is None
    assert batches.max_maintenance_of(config, 'missing') is None


def test_in_maintenance_elsewhere_counts_only_nodes_not_ours():
    label = 'cloud.sap/maintenance-state'
    nodes = {n: {'metadata': {'labels': {label: state}}} for n, state in
             (('w1', 'in-maintenance'), ('x1', 'in-maintenance'), ('x2', 'operational'))}
    assert batches.in_maintenance_elsewhere(nodes, ['w1', 'w2'], label) == ['x1']


def _installed(workers_at):
    nodes = [NodeInstalled('cp1', True, V('v1.32.0'), V('v1.32.0'), V('v1.32.0'), V('v1.32.0'))]
    nodes += [NodeInstalled(name, False, V(version)) for name, version in workers_at.items()]
    return Installed(tuple(nodes))


def test_the_plan_numbers_its_batches_and_shows_what_bounded_them():
    plan = plan_upgrade(_installed({w: 'v1.31.4' for w in WORKERS}), V('v1.32.0'),
                        batching=batches.Limits(3, max_maintenance=2))
    steps = [s.as_dict() for s in plan.steps if s.kind == KUBELET]
    assert [(s['batch'], s['nodes']) for s in steps] == [(1, ['w1', 'w2']), (2, ['w3', 'w4']), (3, ['w5'])]
    shown = plan.as_dict()['batches']
    assert shown['size'] == 2 and shown['limited_by'] == 'maxMaintenance' and shown['max_unavailable'] == 3
    # a control-plane step has no batch number; the dict shape of older steps is unchanged
    assert 'batch' not in plan_upgrade(_installed({}), V('v1.32.1')).steps[0].as_dict()


def test_a_resumed_plan_leaves_done_workers_out_and_finishes_the_one_under_way_first():
    # w1 and w2 were the first batch; w1 is done, w2 was drained when the run was killed
    installed = _installed({'w1': 'v1.32.0', 'w2': 'v1.31.4', 'w3': 'v1.31.4', 'w4': 'v1.31.4'})
    nodes = {'w1': {'metadata': {'annotations': {record.ANNOTATION: record.Record('v1.32.0', 'done').value()}}},
             'w2': {'metadata': {'annotations': {record.ANNOTATION: record.Record('v1.32.0', 'drained').value()}}}}
    plan = plan_upgrade(installed, V('v1.32.0'), batching=batches.Limits(2), in_flight=['w2'])
    assert [s.nodes for s in plan.steps] == [('w2', 'w3'), ('w4',)]
    shown = run.status(plan, nodes)
    assert shown['done'] == ['w1']
    assert shown['batches'] == [{'batch': 1, 'nodes': {'w2': 'drained', 'w3': None}},
                                {'batch': 2, 'nodes': {'w4': None}}]


def test_workers_under_way_are_those_recorded_before_done_or_in_maintenance():
    def obj(rec=None, state=None):
        meta = {'annotations': {record.ANNOTATION: rec.value()} if rec else {},
                'labels': {'cloud.sap/maintenance-state': state} if state else {}}
        return {'metadata': meta}
    nodes = {'w1': obj(record.Record('v1.32.0', 'done')), 'w2': obj(record.Record('v1.32.0', 'drained')),
             'w3': obj(record.Record('v1.31.9', 'drained')), 'w4': obj(state='in-maintenance'),
             'w5': obj(state='operational')}
    assert entry.workers_under_way(nodes, ['w1', 'w2', 'w3', 'w4', 'w5', 'w6'], 'v1.32.0') == ['w2', 'w4']
