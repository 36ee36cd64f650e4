"""The machines loop end to end: the real controller process, the Kubernetes API emulator, EC2 on moto over
HTTP and kubelets registering Nodes. Inventory §2 acceptance 1 (create -> Pending -> Running), 10 (scale-down),
and the lab contract (3 tagged instances; scale to 1; deleting the deployment leaves no instance)."""

import pytest

from support.machines_cluster import MachinesBench, wait_for, when
from support.rbac import audited, calls_of, grants_from, least_privilege

# What the machines loop may do (controller/deploy/rbac.yaml) and, of that, what this scenario does not reach.
MACHINES_ROLES = ('steward-controller-machines', 'steward-controller-leases')
NOT_REACHED_HERE = {
    ('', 'pods', 'delete'): 'a drain past its timeout: test_machines_drain.py',
    ('', 'pods/eviction', 'create'): 'a drain with pods: test_machines_drain.py',
    ('policy', 'poddisruptionbudgets', 'list'): 'a drain with pods: test_machines_drain.py',
    ('', 'persistentvolumeclaims', 'get'): 'a drain of pods with volumes: test_machines_drain.py',
    ('', 'persistentvolumes', 'get'): 'a drain of pods with volumes: test_machines_drain.py',
    ('storage.k8s.io', 'volumeattachments', 'list'): 'a forced drain: test_machines_drain.py',
    ('storage.k8s.io', 'volumeattachments', 'delete'): 'a forced drain: test_machines_drain.py',
}


@pytest.fixture
def bench(kube, ec2, tmp_path):
    b = MachinesBench(kube, ec2.url, str(tmp_path))
    yield b
    b.stop()


def test_a_pool_of_three_runs_scales_and_is_deleted(bench, ec2):
    audit = audited(bench.kube.server)
    bench.create_class()
    bench.create_deployment(replicas=3)
    proc = bench.controller()
    machines = bench.wait_running(3)
    for m in machines:
        assert m['metadata']['labels']['node'].endswith('.compute.internal')
        assert m['spec']['providerID'].startswith('aws:///eu-west-1/i-')
        assert m['metadata']['name'].startswith('pool-')          # <machineset>-<random>, the set is pool-<hash>
        op = m['status']['lastOperation']
        assert (op['type'], op['state']) == ('Create', 'Successful') and op['description'].startswith('Machine is now ready')
        assert 'machine.sapcloud.io/operator' in m['metadata']['finalizers']
    assert ec2.calls('RunInstances') == 3                          # CreateMachine once per machine
    tagged = {t['Value'] for i in bench.running_instances() for t in i['Tags'] if t['Key'] == 'Name'}
    assert tagged == {m['metadata']['name'] for m in machines}
    md = wait_for(lambda: when(bench.kube.get(bench.path('machinedeployments', 'pool')),
                               lambda d: (d.get('status') or {}).get('availableReplicas') == 3), 30,
                  what='deployment status 3 available')
    assert md['status']['readyReplicas'] == 3 and md['metadata']['annotations']['deployment.kubernetes.io/revision'] == '1'
    assert {c['type']: c['reason'] for c in md['status']['conditions']} == {
        'Available': 'MinimumReplicasAvailable', 'Progressing': 'NewMachineSetAvailable'}
    assert proc.metric('steward_machines', {'phase': 'Running'}) == 3.0

    bench.kube.merge_patch(bench.path('machinedeployments', 'pool'), {'spec': {'replicas': 1}})
    bench.wait_running(1)
    bench.kube.delete(bench.path('machinedeployments', 'pool'))
    wait_for(lambda: not bench.kube.list(bench.path('machinedeployments')) and not bench.machines()
             and not bench.running_instances(), 120, 1.0, what='the deployment, its machines and instances gone')
    assert not bench.kube.list(bench.path('machinesets'))

    # Least privilege (issue 19 §5): every call of the loop is granted, every grant is a call it makes.
    calls = calls_of(audit, ['steward-controller/', 'kopf/'])
    denied, unused = least_privilege(calls, grants_from(['controller/deploy/rbac.yaml'], MACHINES_ROLES), NOT_REACHED_HERE)
    assert not denied, 'calls the machines loop makes without a grant: %s' % denied
    assert not unused, 'grants the machines loop does not use: %s' % unused
