# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""SabakanIntegration and RepairEntry end to end: the real controller process, the Kubernetes API
emulator (with Node objects for the data center's machines) and the lab's GraphQL sabakan server."""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any, Dict, List, Optional

import kubernetes
import pytest
import yaml

from ansible_collections.steward.cluster.plugins.module_utils.kube.client import KubeClient, api_path
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.integration_spec import parse_spec
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.kube_nodes import INTEGRATION_ANNOTATION

from lab.env.controller import ControllerProcess, wait_for
from lab.kube.api import repo_path

NAMESPACE = 'infra'
NAME = 'dc1'
RESOURCE = NAMESPACE + '/' + NAME
API = '/apis/cluster.steward.io/v1alpha1'
INTEGRATIONS = API + '/namespaces/%s/sabakanintegrations' % NAMESPACE
REPAIRS = API + '/repairentries'
CONFIGMAP = api_path('v1', 'configmaps', NAMESPACE, NAME + '-cluster')
CONSTRAINTS = {'control-plane-count': 3, 'minimum-workers': 4}
FOREIGN_TAINT = {'key': 'example.com/dedicated', 'value': 'infra', 'effect': 'PreferNoSchedule'}

with open(repo_path('lab', 'sabakan-template.yml')) as f:
    # The Nodes carry a taint of their own (FOREIGN_TAINT): control planes must tolerate it.
    TEMPLATE = dict(yaml.safe_load(f), control_plane_tolerations=[FOREIGN_TAINT['key']])


# --- helpers ----------------------------------------------------------------------------------
def create_nodes(kube: KubeClient, sabakan) -> List[str]:
    """A Node per non-boot machine: named w-<n> with the address as InternalIP for every third one
    (matched by address), by address otherwise; each with a label and a taint that are not ours."""
    addresses = []
    for i, machine in enumerate(m for m in sabakan.machines() if m['spec']['role'] != 'boot'):
        address = machine['spec']['ipv4'][0]
        name = 'w-%d' % i if i % 3 == 0 else address
        kube.create(api_path('v1', 'nodes'), {
            'apiVersion': 'v1', 'kind': 'Node',
            'metadata': {'name': name, 'labels': {'kubernetes.io/hostname': name, 'team': 'infra'}},
            'spec': {'taints': [dict(FOREIGN_TAINT)]},
            'status': {'addresses': [{'type': 'InternalIP', 'address': address}, {'type': 'Hostname', 'address': name}]}})
        addresses.append(address)
    return addresses


def nodes_by_address(kube: KubeClient) -> Dict[str, Dict[str, Any]]:
    result = {}
    for node in kube.list(api_path('v1', 'nodes')):
        for a in node.get('status', {}).get('addresses', []):
            if a['type'] == 'InternalIP':
                result[a['address']] = node
    return result


def create_integration(kube: KubeClient, sabakan, **spec: Any) -> Dict[str, Any]:
    body = {'url': sabakan.base_url, 'interval': '1s', 'timeout': '3s', 'template': TEMPLATE,
            'constraints': dict(CONSTRAINTS)}
    body.update(spec)
    return kube.create(INTEGRATIONS, {'apiVersion': 'cluster.steward.io/v1alpha1', 'kind': 'SabakanIntegration',
                                      'metadata': {'name': NAME, 'namespace': NAMESPACE}, 'spec': body})


def status(kube: KubeClient) -> Dict[str, Any]:
    return kube.get(INTEGRATIONS + '/' + NAME).get('status') or {}


def cluster(kube: KubeClient) -> Optional[Dict[str, Any]]:
    configmap = kube.get_or_none(CONFIGMAP)
    return yaml.safe_load(configmap['data']['cluster.yml']) if configmap else None


def events(kube: KubeClient, reason: str, namespace: str = NAMESPACE) -> List[Dict[str, Any]]:
    return [e for e in kube.list(api_path('v1', 'events', namespace)) if e['reason'] == reason]


def state_taint(node: Dict[str, Any]) -> Optional[str]:
    for taint in node.get('spec', {}).get('taints') or []:
        if taint['key'] == 'cke.cybozu.com/state':
            return '%s:%s' % (taint.get('value'), taint['effect'])
    return None


def serial_of(sabakan, address: str) -> str:
    return next(m['spec']['serial'] for m in sabakan.machines() if m['spec']['ipv4'][0] == address)


def next_cycle(kube: KubeClient, cycles: int = 1, timeout: float = 15) -> Dict[str, Any]:
    """Wait until `cycles` more cycles have written their status; returns the last status."""
    for _cycle in range(cycles):
        before = status(kube).get('lastRun'), status(kube).get('repair', {}).get('lastRun')
        wait_for(lambda: (status(kube).get('lastRun'), status(kube).get('repair', {}).get('lastRun')) != before,
                 timeout, 0.1, 'the next cycle')
    return status(kube)


@pytest.fixture
def controller(kube, tmp_path):
    proc = ControllerProcess(kube.server, str(tmp_path / 'controller')).start()
    yield proc
    code = proc.stop()
    assert code == 0, proc.log()[-3000:]
    assert '"level": "ERROR"' not in proc.log(), proc.log()[-3000:]


def start(kube, sabakan, controller, **spec: Any) -> Dict[str, Any]:
    create_integration(kube, sabakan, **spec)
    wait_for(lambda: status(kube).get('lastResult') in ('Generated', 'Unchanged') and controller.metric(
        'cke_sabakan_integration_successful', {'resource': RESOURCE}) == 1, 30, 0.2, 'the first cycle')
    return cluster(kube)


# --- (a) first cycle --------------------------------------------------------------------------
def test_first_cycle_generates_the_cluster_labels_nodes_and_reports(kube, sabakan_server, controller):
    begin = time.time()
    addresses = create_nodes(kube, sabakan_server)
    generated = start(kube, sabakan_server, controller)

    nodes = generated['nodes']
    assert len(nodes) == 7 and sum(1 for n in nodes if n['control_plane']) == 3
    machines = {m['spec']['ipv4'][0]: m for m in sabakan_server.machines()}
    kube_nodes = nodes_by_address(kube)
    for node in nodes:
        machine = machines[node['address']]
        kube_node = kube_nodes[node['address']]
        labels = kube_node['metadata']['labels']
        annotations = kube_node['metadata']['annotations']
        # seed 000's labels and annotations, from the machine itself
        assert labels['cke.cybozu.com/rack'] == str(machine['spec']['rack'])
        assert labels['topology.kubernetes.io/zone'] == 'rack%d' % machine['spec']['rack']
        assert labels['cke.cybozu.com/role'] == machine['spec']['role']
        assert labels['node-role.kubernetes.io/' + machine['spec']['role']] == 'true'
        assert labels['cke.cybozu.com/retire-month'] == machine['spec']['retireDate'][:7]
        assert labels.get('node-role.kubernetes.io/master') == ('true' if node['control_plane'] else None)
        assert annotations['cke.cybozu.com/serial'] == machine['spec']['serial']
        assert annotations[INTEGRATION_ANNOTATION] == RESOURCE
        assert {k: labels[k] for k in node['labels']} == node['labels']
        # what was not ours is still there
        assert labels['team'] == 'infra' and FOREIGN_TAINT in kube_node['spec']['taints']
        if machine['spec']['role'] == 'ss':
            assert {'key': 'cke.cybozu.com/role', 'value': 'storage', 'effect': 'NoExecute'} in kube_node['spec']['taints']
    outside = [a for a in addresses if a not in {n['address'] for n in nodes}]
    assert len(outside) == 28 - 7
    assert all('cke.cybozu.com/rack' not in kube_nodes[a]['metadata']['labels'] for a in outside)

    st = status(kube)
    workers = {}
    for node in nodes:
        if not node['control_plane']:
            workers[node['labels']['cke.cybozu.com/role']] = workers.get(node['labels']['cke.cybozu.com/role'], 0) + 1
    assert (st['nodes'], st['controlPlanes'], st['workers'], st['unusedMachines']) == (7, 3, workers, 21)
    assert st['observedGeneration'] == 1 and len(st['templateHash']) == 16
    assert [(c['type'], c['status']) for c in st['conditions']] == [('Synced', 'True')]
    configmap = kube.get(CONFIGMAP)
    assert configmap['metadata']['annotations']['cluster.steward.io/template-hash'] == st['templateHash']
    assert configmap['metadata']['annotations']['cluster.steward.io/operation'] == 'new'

    labels = {'resource': RESOURCE}
    assert controller.metric('cke_sabakan_integration_successful', labels) == 1
    assert controller.metric('cke_sabakan_integration_timestamp_seconds', labels) >= int(begin)
    for role, count in workers.items():
        assert controller.metric('cke_sabakan_workers', dict(labels, role=role)) == count
    assert controller.metric('cke_sabakan_unused_machines', labels) == 21
    assert controller.metric('cke_repair_queue_entries') == 0

    (written,) = events(kube, 'ClusterGenerated')
    assert written['involvedObject']['name'] == NAME and 'add new control plane' in written['message']
    assert len(events(kube, 'NodeUpdated')) == 7
    # The next cycles change nothing: no second write, no more Node patches.
    rv = configmap['metadata']['resourceVersion']
    assert next_cycle(kube, 2)['lastResult'] == 'Unchanged'
    assert kube.get(CONFIGMAP)['metadata']['resourceVersion'] == rv
    assert len(events(kube, 'NodeUpdated')) == 7


def test_invalid_spec_changes_nothing_until_fixed(kube, sabakan_server, controller):
    create_nodes(kube, sabakan_server)
    bad = dict(TEMPLATE, nodes=[TEMPLATE['nodes'][0], dict(TEMPLATE['nodes'][1], taints=[{'key': 'k', 'effect': 'Bad'}])])
    create_integration(kube, sabakan_server, template=bad)
    wait_for(lambda: status(kube).get('lastResult') == 'Invalid', 20, 0.2, 'Invalid')
    st = status(kube)
    assert st['reason'].startswith("spec.template.nodes[1].taints[0].effect: 'Bad' is not one of")
    assert [(c['status'], c['reason']) for c in st['conditions']] == [('False', 'InvalidSpec')]
    assert controller.metric('cke_sabakan_integration_successful', {'resource': RESOURCE}) == 0
    assert kube.get_or_none(CONFIGMAP) is None
    assert all('cke.cybozu.com/rack' not in n['metadata']['labels'] for n in kube.list(api_path('v1', 'nodes')))
    (warning,) = events(kube, 'InvalidSpec')
    assert warning['type'] == 'Warning' and 'spec.template.nodes[1]' in warning['message']

    kube.merge_patch(INTEGRATIONS + '/' + NAME, {'spec': {'template': TEMPLATE}})   # read again next cycle
    wait_for(lambda: status(kube).get('lastResult') in ('Generated', 'Unchanged'), 15, 0.2, 'the fixed spec')
    assert len(cluster(kube)['nodes']) == 7 and 'reason' not in status(kube)
    assert status(kube)['observedGeneration'] == 2


# --- (b) sabakan outage -----------------------------------------------------------------------
def test_sabakan_outage_keeps_the_last_good_cluster(kube, sabakan_server, controller):
    create_nodes(kube, sabakan_server)
    start(kube, sabakan_server, controller)
    labels = {'resource': RESOURCE}
    workers = [n['address'] for n in cluster(kube)['nodes'] if not n['control_plane']]
    outages = [('http500', 'HTTP 500', 'SabakanUnavailable'),
               ('graphql_error', 'injected GraphQL error', 'SabakanQueryError')]
    for count, (fault, reason, error) in enumerate(outages, 1):
        configmap_rv = kube.get(CONFIGMAP)['metadata']['resourceVersion']
        size = status(kube)['nodes']                                         # 7, then 8 (a retiring worker is replaced)
        node_rvs = {a: n['metadata']['resourceVersion'] for a, n in nodes_by_address(kube).items()}
        sabakan_server.set_fault(fault)
        # a machine changes meanwhile: nothing may act on it while sabakan cannot be read
        worker = workers[count]
        sabakan_server.set_state(serial_of(sabakan_server, worker), 'RETIRING')
        wait_for(lambda: controller.metric('cke_sabakan_integration_successful', labels) == 0, 15, 0.2, 'metric 0')
        st = next_cycle(kube, 2)
        assert st['lastResult'] == 'Failed' and reason in st['reason']
        assert [(c['status'], c['reason']) for c in st['conditions']] == [('False', error)]
        assert st['nodes'] == size == 6 + count                              # the last good numbers stay
        assert kube.get(CONFIGMAP)['metadata']['resourceVersion'] == configmap_rv
        assert {a: n['metadata']['resourceVersion'] for a, n in nodes_by_address(kube).items()} == node_rvs
        warnings = events(kube, 'SyncFailed')
        assert len(warnings) == count and warnings[-1]['type'] == 'Warning'  # one per outage, not one per cycle

        sabakan_server.set_fault('none')
        wait_for(lambda: controller.metric('cke_sabakan_integration_successful', labels) == 1, 15, 0.2, 'metric 1')
        wait_for(lambda: state_taint(nodes_by_address(kube)[worker]) == 'retiring:NoExecute', 15, 0.2, 'the taint')
        wait_for(lambda: status(kube)['lastResult'] == 'Unchanged', 15, 0.2, 'a quiet cycle')


# --- (c) retiring, retired, removed -----------------------------------------------------------
def test_retiring_then_retired_worker_is_tainted_removed_and_its_node_deleted(kube, sabakan_server, controller):
    create_nodes(kube, sabakan_server)
    generated = start(kube, sabakan_server, controller, waitRetiredSeconds=3,
                      variables={'notHaving': {'roles': ['boot']}}, nodes={'deleteRemoved': True})
    worker = next(n['address'] for n in generated['nodes'] if not n['control_plane'])
    node_name = nodes_by_address(kube)[worker]['metadata']['name']
    serial = serial_of(sabakan_server, worker)

    sabakan_server.set_state(serial, 'RETIRING')
    wait_for(lambda: state_taint(nodes_by_address(kube)[worker]) == 'retiring:NoExecute', 15, 0.1, 'retiring taint')
    assert FOREIGN_TAINT in nodes_by_address(kube)[worker]['spec']['taints']

    sabakan_server.set_state(serial, 'RETIRED')
    retired_at = time.time()
    wait_for(lambda: state_taint(nodes_by_address(kube)[worker]) == 'retired:NoExecute', 15, 0.1, 'retired taint')
    assert worker in [n['address'] for n in cluster(kube)['nodes']]   # still waiting out waitRetiredSeconds
    wait_for(lambda: worker not in [n['address'] for n in cluster(kube)['nodes']], 20, 0.1, 'removal')
    assert time.time() - retired_at >= 2.9
    wait_for(lambda: kube.get_or_none(api_path('v1', 'nodes', None, node_name)) is None, 10, 0.1, 'Node deletion')
    (deleted,) = events(kube, 'NodeDeleted')
    assert serial in deleted['message'] and node_name in deleted['message']
    # Only that Node: the other 27 are still there, and the cluster kept its size.
    assert len(kube.list(api_path('v1', 'nodes'))) == 27
    assert len(cluster(kube)['nodes']) == 7


# --- (d) repair storm -------------------------------------------------------------------------
def test_repair_storm_is_blocked_then_entries_within_the_limit_without_duplicates(kube, sabakan_server, controller):
    create_nodes(kube, sabakan_server)
    spare = [m for m in sabakan_server.machines() if m['spec']['role'] != 'boot'][-4:]  # rack 3, not all in the cluster
    for machine in spare[:3]:
        sabakan_server.set_state(machine['spec']['serial'], 'UNHEALTHY')
    create_integration(kube, sabakan_server, constraints=dict(CONSTRAINTS, **{'maximum-repair-queue-entries': 2}),
                       autoRepair={'enabled': True})
    labels = {'resource': RESOURCE}

    wait_for(lambda: status(kube).get('repair', {}).get('blocked'), 30, 0.2, 'the storm to be blocked')
    st = next_cycle(kube)
    assert '0 existing entries + 3 new failures > maximum-repair-queue-entries=2' in st['repair']['blocked']
    assert kube.list(REPAIRS) == []
    assert controller.metric('steward_repair_blocked_total', labels) >= 2
    assert len(events(kube, 'RepairBlocked')) == 1

    sabakan_server.set_state(spare[2]['spec']['serial'], 'HEALTHY')
    wait_for(lambda: len(kube.list(REPAIRS)) == 2, 15, 0.1, 'two repair entries')
    entries = {e['metadata']['name']: e for e in kube.list(REPAIRS)}
    expected = {'repair-' + m['spec']['ipv4'][0].replace('.', '-'): m for m in spare[:2]}
    assert set(entries) == set(expected)
    for name, entry in entries.items():
        machine = expected[name]
        assert entry['spec'] == {'address': machine['spec']['ipv4'][0], 'machineType': machine['spec']['bmc']['bmcType'],
                                 'operation': 'unhealthy', 'serial': machine['spec']['serial'], 'integration': RESOURCE}
        assert entry['status'] == {'status': 'queued'}
    wait_for(lambda: len(events(kube, 'RepairEntryCreated', 'steward-system')) == 2, 5, 0.1,
             'an Event on each (cluster-scoped) RepairEntry')
    on_integration = events(kube, 'RepairEntryCreated', NAMESPACE)
    assert sorted(e['message'].split(':')[0] for e in on_integration) == sorted('RepairEntry ' + n for n in expected)

    st = next_cycle(kube, 2)                                                # existing entries: no duplicates
    assert len(kube.list(REPAIRS)) == 2 and st['repair']['created'] == [] and 'blocked' not in st['repair']
    assert st['repair']['entries'] == 2
    assert controller.metric('cke_repair_queue_entries') == 2

    sabakan_server.set_state(spare[3]['spec']['serial'], 'UNHEALTHY')      # 2 existing + 1 new > 2
    wait_for(lambda: status(kube).get('repair', {}).get('blocked'), 15, 0.1, 'blocked again')
    assert '2 existing entries + 1 new failures > maximum-repair-queue-entries=2' in status(kube)['repair']['blocked']
    assert len(kube.list(REPAIRS)) == 2

    # A RepairEntry made by hand that is not what the CRD describes still counts toward the limit (never more
    # repairs than it) and is reported once, naming the field, the value and the rule (issue 19 §2).
    kube.create(REPAIRS, {'apiVersion': 'cluster.steward.io/v1alpha1', 'kind': 'RepairEntry',
                          'metadata': {'name': 'repair-by-hand'}, 'spec': {'address': 'rack3-n4', 'operation': 'unhealthy'}})
    st = next_cycle(kube, 2)
    assert '3 existing entries + 1 new failures > maximum-repair-queue-entries=2' in st['repair']['blocked']
    assert kube.get(REPAIRS + '/repair-by-hand')['status']['message'] == (
        "spec.address: expected an IPv4 or IPv6 address, got 'rack3-n4' (rule: ip-address)")
    (warning,) = [e for e in events(kube, 'InvalidSpec', 'steward-system') if 'repair-by-hand' in e['message']]
    assert warning['type'] == 'Warning' and len(kube.list(REPAIRS)) == 3


# --- (e) two repair loops racing --------------------------------------------------------------
class SlowList:
    """A KubeClient whose list of RepairEntries takes a while: widens the window between "count the
    entries" and "create new ones", where two loops without a mutex would both see room."""

    def __init__(self, client: KubeClient, delay: float) -> None:
        self._client = client
        self._delay = delay

    def list(self, path: str, *args: Any, **kwargs: Any):
        items = self._client.list(path, *args, **kwargs)
        if path.endswith('/repairentries'):
            time.sleep(self._delay)
        return items

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def repair_runtime(kube: KubeClient, identity: str):
    from steward_controller.core import metrics, settings
    from steward_controller.core.runtime import Runtime
    configuration = kubernetes.client.Configuration()
    configuration.host = kube.server.url
    client = SlowList(KubeClient(configuration), 0.3)
    return Runtime(settings=settings.parse(['--namespace', 'steward-system', '--identity', identity]),
                   client=client, metrics=metrics.Metrics(), health=metrics.Health())


def integration_body(name: str) -> Dict[str, Any]:
    return {'apiVersion': 'cluster.steward.io/v1alpha1', 'kind': 'SabakanIntegration',
            'metadata': {'name': name, 'namespace': NAMESPACE, 'uid': 'uid-' + name}, 'spec': {}, 'status': {}}


def race(kube: KubeClient, sabakan, racks_a: List[int], racks_b: List[int]) -> List[Any]:
    """Two loops (own identity, own client, own integration with its own query) run at the same moment."""
    from steward_controller.sabakan.handlers import run_auto_repair
    runs: List[Any] = [None, None]
    barrier = threading.Barrier(2)

    def loop(index: int, name: str, racks: List[int]) -> None:
        runtime = repair_runtime(kube, 'replica-' + name)
        spec = parse_spec({'url': sabakan.base_url, 'template': TEMPLATE, 'timeout': '5s',
                           'constraints': {'maximum-repair-queue-entries': 3},
                           'autoRepair': {'enabled': True, 'variables': {'having': {
                               'states': ['UNHEALTHY', 'UNREACHABLE'], 'racks': racks}}}}, name)
        barrier.wait()
        runs[index] = run_auto_repair(runtime, integration_body(name), spec, None)

    threads = [threading.Thread(target=loop, args=(0, 'a', racks_a)), threading.Thread(target=loop, args=(1, 'b', racks_b))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return runs


def test_two_repair_loops_racing_never_exceed_the_limit(kube, sabakan_server, monkeypatch):
    # Two failed machines in racks 0-1 (seen by loop a) and two in racks 2-3 (seen by loop b):
    # each loop alone fits (2 <= 3), both together do not (4 > 3).
    by_rack: Dict[int, List[Dict[str, Any]]] = {}
    for machine in sabakan_server.machines():
        if machine['spec']['role'] != 'boot':
            by_rack.setdefault(machine['spec']['rack'], []).append(machine)
    for machine in by_rack[0][:1] + by_rack[1][:1] + by_rack[2][:1] + by_rack[3][:1]:
        sabakan_server.set_state(machine['spec']['serial'], 'UNHEALTHY')

    for _round in range(3):
        runs = race(kube, sabakan_server, [0, 1], [2, 3])
        entries = kube.list(REPAIRS)
        assert len(entries) == 2, [e['metadata']['name'] for e in entries]
        assert sorted(len(r.created) for r in runs) == [0, 2]
        assert sum(1 for r in runs if r.blocked) == 1 and all(r.error is None for r in runs)
        assert len({e['spec']['integration'] for e in entries}) == 1
        for entry in entries:
            kube.delete(REPAIRS + '/' + entry['metadata']['name'])

    # The same race without the mutex overfills the queue: the test above would see it.
    import steward_controller.sabakan.handlers as handler
    monkeypatch.setattr(handler, 'LeaseMutex', lambda *args, **kwargs: contextlib.nullcontext())
    race(kube, sabakan_server, [0, 1], [2, 3])
    assert len(kube.list(REPAIRS)) == 4
