"""The node emulator's pure parts (lab/cloud/node_objects.py, the faults file of lab/cloud/nodes.py): what a kubelet writes,
what the node lifecycle controller writes, which machines are targets."""

import pytest

from lab.cloud.node_objects import (ec2_targets, lease_object, node_object, ready_conditions,
                                    sabakan_targets, unknown_conditions)
from lab.cloud.nodes import heal, partition, read_faults

INSTANCE = {'InstanceId': 'i-0abc', 'PrivateDnsName': 'ip-10-0-1-5.eu-west-1.compute.internal',
            'PrivateIpAddress': '10.0.1.5', 'InstanceType': 'm5.xlarge', 'State': {'Name': 'running'},
            'Placement': {'AvailabilityZone': 'eu-west-1b'}, 'Architecture': 'x86_64'}


def test_ec2_targets_by_state():
    states = ['pending', 'running', 'stopping', 'stopped', 'shutting-down', 'terminated']
    instances = [dict(INSTANCE, InstanceId='i-%d' % i, PrivateDnsName='ip-%d' % i, State={'Name': s})
                 for i, s in enumerate(states)]
    targets = ec2_targets(instances, 'eu-west-1')
    assert 'ip-0' not in targets  # pending: no kubelet yet
    assert {n: (t.alive, t.gone) for n, t in targets.items()} == {
        'ip-1': (True, False), 'ip-2': (False, False), 'ip-3': (False, False), 'ip-4': (False, False),
        'ip-5': (False, True)}
    assert targets['ip-1'].provider_id == 'aws:///eu-west-1/i-1'


def test_sabakan_targets_follow_the_claim_contract():
    def claim(name, serial, address, **meta):
        return {'metadata': dict({'name': name, 'namespace': 'm', 'labels': {'machine.steward.io/sabakan-serial': serial},
                                  'annotations': {'machine.steward.io/sabakan-address': address}}, **meta)}
    targets = sabakan_targets([claim('sabakan-claim-s1', 's1', '10.69.0.4'),
                               claim('sabakan-claim-s2', 's2', 'not-ip'),          # no IPv4: no node
                               claim('other-name', 's3', '10.69.0.5'),             # not named for its serial
                               claim('sabakan-claim-s4', 's4', '10.69.0.6', deletionTimestamp='x')])
    assert list(targets) == ['10.69.0.4']
    assert targets['10.69.0.4'].provider_id == 'sabakan:///s1' and targets['10.69.0.4'].alive


def test_node_and_lease_as_a_kubelet_writes_them():
    target = ec2_targets([INSTANCE], 'eu-west-1')[INSTANCE['PrivateDnsName']]
    node = node_object(target, 1_800_000_000)
    labels = node['metadata']['labels']
    assert labels['kubernetes.io/hostname'] == INSTANCE['PrivateDnsName']
    assert labels['node.kubernetes.io/instance-type'] == 'm5.xlarge'
    assert (labels['topology.kubernetes.io/region'], labels['topology.kubernetes.io/zone']) == ('eu-west-1', 'eu-west-1b')
    assert node['status']['capacity']['cpu'] == '4'
    assert {'type': 'InternalIP', 'address': '10.0.1.5'} in node['status']['addresses']
    node['metadata']['uid'] = 'u1'
    lease = lease_object(node, 1_800_000_000.5, 40)
    assert lease['spec']['renewTime'] == '2027-01-15T08:00:00.500000Z'
    assert lease['spec']['leaseDurationSeconds'] == 40 and lease['metadata']['namespace'] == 'kube-node-lease'


def test_conditions_keep_transition_times_and_others_conditions():
    ready = ready_conditions(100, [{'type': 'KernelDeadlock', 'status': 'False'}])
    assert {c['type']: c['status'] for c in ready} == {'KernelDeadlock': 'False', 'MemoryPressure': 'False',
                                                       'DiskPressure': 'False', 'PIDPressure': 'False', 'Ready': 'True'}
    again = ready_conditions(200, ready)
    assert {c['lastTransitionTime'] for c in again if c['type'] == 'Ready'} == {'1970-01-01T00:01:40Z'}
    unknown = unknown_conditions(300, again)
    row = next(c for c in unknown if c['type'] == 'Ready')
    assert (row['status'], row['reason'], row['lastTransitionTime']) == ('Unknown', 'NodeStatusUnknown',
                                                                         '1970-01-01T00:05:00Z')
    assert row['lastHeartbeatTime'] == '1970-01-01T00:03:20Z'  # the kubelet's last post, not the controller's


def test_faults_file_accumulates_and_heals(tmp_path):
    assert read_faults(str(tmp_path)) == {'all': False, 'nodes': []}
    partition(str(tmp_path), ['a'])
    partition(str(tmp_path), ['b'])
    assert read_faults(str(tmp_path)) == {'all': False, 'nodes': ['a', 'b']}
    heal(str(tmp_path), ['a'])
    partition(str(tmp_path))
    assert read_faults(str(tmp_path)) == {'all': True, 'nodes': ['b']}
    heal(str(tmp_path))
    assert read_faults(str(tmp_path)) == {'all': False, 'nodes': []}
    (tmp_path / 'node-faults.json').write_text('{not json')
    with pytest.raises(ValueError, match='not a faults file'):
        read_faults(str(tmp_path))
