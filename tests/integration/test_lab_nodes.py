"""The lab's node emulator (lab/cloud/nodes.py) against the API emulator and EC2 with fidelity, over HTTP: Nodes and
Leases for running instances and claimed sabakan machines, Ready Unknown after the grace when a node is
partitioned or its instance stops, recovery on heal, deletion only of Nodes whose machine is gone."""

from __future__ import annotations

import datetime
import math
import time

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.kube.client import KubeClient, api_path
from lab.env.controller import wait_for
from lab.kube.api import KubeServer
from lab.cloud.node_objects import ADDRESS_ANNOTATION, MARKER, SERIAL_LABEL, UNREACHABLE
from lab.cloud.nodes import NodeEmulator, partition

RENEW, GRACE, DELETE_AFTER = 0.4, 2.5, 1.0
NODES = api_path('v1', 'nodes')
LEASES = api_path('coordination.k8s.io/v1', 'leases', 'kube-node-lease')


@pytest.fixture
def lab(tmp_path, ec2):
    server = KubeServer().start()
    import kubernetes
    configuration = kubernetes.client.Configuration()
    configuration.host = server.url
    kube = KubeClient(configuration)
    emulator = NodeEmulator(server.url, ec2.url, region=ec2.region, renew_interval=RENEW, grace=GRACE,
                            delete_after=DELETE_AFTER, state_dir=str(tmp_path)).start()
    yield kube, ec2, emulator
    emulator.stop()
    kube.close()
    server.stop()


def wait_passes(emulator, seconds):
    """Until the emulator has made enough passes to cover `seconds` of its time (not wall time: a loaded
    machine slows the passes, and a check that something did NOT happen must wait for passes, not seconds)."""
    wanted = emulator.stats['passes'] + int(math.ceil(seconds / emulator.tick)) + 2
    wait_for(lambda: emulator.stats['passes'] >= wanted, 60 + 10 * seconds, 0.05, '%d emulator passes' % wanted)


def launch(ec2, count=1, instance_type='t3.small'):
    answer = ec2.client().run_instances(ImageId='ami-0694d931cee176e7d', MinCount=count, MaxCount=count,
                                        InstanceType=instance_type)
    return [(i['InstanceId'], i['PrivateDnsName']) for i in answer['Instances']]


def node(kube, name):
    return kube.get_or_none(NODES + '/' + name)


def ready(kube, name):
    found = node(kube, name)
    if found is None:
        return None
    return next(c['status'] for c in found['status']['conditions'] if c['type'] == 'Ready')


def renew_time(kube, name):
    lease = kube.get_or_none(LEASES + '/' + name)
    return lease and datetime.datetime.fromisoformat(lease['spec']['renewTime'].replace('Z', '+00:00')).timestamp()


def test_running_instances_get_nodes_and_renewed_leases(lab):
    kube, ec2, emulator = lab
    (instance_id, name), = launch(ec2, instance_type='m5.large')
    found = wait_for(lambda: node(kube, name), 30, 0.1, 'the node')
    assert found['spec']['providerID'] == 'aws:///%s/%s' % (ec2.region, instance_id)
    labels = found['metadata']['labels']
    assert labels['kubernetes.io/hostname'] == name and labels['node.kubernetes.io/instance-type'] == 'm5.large'
    assert labels['topology.kubernetes.io/region'] == ec2.region
    assert labels['topology.kubernetes.io/zone'].startswith(ec2.region)
    conditions = {c['type']: c['status'] for c in found['status']['conditions']}
    assert conditions == {'Ready': 'True', 'MemoryPressure': 'False', 'DiskPressure': 'False', 'PIDPressure': 'False'}
    assert found['status']['capacity']['cpu'] == '2' and found['status']['capacity']['memory'] == '8388608Ki'
    lease = wait_for(lambda: kube.get_or_none(LEASES + '/' + name), 10, 0.1, 'the lease')
    assert lease['spec']['holderIdentity'] == name
    assert lease['metadata']['ownerReferences'][0]['uid'] == found['metadata']['uid']
    first = renew_time(kube, name)
    wait_for(lambda: renew_time(kube, name) > first, 10, 0.1, 'a renewal')
    listings, started = emulator.stats['describe_instance_status'], time.monotonic()
    wait_passes(emulator, RENEW * 3)
    # the inventory thread lists once per renew interval of wall time (a loaded machine stretches the passes)
    allowed = int((time.monotonic() - started) / RENEW) + 2
    assert emulator.stats['describe_instance_status'] - listings <= allowed
    assert emulator.stats['describe_instances'] == 1  # names and types once, for the one new instance
    assert ec2.calls() == 1  # only the test's RunInstances: the lab's kubelets are not counted


def test_partition_turns_ready_unknown_after_the_grace_and_heal_recovers(lab):
    kube, ec2, emulator = lab
    (_cut_id, cut), (_other_id, other) = launch(ec2, 2)
    wait_for(lambda: ready(kube, cut) == 'True' and ready(kube, other) == 'True', 60, 0.1, 'two ready nodes')
    emulator.partition([cut])
    wait_passes(emulator, 0)  # a pass that began before the partition may still renew
    frozen = renew_time(kube, cut)
    wait_for(lambda: ready(kube, cut) == 'Unknown', GRACE * 4 + 10, 0.1, 'Ready Unknown')
    unknown_at = time.time()
    assert unknown_at - frozen >= GRACE
    assert renew_time(kube, cut) == frozen  # no renewal while cut off
    found = node(kube, cut)
    assert {c['reason'] for c in found['status']['conditions']} == {'NodeStatusUnknown'}
    assert {(t['key'], t['effect']) for t in found['spec']['taints']} == {(UNREACHABLE, 'NoSchedule'),
                                                                          (UNREACHABLE, 'NoExecute')}
    assert ready(kube, other) == 'True'
    emulator.heal()
    wait_for(lambda: ready(kube, cut) == 'True', 60, 0.1, 'Ready again')
    assert not node(kube, cut)['spec'].get('taints')
    assert renew_time(kube, cut) > frozen


def test_partition_all_through_the_state_file_reaches_new_nodes_too(lab, tmp_path):
    kube, ec2, emulator = lab
    (_first_id, first), = launch(ec2)
    wait_for(lambda: ready(kube, first) == 'True', 30, 0.1, 'a ready node')
    partition(str(tmp_path))  # what `lab.py partition --all` does from another process
    (_late_id, late), = launch(ec2)
    wait_for(lambda: ready(kube, first) == 'Unknown', GRACE * 4 + 10, 0.1, 'Ready Unknown')
    assert node(kube, late) is None  # its kubelet cannot reach the API server to register
    emulator.heal()
    wait_for(lambda: ready(kube, first) == 'True' and ready(kube, late) == 'True', 30, 0.1, 'both ready')


def test_stopped_instance_goes_unknown_but_stays_terminated_instance_is_deleted(lab):
    kube, ec2, emulator = lab
    client = ec2.client()
    (stopped_id, stopped), (terminated_id, terminated) = launch(ec2, 2)
    wait_for(lambda: ready(kube, stopped) == 'True' and ready(kube, terminated) == 'True', 30, 0.1, 'ready nodes')
    client.stop_instances(InstanceIds=[stopped_id])
    client.terminate_instances(InstanceIds=[terminated_id])
    wait_for(lambda: node(kube, terminated) is None, GRACE * 4 + 20, 0.1, 'the terminated node deleted')
    assert kube.get_or_none(LEASES + '/' + terminated) is None
    wait_for(lambda: ready(kube, stopped) == 'Unknown', GRACE * 4 + 10, 0.1, 'the stopped node Unknown')
    wait_passes(emulator, DELETE_AFTER + 3 * RENEW)
    assert node(kube, stopped) is not None  # its instance still exists: never deleted
    client.start_instances(InstanceIds=[stopped_id])
    wait_for(lambda: ready(kube, stopped) == 'True', 30, 0.1, 'the restarted node Ready')


def test_claimed_sabakan_machines_get_nodes_named_by_address(lab):
    kube, _ec2, _emulator = lab
    claims = api_path('coordination.k8s.io/v1', 'leases', 'machines')
    kube.create(claims, {'apiVersion': 'coordination.k8s.io/v1', 'kind': 'Lease',
                         'metadata': {'name': 'sabakan-claim-abc123', 'labels': {SERIAL_LABEL: 'abc123'},
                                      'annotations': {ADDRESS_ANNOTATION: '10.69.0.4'}},
                         'spec': {'holderIdentity': 'machine-uid'}})
    kube.create(claims, {'apiVersion': 'coordination.k8s.io/v1', 'kind': 'Lease',
                         'metadata': {'name': 'sabakan-claim-bad', 'labels': {SERIAL_LABEL: 'bad'},
                                      'annotations': {ADDRESS_ANNOTATION: 'not-an-address'}}})
    found = wait_for(lambda: node(kube, '10.69.0.4'), 30, 0.1, 'the sabakan node')
    assert found['spec']['providerID'] == 'sabakan:///abc123'
    assert {'type': 'InternalIP', 'address': '10.69.0.4'} in found['status']['addresses']
    wait_for(lambda: ready(kube, '10.69.0.4') == 'True', 10, 0.1, 'Ready')
    assert [n['metadata']['name'] for n in kube.list(NODES)] == ['10.69.0.4']
    kube.delete(claims + '/sabakan-claim-abc123')  # released: the machine left the cluster
    wait_for(lambda: node(kube, '10.69.0.4') is None, GRACE * 4 + 20, 0.1, 'the released node deleted')


def test_nodes_it_did_not_register_are_never_touched(lab):
    kube, ec2, emulator = lab
    kube.create(NODES, {'metadata': {'name': 'hand-made'}, 'status': {'conditions': [
        {'type': 'Ready', 'status': 'True'}]}})
    (_name_id, name), = launch(ec2)
    kube.create(NODES, {'metadata': {'name': name}, 'spec': {'providerID': 'somebody-else'}})
    (_other_id, other), = launch(ec2)
    wait_for(lambda: ready(kube, other) == 'True', 30, 0.1, 'the other node')
    wait_passes(emulator, GRACE + 3 * RENEW)
    assert MARKER not in (node(kube, name)['metadata'].get('annotations') or {})
    assert node(kube, name)['spec'] == {'providerID': 'somebody-else'}
    assert ready(kube, 'hand-made') == 'True' and not node(kube, 'hand-made').get('spec', {}).get('taints')
