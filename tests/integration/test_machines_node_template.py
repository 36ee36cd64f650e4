"""The node template end to end (MCM's syncNodeTemplates): the real controller, the Kubernetes API emulator, EC2 on
moto and kubelets registering Nodes. A MachineDeployment's `template.spec.nodeTemplate` labels, annotations and
taints land on each machine's Node; changing the template changes the Nodes in place (no rollout), and keys the
template dropped are removed, while the Node's own keys (kubelet's labels, another controller's taint) stay."""

import json

from ansible_collections.steward.cluster.plugins.module_utils.kube.client import api_path

from lab.env.controller import wait_for

LAST = 'node.machine.sapcloud.io/last-applied-anno-labels-taints'
WEB = {'key': 'dedicated', 'value': 'web', 'effect': 'NoSchedule'}
OTHER = {'key': 'someone.else/taint', 'value': 'x', 'effect': 'PreferNoSchedule'}


def node_of(bench, machine):
    return bench.kube.get(api_path('v1', 'nodes', name=machine['metadata']['labels']['node']))


def test_node_template_reaches_the_nodes_and_follows_changes_in_place(bench, ec2):
    bench.create_class()
    bench.create_deployment(replicas=2, template={
        'metadata': {'labels': {'name': 'pool'}},
        'spec': {'class': {'kind': 'MachineClass', 'name': 'nodes'},
                 'nodeTemplate': {'metadata': {'labels': {'pool': 'web', 'tier': 'front'}, 'annotations': {'team': 'a'}},
                                  'spec': {'taints': [WEB]}}}})
    bench.controller()
    machines = bench.wait_running(2)
    names = sorted(m['metadata']['name'] for m in machines)

    def synced(check):
        def probe():
            nodes = [node_of(bench, m) for m in bench.machines()]
            return nodes if len(nodes) == 2 and all(check(n) for n in nodes) else None
        return probe

    nodes = wait_for(synced(lambda n: n['metadata']['labels'].get('pool') == 'web'), 60, 0.5, what='template on the Nodes')
    for n in nodes:
        assert n['metadata']['labels']['tier'] == 'front' and n['metadata']['labels']['kubernetes.io/hostname']
        assert n['metadata']['annotations']['team'] == 'a' and WEB in n['spec']['taints']
        assert json.loads(n['metadata']['annotations'][LAST])['metadata']['labels'] == {'pool': 'web', 'tier': 'front'}
        # someone else's taint, added after the sync: the controller must keep it
        bench.kube.merge_patch(api_path('v1', 'nodes', name=n['metadata']['name']),
                               {'spec': {'taints': n['spec']['taints'] + [OTHER]}})

    bench.kube.merge_patch(bench.path('machinedeployments', 'pool'), {'spec': {'template': {'spec': {'nodeTemplate': {
        'metadata': {'labels': {'pool': 'api', 'tier': None}, 'annotations': None},
        'spec': {'taints': [dict(WEB, value='api')]}}}}}})
    nodes = wait_for(synced(lambda n: n['metadata']['labels'].get('pool') == 'api' and 'tier' not in n['metadata']['labels']
                            and 'team' not in (n['metadata'].get('annotations') or {})), 60, 0.5, what='changed template on the Nodes')
    for n in nodes:
        assert dict(WEB, value='api') in n['spec']['taints'] and WEB not in n['spec']['taints']
        assert OTHER in n['spec']['taints'] and n['metadata']['labels']['kubernetes.io/hostname']
    assert sorted(m['metadata']['name'] for m in bench.machines()) == names        # in place: nothing rolled
    assert len(bench.kube.list(bench.path('machinesets'))) == 1
