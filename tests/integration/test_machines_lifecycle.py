"""The machines loop end to end: the real controller process, the Kubernetes API emulator, EC2 on moto over
HTTP and kubelets registering Nodes. Inventory §2 acceptance 1 (create -> Pending -> Running, held Pending while
the Node carries Gardener's critical-components-not-ready taint), 10 (scale-down), and the lab contract (3
tagged instances; scale to 1; deleting the deployment leaves no instance)."""


from ansible_collections.steward.cluster.plugins.module_utils.kube.client import api_path

from lab.env.machines_bench import wait_for, when
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

CRITICAL = {'key': 'node.gardener.cloud/critical-components-not-ready', 'effect': 'NoSchedule'}


def current(machine):
    return ((machine or {}).get('status') or {}).get('currentStatus') or {}


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

    # A fourth machine whose kubelet registers its Node with Gardener's startup taint: Ready, yet Pending until
    # the taint is gone (Gardener's node-critical-components controller removes it once the DaemonSets run).
    bench.kubelets.register_taints = [CRITICAL]
    bench.kube.merge_patch(bench.path('machinedeployments', 'pool'), {'spec': {'replicas': 4}})
    first = {m['metadata']['name'] for m in machines}

    def seen_ready_while_tainted():
        for m in bench.machines():
            ready = [c for c in (m.get('status') or {}).get('conditions') or [] if c['type'] == 'Ready']
            if m['metadata']['name'] not in first and ready and ready[0]['status'] == 'True':
                return m           # the controller copied the Ready Node's conditions: it judged the machine
        return None
    fourth = wait_for(seen_ready_while_tainted, 90, 0.5, what="the fourth machine's Ready Node seen by the controller")
    node = bench.kube.get(api_path('v1', 'nodes', name=fourth['metadata']['labels']['node']))
    assert CRITICAL in node['spec']['taints'] and current(fourth)['phase'] == 'Pending'
    bench.kube.merge_patch(api_path('v1', 'nodes', name=node['metadata']['name']), {'spec': {'taints': None}})
    running = wait_for(lambda: when(bench.machine_named(fourth['metadata']['name']),
                                    lambda m: current(m).get('phase') == 'Running'), 30, 0.5, what='Running once untainted')
    op = running['status']['lastOperation']
    assert (op['type'], op['state']) == ('Create', 'Successful') and op['description'].startswith('Machine is now ready')
    bench.kubelets.register_taints = []

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
