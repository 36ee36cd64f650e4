"""MCM's in-place update strategy, pure parts: the strategy's fields, the deployment's pass (candidates, the Auto
budget, Manual, transfers, the new set's count and the Nodes' clean-up), the set's guards during the move, and
which machines the loop updates."""

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.kube.lease import format_micro
from ansible_collections.steward.cluster.plugins.module_utils.machines import rollout as r
from ansible_collections.steward.cluster.plugins.module_utils.machines.inplace import (
    needs_update,
    plan_deployment_inplace,
)
from ansible_collections.steward.cluster.plugins.module_utils.machines.machineset import plan_set

T0 = 1_700_000_000.0
CANDIDATE = 'node.machine.sapcloud.io/candidate-for-update'
SELECTED = 'node.machine.sapcloud.io/selected-for-update'
RESULT = 'node.machine.sapcloud.io/update-result'
SCALE_UP_DISABLED = 'node.machine.sapcloud.io/scale-up-disabled'
MD = {'metadata': {'name': 'pool', 'namespace': 'ns', 'uid': 'md'}, 'spec': {'replicas': 3}}


def ts(t):
    return format_micro(t)[:19] + 'Z'


def mset(name, replicas, available=None, labels=None):
    return {'metadata': {'name': name, 'namespace': 'ns', 'uid': name, 'creationTimestamp': ts(T0),
                         'labels': dict(labels or {})},
            'spec': {'replicas': replicas, 'selector': {'matchLabels': {'pool': 'p', 'machine-template-hash': name}},
                     'template': {'spec': {'class': {'kind': 'MachineClass', 'name': 'class-' + name}}}},
            'status': {'availableReplicas': replicas if available is None else available}}


def mach(name, node, owner='old', phase='Running', labels=None, created=T0):
    return {'metadata': {'name': name, 'namespace': 'ns', 'uid': name, 'creationTimestamp': ts(created),
                         'labels': dict({'node': node, 'pool': 'p', 'machine-template-hash': owner}, **(labels or {})),
                         'ownerReferences': [{'uid': owner, 'name': owner, 'controller': True}]},
            'spec': {}, 'status': {'currentStatus': {'phase': phase}}}


def node(name, **labels):
    return {'metadata': {'name': name, 'labels': dict(labels)}}


def plan(old_sets, new, machines, nodes, orchestration='Auto', max_unavailable=1, desired=3):
    by_set = {}
    for m in machines:
        by_set.setdefault(m['metadata']['ownerReferences'][0]['name'], []).append(m)
    return plan_deployment_inplace(MD, old_sets, new, by_set, {n['metadata']['name']: n for n in nodes}, desired,
                                   max_unavailable, orchestration)


def three(**node_labels):
    machines = [mach('m%d' % i, 'n%d' % i, created=T0 + i) for i in range(3)]
    nodes = [node('n%d' % i, **node_labels.get('n%d' % i, {})) for i in range(3)]
    return machines, nodes


# --- the strategy -----------------------------------------------------------------------------------------------
def test_the_strategy_reads_in_place_update_with_its_own_fields_and_orchestration():
    strategy = {'type': 'InPlaceUpdate', 'inPlaceUpdate': {'maxSurge': 0, 'maxUnavailable': 2,
                                                           'orchestrationType': 'Manual'}}
    assert r.strategy_values(strategy) == ('InPlaceUpdate', 0, 2)
    assert r.orchestration(strategy) == 'Manual'
    assert r.orchestration({'type': 'InPlaceUpdate'}) == 'Auto'
    assert r.max_unavailable('InPlaceUpdate', 0, 2, 3) == 2
    assert r.max_surge('InPlaceUpdate', 1, 1, 3) == 0              # no surge machine in place
    assert r.max_unavailable('InPlaceUpdate', 1, 0, 3) == 1        # one node must be able to go


@pytest.mark.parametrize('strategy, field', [
    ({'type': 'InPlaceUpdate', 'inPlaceUpdate': {'orchestrationType': 'Sometimes'}},
     'spec.strategy.inPlaceUpdate.orchestrationType'),
    ({'type': 'InPlaceUpdate', 'inPlaceUpdate': {'maxSurge': 0, 'maxUnavailable': 0}}, 'spec.strategy.inPlaceUpdate'),
    ({'type': 'InPlaceUpdate', 'inPlaceUpdate': {'maxUnavailable': '5.5%'}}, 'spec.strategy.inPlaceUpdate.maxUnavailable'),
])
def test_bad_in_place_strategies_name_the_field(strategy, field):
    with pytest.raises(InvalidInput) as info:
        r.strategy_values(strategy)
    assert info.value.field == field


# --- the deployment's pass ------------------------------------------------------------------------------------
def test_old_sets_stop_creating_their_nodes_become_candidates_and_auto_selects_within_max_unavailable():
    machines, nodes = three()
    step = plan([mset('old', 3)], mset('new', 0), machines, nodes)
    assert step.set_patches['old'] == {'metadata': {'labels': {SCALE_UP_DISABLED: 'true'}}}
    assert step.selected == ['n0']                     # oldest first, one (maxUnavailable 1)
    assert step.node_patches['n0']['metadata']['labels'] == {CANDIDATE: 'true', SELECTED: 'true'}
    assert step.node_patches['n1']['metadata']['labels'] == {CANDIDATE: 'true'}
    assert not step.transfers


def test_a_node_being_updated_uses_the_budget_and_a_failed_one_keeps_it():
    machines, nodes = three(n0={CANDIDATE: 'true', SELECTED: 'true'})
    old = mset('old', 3, available=2, labels={SCALE_UP_DISABLED: 'true'})
    step = plan([old], mset('new', 0), machines, nodes)
    assert step.selected == [] and 'leaves no room' in step.waiting
    machines, nodes = three(n0={CANDIDATE: 'true', SELECTED: 'true', RESULT: 'failed'})
    step = plan([old], mset('new', 0), machines, nodes)
    assert step.selected == [] and not step.transfers       # a failed update is not moved, and stops Auto
    # MCM's budget subtracts the nodes being updated from the available count (its status may still count them)
    wider = plan([mset('old', 3, labels={SCALE_UP_DISABLED: 'true'})], mset('new', 0),
                 *three(n0={CANDIDATE: 'true', SELECTED: 'true'}), max_unavailable=2)
    assert wider.selected == ['n1']


def test_manual_selects_nothing_and_says_what_to_label():
    machines, nodes = three()
    step = plan([mset('old', 3)], mset('new', 0), machines, nodes, orchestration='Manual')
    assert step.selected == []
    assert SELECTED in step.waiting and '3 machine(s)' in step.waiting
    assert all(SELECTED not in p['metadata']['labels'] for p in step.node_patches.values())


def test_an_updated_machine_moves_to_the_new_set_with_its_labels_and_owner():
    machines, nodes = three(n0={CANDIDATE: 'true', SELECTED: 'true', RESULT: 'successful'})
    step = plan([mset('old', 3, labels={SCALE_UP_DISABLED: 'true'})], mset('new', 0), machines, nodes)
    assert [(t.machine, t.from_set, t.from_replicas) for t in step.transfers] == [('m0', 'old', 3)]
    patch = step.transfers[0].patch
    assert patch['metadata']['labels'] == {'pool': 'p', 'machine-template-hash': 'new', RESULT: 'successful'}
    assert patch['metadata']['ownerReferences'][0]['name'] == 'new'
    assert 'spec' not in patch                               # spec.class stays, as MCM's transfer keeps it
    assert step.selected == []                               # moves first; selection in a later pass


def test_a_machine_still_updating_is_not_moved():
    machines, nodes = three(n0={SELECTED: 'true', RESULT: 'successful'})
    machines[0]['status']['currentStatus']['phase'] = 'InPlaceUpdating'
    step = plan([mset('old', 3)], mset('new', 0), machines, nodes)
    assert not step.transfers


def test_the_new_set_counts_moved_machines_then_drops_their_label_and_cleans_their_nodes():
    moved = mach('m0', 'n0', owner='new', labels={RESULT: 'successful'})
    rest = [mach('m1', 'n1'), mach('m2', 'n2')]
    nodes = [node('n0', **{CANDIDATE: 'true', SELECTED: 'true', RESULT: 'successful'}), node('n1'), node('n2')]
    old = mset('old', 2, labels={SCALE_UP_DISABLED: 'true'})
    step = plan([old], mset('new', 0), [moved] + rest, nodes)
    assert step.set_patches['new'] == {'spec': {'replicas': 1}}
    assert not step.machine_patches and not step.transfers and not step.selected      # the count first
    step = plan([old], mset('new', 1), [moved] + rest, nodes)
    assert step.machine_patches == {'m0': {'metadata': {'labels': {RESULT: None}}}}
    assert step.node_patches['n0'] == {'metadata': {'labels': {CANDIDATE: None, SELECTED: None, RESULT: None}},
                                       'spec': {'unschedulable': False}}
    assert step.selected == ['n1']


def test_a_deployment_without_old_machines_scales_its_new_set_and_leftovers_go_to_zero():
    step = plan([], mset('new', 0), [], [])
    assert step.set_patches == {'new': {'spec': {'replicas': 3}}}
    left = plan([mset('old', 1)], mset('new', 3), [mach('m9', 'n9')], [node('n9')])
    assert left.set_patches['old']['spec'] == {'replicas': 0}


# --- the set during the move, and which machines the loop updates -------------------------------------------
def test_a_set_neither_deletes_a_machine_that_moved_in_nor_creates_while_scale_up_is_disabled():
    new = mset('new', 0)
    moved = mach('m0', 'n0', owner='new', labels={RESULT: 'successful'})
    assert plan_set(new, [moved], [], T0, 10).delete == []
    old = mset('old', 3, labels={SCALE_UP_DISABLED: 'true'})
    waiting = plan_set(old, [mach('m1', 'n1'), mach('m2', 'n2')], [], T0, 10)
    assert waiting.create == 0 and SCALE_UP_DISABLED in waiting.waiting


@pytest.mark.parametrize('labels, phase, in_old, expected', [
    ({SELECTED: 'true'}, 'Running', True, True),
    ({SELECTED: 'true'}, 'InPlaceUpdating', True, True),          # a run that stopped: again
    ({SELECTED: 'true', RESULT: 'successful'}, 'Running', True, False),
    ({SELECTED: 'true', RESULT: 'failed'}, 'InPlaceUpdateFailed', True, False),
    ({CANDIDATE: 'true'}, 'Running', True, False),
    ({SELECTED: 'true'}, 'Running', False, False),                # already in the new set
    ({SELECTED: 'true'}, 'Pending', True, False),
])
def test_which_machines_the_loop_updates(labels, phase, in_old, expected):
    assert needs_update(mach('m', 'n', phase=phase), node('n', **labels), in_old) is expected


# --- one machine's update (apply.run_in_place) over a recording stand-in for the controller's Target ------------
class Recorder:
    """Records what run_in_place writes; `update_error` is what the driver's UpdateMachine raises."""

    def __init__(self, update_error=None):
        self.writes, self.nodes, self.update_error = [], {'n0': node('n0')}, update_error

    def patch(self, kind, namespace, name, patch, status=False, resource_version=None):
        self.writes.append((kind, name, patch))

    def patch_node(self, name, patch, status=False):
        self.writes.append(('Node', name, patch))
        labels = (patch.get('metadata') or {}).get('labels')
        if labels:
            self.nodes[name]['metadata']['labels'].update(labels)
        if 'status' in patch:
            self.nodes[name]['status'] = patch['status']

    def node(self, name):
        return self.nodes.get(name)

    def drain_node(self, name, timeout):
        self.writes.append(('drain', name, timeout))
        return {'evicted': ['ns/web-0'], 'skipped': [], 'cordoned': True}

    def update_machine(self, machine, class_name):
        self.writes.append(('update', machine['metadata']['name'], class_name))
        if self.update_error is not None:
            raise self.update_error

    def event(self, obj, event):
        self.writes.append(('event', event.reason, event.message))


def _timeouts():
    from ansible_collections.steward.cluster.plugins.module_utils.machines.config import MachineTimeouts
    return MachineTimeouts(creation=1200, health=600, drain=7200, max_evict_retries=360, node_conditions=(),
                           disable_health_timeout=False)


def test_an_update_drains_calls_the_driver_then_labels_the_node_successful():
    from ansible_collections.steward.cluster.plugins.module_utils.machines.apply import run_in_place
    t = Recorder()
    assert run_in_place(t, mach('m0', 'n0'), 'n0', 'class-new', _timeouts(), lambda: T0) is True
    kinds = [w[0] for w in t.writes]
    assert kinds.index('drain') < kinds.index('update')            # drained before the driver touches it
    assert t.writes[0][2]['status']['currentStatus']['phase'] == 'InPlaceUpdating'
    assert t.nodes['n0']['metadata']['labels'][RESULT] == 'successful'
    assert t.nodes['n0']['status']['conditions'][0]['reason'] == 'UpdateSuccessful'
    last = [w for w in t.writes if w[0] == 'Machine'][-1][2]['status']
    assert last['currentStatus']['phase'] == 'Running' and last['lastOperation']['type'] == 'InPlaceUpdate'


def test_a_refused_update_labels_the_node_failed_with_the_reason_and_a_transient_one_is_retried():
    from ansible_collections.steward.cluster.plugins.module_utils.machines.apply import run_in_place
    from ansible_collections.steward.cluster.plugins.module_utils.machines.codes import Call, Code
    from ansible_collections.steward.cluster.plugins.module_utils.machines.errors import DriverError
    t = Recorder(DriverError(Code.PRECONDITION_FAILED, 'server S does not match the class', Call.UPDATE))
    assert run_in_place(t, mach('m0', 'n0'), 'n0', 'class-new', _timeouts(), lambda: T0) is False
    labels = t.nodes['n0']['metadata']['labels']
    assert labels[RESULT] == 'failed'
    failed_reason = [w[2] for w in t.writes if w[0] == 'Node' and 'annotations' in (w[2].get('metadata') or {})]
    assert 'does not match' in failed_reason[0]['metadata']['annotations'][
        'node.machine.sapcloud.io/update-failed-reason']
    last = [w for w in t.writes if w[0] == 'Machine'][-1][2]['status']
    assert last['currentStatus']['phase'] == 'InPlaceUpdateFailed' and last['lastOperation']['state'] == 'Failed'
    transient = Recorder(DriverError(Code.UNAVAILABLE, 'sabakan did not answer', Call.UPDATE))
    with pytest.raises(DriverError):
        run_in_place(transient, mach('m0', 'n0'), 'n0', 'class-new', _timeouts(), lambda: T0)
    assert RESULT not in transient.nodes['n0']['metadata']['labels']     # no result: the next pass tries again


# --- the pass: which machines get an update job, and not during a freeze ----------------------------------------
def _world(api_freeze=None):
    from ansible_collections.steward.cluster.plugins.module_utils.machines.reconcile import World
    md = {'metadata': {'name': 'pool', 'namespace': 'ns', 'uid': 'md', 'generation': 2,
                       'finalizers': ['machine.sapcloud.io/operator']},
          'spec': {'replicas': 1, 'selector': {'matchLabels': {'pool': 'p'}},
                   'strategy': {'type': 'InPlaceUpdate', 'inPlaceUpdate': {'maxUnavailable': 1}},
                   'template': {'metadata': {'labels': {'pool': 'p'}},
                                'spec': {'class': {'kind': 'MachineClass', 'name': 'class-new'}}}}}
    sets = []
    for name in ('old', 'new'):
        ms = mset(name, 1 if name == 'old' else 0)
        ms['metadata']['ownerReferences'] = [{'uid': 'md', 'name': 'pool', 'controller': True}]
        ms['metadata']['finalizers'] = ['machine.sapcloud.io/operator']
        ms['spec']['template']['metadata'] = {'labels': {'pool': 'p', 'machine-template-hash': name}}
        sets.append(ms)
    sets[1]['spec']['template'] = dict(md['spec']['template'])      # the new set carries the deployment's template
    m = mach('m0', 'n0')
    m['metadata']['finalizers'] = ['machine.sapcloud.io/operator']
    m['spec'] = {'class': {'kind': 'MachineClass', 'name': 'class-old'}, 'providerID': 'sabakan:///S0'}
    n = node('n0', **{CANDIDATE: 'true', SELECTED: 'true'})
    n['spec'] = {'providerID': 'sabakan:///S0'}
    n['status'] = {'conditions': [{'type': 'Ready', 'status': 'True'}]}
    return World(deployments=[md], sets=sets, machines=[m], classes={}, nodes={'n0': n}, api_freeze=api_freeze)


def test_a_selected_machine_gets_an_update_job_to_the_new_set_s_class_but_not_while_frozen():
    from ansible_collections.steward.cluster.plugins.module_utils.machines import safety
    from ansible_collections.steward.cluster.plugins.module_utils.machines.config import Settings
    from ansible_collections.steward.cluster.plugins.module_utils.machines.reconcile import Memory, plan_pass
    plan = plan_pass(_world(), Memory(), Settings(), T0 + 60)
    assert [(j.key, j.node, j.class_name) for j in plan.in_place] == [('ns/m0', 'n0', 'class-new')]
    assert not [p for p in plan.machines if p.key == 'ns/m0']     # not health-planned meanwhile
    frozen = plan_pass(_world(safety.Freeze('ApiServerUnreachable', 'probes failed')), Memory(), Settings(), T0 + 60)
    assert frozen.in_place == []
