# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One SabakanIntegration cycle (controller_cycle.plan_cycle) and the status it writes."""

from __future__ import annotations

import copy
from datetime import datetime, timezone
from typing import Any, Dict, List

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.sabakan.controller_cycle import (
    CONSTRAINT_VIOLATION, FAILED, GENERATED, REGENERATED, UNCHANGED, UPDATED, failed, integration_status, plan_cycle,
)
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.errors import ConstraintViolation
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.integrate import plan_checked_cluster
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.integration_spec import parse_spec
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.kube_nodes import INTEGRATION_ANNOTATION

NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)
NOW_TS = NOW.timestamp()
INTEGRATION = 'infra/dc1'
TEMPLATE = {'name': 'lab', 'service_subnet': '10.68.0.0/16', 'nodes': [
    {'user': 'cybozu', 'control_plane': True, 'labels': {'cke.cybozu.com/role': 'cs'}},
    {'user': 'cybozu', 'labels': {'cke.cybozu.com/role': 'cs'}},
]}


def machine(rack: int, index: int, state: str = 'HEALTHY', duration: float = 3600.0) -> Dict[str, Any]:
    return {'spec': {'serial': 'm%d%d' % (rack, index), 'labels': [{'name': 'product', 'value': 'R640'}], 'rack': rack,
                     'indexInRack': index, 'role': 'cs', 'ipv4': ['10.%d.0.%d' % (rack, index)],
                     'registerDate': '2024-01-01T00:00:00Z', 'retireDate': '2030-01-01T00:00:00Z',
                     'bmc': {'bmcType': 'IPMI-2.0'}},
            'status': {'state': state, 'timestamp': '2025-12-31T23:00:00Z', 'duration': duration}}


MACHINES = [machine(rack, index) for rack in range(3) for index in range(2, 4)]   # 6 healthy cs machines


def nodes_for(machines: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    return [{'metadata': {'name': m['spec']['ipv4'][0], 'resourceVersion': '1', 'labels': {'team': 'x'}},
             'spec': {}} for m in machines]


def spec(**extra: Any):
    raw = {'url': 'http://sabakan:10080', 'template': TEMPLATE,
           'constraints': {'control-plane-count': 1, 'minimum-workers': 2}, 'waitRetiredSeconds': 60}
    raw.update(extra)
    return parse_spec(raw, 'dc1')


def with_state(machines, address, state, duration=3600.0):
    result = copy.deepcopy(machines)
    for m in result:
        if m['spec']['ipv4'][0] == address:
            m['status'].update(state=state, duration=duration)
    return result


def applied_nodes(kube_nodes, outcome):
    """The Nodes after the outcome's patches (labels, annotations, taints)."""
    by_name = {n['metadata']['name']: copy.deepcopy(n) for n in kube_nodes}
    for patch in outcome.node_patches:
        node = by_name[patch.name]
        for kind in ('labels', 'annotations'):
            values = node['metadata'].setdefault(kind, {})
            for key, value in ((patch.patch.get('metadata') or {}).get(kind) or {}).items():
                if value is None:
                    values.pop(key, None)
                else:
                    values[key] = value
        if 'spec' in patch.patch:
            node['spec']['taints'] = patch.patch['spec']['taints']
    return list(by_name.values())


@pytest.fixture(scope='module')
def first():
    """The first cycle: no cluster yet, a Node for every machine."""
    kube_nodes = nodes_for(MACHINES)
    outcome = plan_cycle(spec(), TEMPLATE, MACHINES, None, kube_nodes, integration=INTEGRATION, now=NOW)
    return outcome, kube_nodes


def test_first_cycle_generates_and_labels(first):
    outcome, kube_nodes = first
    assert outcome.result == GENERATED and outcome.successful and outcome.reason == ''
    assert outcome.plan.operation == 'new'
    assert [n['address'] for n in outcome.cluster['nodes']] == ['10.0.0.2', '10.0.0.3', '10.1.0.2']
    assert outcome.summary.nodes == 3 and outcome.summary.control_planes == 1
    assert outcome.summary.workers == {'cs': 2} and outcome.summary.unused_machines == 3
    assert sorted(p.name for p in outcome.node_patches) == ['10.0.0.2', '10.0.0.3', '10.1.0.2']
    cp = next(p for p in outcome.node_patches if p.name == '10.0.0.2')
    labels = cp.patch['metadata']['labels']
    assert labels['node-role.kubernetes.io/master'] == 'true'
    assert labels['cke.cybozu.com/rack'] == '0' and labels['topology.kubernetes.io/zone'] == 'rack0'
    assert labels['sabakan.cke.cybozu.com/product'] == 'R640'
    assert cp.patch['metadata']['annotations']['cke.cybozu.com/serial'] == 'm02'
    assert cp.patch['metadata']['annotations'][INTEGRATION_ANNOTATION] == INTEGRATION
    assert outcome.node_deletions == []


def test_second_cycle_changes_nothing(first):
    outcome, kube_nodes = first
    again = plan_cycle(spec(), TEMPLATE, MACHINES, outcome.cluster, applied_nodes(kube_nodes, outcome),
                       integration=INTEGRATION, now=NOW)
    assert again.result == UNCHANGED and again.cluster is None and again.node_patches == []
    assert again.summary == outcome.summary


RETIRING_TAINT = {'key': 'cke.cybozu.com/state', 'value': 'retiring', 'effect': 'NoExecute'}
RETIRED_TAINT = {'key': 'cke.cybozu.com/state', 'value': 'retired', 'effect': 'NoExecute'}


def test_retiring_worker_is_tainted_and_replaced(first):
    outcome, kube_nodes = first
    machines = with_state(MACHINES, '10.1.0.2', 'RETIRING')
    nodes = applied_nodes(kube_nodes, outcome)
    nxt = plan_cycle(spec(), TEMPLATE, machines, outcome.cluster, nodes, integration=INTEGRATION, now=NOW)
    # Only one of the two workers is healthy now: CKE adds one, and the retiring one gets its taint.
    assert nxt.result == UPDATED and nxt.plan.operation == 'increase worker'
    assert nxt.plan.changes == ['add new worker: 10.2.0.2']
    patches = {p.name: p.patch for p in nxt.node_patches}
    assert patches['10.1.0.2'] == {'spec': {'taints': [RETIRING_TAINT]}}
    assert set(patches) == {'10.1.0.2', '10.2.0.2'}
    assert nxt.summary.workers == {'cs': 3}


def test_retired_worker_leaves_after_the_wait_and_its_node_is_deleted(first):
    outcome, kube_nodes = first
    visible = {'notHaving': {'roles': ['boot']}}   # RETIRED machines stay in the answer, so the wait applies
    integration = spec(variables=visible, nodes={'deleteRemoved': True})
    machines = with_state(MACHINES, '10.1.0.2', 'RETIRED', duration=30)   # within waitRetiredSeconds=60
    nodes = applied_nodes(kube_nodes, outcome)
    waiting = plan_cycle(integration, TEMPLATE, machines, outcome.cluster, nodes, integration=INTEGRATION, now=NOW,
                         retired_machines=machines)
    assert waiting.result == UPDATED and waiting.plan.changes == ['add new worker: 10.2.0.2']
    assert {p.name: p.patch for p in waiting.node_patches}['10.1.0.2'] == {'spec': {'taints': [RETIRED_TAINT]}}
    assert waiting.node_deletions == []                       # still a cluster node: kept
    nodes = applied_nodes(nodes, waiting)
    machines = with_state(MACHINES, '10.1.0.2', 'RETIRED', duration=61)
    gone = plan_cycle(integration, TEMPLATE, machines, waiting.cluster, nodes, integration=INTEGRATION, now=NOW,
                      retired_machines=machines)
    assert gone.result == UPDATED and gone.plan.changes == ['remove retired worker: 10.1.0.2']
    assert [n['address'] for n in gone.cluster['nodes']] == ['10.0.0.2', '10.0.0.3', '10.2.0.2']
    assert [(d.name, d.serial) for d in gone.node_deletions] == [('10.1.0.2', 'm12')]
    # Without deleteRemoved the Node stays.
    kept = plan_cycle(spec(variables=visible), TEMPLATE, machines, waiting.cluster, nodes, integration=INTEGRATION,
                      now=NOW, retired_machines=machines)
    assert kept.node_deletions == [] and kept.plan.changes == ['remove retired worker: 10.1.0.2']


def test_template_change_regenerates(first):
    outcome, kube_nodes = first
    template = copy.deepcopy(TEMPLATE)
    template['nodes'][1]['labels']['team'] = 'blue'
    nxt = plan_cycle(spec(template=template), template, MACHINES, outcome.cluster, applied_nodes(kube_nodes, outcome),
                     integration=INTEGRATION, now=NOW)
    assert nxt.result == REGENERATED
    assert [p.name for p in nxt.node_patches] == ['10.0.0.3', '10.1.0.2']
    assert all(p.patch == {'metadata': {'labels': {'team': 'blue'}}} for p in nxt.node_patches)


def test_apply_nodes_false_patches_nothing(first):
    _outcome, kube_nodes = first
    outcome = plan_cycle(spec(nodes={'apply': False}), TEMPLATE, MACHINES, None, kube_nodes, integration=INTEGRATION,
                         now=NOW)
    assert outcome.result == GENERATED and outcome.node_patches == []


@pytest.mark.parametrize('machines, current, error', [
    # too few healthy machines for control-plane-count + minimum-workers
    (MACHINES[:2], None, 'NotAvailable'),
    # both control planes gone from sabakan: replacing them would break etcd quorum
    (MACHINES[2:], {'name': 'lab', 'service_subnet': '10.68.0.0/16', 'nodes': [
        {'address': '10.0.0.2', 'user': 'cybozu', 'control_plane': True},
        {'address': '10.0.0.3', 'user': 'cybozu', 'control_plane': True},
        {'address': '10.1.0.2', 'user': 'cybozu'}]}, 'TooManyNonExistent'),
])
def test_generator_errors_write_nothing(machines, current, error):
    outcome = plan_cycle(spec(constraints={'control-plane-count': 1 if current is None else 2, 'minimum-workers': 2}),
                         TEMPLATE, machines, current, nodes_for(MACHINES), integration=INTEGRATION, now=NOW)
    assert (outcome.result, outcome.error) == (FAILED, error) and not outcome.successful
    assert outcome.cluster is None and outcome.node_patches == [] and outcome.node_deletions == []
    assert outcome.reason


def test_unchanged_cluster_that_violates_the_constraints_is_a_failure(first):
    outcome, kube_nodes = first
    only_members = [m for m in MACHINES if m['spec']['ipv4'][0] in {'10.0.0.2', '10.0.0.3', '10.1.0.2'}]
    nxt = plan_cycle(spec(constraints={'control-plane-count': 1, 'minimum-workers': 3}), TEMPLATE, only_members,
                     outcome.cluster, applied_nodes(kube_nodes, outcome), integration=INTEGRATION, now=NOW)
    assert (nxt.result, nxt.error) == (FAILED, CONSTRAINT_VIOLATION)
    assert nxt.reason == 'the cluster does not satisfy the constraints: number of worker nodes is less than the minimum'
    assert nxt.cluster is None and nxt.node_patches == []


def test_the_modules_planner_is_the_controllers(first):
    """sabakan_cluster and the inventory call plan_checked_cluster, the planner under plan_cycle: same cluster,
    same refusal (constraint check included)."""
    outcome, _kube_nodes = first
    plan, cluster = plan_checked_cluster(None, TEMPLATE, spec().constraints, MACHINES, now=NOW)
    assert cluster == outcome.cluster and plan.operation == outcome.plan.operation and plan.changes == outcome.plan.changes
    only_members = [m for m in MACHINES if m['spec']['ipv4'][0] in {'10.0.0.2', '10.0.0.3', '10.1.0.2'}]
    with pytest.raises(ConstraintViolation, match='^the cluster does not satisfy the constraints: number of worker nodes'):
        plan_checked_cluster(outcome.cluster, TEMPLATE, {'control-plane-count': 1, 'minimum-workers': 3}, only_members,
                             now=NOW)


def test_tainted_node_is_not_made_a_control_plane():
    """Node taints read from Kubernetes reach the generator (control planes must be untainted)."""
    kube_nodes = nodes_for(MACHINES)
    kube_nodes[0]['spec']['taints'] = [{'key': 'example.com/broken', 'effect': 'NoSchedule'}]   # 10.0.0.2
    outcome = plan_cycle(spec(), TEMPLATE, MACHINES, None, kube_nodes, integration=INTEGRATION, now=NOW)
    cps = [n['address'] for n in outcome.cluster['nodes'] if n['control_plane']]
    assert cps == ['10.0.0.3']


# --- status -----------------------------------------------------------------------------------
def test_status_of_a_success(first):
    outcome, _node_taints = first
    status = integration_status({'workers': {'gpu': 1, 'cs': 1}}, outcome, now=NOW_TS, generation=3,
                                template_hash='abc')
    condition = status.pop('conditions')
    assert status == {
        'lastRun': '2026-01-01T00:00:00Z', 'lastSuccess': '2026-01-01T00:00:00Z', 'lastResult': GENERATED,
        'observedGeneration': 3, 'reason': None, 'operation': 'new', 'changes': outcome.plan.changes,
        'nodes': 3, 'controlPlanes': 1, 'workers': {'gpu': None, 'cs': 2}, 'unusedMachines': 3, 'templateHash': 'abc'}
    assert [(c['type'], c['status'], c['reason']) for c in condition] == [('Synced', 'True', GENERATED)]
    assert condition[0]['message'] == '3 nodes (1 control planes), 3 unused machines'


def test_status_of_a_failure_keeps_the_numbers_and_flips_the_condition(first):
    outcome, _node_taints = first
    good = integration_status(None, outcome, now=NOW_TS)
    bad = integration_status(good, failed('SabakanUnavailable', 'cannot reach sabakan'), now=NOW_TS + 60)
    assert bad['lastResult'] == FAILED and bad['reason'] == 'cannot reach sabakan'
    assert not {'nodes', 'workers', 'unusedMachines', 'lastSuccess', 'changes'} & set(bad)
    (condition,) = bad['conditions']
    assert (condition['status'], condition['reason'], condition['message']) == (
        'False', 'SabakanUnavailable', 'cannot reach sabakan')
    assert condition['lastTransitionTime'] == '2026-01-01T00:01:00Z'
    again = integration_status(bad, failed('SabakanUnavailable', 'cannot reach sabakan'), now=NOW_TS + 120)
    assert again['conditions'][0]['lastTransitionTime'] == '2026-01-01T00:01:00Z'   # no flip, no transition
