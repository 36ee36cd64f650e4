"""MachineDeployment rollouts end to end (inventory §2 acceptance 10-13): the real controller, the API emulator,
EC2 with fidelity and kubelets. Changing the template's class creates a new MachineSet `<md>-<hash>`;
throughout, at most replicas + maxSurge machines exist and at least replicas - maxUnavailable are Running; the old
set ends at 0 and is kept, the revision annotation moves to 2. Then a scale-down removes the machine an operator
gave `machinepriority.machine.sapcloud.io: "1"`. Scaling mid-rollout, pause, resume, rollback and Recreate below."""

import time

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.kube.client import api_path

from lab.env.machines_bench import Kubelets, wait_for, when

REVISION = 'deployment.kubernetes.io/revision'
DESIRED = 'deployment.kubernetes.io/desired-replicas'


def live(bench, md='pool'):
    """The deployment's machines not being deleted (its template labels them name=<md>)."""
    return [m for m in pool_machines(bench, md) if not m['metadata'].get('deletionTimestamp')]


def pool_machines(bench, md='pool'):
    return [m for m in bench.machines() if (m['metadata'].get('labels') or {}).get('name') == md]


def states(bench):
    """What the machines of the pool are, for a failure message."""
    return sorted((m['metadata']['name'], m['spec']['class']['name'], ((m.get('status') or {}).get('currentStatus') or {}).get('phase'),
                   (m['metadata'].get('labels') or {}).get('node'), ((m.get('status') or {}).get('lastOperation') or {}).get('description'))
                  for m in pool_machines(bench))


def running(machines):
    return [m for m in machines if ((m.get('status') or {}).get('currentStatus') or {}).get('phase') == 'Running']


def sets_by_class(bench, md='pool'):
    return {s['spec']['template']['spec']['class']['name']: s for s in bench.kube.list(bench.path('machinesets'))
            if [r['name'] for r in s['metadata'].get('ownerReferences') or []] == [md]}


def test_a_class_change_rolls_within_surge_and_unavailability_and_priority_picks_the_scale_down_victim(bench):
    bench.create_class('nodes')
    bench.create_class('nodes-v2')
    bench.create_deployment(replicas=3)         # RollingUpdate, maxSurge 1, maxUnavailable 1
    bench.controller()
    old_machines = {m['metadata']['name'] for m in bench.wait_running(3)}
    old_set = sets_by_class(bench)['nodes']['metadata']['name']

    bench.kube.merge_patch(bench.path('machinedeployments', 'pool'),
                           {'spec': {'template': {'spec': {'class': {'kind': 'MachineClass', 'name': 'nodes-v2'}}}}})
    most, fewest_running = 0, 3
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        machines = live(bench)
        most, fewest_running = max(most, len(machines)), min(fewest_running, len(running(machines)))
        new = sets_by_class(bench).get('nodes-v2')
        if new and (new.get('status') or {}).get('readyReplicas') == 3 and len(machines) == 3 \
                and not old_machines & {m['metadata']['name'] for m in machines} and len(running(machines)) == 3:
            break
        time.sleep(0.3)
    else:
        left = sorted((m['metadata']['name'], m['spec']['class']['name']) for m in live(bench))
        pytest.fail('the rollout did not finish: %s' % left)
    assert most <= 4, 'more than replicas + maxSurge machines at once: %d' % most
    assert fewest_running >= 2, 'fewer than replicas - maxUnavailable Running machines: %d' % fewest_running

    sets = sets_by_class(bench)
    assert sets['nodes']['metadata']['name'] == old_set and sets['nodes']['spec']['replicas'] == 0   # kept, empty
    assert sets['nodes-v2']['metadata']['name'].startswith('pool-') and sets['nodes-v2']['metadata']['name'] != old_set
    md = bench.kube.get(bench.path('machinedeployments', 'pool'))
    assert md['metadata']['annotations'][REVISION] == '2'
    assert {m['spec']['class']['name'] for m in live(bench)} == {'nodes-v2'}

    machines = sorted(live(bench), key=lambda m: m['metadata']['creationTimestamp'])
    victim = machines[-1]['metadata']['name']          # the newest: age alone would keep it
    bench.kube.merge_patch(bench.path('machines', victim),
                           {'metadata': {'annotations': {'machinepriority.machine.sapcloud.io': '1'}}})
    bench.kube.merge_patch(bench.path('machinedeployments', 'pool'), {'spec': {'replicas': 2}})
    wait_for(lambda: victim not in {m['metadata']['name'] for m in bench.machines()}, 90, 0.5, what='the priority-1 machine gone')
    assert len(bench.wait_running(2)) == 2


def replicas_by_class(bench, md='pool'):
    return {c: (s['spec']['replicas'], s['metadata']['annotations'].get(DESIRED))
            for c, s in sets_by_class(bench, md).items()}


def events(bench, reason):
    return [e for e in bench.kube.list(api_path('v1', 'events', bench.namespace)) if e['reason'] == reason]


def test_scaling_mid_rollout_is_proportional_pause_holds_rollback_waits_for_resume_and_recreate(bench):
    """Acceptance 13 (scale 4 -> 2 mid-rollout: both sets shrink by their share; 2 -> 4: only the new set grows;
    desired-replicas annotations follow; a second deployment, 3 -> 1 mid-rollout: the shares leave one machine
    over, which comes off the largest set), 12 (paused: a rollout that could go on does not; resumed: it
    finishes; rollbackTo.revision 0 on a paused deployment waits for the resume, as in Kubernetes and MCM; then
    the previous template comes back and the field is cleared) and the Recreate strategy (every old machine is
    gone before a new one is made). The new class's instances carry another cluster tag, whose kubelets start
    only when the test wants them Ready: the rollouts stall where the arithmetic says (maxSurge 1,
    maxUnavailable 1: old 3, new 2; maxUnavailable 0: old 3, new 1)."""
    cluster_b = bench.cluster + '-b'
    bench.create_class('nodes')
    bench.create_class('nodes-b', tags={'kubernetes.io/cluster/%s' % cluster_b: '1', 'kubernetes.io/role/node': '1'})
    bench.create_deployment(replicas=4)
    bench.create_deployment('spare', replicas=3, strategy={'type': 'RollingUpdate',
                                                           'rollingUpdate': {'maxSurge': 1, 'maxUnavailable': 0}})
    bench.controller('--machine-creation-timeout', '10m')
    bench.wait_running(7)
    md_path = bench.path('machinedeployments', 'pool')
    spare_path = bench.path('machinedeployments', 'spare')

    for path in (md_path, spare_path):
        bench.kube.merge_patch(path, {'spec': {'template': {'spec': {'class': {'kind': 'MachineClass', 'name': 'nodes-b'}}}}})
    wait_for(lambda: replicas_by_class(bench) == {'nodes': (3, '4'), 'nodes-b': (2, '4')}
             and replicas_by_class(bench, 'spare') == {'nodes': (3, '3'), 'nodes-b': (1, '3')}, 90, 0.5,
             what='the rollouts stalled at old 3 / new 2 and old 3 / new 1 (new machines never Ready)')
    for path in (md_path, spare_path):
        bench.kube.merge_patch(path, {'spec': {'paused': True}})
    bench.kube.merge_patch(md_path, {'spec': {'replicas': 2}})
    bench.kube.merge_patch(spare_path, {'spec': {'replicas': 1}})
    wait_for(lambda: replicas_by_class(bench) == {'nodes': (2, '2'), 'nodes-b': (1, '2')}, 60, 0.5,
             what='scale 4 -> 2: old 3 -> 2 and new 2 -> 1 (allowed 2 + surge 1 = 3, each set its share)')
    wait_for(lambda: replicas_by_class(bench, 'spare') == {'nodes': (1, '1'), 'nodes-b': (1, '1')}, 60, 0.5,
             what='scale 3 -> 1: allowed 2 of 4; the shares (3*2/4 = 1.5 -> 2, 1*2/4 = 0.5 -> 1) leave one over, '
                  'taken off the largest set (old 3 -> 1, new stays 1)')
    bench.kube.delete(spare_path)
    bench.kube.merge_patch(md_path, {'spec': {'replicas': 4}})
    wait_for(lambda: replicas_by_class(bench) == {'nodes': (2, '4'), 'nodes-b': (3, '4')}, 60, 0.5,
             what='scale 2 -> 4: only the new set grows (1 -> 3)')
    wait_for(lambda: len(live(bench)) == 5, 60, 0.5, what='5 machines (2 old, 3 new)')

    kubelets_b = Kubelets(bench.kube, bench.ec2_url, cluster_b).start()
    try:
        wait_for(lambda: sorted(m['spec']['class']['name'] for m in running(live(bench))) == ['nodes'] * 2 + ['nodes-b'] * 3,
                 90, 0.5, what=lambda: 'the new machines Running (the rollout could go on); now %s' % states(bench))
        held = replicas_by_class(bench)
        names = {m['metadata']['name'] for m in live(bench)}
        time.sleep(5)                                          # several passes: paused, nothing moves
        assert replicas_by_class(bench) == held and {m['metadata']['name'] for m in live(bench)} == names
        md = bench.kube.get(md_path)
        assert {c['type']: c['reason'] for c in md['status']['conditions']}['Progressing'] == 'DeploymentPaused'

        bench.kube.merge_patch(md_path, {'spec': {'paused': None}})
        wait_for(lambda: replicas_by_class(bench) == {'nodes': (0, '4'), 'nodes-b': (4, '4')} and len(live(bench)) == 4
                 and sorted(m['spec']['class']['name'] for m in running(live(bench))) == ['nodes-b'] * 4, 120, 0.5,
                 what='resumed: the rollout finishes on nodes-b')
        assert bench.kube.get(md_path)['metadata']['annotations'][REVISION] == '2'

        # rollbackTo on a paused deployment: nothing rolls back until it is resumed
        names = {m['metadata']['name'] for m in live(bench)}
        generation = bench.kube.merge_patch(md_path, {'spec': {'paused': True, 'rollbackTo': {'revision': 0}}})['metadata']['generation']
        wait_for(lambda: when(bench.kube.get(md_path), lambda d: (d.get('status') or {}).get('observedGeneration', 0)
                              >= generation or 'rollbackTo' not in d['spec']), 30, 0.5,
                 what='the controller saw the paused deployment with rollbackTo')
        time.sleep(3)                                          # more passes
        md = bench.kube.get(md_path)
        assert md['spec'].get('rollbackTo') == {'revision': 0} and md['spec']['template']['spec']['class']['name'] == 'nodes-b'
        assert {m['metadata']['name'] for m in live(bench)} == names and not events(bench, 'DeploymentRollback')
        assert replicas_by_class(bench) == {'nodes': (0, '4'), 'nodes-b': (4, '4')}

        bench.kube.merge_patch(md_path, {'spec': {'paused': None}})
        md = wait_for(lambda: when(bench.kube.get(md_path), lambda d: 'rollbackTo' not in d['spec']), 60, 0.5,
                      what='rollbackTo applied and cleared after the resume')
        assert md['spec']['template']['spec']['class']['name'] == 'nodes'
        wait_for(lambda: sorted(m['spec']['class']['name'] for m in running(live(bench))) == ['nodes'] * 4
                 and len(live(bench)) == 4, 120, 0.5, what='rolled back to the nodes class')
        assert bench.kube.get(md_path)['metadata']['annotations'][REVISION] == '3'
        assert replicas_by_class(bench)['nodes-b'][0] == 0
        rollback = events(bench, 'DeploymentRollback')
        assert rollback and 'to revision 1' in rollback[0]['message']

        # Recreate: every old machine (and its VM) is gone before the first new machine is made
        wait_for(lambda: len(pool_machines(bench)) == 4, 60, 0.5, what='the rolled-back machines deleted')
        bench.kube.merge_patch(md_path, {'spec': {'strategy': {'type': 'Recreate', 'rollingUpdate': None}, 'template': {
            'spec': {'class': {'kind': 'MachineClass', 'name': 'nodes-b'}}}}})
        mixed = []
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            machines = pool_machines(bench)                    # deleting ones too
            classes = {m['spec']['class']['name'] for m in machines}
            if len(classes) > 1:
                mixed.append(sorted((m['metadata']['name'], m['spec']['class']['name'],
                                     'deleting' if m['metadata'].get('deletionTimestamp') else '') for m in machines))
            if classes == {'nodes-b'} and len(running(machines)) == 4 and len(machines) == 4:
                break
            time.sleep(0.3)
        else:
            pytest.fail('Recreate did not finish: %s' % sorted((m['metadata']['name'], m['spec']['class']['name'])
                                                               for m in machines))
        assert not mixed, 'old and new machines at the same time: %s' % mixed[0]
        assert replicas_by_class(bench) == {'nodes': (0, '4'), 'nodes-b': (4, '4')}
        assert bench.kube.get(md_path)['metadata']['annotations'][REVISION] == '4'
    finally:
        kubelets_b.stop()
