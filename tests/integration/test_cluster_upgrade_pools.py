"""A cloud pool in a Kubernetes upgrade (docs/upgrades.md "Cloud pools"): the real machines controller, the API
emulator, EC2 with fidelity and kubelets that report the version their instance's tag names. A MachineDeployment of
2 at kubelet v1.31.4; the control plane (mirror pods and a Node) first at v1.31.4, where the pool's step is blocked
behind the apiserver, then at v1.32.0. The cluster_upgrade engine (the module's entry) shows the pool's step in
check mode changing nothing, then a run whose rollout deadline is too short (killed in effect after the class switch),
then a second run that finds the new class in place and only waits for the machines controller's rolling update.
Sampled every 0.2 s: never more than replicas + maxSurge machines, no kubelet newer than the apiserver, and only
the two versions."""

from __future__ import annotations

import threading
import time

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.kube.client import api_path
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.errors import NotReady
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.upgrade import entry

from lab.env.machines_bench import wait_for

COMPONENTS = ('kube-apiserver', 'kube-controller-manager', 'kube-scheduler')
VERSION_LABEL = 'machine.steward.io/kubelet-version'     # written out, not imported: the test checks the engine


def control_plane(kube, version):
    """cp1 as a kubelet and its mirror pods would report it at `version`."""
    node = kube.get_or_none(api_path('v1', 'nodes', name='cp1'))
    status = {'nodeInfo': {'kubeletVersion': version}, 'conditions': [{'type': 'Ready', 'status': 'True'}]}
    if node is None:
        kube.create(api_path('v1', 'nodes'), {'apiVersion': 'v1', 'kind': 'Node', 'metadata': {'name': 'cp1'},
                                              'status': status})
    else:
        kube.merge_patch(api_path('v1', 'nodes', name='cp1'), {'status': status})
    for component in COMPONENTS:
        path = api_path('v1', 'pods', 'kube-system', '%s-cp1' % component)
        body = {'apiVersion': 'v1', 'kind': 'Pod',
                'metadata': {'name': '%s-cp1' % component, 'namespace': 'kube-system',
                             'labels': {'component': component, 'tier': 'control-plane'}},
                'spec': {'nodeName': 'cp1', 'containers': [{'name': component,
                                                            'image': 'registry.k8s.io/%s:%s' % (component, version)}]},
                'status': {'conditions': [{'type': 'Ready', 'status': 'True'}]}}
        kube.delete(path)
        kube.create(api_path('v1', 'pods', 'kube-system'), body)


def kubelets(kube):
    return {n['metadata']['name']: ((n.get('status') or {}).get('nodeInfo') or {}).get('kubeletVersion')
            for n in kube.list(api_path('v1', 'nodes'))}


class Sampler(threading.Thread):
    """Machines of the pool, kubelets and the apiserver's version every 0.2 s, checked with the test's own lines."""

    def __init__(self, bench):
        super().__init__(daemon=True)
        self.bench = bench
        self.stop = threading.Event()
        self.samples = 0
        self.most_machines = 0
        self.violations = []
        self.versions = set()

    def run(self):
        kube = self.bench.kube
        while not self.stop.is_set():
            try:
                machines = [m for m in self.bench.machines() if not m['metadata'].get('deletionTimestamp')]
                pod = kube.get(api_path('v1', 'pods', 'kube-system', 'kube-apiserver-cp1'))
                api = pod['spec']['containers'][0]['image'].rsplit(':', 1)[1]
                seen = kubelets(kube)
            except Exception:     # pylint: disable=broad-except
                continue          # a sample racing a pod's replacement is skipped
            self.samples += 1
            self.most_machines = max(self.most_machines, len(machines))
            minor = int(api.split('.')[1])
            for name, version in seen.items():
                if not version:
                    continue
                self.versions.add(version)
                if int(version.split('.')[1]) > minor:
                    self.violations.append((name, version, api))
            self.stop.wait(0.2)


@pytest.mark.timeout(600)
def test_a_pool_rolls_onto_a_new_class_after_the_control_plane_and_a_second_run_only_waits(bench, tmp_path):
    kube = bench.kube
    bench.create_class('nodes')
    bench.create_deployment(replicas=2)          # RollingUpdate, maxSurge 1, maxUnavailable 1
    bench.controller()
    bench.wait_running(2)
    wait_for(lambda: len([v for n, v in kubelets(kube).items() if v == 'v1.31.4']) == 2, 60, 0.5,
             what='2 pool Nodes reporting v1.31.4')
    control_plane(kube, 'v1.31.4')
    pool = '%s/pool' % bench.namespace
    kubeconfig = kube.server.write_kubeconfig(str(tmp_path / 'kubeconfig.json'))

    def params(stage='plan', **more):
        return dict({'version': 'v1.32.0', 'control_plane': ['cp1'], 'workers': [], 'stage': stage,
                     'machine_deployments': [pool], 'kubeconfig': kubeconfig, 'request_timeout': 30.0,
                     'etcd_check': False}, **more)

    md_path = bench.path('machinedeployments', 'pool')
    class_path = bench.path('machineclasses', 'nodes-v1-32-0')

    # the control plane is still at v1.31.4: the pool's step waits behind the apiserver, and nothing is written
    planned = entry.cluster_upgrade(params(), True)
    assert [s['kind'] for s in planned['plan']['steps']] == ['kube-apiserver', 'controller-manager-scheduler',
                                                             'kubelet', 'machine-deployment']
    pool_step = planned['plan']['steps'][-1]
    assert pool_step['pool'] == pool and pool_step['version'] == 'v1.32.0' and len(pool_step['nodes']) == 2
    blocked = entry.cluster_upgrade(params('machine-deployment', machine_deployment=pool), False)
    assert blocked['blocked'] and 'kube-apiserver' in blocked['msg']
    assert kube.get_or_none(class_path) is None

    control_plane(kube, 'v1.32.0')         # as the playbook's control-plane plays leave it
    sampler = Sampler(bench)
    sampler.start()
    try:
        # check mode: the step and its actions, nothing written
        shown = entry.cluster_upgrade(params('machine-deployment', machine_deployment=pool), True)
        assert shown['changed'] and shown['machine_class'] == 'nodes-v1-32-0'
        assert shown['actions'][0].startswith('create the MachineClass %s/nodes-v1-32-0' % bench.namespace)
        assert kube.get_or_none(class_path) is None
        assert kube.get(md_path)['spec']['template']['spec']['class']['name'] == 'nodes'

        # a first run that stops right after the switch (its deadline too short for the rollout)
        with pytest.raises(NotReady):
            entry.cluster_upgrade(params('machine-deployment', machine_deployment=pool, rollout_timeout=0.5), False)
        cls = kube.get(class_path)
        assert cls['metadata']['labels'][VERSION_LABEL] == 'v1.32.0'
        assert cls['providerSpec']['tags'][VERSION_LABEL] == 'v1.32.0'
        assert cls['secretRef'] == kube.get(bench.path('machineclasses', 'nodes'))['secretRef']
        assert kube.get(md_path)['spec']['template']['spec']['class']['name'] == 'nodes-v1-32-0'
        uid = cls['metadata']['uid']

        # the second run finds the class and the switch in place and only waits
        started = time.monotonic()
        done = entry.cluster_upgrade(params('machine-deployment', machine_deployment=pool, rollout_timeout=300), False)
        took = time.monotonic() - started
        assert done['actions'][:2] == [
            'the MachineClass %s/nodes-v1-32-0 names kubelet v1.32.0 already' % bench.namespace,
            'the MachineDeployment %s names it already: wait for its rollout' % pool]
    finally:
        sampler.stop.set()
        sampler.join(5)
    assert kube.get(class_path)['metadata']['uid'] == uid          # not written again
    machines = bench.machines()
    assert len(machines) == 2
    assert {m['spec']['class']['name'] for m in machines} == {'nodes-v1-32-0'}
    pool_nodes = {m['metadata']['labels']['node'] for m in machines}
    assert {n: v for n, v in kubelets(kube).items() if n in pool_nodes} == {n: 'v1.32.0' for n in pool_nodes}
    assert sampler.samples > 10
    assert sampler.violations == []
    assert sampler.most_machines <= 3                               # replicas + maxSurge
    assert sampler.versions == {'v1.31.4', 'v1.32.0'}
    after = entry.cluster_upgrade(params(), True)
    assert after['plan']['done'], after['plan']['steps']
    print('pool rollout of 2 machines: %.1f s waited by the second run, %d samples' % (took, sampler.samples))


@pytest.mark.timeout(900)
def test_the_playbook_shows_the_pool_in_check_mode_and_rolls_it(bench, tmp_path):
    """`ansible-playbook steward.cluster.cluster_upgrade` with cluster_upgrade_machine_deployments, as a user runs it:
    check mode lists the pool and changes nothing; the run rolls it (the control plane already at the target, as a
    stand-in for the control-plane plays, which test_provisioning_upgrade.py exercises); a second run changes
    nothing."""
    from support.ansible import run_playbook
    kube = bench.kube
    bench.create_class('nodes')
    bench.create_deployment(replicas=2)
    bench.controller()
    bench.wait_running(2)
    control_plane(kube, 'v1.32.0')
    kubeconfig = kube.server.write_kubeconfig(str(tmp_path / 'kubeconfig.json'))
    inventory = tmp_path / 'inventory.ini'
    inventory.write_text('[control_plane]\ncp1 ansible_connection=local provisioning_root=%s\n[workers]\n'
                         % (tmp_path / 'root'))
    pool = '%s/pool' % bench.namespace
    extra = {'cluster_upgrade_version': 'v1.32.0', 'cluster_upgrade_machine_deployments': [pool],
             'cluster_upgrade_etcd_check': False, 'cluster_upgrade_kubeconfig': kubeconfig,
             'cluster_upgrade_machine_class_patches': {pool: {'nodeTemplate': {'capacity': {'cpu': '2'}}}},
             'cluster_upgrade_rollout_timeout': 300}
    class_path = bench.path('machineclasses', 'nodes-v1-32-0')

    shown = run_playbook('steward.cluster.cluster_upgrade', inventory=str(inventory), extra_vars=extra, check=True)
    assert shown.rc == 0, shown.stdout[-3000:] + shown.stderr[-3000:]
    planned = shown.result('Plan', 'cp1')
    assert planned['plan']['pools'] == [pool]
    assert kube.get_or_none(class_path) is None

    run = run_playbook('steward.cluster.cluster_upgrade', inventory=str(inventory), extra_vars=extra)
    assert run.rc == 0, run.stdout[-3000:] + run.stderr[-3000:]
    rolled = run.result('Cloud pools, one MachineDeployment rollout at a time', 'cp1')['results']
    assert [r['item'] for r in rolled] == [pool] and rolled[0]['changed']
    cls = kube.get(class_path)
    assert cls['nodeTemplate'] == {'capacity': {'cpu': '2'}}
    machines = bench.machines()
    assert {m['spec']['class']['name'] for m in machines} == {'nodes-v1-32-0'} and len(machines) == 2
    assert set(kubelets(kube).values()) == {'v1.32.0'}

    again = run_playbook('steward.cluster.cluster_upgrade', inventory=str(inventory), extra_vars=extra)
    assert again.rc == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert again.changed('cp1') == 0


@pytest.mark.timeout(600)
def test_a_bare_metal_pool_with_the_in_place_strategy_gets_the_new_kubelet_on_the_same_machines(
        bench, sabakan_server, tmp_path):
    """The same step on a sabakan pool whose MachineDeployment has `strategy.type: InPlaceUpdate`: the class switch
    starts MCM's in-place update in the machines loop (one drain per node, the driver updating each server where it
    stands), and the step's gate passes with the same machines on the same servers."""
    from lab.cloud.nodes import NodeEmulator
    kube = bench.kube
    emulator = NodeEmulator(kube.server.url, None, renew_interval=1.0, grace=20.0, delete_after=5.0,
                            state_dir=str(tmp_path / 'nodes')).start()
    try:
        bench.create_class('metal', provider='Sabakan', spec={'sabakanURL': sabakan_server.url, 'role': 'cs'})
        bench.create_deployment(name='metal', replicas=2, cls='metal', strategy={
            'type': 'InPlaceUpdate', 'inPlaceUpdate': {'maxUnavailable': 1, 'orchestrationType': 'Auto'}})
        bench.controller('--sabakan-url', sabakan_server.url)
        wait_for(lambda: [((m.get('status') or {}).get('currentStatus') or {}).get('phase') for m in bench.machines()]
                 == ['Running'] * 2, 120, 0.5, what='2 Running sabakan machines')
        before = {m['metadata']['name']: m['spec']['providerID'] for m in bench.machines()}
        wait_for(lambda: sorted(v for n, v in kubelets(kube).items() if n != 'cp1') == ['v1.31.4'] * 2, 60, 0.5,
                 what='2 Nodes reporting v1.31.4')
        control_plane(kube, 'v1.32.0')
        kubeconfig = kube.server.write_kubeconfig(str(tmp_path / 'kubeconfig.json'))
        pool = '%s/metal' % bench.namespace
        done = entry.cluster_upgrade({'version': 'v1.32.0', 'control_plane': ['cp1'], 'stage': 'machine-deployment',
                                      'machine_deployments': [pool], 'machine_deployment': pool, 'etcd_check': False,
                                      'kubeconfig': kubeconfig, 'request_timeout': 30.0, 'rollout_timeout': 300}, False)
        assert done['machine_class'] == 'metal-v1-32-0'
        after = {m['metadata']['name']: m['spec']['providerID'] for m in bench.machines()}
        assert after == before                                             # the same machines, the same servers
        assert sorted(v for n, v in kubelets(kube).items() if n != 'cp1') == ['v1.32.0'] * 2
        again = entry.cluster_upgrade({'version': 'v1.32.0', 'control_plane': ['cp1'], 'machine_deployments': [pool],
                                       'etcd_check': False, 'kubeconfig': kubeconfig, 'request_timeout': 30.0}, True)
        assert again['plan']['done']
    finally:
        emulator.stop()
