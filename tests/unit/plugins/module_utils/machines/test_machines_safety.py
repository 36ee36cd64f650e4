"""Safety rules: meltdown limit (acceptance 5), fleet freeze and positive evidence (machines.md §(f)3),
overshoot, API-server and watchdog freezes (acceptance 14), orphan collection (acceptance 15, §(f)2)."""

import dataclasses

from ansible_collections.steward.cluster.plugins.module_utils.machines import objects as o
from ansible_collections.steward.cluster.plugins.module_utils.machines import safety
from ansible_collections.steward.cluster.plugins.module_utils.machines.codes import Call, Code
from ansible_collections.steward.cluster.plugins.module_utils.machines.config import Settings
from ansible_collections.steward.cluster.plugins.module_utils.machines.driver import VM, VMState
from ansible_collections.steward.cluster.plugins.module_utils.machines.inventory import Inventory
from ansible_collections.steward.cluster.plugins.module_utils.machines.reconcile import plan_pass

from support.machines_sim import MachinesSim

FAST = Settings(short_retry=1, medium_retry=5, long_retry=10, machine_health_timeout=30, machine_creation_timeout=120)


def sim_with(replicas, settings=FAST, **kw):
    sim = MachinesSim(settings=settings, **kw)
    sim.add_class()
    sim.add_deployment(replicas=replicas)
    sim.run_until(lambda: sim.phases() == ['Running'] * replicas)
    return sim


def running_nodes(sim):
    return sorted(o.node_name(m) for m in sim.machines() if o.phase(m).value == 'Running')


def frozen_condition(sim):
    conds = o.status(sim.get('MachineDeployment', 'md')).get('conditions') or []
    return next((c for c in conds if c['type'] == 'Frozen'), None)


def failed_or_replaced(sim):
    return sum(1 for m in sim.machines() if o.phase(m).value in ('Failed', 'Terminating') or o.deleting(m))


# --- meltdown limit (acceptance 5) --------------------------------------------------------------------

def test_two_unknown_machines_of_one_deployment_are_replaced_one_at_a_time():
    sim = sim_with(4)
    bad = running_nodes(sim)[:2]
    for n in bad:
        sim.set_condition(n, 'Ready', 'False')
    most_in_flight = 0
    for _step in range(120):
        sim.step()
        for n in bad:
            if n in sim.nodes:
                sim.set_condition(n, 'Ready', 'False')
        in_flight = sum(1 for m in sim.machines() if o.phase(m).value in ('Failed', 'Terminating') or o.deleting(m))
        most_in_flight = max(most_in_flight, in_flight)
    assert most_in_flight == 1
    assert not set(bad) & set(running_nodes(sim)) and len(running_nodes(sim)) == 4


def test_a_cap_of_two_with_thirty_percent_bad_never_replaces_more_than_two_at_once():
    sim = sim_with(10, settings=dataclasses.replace(FAST, max_replacements=2))
    bad = running_nodes(sim)[:3]
    sim.unreachable.update(bad)
    most = 0
    for _step in range(150):
        sim.step()
        most = max(most, sum(1 for m in sim.machines() if o.deleting(m) or o.phase(m).value in ('Failed', 'Terminating')))
    assert most <= 2 and frozen_condition(sim) is None
    assert len(running_nodes(sim)) == 10 and not set(bad) & set(running_nodes(sim))


def test_the_cap_counts_failures_whose_status_write_is_still_in_flight():
    """A pass that runs while the Failed writes of the previous one are in flight (their machines busy, the
    cache still showing them Unknown) must count them: seen end to end, 3 of a deployment failed at once with a
    cap of 2."""
    sim = sim_with(10, settings=dataclasses.replace(FAST, max_replacements=2))
    sim.unreachable.update(running_nodes(sim)[:3])
    sim.run_until(lambda: sim.phases().count('Unknown') == 3, limit=10)
    sim.now += 31                                          # past the 30 s health timeout
    world = sim.world()
    first = [mp.uid for mp in plan_pass(world, sim.memory, sim.settings, sim.now).machines if mp.failed]
    assert len(first) == 2
    in_flight = dataclasses.replace(world, busy=set(first))
    assert not [mp for mp in plan_pass(in_flight, sim.memory, sim.settings, sim.now + 0.2).machines if mp.failed]
    sim.step(count=3)                                      # the writes landed: still 2, the third waits
    assert failed_or_replaced(sim) == 2


def test_in_progress_counts_terminating_twice():
    def m(phase, deleting=False):
        md = {'deletionTimestamp': 'x'} if deleting else {}
        return {'metadata': md, 'status': {'currentStatus': {'phase': phase}}}
    assert safety.in_progress([m('Running'), m('Unknown'), m('Pending'), m('Terminating'), m('Running', deleting=True)]) == 5


# --- fleet freeze and evidence (§(f)3) ----------------------------------------------------------------

def test_every_node_unreachable_past_the_health_timeout_replaces_nothing_and_freezes():
    sim = sim_with(4)
    sim.unreachable.update(sim.nodes)
    sim.step(count=100)
    assert failed_or_replaced(sim) == 0 and len(sim.machines()) == 4
    cond = frozen_condition(sim)
    assert cond['status'] == 'True' and cond['reason'] == 'FleetFreeze' and '4 of 4 machines (100%' in cond['message']
    assert sim.last_plan.freezes['fleet'].rule == 'FleetFreeze'
    # healing thaws with no replacement; the Unknown machines got a fresh health clock
    sim.unreachable.clear()
    sim.step(count=5)
    assert frozen_condition(sim) is None and sim.phases() == ['Running'] * 4 and sim.cloud.calls.get('CreateMachine') == 4


def test_after_a_partial_thaw_the_remaining_unknown_machines_get_a_fresh_clock():
    sim = sim_with(4)
    nodes = running_nodes(sim)
    sim.unreachable.update(nodes)
    sim.step(count=60)
    sim.unreachable.difference_update(nodes[:3])          # 1 of 4 still unreachable: no longer an outage
    sim.step(count=5)
    assert frozen_condition(sim) is None and failed_or_replaced(sim) == 0      # clock restarted at the thaw
    sim.run_until(lambda: failed_or_replaced(sim) == 1, limit=60)


def test_a_health_clock_restart_missed_at_the_thaw_is_made_in_a_later_pass():
    """The restart of an Unknown machine's health clock after a freeze is owed until it is written: the pass that
    learns of the thaw may skip the machine (an action in flight) or its status write may fail; the next pass must
    not fail the machine on its pre-freeze clock (seen end to end: Failed right after an API-server freeze)."""
    sim = sim_with(3)
    bad = running_nodes(sim)[0]
    sim.unreachable.add(bad)
    sim.step(count=2)
    [machine] = [m for m in sim.machines() if o.phase(m).value == 'Unknown']
    sim.api_freeze = safety.Freeze('APIServerUnreachable', 'no answer')
    sim.step(count=40)                                     # past the 30 s health timeout, frozen
    assert o.phase(sim.get('Machine', o.name(machine))).value == 'Unknown'
    sim.api_freeze, sim.api_thawed, sim.busy = None, True, {o.uid(machine)}
    thawed_at = sim.now
    sim.step()                                             # the thaw pass skips the busy machine
    sim.busy = set()
    sim.step(count=3)
    after = sim.get('Machine', o.name(machine))
    assert o.phase(after).value == 'Unknown' and o.phase_time(after) >= thawed_at
    assert failed_or_replaced(sim) == 0
    sim.run_until(lambda: failed_or_replaced(sim) == 1, limit=60)     # then its fresh clock runs out as usual
    assert sim.now - thawed_at > 30


def test_one_unreachable_machine_is_replaced():
    sim = sim_with(4)
    bad = running_nodes(sim)[0]
    sim.unreachable.add(bad)
    sim.run_until(lambda: bad not in running_nodes(sim) and len(running_nodes(sim)) == 4, limit=150)
    assert frozen_condition(sim) is None


def test_a_terminated_instance_is_replaced_at_once_even_during_a_freeze():
    sim = sim_with(4)
    sim.unreachable.update(sim.nodes)
    sim.step(count=3)
    victim = sorted(sim.cloud.vms.values(), key=lambda v: v['provider_id'])[0]
    victim['state'] = VMState.TERMINATED
    steps = sim.run_until(lambda: not any(o.provider_id(m) == victim['provider_id'] for m in sim.machines()), limit=30)
    assert steps < 10                      # not the 30 s health timeout
    assert len(sim.machines()) == 4


def test_listings_that_started_before_the_vm_was_known_are_no_evidence():
    """Two listings (the scheduler's and the orphan collector's) started before a create and finished after it:
    neither can contain the new VM, so neither counts; listings started later do."""
    memory = safety.MissingMemory()
    assert memory.observe('m1', 7, True, listed_at=95.0, now=100.0) == 0
    assert memory.observe('m1', 8, True, listed_at=99.0, now=101.0) == 0
    assert memory.observe('m1', 9, True, listed_at=102.0, now=103.0) == 1
    assert memory.observe('m1', 9, True, listed_at=102.0, now=104.0) == 1      # the same listing counts once
    assert memory.observe('m1', 10, True, listed_at=112.0, now=113.0) == 2
    assert memory.observe('m1', 11, False, listed_at=122.0, now=123.0) == 0    # seen again: the count restarts
    memory.forget(set())
    assert memory.counts == {} and memory.known_since == {}


def test_a_vm_missing_from_two_listings_is_replaced_but_many_missing_at_once_is_suspect():
    sim = sim_with(6)
    gone = sorted(sim.cloud.vms)[0]
    del sim.cloud.vms[gone]
    sim.run_until(lambda: not any(o.provider_id(m) == gone for m in sim.machines()), limit=20)
    sim = sim_with(6)
    for pid in sorted(sim.cloud.vms)[:4]:
        del sim.cloud.vms[pid]
    sim.step(count=10)
    assert failed_or_replaced(sim) == 0 and sim.last_plan.freezes['class:ns/cls'].rule == 'CloudInventorySuspect'


def test_a_failed_cloud_listing_concludes_nothing():
    sim = sim_with(3)
    sim.cloud.fail(Call.LIST, Code.UNAVAILABLE, times=100)
    sim.unreachable.update(sim.nodes)
    sim.step(count=5)
    assert failed_or_replaced(sim) == 0


# --- watchdog, API server, overshoot (acceptance 14) --------------------------------------------------

def test_an_active_dependency_watchdog_scale_down_freezes_replacement_in_its_namespace():
    sim = sim_with(3)
    sim.watchdog_marked = {'ns': ['Deployment/kube-controller-manager']}
    bad = running_nodes(sim)[0]
    sim.set_condition(bad, 'Ready', 'False')
    sim.step(count=80)
    assert failed_or_replaced(sim) == 0
    assert frozen_condition(sim)['reason'] == 'DependencyWatchdogMeltdownProtection'
    sim.watchdog_marked = {}
    sim.run_until(lambda: bad not in running_nodes(sim) and len(running_nodes(sim)) == 3, limit=120)


def test_an_api_server_freeze_mutates_nothing_but_deletions():
    sim = sim_with(2)
    api = safety.ApiFreeze(timeout=30)
    assert api.observe(False, 0, 'connection refused') is None and api.observe(False, 31, 'refused') is True
    sim.api_freeze = api.freeze()
    sim.update('MachineDeployment', 'md', {'spec': {'replicas': 4}})
    sim.step(count=10)
    assert len(sim.machines()) == 2 and frozen_condition(sim)['reason'] == 'APIServerUnreachable'
    assert api.observe(True, 40) is False and api.freeze() is None
    sim.api_freeze = None
    sim.run_until(lambda: len(running_nodes(sim)) == 4)


def test_overshoot_freezes_scale_up_with_label_and_condition_then_thaws():
    sim = sim_with(2, settings=dataclasses.replace(FAST, safety_up=1, safety_down=1))
    ms = sim.sets()[0]
    for i in range(2):     # machines made behind the set's back: 4 >= 2 + surge 1 + safety-up 1
        sim.create('Machine', {'metadata': {'name': 'extra-%d' % i, 'namespace': 'ns', 'labels': dict(
            ms['spec']['template']['metadata']['labels']), 'ownerReferences': [o.owner_reference(ms, 'MachineSet')],
            'finalizers': ['machine.sapcloud.io/operator']}, 'spec': {'class': {'name': 'cls'}}})
    sim.step()
    ms = sim.sets()[0]
    assert o.labels(ms)['freeze'] == 'True'
    cond = ms['status']['machineSetCondition'][0]
    assert (cond['type'], cond['reason']) == ('Frozen', 'OverShootingReplicaCount')
    assert o.labels(sim.get('MachineDeployment', 'md'))['freeze'] == 'True'
    sim.run_until(lambda: 'freeze' not in o.labels(sim.sets()[0]), limit=30)
    assert len([m for m in sim.machines() if not o.deleting(m)]) == 2


def test_a_frozen_set_with_its_job_in_flight_stays_frozen_in_the_pass():
    """A pass skips a set whose job is still running; its freeze must stand meanwhile. It did not: at 1,000-2,000
    machines, where set jobs run long, the deployment's freeze label and Frozen condition were lifted and set again
    every few passes (19 'freeze started' in one 2,000-machine scale-down)."""
    sim = sim_with(2, settings=dataclasses.replace(FAST, safety_up=1, safety_down=1))
    ms = sim.sets()[0]
    for i in range(2):
        sim.create('Machine', {'metadata': {'name': 'extra-%d' % i, 'namespace': 'ns', 'labels': dict(
            ms['spec']['template']['metadata']['labels']), 'ownerReferences': [o.owner_reference(ms, 'MachineSet')],
            'finalizers': ['machine.sapcloud.io/operator']}, 'spec': {'class': {'name': 'cls'}}})
    sim.step()
    ms = sim.sets()[0]
    assert o.labels(ms)['freeze'] == 'True' and frozen_condition(sim) is not None
    world = sim.world()
    world.busy = {o.uid(ms)}
    plan = plan_pass(world, sim.memory, sim.settings, sim.now)
    assert plan.freezes['set:' + o.key(ms)].rule == 'OverShootingReplicaCount'
    assert o.key(sim.get('MachineDeployment', 'md')) not in plan.deployment_patches     # the label stays
    dplan = next(d for d in plan.deployments if d.key == o.key(sim.get('MachineDeployment', 'md')))
    assert not [e for e in dplan.events if e.reason == 'MachineDeploymentUnfrozen'] and not (dplan.status or {}).get('conditions') == []


def test_overshoot_rule_thresholds():
    ms = {'metadata': {'labels': {}, 'annotations': {}}, 'spec': {'replicas': 3, 'template': {'metadata': {'labels': {}}}}}
    md = {'metadata': {'annotations': {}}, 'spec': {'replicas': 3}}
    s = Settings()
    machines = [{'metadata': {'labels': {}}}] * 6        # 3 + surge 1 + safety-up 2 = 6
    assert safety.overshoot(ms, machines, md, 1, s) is True
    assert safety.overshoot(ms, machines[:5], md, 1, s) is None
    frozen = dict(ms, metadata={'labels': {'freeze': 'True'}, 'annotations': {}})
    assert safety.overshoot(frozen, machines[:5], md, 1, s) is False        # <= 6 - safety-down 1
    unfreeze = dict(ms, metadata={'labels': {'freeze': 'True'}, 'annotations': {'safety.machine.sapcloud.io/unfreeze': 'True'}})
    assert safety.overshoot(unfreeze, machines, md, 1, s) is False


# --- orphans (acceptance 15, §(f)2) --------------------------------------------------------------------

NOW = 1_700_010_000.0
S = Settings(orphan_min_age=600)


def vm(pid, owner='', cls='class-uid', age=3600, state=VMState.RUNNING):
    return VM(pid, owner_uid=owner, class_uid=cls, launched=NOW - age, state=state)


def collect(vms, machine_uids, class_machines=1, memory=None, freeze=None, synced=True, cycles=2, ok=True):
    memory = memory or safety.OrphanMemory()
    verdict = None
    for i in range(cycles):
        inventory = Inventory(vms, NOW, i + 1) if ok else Inventory([], NOW, i + 1, error=Exception('x'))
        verdict = safety.orphans(inventory, 'class-uid', set(machine_uids), class_machines, memory, S, NOW, freeze, synced)
    return verdict


def deleted(verdict):
    return sorted(v.provider_id for v in verdict.delete)


def test_an_owned_vm_whose_machine_is_gone_is_deleted_on_the_second_cycle():
    vms = [vm('p1', 'dead-uid'), vm('p2', 'live-uid')]
    assert deleted(collect(vms, ['live-uid'], cycles=1)) == []
    assert deleted(collect(vms, ['live-uid'])) == ['p1']


def test_what_is_never_collected():
    assert deleted(collect([vm('p1', '')], [])) == []                                   # no owner tag: not ours to judge
    assert deleted(collect([vm('p1', 'dead', cls='other-class')], ['x'])) == []        # another controller's
    assert deleted(collect([vm('p1', 'dead', age=60)], ['x'])) == []                   # too young
    assert deleted(collect([vm('p1', 'dead', state=VMState.TERMINATED)], ['x'])) == []


def test_no_collection_while_frozen_unsynced_listing_failed_or_with_an_empty_store():
    vms = [vm('p1', 'dead')]
    assert collect(vms, [], freeze=safety.Freeze('FleetFreeze', 'x')).skipped.startswith('frozen')
    assert collect(vms, [], synced=False).skipped == 'caches not synced yet'
    assert collect(vms, [], ok=False).skipped == 'cloud listing failed'
    assert 'empty store' in collect(vms, [], class_machines=0).skipped


def test_an_owner_that_reappears_resets_the_count():
    memory = safety.OrphanMemory()
    collect([vm('p1', 'u')], [], memory=memory, cycles=1)
    collect([vm('p1', 'u')], ['u'], memory=memory, cycles=1)
    assert deleted(collect([vm('p1', 'u')], ['x'], memory=memory, cycles=1)) == []
