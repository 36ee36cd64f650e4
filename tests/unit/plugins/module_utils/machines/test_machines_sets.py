"""MachineSet replicas and victim order (acceptance 10), rollout arithmetic, and MachineDeployment rollouts,
pause, rollback and proportional scaling (acceptance 11-13) driven through the engine in memory."""

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.kube.lease import format_micro
from ansible_collections.steward.cluster.plugins.module_utils.machines import objects as o
from ansible_collections.steward.cluster.plugins.module_utils.machines import rollout as r
from ansible_collections.steward.cluster.plugins.module_utils.machines.deployment import rollout_template, template_hash
from ansible_collections.steward.cluster.plugins.module_utils.machines.machineset import plan_set, victim_order

from support.machines_sim import MachinesSim

T0 = 1_700_000_000.0


def ts(t):
    return format_micro(t)[:19] + 'Z'


def mach(name, phase='Running', created=T0, priority=None, deleting=False):
    md = {'name': name, 'namespace': 'ns', 'uid': name, 'creationTimestamp': ts(created), 'annotations': {},
          'finalizers': ['machine.sapcloud.io/operator'], 'ownerReferences': [{'uid': 'ms', 'controller': True}]}
    if priority is not None:
        md['annotations']['machinepriority.machine.sapcloud.io'] = str(priority)
    if deleting:
        md['deletionTimestamp'] = ts(T0)
    return {'metadata': md, 'spec': {}, 'status': {'currentStatus': {'phase': phase, 'lastUpdateTime': ts(created)}}}


def mset(replicas, deleting=False):
    md = {'name': 'ms', 'namespace': 'ns', 'uid': 'ms', 'finalizers': ['machine.sapcloud.io/operator']}
    if deleting:
        md['deletionTimestamp'] = ts(T0)
    return {'metadata': md, 'spec': {'replicas': replicas, 'selector': {'matchLabels': {'a': 'b'}},
                                     'template': {'metadata': {'labels': {'a': 'b'}}}}, 'status': {}}


# --- victim order and replicas (acceptance 10) -----------------------------------------------------

def test_priority_one_goes_first():
    machines = [mach('a', created=T0), mach('b', created=T0 + 1, priority=1), mach('c', created=T0 + 2)]
    assert plan_set(mset(2), machines, [], T0, 100).delete == ['b']


def test_failed_before_running_then_oldest():
    order = victim_order([mach('run-old', created=T0), mach('failed', 'Failed', T0 + 5), mach('unknown', 'Unknown', T0 + 9),
                          mach('run-new', created=T0 + 7), mach('pending', 'Pending', T0 + 8)])
    assert [o.name(m) for m in order] == ['failed', 'unknown', 'pending', 'run-old', 'run-new']


def test_scale_up_creates_the_difference_within_the_burst_and_not_when_frozen():
    assert plan_set(mset(5), [mach('a')], [], T0, 100).create == 4
    assert plan_set(mset(500), [], [], T0, 100).create == 100
    frozen = plan_set(mset(5), [mach('a')], [], T0, 100, frozen='OverShootingReplicaCount: x')
    assert frozen.create == 0 and frozen.waiting.startswith('OverShooting')


def test_failed_machines_are_replaced_and_terminating_ones_do_not_count():
    plan = plan_set(mset(2), [mach('a'), mach('f', 'Failed'), mach('t', 'Terminating', deleting=True)], [], T0, 100)
    assert plan.delete == ['f'] and plan.create == 0       # 'f' still counts until its deletion starts
    assert plan.status['replicas'] == 2 and plan.status['readyReplicas'] == 1
    assert plan.status['failedMachines'][0]['name'] == 'f'


def test_a_deleted_set_deletes_its_machines_then_drops_its_finalizer():
    plan = plan_set(mset(2, deleting=True), [mach('a'), mach('b')], [], T0, 100)
    assert sorted(plan.delete) == ['a', 'b'] and not plan.remove_finalizer
    assert plan_set(mset(2, deleting=True), [], [], T0, 100).remove_finalizer


def test_orphans_matching_the_selector_are_adopted():
    orphan = mach('o')
    orphan['metadata']['labels'] = {'a': 'b'}
    orphan['metadata']['ownerReferences'] = []
    stranger = mach('x')
    assert plan_set(mset(1), [], [orphan, stranger], T0, 100).adopt == ['o']


# --- rollout arithmetic -------------------------------------------------------------------------------

@pytest.mark.parametrize('surge, unavailable, desired, expected', [
    (1, 1, 3, (1, 1)),
    ('25%', '25%', 10, (3, 2)),        # surge rounds up, unavailable down
    ('10%', '10%', 5, (1, 0)),
    (0, 0, 5, (0, 1)),                 # never both zero
    ('0%', '0%', 5, (0, 1)),
])
def test_fenceposts(surge, unavailable, desired, expected):
    assert r.resolve_fenceposts(surge, unavailable, desired) == expected


@pytest.mark.parametrize('strategy, field', [
    ({'type': 'Rolling'}, 'spec.strategy.type'),
    ({'rollingUpdate': {'maxSurge': 0, 'maxUnavailable': 0}}, 'spec.strategy.rollingUpdate'),
    ({'rollingUpdate': {'maxSurge': '1.5%'}}, 'spec.strategy.rollingUpdate.maxSurge'),
    ({'rollingUpdate': {'maxUnavailable': -1}}, 'spec.strategy.rollingUpdate.maxUnavailable'),
])
def test_bad_strategies_are_refused_with_the_field(strategy, field):
    with pytest.raises(InvalidInput) as info:
        r.strategy_values(strategy)
    assert info.value.field == field


def test_defaults_are_one_and_one():
    assert r.strategy_values(None) == ('RollingUpdate', 1, 1)


def test_scale_in_mid_rollout_is_proportional_and_the_leftover_comes_off_the_largest():
    old = r.SetState('old', T0, 4, max_replicas=7)
    new = r.SetState('new', T0 + 1, 3, max_replicas=7)
    # 6 -> 3 with surge 1: 4 allowed; old 4*4/7 = 2.29 -> 2, new 3*4/7 = 1.71 -> 2
    assert r.proportional_scale(3, 1, [old, new], new, 7) == {'old': 2, 'new': 2}
    big = r.SetState('old', T0, 5, max_replicas=7)
    small = r.SetState('new', T0 + 1, 2, max_replicas=7)
    # 6 -> 2, surge 1 -> 3 allowed: 5*3/7 = 2.14 -> 2 (-3), 2*3/7 = 0.86 -> 1 (-1): leftover 0
    assert r.proportional_scale(2, 1, [big, small], small, 7) == {'old': 2, 'new': 1}


def test_scale_out_mid_rollout_grows_only_the_new_set():
    old = r.SetState('old', T0, 2, max_replicas=4)
    new = r.SetState('new', T0 + 1, 2, max_replicas=4)
    assert r.proportional_scale(6, 1, [old, new], new, 4) == {'new': 5}


def test_new_set_growth_and_old_scale_down_respect_surge_and_availability():
    old = r.SetState('old', T0, 3, available=3, status_replicas=3)
    new = r.SetState('new', T0 + 1, 0)
    assert r.new_set_replicas(3, 1, [old, new], new) == 1
    new = r.SetState('new', T0 + 1, 1, available=0, status_replicas=1)
    # total 4, min available 2, new has 1 unavailable: at most 1 old machine goes
    assert r.scale_down_old(3, 1, [old, new], [old], new) == {'old': 2}


def test_unhealthy_old_machines_go_first():
    old = r.SetState('old', T0, 3, available=1, status_replicas=3)
    new = r.SetState('new', T0 + 1, 1, available=1, status_replicas=1)
    assert r.scale_down_old(3, 1, [old, new], [old], new) == {'old': 1}


def test_template_hash_ignores_node_template_and_timeouts():
    base = {'metadata': {'labels': {'a': 'b'}}, 'spec': {'class': {'name': 'c1'}}}
    changed_in_place = {'metadata': {'labels': {'a': 'b', 'machine-template-hash': 'x'}},
                        'spec': {'class': {'name': 'c1'}, 'healthTimeout': '5m', 'nodeTemplate': {'metadata': {'labels': {'x': 'y'}}}}}
    assert rollout_template(base) == rollout_template(changed_in_place)
    assert template_hash(base) == template_hash(changed_in_place) != template_hash(base, collision_count=1)
    assert template_hash(base) != template_hash({'metadata': {'labels': {'a': 'b'}}, 'spec': {'class': {'name': 'c2'}}})


# --- deployments in memory (acceptance 11-13) --------------------------------------------------------

def settled(sim, replicas=3):
    sim.run_until(lambda: sim.phases() == ['Running'] * replicas and all(
        o.status(s).get('availableReplicas') == o.replicas(s) for s in sim.sets()))


def available_count(sim):
    return sum(1 for m in sim.machines() if o.phase(m).value == 'Running' and not o.deleting(m))


def test_rolling_update_keeps_surge_and_availability_and_ends_at_3_0():
    sim = MachinesSim(node_delay=2)
    sim.add_class('c1')
    sim.add_class('c2')
    sim.add_deployment(replicas=3, cls='c1')
    settled(sim)
    first = sim.sets()[0]
    assert o.annotations_of(sim.get('MachineDeployment', 'md'))['deployment.kubernetes.io/revision'] == '1'
    sim.update('MachineDeployment', 'md', {'spec': {'template': {'spec': {'class': {'name': 'c2'}}}}})
    worst_total, worst_available = 0, 3
    for _step in range(60):
        sim.step()
        live = [m for m in sim.machines() if not o.deleting(m)]
        worst_total = max(worst_total, len(live))
        worst_available = min(worst_available, available_count(sim))
    sets = {o.name(s): s for s in sim.sets()}
    new = [s for n, s in sets.items() if n != o.name(first)]
    assert len(new) == 1 and o.name(new[0]).startswith('md-')
    assert (o.replicas(new[0]), o.status(new[0])['replicas'], o.status(new[0])['readyReplicas']) == (3, 3, 3)
    assert (o.replicas(sets[o.name(first)]), o.status(sets[o.name(first)]).get('replicas')) == (0, 0)
    assert worst_total <= 4 and worst_available >= 2
    assert o.annotations_of(sim.get('MachineDeployment', 'md'))['deployment.kubernetes.io/revision'] == '2'
    assert all(o.class_name(o.spec(m)) == 'c2' for m in sim.machines())


def test_pause_stops_a_rollout_and_rollback_restores_the_previous_template():
    sim = MachinesSim(node_delay=2)
    sim.add_class('c1')
    sim.add_class('c2')
    sim.add_deployment(replicas=2, cls='c1')
    settled(sim, 2)
    sim.update('MachineDeployment', 'md', {'spec': {'paused': True, 'template': {'spec': {'class': {'name': 'c2'}}}}})
    sim.step(count=10)
    assert all(o.class_name(o.spec(m)) == 'c1' for m in sim.machines())
    cond = [c for c in o.status(sim.get('MachineDeployment', 'md'))['conditions'] if c['type'] == 'Progressing'][0]
    assert cond['reason'] == 'DeploymentPaused'
    sim.update('MachineDeployment', 'md', {'spec': {'paused': None}})
    sim.run_until(lambda: sorted(o.class_name(o.spec(m)) for m in sim.machines() if not o.deleting(m)) == ['c2', 'c2']
                  and len(sim.machines()) == 2)
    sim.update('MachineDeployment', 'md', {'spec': {'rollbackTo': {'revision': 0}}})
    sim.step()
    md = sim.get('MachineDeployment', 'md')
    assert 'rollbackTo' not in o.spec(md) and o.class_name(o.spec(md)['template']['spec']) == 'c1'
    sim.run_until(lambda: sorted(o.class_name(o.spec(m)) for m in sim.machines()) == ['c1', 'c1'])
    assert ('md', 'DeploymentRollback', 'Rolled back deployment md to revision 1') in sim.events


def test_a_paused_deployment_keeps_its_rollback_until_it_is_resumed():
    """Kubernetes' and MCM's syncDeployment check spec.paused before rollbackTo: while paused the rollback waits
    (the field stays, the template and the machines do not change, no event); resumed, it is applied and cleared."""
    sim = MachinesSim(node_delay=2)
    sim.add_class('c1')
    sim.add_class('c2')
    sim.add_deployment(replicas=2, cls='c1')
    settled(sim, 2)
    sim.update('MachineDeployment', 'md', {'spec': {'template': {'spec': {'class': {'name': 'c2'}}}}})
    sim.run_until(lambda: sorted(o.class_name(o.spec(m)) for m in sim.machines()) == ['c2', 'c2'])
    names = sorted(o.name(m) for m in sim.machines())
    sim.update('MachineDeployment', 'md', {'spec': {'paused': True, 'rollbackTo': {'revision': 0}}})
    sim.step(count=10)
    md = sim.get('MachineDeployment', 'md')
    assert o.spec(md)['rollbackTo'] == {'revision': 0} and o.class_name(o.spec(md)['template']['spec']) == 'c2'
    assert sorted(o.name(m) for m in sim.machines()) == names
    assert not [e for e in sim.events if e[1] == 'DeploymentRollback']
    cond = [c for c in o.status(md)['conditions'] if c['type'] == 'Progressing'][0]
    assert cond['reason'] == 'DeploymentPaused'
    sim.update('MachineDeployment', 'md', {'spec': {'paused': None}})
    sim.step()
    md = sim.get('MachineDeployment', 'md')
    assert 'rollbackTo' not in o.spec(md) and o.class_name(o.spec(md)['template']['spec']) == 'c1'
    assert ('md', 'DeploymentRollback', 'Rolled back deployment md to revision 1') in sim.events
    sim.run_until(lambda: sorted(o.class_name(o.spec(m)) for m in sim.machines()) == ['c1', 'c1'])


def test_scaling_mid_rollout_is_proportional_and_updates_desired_replicas():
    sim = MachinesSim(node_delay=1000)        # new machines never join: the rollout stays mid-way
    sim.add_class('c1')
    sim.add_class('c2')
    sim.add_deployment(replicas=6, cls='c1')
    sim.node_delay = 0
    settled(sim, 6)
    sim.node_delay = 1000
    sim.update('MachineDeployment', 'md', {'spec': {'template': {'spec': {'class': {'name': 'c2'}}}}})
    sim.step(count=6)
    before = {o.name(s): o.replicas(s) for s in sim.sets()}
    assert sum(before.values()) == 7 and len(before) == 2         # 6 + surge 1, mid-rollout
    sim.update('MachineDeployment', 'md', {'spec': {'replicas': 3}})
    sim.step()
    after = {o.name(s): o.replicas(s) for s in sim.sets()}
    assert sum(after.values()) == 4 and all(after[n] < before[n] or before[n] == 0 for n in after)
    assert all(o.annotations_of(s)['deployment.kubernetes.io/desired-replicas'] == '3' for s in sim.sets())
    new_name = max(sim.sets(), key=o.created_at)['metadata']['name']
    sim.update('MachineDeployment', 'md', {'spec': {'replicas': 8}})
    sim.step()
    grown = {o.name(s): o.replicas(s) for s in sim.sets()}
    assert grown[new_name] > after[new_name] and all(grown[n] == after[n] for n in grown if n != new_name)


def test_recreate_removes_every_old_machine_before_creating_new_ones():
    sim = MachinesSim(node_delay=1)
    sim.add_class('c1')
    sim.add_class('c2')
    sim.add_deployment(replicas=2, cls='c1', strategy={'type': 'Recreate'})
    settled(sim, 2)
    sim.update('MachineDeployment', 'md', {'spec': {'template': {'spec': {'class': {'name': 'c2'}}}}})
    mixed = False
    for _step in range(40):
        sim.step()
        classes = {o.class_name(o.spec(m)) for m in sim.machines()}
        mixed = mixed or classes == {'c1', 'c2'}
    assert not mixed and sorted(o.class_name(o.spec(m)) for m in sim.machines()) == ['c2', 'c2']


def test_revision_history_limit_deletes_old_empty_sets():
    sim = MachinesSim()
    for c in ('c1', 'c2', 'c3'):
        sim.add_class(c)
    sim.add_deployment(replicas=1, cls='c1', revisionHistoryLimit=1)
    settled(sim, 1)
    for c in ('c2', 'c3'):
        sim.update('MachineDeployment', 'md', {'spec': {'template': {'spec': {'class': {'name': c}}}}})
        sim.run_until(lambda: [o.class_name(o.spec(m)) for m in sim.machines()] == [c] and all(
            o.replicas(s) == 0 or o.status(s).get('availableReplicas') == 1 for s in sim.sets()))
    sim.step(count=5)
    assert len(sim.sets()) == 2      # the current one and one old revision


def test_progress_deadline_is_reported():
    sim = MachinesSim(node_delay=10_000)
    sim.add_class('c1')
    sim.add_deployment(replicas=1, cls='c1', progressDeadlineSeconds=30)
    sim.step(count=60)
    cond = [c for c in o.status(sim.get('MachineDeployment', 'md'))['conditions'] if c['type'] == 'Progressing'][0]
    assert cond['reason'] == 'ProgressDeadlineExceeded' and cond['status'] == 'False'


def test_node_template_changes_roll_nothing():
    sim = MachinesSim()
    sim.add_class('c1')
    sim.add_deployment(replicas=2, cls='c1')
    settled(sim, 2)
    names = sorted(o.name(m) for m in sim.machines())
    sim.update('MachineDeployment', 'md', {'spec': {'template': {'spec': {'healthTimeout': '1m'}}}})
    sim.step(count=5)
    assert sorted(o.name(m) for m in sim.machines()) == names and len(sim.sets()) == 1
    assert sim.sets()[0]['spec']['template']['spec']['healthTimeout'] == '1m'


def test_deleting_a_deployment_deletes_sets_machines_and_vms():
    sim = MachinesSim()
    sim.add_class('c1')
    sim.add_deployment(replicas=3, cls='c1')
    settled(sim)
    sim.delete('MachineDeployment', 'ns', 'md')
    sim.run_until(lambda: not sim.objects('MachineDeployment'))
    assert not sim.machines() and not sim.sets() and not sim.cloud.running()
    assert len(sim.deleted_nodes) == 3


# --- replicas the schema should have refused (issue 19 §2) -------------------------------------------------
@pytest.mark.parametrize('replicas, rule', [('3', 'integer'), (-1, 'minimum'), (2.5, 'integer'), (True, 'integer'),
                                            (10 ** 9, 'maximum')])
def test_a_wrong_replicas_is_named_and_nothing_is_scaled(replicas, rule):
    """`replicas: "3"` used to read as "not an integer, so 0": the pool would have been scaled down to nothing."""
    sim = MachinesSim()
    sim.add_class('c1')
    sim.add_deployment(replicas=2, cls='c1')
    settled(sim, 2)
    names = sorted(o.name(m) for m in sim.machines())
    sim.update('MachineDeployment', 'md', {'spec': {'replicas': replicas}})
    sim.step(count=3)
    assert sorted(o.name(m) for m in sim.machines()) == names and sim.sets()[0]['spec']['replicas'] == 2
    error = sim.last_plan.invalid['ns/md']
    assert (error.field, error.rule) == ('spec.replicas', rule)
    sim.update('MachineDeployment', 'md', {'spec': {'replicas': 2}})
    ms = sim.sets()[0]
    sim.update('MachineSet', o.name(ms), {'spec': {'replicas': '5'}})    # a set edited by hand: it and its deployment wait
    sim.step(count=3)
    assert sorted(o.name(m) for m in sim.machines()) == names
    assert sim.last_plan.invalid['ns/' + o.name(ms)].field == 'spec.replicas'
    assert sim.last_plan.invalid['ns/md'].field == 'MachineSet %s' % o.name(ms)


# --- in place: node template and timeouts reach the machines and their Nodes (MCM) ----------------------

def test_node_template_changes_reach_every_machine_and_its_node_and_removals_follow():
    sim = MachinesSim()
    sim.add_class('c1')
    sim.add_deployment(replicas=2, cls='c1')
    sim.update('MachineDeployment', 'md', {'spec': {'template': {'spec': {'nodeTemplate': {
        'metadata': {'labels': {'pool': 'a', 'tier': 'web'}, 'annotations': {'team': 'x'}},
        'spec': {'taints': [{'key': 'dedicated', 'value': 'web', 'effect': 'NoSchedule'}]}}}}}})
    settled(sim, 2)
    names = sorted(o.name(m) for m in sim.machines())
    sim.step(count=3)
    for m in sim.machines():
        node = sim.nodes[o.node_name(m)]
        assert node['metadata']['labels']['pool'] == 'a' and node['metadata']['labels']['tier'] == 'web'
        assert node['metadata']['annotations']['team'] == 'x'
        assert {'key': 'dedicated', 'value': 'web', 'effect': 'NoSchedule'} in node['spec']['taints']
    sim.update('MachineDeployment', 'md', {'spec': {'template': {'spec': {'nodeTemplate': {
        'metadata': {'labels': {'pool': 'b', 'tier': None}, 'annotations': None}, 'spec': {'taints': None}}}}}})
    sim.step(count=5)
    assert sorted(o.name(m) for m in sim.machines()) == names          # no rollout
    for m in sim.machines():
        assert m['spec']['nodeTemplate'] == {'metadata': {'labels': {'pool': 'b'}}, 'spec': {}}
        node = sim.nodes[o.node_name(m)]
        labels = node['metadata']['labels']
        assert labels['pool'] == 'b' and 'tier' not in labels
        assert 'team' not in node['metadata'].get('annotations', {})
        assert not [t for t in node['spec'].get('taints') or [] if t['key'] == 'dedicated']


def test_in_place_patches_skip_failed_terminating_and_deleting_machines():
    from ansible_collections.steward.cluster.plugins.module_utils.machines.machineset import in_place_patches
    ms = mset(3)
    ms['spec']['template']['spec'] = {'healthTimeout': '5m', 'nodeTemplate': {'metadata': {'labels': {'x': 'y'}}}}
    machines = [mach('a'), mach('b', 'Failed'), mach('c', 'Terminating'), mach('d', deleting=True)]
    assert in_place_patches(ms, machines) == {
        'a': {'spec': {'healthTimeout': '5m', 'nodeTemplate': {'metadata': {'labels': {'x': 'y'}}}}}}
    machines[0]['spec'] = dict(ms['spec']['template']['spec'])
    assert in_place_patches(ms, machines) == {}


# --- machines a scaler marked (MCM's getMachinesMarkedForDeletion) --------------------------------------

def marked(m, at):
    m['metadata']['annotations'].update({'machinepriority.machine.sapcloud.io': '1',
                                         'machine.sapcloud.io/marked-for-deletion-time': ts(at)})
    return m


def scaled_set(replicas, at):
    ms = mset(replicas)
    ms['metadata']['annotations'] = {'machine.sapcloud.io/last-deployment-replica-change-by-scaler-time': ts(at)}
    return ms


def test_a_machine_the_autoscaler_marked_goes_even_when_the_count_matches():
    machines = [mach('a'), marked(mach('b', created=T0 + 1), T0 + 10), mach('c', created=T0 + 2)]
    plan = plan_set(scaled_set(3, T0 + 10), machines, [], T0 + 11, 100)
    assert plan.delete == ['b'] and 'marked for deletion' in plan.delete_reasons['b'] and plan.create == 0


def test_a_mark_after_the_scalers_last_change_or_without_one_waits():
    machines = [mach('a'), marked(mach('b'), T0 + 20), mach('c')]
    assert plan_set(scaled_set(3, T0 + 10), machines, [], T0 + 21, 100).delete == []     # marked after the change
    assert plan_set(mset(3), machines, [], T0 + 21, 100).delete == []                    # no scaler change time
    only_priority = [mach('a'), mach('b', priority=1), mach('c')]                       # priority without a mark time
    assert plan_set(scaled_set(3, T0 + 10), only_priority, [], T0 + 21, 100).delete == []


def test_a_marked_machine_is_not_deleted_while_the_set_is_short():
    machines = [marked(mach('b'), T0 + 5), mach('c')]
    plan = plan_set(scaled_set(3, T0 + 10), machines, [], T0 + 11, 100)
    assert plan.delete == [] and plan.create == 1


def test_the_deployment_passes_the_scalers_change_time_to_its_new_set():
    """The count already matches (the autoscaler's replica change landed); only the mark and the change time,
    copied from the deployment to its set, make the marked machine the one that goes."""
    sim = MachinesSim()
    sim.add_class('c1')
    sim.add_deployment(replicas=2, cls='c1')
    settled(sim, 2)
    victim = o.name(sorted(sim.machines(), key=o.name)[1])
    sim.update('Machine', victim, {'metadata': {'annotations': {
        'machinepriority.machine.sapcloud.io': '1', 'machine.sapcloud.io/marked-for-deletion-time': ts(sim.now)}}})
    changed_at = ts(sim.now + 1)
    sim.update('MachineDeployment', 'md', {'metadata': {'annotations': {
        'machine.sapcloud.io/last-deployment-replica-change-by-scaler-time': changed_at}}})
    sim.run_until(lambda: victim not in [o.name(m) for m in sim.machines()])
    assert o.annotations_of(sim.sets()[0])['machine.sapcloud.io/last-deployment-replica-change-by-scaler-time'] == changed_at
    settled(sim, 2)


# --- MCM's validation: selector against template labels, class kind and name (issue 23 §3) --------------------------

@pytest.mark.parametrize('patch, field, rule', [
    ({'spec': {'selector': {'matchLabels': {'name': 'other'}}}}, 'spec.selector.matchLabels', 'matches-template'),
    ({'spec': {'selector': {'matchLabels': {'extra': 'x'}}}}, 'spec.selector.matchLabels', 'matches-template'),
    ({'spec': {'template': {'spec': {'class': {'kind': ''}}}}}, 'spec.template.spec.class.kind', 'required'),
    ({'spec': {'template': {'spec': {'class': {'kind': None}}}}}, 'spec.template.spec.class.kind', 'required'),
    ({'spec': {'template': {'spec': {'class': {'name': ''}}}}}, 'spec.template.spec.class.name', 'required'),
])
def test_a_deployment_mcm_would_refuse_is_named_and_nothing_is_done(patch, field, rule):
    sim = MachinesSim()
    sim.add_class('c1')
    sim.add_deployment(replicas=2, cls='c1')
    settled(sim, 2)
    names = sorted(o.name(m) for m in sim.machines())
    sim.update('MachineDeployment', 'md', dict(patch, spec=dict(patch['spec'], replicas=4)))
    sim.step(count=3)
    assert sorted(o.name(m) for m in sim.machines()) == names and sim.sets()[0]['spec']['replicas'] == 2
    error = sim.last_plan.invalid['ns/md']
    assert (error.field, error.rule) == (field, rule)


def test_a_set_and_a_machine_mcm_would_refuse_are_named():
    sim = MachinesSim()
    sim.add_class('c1')
    sim.add_deployment(replicas=1, cls='c1')
    settled(sim, 1)
    ms = sim.sets()[0]
    sim.update('MachineSet', o.name(ms), {'spec': {'selector': {'matchLabels': {'nope': 'x'}}}})
    [m] = sim.machines()
    sim.update('Machine', o.name(m), {'spec': {'class': {'kind': ''}}})
    sim.step(count=2)
    invalid = sim.last_plan.invalid
    assert (invalid['ns/' + o.name(ms)].field, invalid['ns/' + o.name(m)].field) == (
        'spec.selector.matchLabels', 'spec.class.kind')
    assert 'ns/md' in invalid and 'owned set is invalid' in str(invalid['ns/md'])
    sim.delete('Machine', 'ns', o.name(m))                        # a deletion is not held up by the class reference
    sim.run_until(lambda: not sim.machines())
