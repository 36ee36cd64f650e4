"""The lab contract (`make lab` / `make lab-down`, issue 14 §6) on a temporary state dir and free ports, so it
never meets a user's lab: lab.py starts the API emulator, EC2 with fidelity, the node emulator and the controller;
.lab/kubeconfig, aws.env and controller.log are there; an instance launched with boto3 from aws.env becomes a Node
with a Lease; `lab.py partition` turns it Unknown after the grace, `heal` Ready again, terminating it deletes the
Node; `up` twice is a no-op; `down` leaves no process and never signals one that is not the lab's."""

from __future__ import annotations

import json
import os
import subprocess
import time

import boto3
import pytest

from ansible_collections.steward.cluster.plugins.module_utils.kube.client import KubeClient, api_path
from lab.env.controller import wait_for
from lab.kube.api import load_yaml_documents, repo_path
from support.lab_cli import alive, lab

LAB = repo_path('lab', 'lab.py')
PARTS = ('kube', 'ec2', 'nodes', 'pods', 'controller')
GRACE = 2.0


def records(state):
    out = {}
    for part in PARTS:
        with open(os.path.join(state, part + '.pid')) as f:
            out[part] = json.load(f)
    return out


def aws_env(state):
    env = {}
    with open(os.path.join(state, 'aws.env')) as f:
        for line in f:
            if line.startswith('export '):
                key, _sep, value = line[len('export '):].strip().partition('=')
                env[key] = value
    return env


def ready(kube, name):
    node = kube.get_or_none(api_path('v1', 'nodes', None, name))
    if node is None:
        return None
    return next(c['status'] for c in node['status']['conditions'] if c['type'] == 'Ready')


def mcm_pool_of_one(kube, ec2, env, subnet, security_group):
    """A Secret, an MCM AWS MachineClass and a MachineDeployment of 1 as MCM's users have them: one Running
    machine with an instance; deleting the deployment terminates it."""
    ns, group = 'mcm-unchanged', 'machine.sapcloud.io/v1alpha1'
    boto3.client('iam', endpoint_url=env['AWS_ENDPOINT_URL'], region_name=env['AWS_DEFAULT_REGION'],
                 aws_access_key_id=env['AWS_ACCESS_KEY_ID'], aws_secret_access_key=env['AWS_SECRET_ACCESS_KEY'],
                 ).create_instance_profile(InstanceProfileName='contract-nodes')
    kube.create(api_path('v1', 'namespaces'), {'apiVersion': 'v1', 'kind': 'Namespace', 'metadata': {'name': ns}})
    kube.create(api_path('v1', 'secrets', ns), {
        'apiVersion': 'v1', 'kind': 'Secret', 'metadata': {'name': 'cloud'},
        'stringData': {'userData': '#cloud-config\n', 'providerAccessKeyId': env['AWS_ACCESS_KEY_ID'],
                       'providerSecretAccessKey': env['AWS_SECRET_ACCESS_KEY']}})
    kube.create(api_path(group, 'machineclasses', ns), {
        'apiVersion': group, 'kind': 'MachineClass', 'metadata': {'name': 'pool'}, 'provider': 'AWS',
        'providerSpec': {'ami': 'ami-0f1a5f5ada0e7da53', 'region': env['AWS_DEFAULT_REGION'], 'machineType': 't3.medium',
                         'iam': {'name': 'contract-nodes'}, 'keyName': 'ssh',
                         'networkInterfaces': [{'subnetID': subnet, 'securityGroupIDs': [security_group]}],
                         'tags': {'kubernetes.io/cluster/contract': '1', 'kubernetes.io/role/node': '1'}},
        'secretRef': {'name': 'cloud', 'namespace': ns}})
    kube.create(api_path(group, 'machinedeployments', ns), {
        'apiVersion': group, 'kind': 'MachineDeployment', 'metadata': {'name': 'pool'},
        'spec': {'replicas': 1, 'selector': {'matchLabels': {'pool': 'mcm'}},
                 'template': {'metadata': {'labels': {'pool': 'mcm'}},
                              'spec': {'class': {'kind': 'MachineClass', 'name': 'pool'}}}}})

    def running():
        machines = kube.list(api_path(group, 'machines', ns))
        return [m for m in machines if (m.get('status') or {}).get('currentStatus', {}).get('phase') == 'Running']

    def tagged(states):
        found = ec2.describe_instances(Filters=[{'Name': 'tag-key', 'Values': ['kubernetes.io/cluster/contract']},
                                                {'Name': 'instance-state-name', 'Values': states}])
        return [i for r in found['Reservations'] for i in r['Instances']]

    wait_for(lambda: len(running()) == 1, 120, 0.5, 'a Running machine from an unlabelled MachineClass Secret')
    assert len(tagged(['pending', 'running'])) == 1
    kube.delete(api_path(group, 'machinedeployments', ns, 'pool'))
    wait_for(lambda: not tagged(['pending', 'running', 'stopping', 'stopped']), 120, 0.5, 'the instance terminated')


@pytest.fixture
def state(tmp_path):
    state = tmp_path / 'lab'
    yield state
    lab(state, 'down', check=False)  # whatever happened in the test


def test_the_lab_contract(state):
    started = lab(state, 'up', '--only', ','.join(PARTS), '--status-delay', '0.2', '--renew-interval', '0.5',
                  '--grace', str(GRACE), '--delete-after', '1')
    assert 'KUBECONFIG=' in started.stdout
    first = records(state)
    assert all(alive(r) for r in first.values())
    for name in ('kubeconfig', 'aws.env', 'controller.log'):
        assert os.path.exists(os.path.join(state, name)), name

    # The API through .lab/kubeconfig, with every CRD of controller/deploy/crds registered.
    kube = KubeClient.from_config(str(state / 'kubeconfig'))
    wanted = {d['metadata']['name'] for p in sorted(os.listdir(repo_path('controller', 'deploy', 'crds')))
              for d in load_yaml_documents(repo_path('controller', 'deploy', 'crds', p))}
    assert {c['metadata']['name'] for c in kube.list(api_path('apiextensions.k8s.io/v1', 'customresourcedefinitions'))} \
        == wanted

    # EC2 from aws.env, as a user's boto3 would read it.
    env = aws_env(state)
    assert set(env) == {'AWS_ENDPOINT_URL', 'AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY', 'AWS_DEFAULT_REGION'}
    ec2 = boto3.client('ec2', endpoint_url=env['AWS_ENDPOINT_URL'], region_name=env['AWS_DEFAULT_REGION'],
                       aws_access_key_id=env['AWS_ACCESS_KEY_ID'], aws_secret_access_key=env['AWS_SECRET_ACCESS_KEY'])
    # S3 from the same file: the bucket a druid user's Etcd names (docs/etcd-druid.md) is there
    s3 = boto3.client('s3', endpoint_url=env['AWS_ENDPOINT_URL'], region_name=env['AWS_DEFAULT_REGION'],
                      aws_access_key_id=env['AWS_ACCESS_KEY_ID'], aws_secret_access_key=env['AWS_SECRET_ACCESS_KEY'])
    assert 'etcd-backups' in {b['Name'] for b in s3.list_buckets()['Buckets']}
    vpc = ec2.create_vpc(CidrBlock='10.0.0.0/16')['Vpc']['VpcId']
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock='10.0.1.0/24')['Subnet']['SubnetId']
    instance = ec2.run_instances(ImageId='ami-0f1a5f5ada0e7da53', MinCount=1, MaxCount=1, InstanceType='t3.medium',
                                 SubnetId=subnet)['Instances'][0]
    name = instance['PrivateDnsName']
    wait_for(lambda: ready(kube, name) == 'True', 60, 0.2, 'the Node of the instance')
    node = kube.get(api_path('v1', 'nodes', None, name))
    assert node['spec']['providerID'] == 'aws:///%s/%s' % (env['AWS_DEFAULT_REGION'], instance['InstanceId'])
    assert kube.get_or_none(api_path('coordination.k8s.io/v1', 'leases', 'kube-node-lease', name)) is not None

    # Faults on demand, through the state dir the running node emulator re-reads.
    lab(state, 'partition', '--nodes', name)
    wait_for(lambda: ready(kube, name) == 'Unknown', 4 * GRACE + 30, 0.2, 'Ready Unknown')
    lab(state, 'heal')
    wait_for(lambda: ready(kube, name) == 'True', 30, 0.2, 'Ready again')
    ec2.terminate_instances(InstanceIds=[instance['InstanceId']])
    wait_for(lambda: kube.get_or_none(api_path('v1', 'nodes', None, name)) is None, 60, 0.2, 'the Node deleted')

    # MCM's manifests unchanged on the lab: a MachineClass whose Secret has no opt-in label gets its machine
    # (the lab's controller runs with --machine-secret-opt-in false; the product's default is on).
    group_id = ec2.create_security_group(GroupName='nodes', Description='nodes', VpcId=vpc)['GroupId']
    mcm_pool_of_one(kube, ec2, env, subnet, group_id)

    # status reports every part; up again changes nothing; the controller runs and logs.
    status = lab(state, 'status', check=False)
    for part in PARTS:
        assert part in status.stdout
    assert 'UNHEALTHY' not in status.stdout, status.stdout
    lab(state, 'up', '--only', ','.join(PARTS), '--status-delay', '0.2', '--renew-interval', '0.5',
        '--grace', str(GRACE), '--delete-after', '1')
    assert records(state) == first
    wait_for(lambda: os.path.getsize(state / 'controller.log') > 0, 30, 0.2, 'controller log lines')
    # its watches log in with --kubeconfig too (kopf alone reads only $KUBECONFIG or ~/.kube/config)
    log = (state / 'controller.log').read_text(errors='replace')
    assert 'Cannot authenticate' not in log and 'LoginError' not in log, log[-3000:]
    kube.close()

    stopped = lab(state, 'down')
    assert all(part in stopped.stdout for part in PARTS)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(alive(r) for r in first.values()):
        time.sleep(0.1)
    assert not [p for p, r in first.items() if alive(r)]


def test_down_never_signals_a_process_the_lab_did_not_start(state):
    os.makedirs(state)
    bystander = subprocess.Popen(['sleep', '300'])
    try:
        # A stale pid file naming another program (as after a reboot), and one with the right pid but
        # another start time: neither is the lab's.
        with open(state / 'kube.pid', 'w') as f:
            json.dump({'pid': bystander.pid, 'start_time': '1', 'argv': ['sleep', '300']}, f)
        with open(state / 'nodes.pid', 'w') as f:
            json.dump({'pid': bystander.pid, 'start_time': None, 'argv': ['python', 'lab/cloud/nodes.py']}, f)
        lab(state, 'down')
        assert bystander.poll() is None
        assert not os.path.exists(state / 'kube.pid') and not os.path.exists(state / 'nodes.pid')
    finally:
        bystander.kill()
        bystander.wait()
