"""MCM's in-place update strategy on the lab parts (docs/machines.md "In-place updates"): the real controller
(`--controllers machines`) with the sabakan driver against sabakan over GraphQL/HTTP, the API emulator, and the
lab's node emulator as the servers' kubelets (a claim's applied kubelet version is what its kubelet reports).

A MachineDeployment of 3 bare-metal machines with `strategy.type: InPlaceUpdate` moves to a class naming kubelet
v1.32.0: Auto selects one Node at a time (maxUnavailable 1), each is drained once (its pod evicted once), updated
by the driver on the same server, labelled `update-result=successful` and moved to the new MachineSet; no machine is
created or deleted. Then Manual: nothing moves until the operator labels a Node `selected-for-update=true`, and
only that machine is updated."""

from __future__ import annotations

import threading
import time

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.kube.client import api_path

from lab.env.machines_bench import wait_for
from support.rbac import audited

API = 'machine.sapcloud.io/v1alpha1'
# MCM's names, written out (the test checks the code, it does not share its constants)
CANDIDATE = 'node.machine.sapcloud.io/candidate-for-update'
SELECTED = 'node.machine.sapcloud.io/selected-for-update'
RESULT = 'node.machine.sapcloud.io/update-result'
KUBELET = 'machine.steward.io/kubelet-version'


def phase(m):
    return ((m.get('status') or {}).get('currentStatus') or {}).get('phase')


def node_of(bench, machine):
    name = (machine['metadata'].get('labels') or {}).get('node')
    return bench.kube.get_or_none(api_path('v1', 'nodes', name=name)) if name else None


def kubelet(node):
    return (((node or {}).get('status') or {}).get('nodeInfo') or {}).get('kubeletVersion')


def owner(machine):
    return [r['name'] for r in machine['metadata'].get('ownerReferences') or []]


def sets(bench):
    return {s['spec']['template']['spec']['class']['name']: s for s in bench.kube.list(bench.path('machinesets'))}


def add_pod(bench, name, node):
    bench.kube.create(api_path('v1', 'pods', bench.namespace), {
        'apiVersion': 'v1', 'kind': 'Pod',
        'metadata': {'name': name, 'namespace': bench.namespace, 'labels': {'app': 'web'},
                     'ownerReferences': [{'apiVersion': 'apps/v1', 'kind': 'ReplicaSet', 'name': 'web',
                                          'uid': 'rs-uid', 'controller': True}]},
        'spec': {'nodeName': node, 'containers': [{'name': 'c', 'image': 'nginx'}]}})


class Watch(threading.Thread):
    """Every 0.2 s: how many machines exist, how many are not usable (not Running, or their Node cordoned or not
    Ready), and which servers (providerIDs) back them."""

    def __init__(self, bench):
        super().__init__(daemon=True)
        self.bench = bench
        self.stop = threading.Event()
        self.counts, self.unusable, self.providers = set(), 0, set()
        self.samples = 0

    def run(self):
        while not self.stop.is_set():
            try:
                machines = self.bench.machines()
                nodes = {m['metadata']['name']: node_of(self.bench, m) for m in machines}
            except Exception:     # pylint: disable=broad-except
                continue          # a sample racing a write is skipped
            self.samples += 1
            self.counts.add(len(machines))
            bad = 0
            for m in machines:
                node = nodes[m['metadata']['name']]
                ready = any(c.get('type') == 'Ready' and c.get('status') == 'True'
                            for c in ((node or {}).get('status') or {}).get('conditions') or [])
                if phase(m) != 'Running' or node is None or not ready or (node.get('spec') or {}).get('unschedulable'):
                    bad += 1
                self.providers.add(m['spec'].get('providerID'))
            self.unusable = max(self.unusable, bad)
            self.stop.wait(0.2)


@pytest.fixture
def metal(bench, sabakan_server, tmp_path):
    from lab.cloud.nodes import NodeEmulator
    emulator = NodeEmulator(bench.kube.server.url, None, renew_interval=1.0, grace=20.0, delete_after=5.0,
                            state_dir=str(tmp_path / 'nodes')).start()
    spec = {'sabakanURL': sabakan_server.url, 'role': 'cs'}
    bench.create_class('metal', provider='Sabakan', spec=spec)
    for name, version in (('metal-v1-32-0', 'v1.32.0'), ('metal-v1-33-0', 'v1.33.0')):
        bench.create_class(name, provider='Sabakan', spec=spec)
        bench.kube.merge_patch(bench.path('machineclasses', name), {'metadata': {'labels': {KUBELET: version}}})
    bench.create_deployment(name='metal', replicas=3, cls='metal', strategy={
        'type': 'InPlaceUpdate', 'inPlaceUpdate': {'maxSurge': 0, 'maxUnavailable': 1, 'orchestrationType': 'Auto'}})
    bench.controller('--sabakan-url', sabakan_server.url)
    wait_for(lambda: [phase(m) for m in bench.machines()] == ['Running'] * 3, 120, 0.5,
             what='3 Running sabakan machines')
    yield emulator
    emulator.stop()


@pytest.mark.timeout(600)
def test_auto_updates_one_node_at_a_time_without_a_new_machine_then_manual_waits_for_the_operator(bench, metal):
    kube = bench.kube
    machines = {m['metadata']['name']: m for m in bench.machines()}
    servers = {m['spec']['providerID'] for m in machines.values()}
    nodes = {name: m['metadata']['labels']['node'] for name, m in machines.items()}
    for i, node in enumerate(sorted(nodes.values())):
        add_pod(bench, 'web-%d' % i, node)
    assert {kubelet(node_of(bench, m)) for m in machines.values()} == {'v1.31.4'}
    audit = audited(kube.server)
    watch = Watch(bench)
    watch.start()
    started = time.monotonic()
    try:
        kube.merge_patch(bench.path('machinedeployments', 'metal'),
                         {'spec': {'template': {'spec': {'class': {'kind': 'MachineClass', 'name': 'metal-v1-32-0'}}}}})

        def rolled():
            new = sets(bench).get('metal-v1-32-0')
            if new is None:
                return False
            now = bench.machines()
            return (len(now) == 3 and all(owner(m) == [new['metadata']['name']] for m in now)
                    and all(kubelet(node_of(bench, m)) == 'v1.32.0' for m in now)
                    and all(not {CANDIDATE, SELECTED, RESULT} & set(node_of(bench, m)['metadata'].get('labels') or {})
                            and not (node_of(bench, m).get('spec') or {}).get('unschedulable') for m in now)
                    and (kube.get(bench.path('machinedeployments', 'metal')).get('status') or {}).get(
                        'updatedReplicas') == 3)
        wait_for(rolled, 300, 0.5, what='every machine updated in place and in the new set')
        auto_seconds = time.monotonic() - started
    finally:
        watch.stop.set()
        watch.join(5)
    after = {m['metadata']['name']: m for m in bench.machines()}
    assert set(after) == set(machines)                                  # the same machines ...
    assert {m['spec']['providerID'] for m in after.values()} == servers  # ... on the same servers
    assert watch.counts == {3} and watch.providers == servers           # never a new machine or server
    assert watch.unusable <= 1, watch.unusable                          # maxUnavailable 1
    selected = [e['message'] for e in kube.list(api_path('v1', 'events', bench.namespace))
                if e.get('reason') == 'SelectedForUpdate']
    assert len(selected) == 3 and all(m.count(',') == 0 for m in selected), selected   # one Node per selection
    evicted = [path for _agent, method, path, _q in list(audit) if method == 'POST' and path.endswith('/eviction')]
    assert sorted(p.split('/pods/')[1].split('/')[0] for p in evicted) == ['web-0', 'web-1', 'web-2']   # once each
    claims = kube.list(api_path('coordination.k8s.io/v1', 'leases', bench.namespace),
                       label_selector='machine.steward.io/sabakan-serial')
    assert {c['metadata']['annotations'].get('machine.steward.io/applied-class') for c in claims} == {'metal-v1-32-0'}
    assert all(RESULT not in (m['metadata'].get('labels') or {}) for m in after.values())
    assert sets(bench)['metal']['spec']['replicas'] == 0
    condition = next(c for c in node_of(bench, next(iter(after.values())))['status']['conditions']
                     if c['type'] == 'InPlaceUpdate')
    assert condition['reason'] == 'UpdateSuccessful'

    # Manual: nothing moves until the operator selects a Node; then only that machine
    kube.merge_patch(bench.path('machinedeployments', 'metal'), {'spec': {
        'strategy': {'inPlaceUpdate': {'orchestrationType': 'Manual'}},
        'template': {'spec': {'class': {'kind': 'MachineClass', 'name': 'metal-v1-33-0'}}}}})
    wait_for(lambda: all(CANDIDATE in (node_of(bench, m)['metadata'].get('labels') or {}) for m in bench.machines()),
             60, 0.5, what='every Node a candidate for the update')
    time.sleep(5)     # several passes (sync period, the controller's fast flags): none selects anything
    assert all(SELECTED not in (node_of(bench, m)['metadata'].get('labels') or {}) for m in bench.machines())
    assert {kubelet(node_of(bench, m)) for m in bench.machines()} == {'v1.32.0'}
    chosen = sorted(after)[0]
    kube.merge_patch(api_path('v1', 'nodes', name=nodes[chosen]), {'metadata': {'labels': {SELECTED: 'true'}}})

    def new_name():
        return (sets(bench).get('metal-v1-33-0') or {}).get('metadata', {}).get('name')
    wait_for(lambda: owner(bench.machine_named(chosen)) == [new_name()]
             and kubelet(node_of(bench, bench.machine_named(chosen))) == 'v1.33.0', 120, 0.5,
             what='the selected machine updated and moved')
    time.sleep(3)
    others = [bench.machine_named(n) for n in sorted(after)[1:]]
    assert all(kubelet(node_of(bench, m)) == 'v1.32.0' and owner(m) != [new_name()] for m in others)
    assert all(SELECTED not in (node_of(bench, m)['metadata'].get('labels') or {}) for m in others)
    print('in-place Auto update of 3 sabakan machines: %.1f s, %d samples' % (auto_seconds, watch.samples))
