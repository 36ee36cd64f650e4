"""A MachineDeployment rollout end to end (inventory §2 acceptance 11 and 10): the real controller, the API
emulator, EC2 with fidelity and kubelets. Changing the template's class creates a new MachineSet `<md>-<hash>`;
throughout, at most replicas + maxSurge machines exist and at least replicas - maxUnavailable are Running; the old
set ends at 0 and is kept, the revision annotation moves to 2. Then a scale-down removes the machine an operator
gave `machinepriority.machine.sapcloud.io: "1"`."""

import time

import pytest

from support.machines_cluster import MachinesBench, wait_for

REVISION = 'deployment.kubernetes.io/revision'


@pytest.fixture
def bench(kube, ec2, tmp_path):
    b = MachinesBench(kube, ec2.url, str(tmp_path))
    yield b
    b.stop()


def live(bench):
    return [m for m in bench.machines() if not m['metadata'].get('deletionTimestamp')]


def running(machines):
    return [m for m in machines if ((m.get('status') or {}).get('currentStatus') or {}).get('phase') == 'Running']


def sets_by_class(bench):
    return {s['spec']['template']['spec']['class']['name']: s for s in bench.kube.list(bench.path('machinesets'))}


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
