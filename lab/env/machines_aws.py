"""An EC2 network for machine tests on the moto server: VPC, subnet, security group, instance profile, and an
MCM-style AWS MachineClass providerSpec that uses them (what a user creates with boto3 before a MachineClass)."""

from __future__ import annotations

import uuid
from typing import Any, Dict

import boto3
from botocore.config import Config

KEYS = {'aws_access_key_id': 'AKIDSTEWARDTEST', 'aws_secret_access_key': 'steward-test-secret'}


def ec2_client(url: str, region: str, lab: bool = False):
    """A boto3 EC2 client; `lab` marks its calls as lab machinery (the fidelity layer neither counts nor limits them)."""
    config = Config(user_agent_extra='steward-lab/tests') if lab else None
    return boto3.client('ec2', endpoint_url=url, region_name=region, config=config, **KEYS)


def make_network(url: str, region: str) -> Dict[str, str]:
    ec2 = ec2_client(url, region, lab=True)
    vpc = ec2.create_vpc(CidrBlock='10.0.0.0/16')['Vpc']['VpcId']
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock='10.0.%d.0/24' % (uuid.uuid4().int % 250))['Subnet']['SubnetId']
    group = ec2.create_security_group(GroupName='nodes-' + uuid.uuid4().hex[:8], Description='nodes', VpcId=vpc)['GroupId']
    profile = 'nodes-' + uuid.uuid4().hex[:8]
    boto3.client('iam', endpoint_url=url, region_name=region, **KEYS).create_instance_profile(InstanceProfileName=profile)
    ami = ec2.describe_images(Owners=['amazon'])['Images'][0]['ImageId']     # the lab serves a few AMIs, not moto's 1,300
    return {'vpc': vpc, 'subnet': subnet, 'group': group, 'profile': profile, 'ami': ami}


def provider_spec(net: Dict[str, str], region: str, cluster: str, **extra: Any) -> Dict[str, Any]:
    spec = {'ami': net['ami'], 'region': region, 'machineType': 'm5.large', 'iam': {'name': net['profile']},
            'keyName': 'ssh', 'networkInterfaces': [{'subnetID': net['subnet'], 'securityGroupIDs': [net['group']]}],
            'blockDevices': [{'ebs': {'volumeSize': 20, 'volumeType': 'gp3'}}],
            'tags': {'kubernetes.io/cluster/%s' % cluster: '1', 'kubernetes.io/role/node': '1'}}
    spec.update(extra)
    return spec


def secret_data(user_data: str = '#cloud-config\n') -> Dict[str, str]:
    return {'userData': user_data, 'providerAccessKeyId': KEYS['aws_access_key_id'],
            'providerSecretAccessKey': KEYS['aws_secret_access_key']}


def instances(url: str, region: str, cluster: str, states=('pending', 'running')) -> list:
    ec2 = ec2_client(url, region, lab=True)
    out = []
    for page in ec2.get_paginator('describe_instances').paginate(Filters=[
            {'Name': 'tag-key', 'Values': ['kubernetes.io/cluster/%s' % cluster]},
            {'Name': 'instance-state-name', 'Values': list(states)}]):
        for reservation in page['Reservations']:
            out.extend(reservation['Instances'])
    return out
