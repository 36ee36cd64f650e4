"""A test double of a machine driver for the answers EC2 never gives: InitializeMachine answering UNINITIALIZED
(17) until the test allows it, or UNIMPLEMENTED (12). MCM's acceptance 16 needs both; the AWS driver has nothing
to initialize unless `srcAndDstChecksEnabled: false`, and EC2 then either works or fails with its own codes.

The VMs are real instances on the lab's EC2 (the controller's AWS_ENDPOINT_URL, the class Secret's keys), so the
bench's kubelets register their Nodes as for any instance. MachineClass (`provider: InitFault`):

    providerSpec: {ami, subnet, region, tags: {kubernetes.io/cluster/<c>: '1', kubernetes.io/role/node: '1'},
                   initialize: uninitialized | unimplemented}

`uninitialized`: InitializeMachine fails with UNINITIALIZED until the instance carries the tag ALLOW_TAG (the
test sets it), then tags it INITIALIZED_TAG and succeeds; the listing reports `needs_init` until then. It is the
controller's counterpart only through the driver interface (driver.py's types and MCM's codes); it imports
nothing of the AWS driver or the engine's decisions.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

from ansible_collections.steward.cluster.plugins.module_utils.machines.codes import Call, Code
from ansible_collections.steward.cluster.plugins.module_utils.machines.driver import (
    VM, ClassContext, CreateResult, Driver, MachineContext, VMState)
from ansible_collections.steward.cluster.plugins.module_utils.machines.errors import DriverError

PROVIDER = 'InitFault'
ALLOW_TAG = 'fault.steward.io/allow-init'
INITIALIZED_TAG = 'fault.steward.io/initialized'
OWNER_TAG = 'machine.steward.io/owner-uid'       # the documented tags, spelled out (docs/machines.md)
CLASS_TAG = 'machine.steward.io/class-uid'
LIVE = ('pending', 'running', 'stopping', 'stopped', 'shutting-down', 'terminated')


class InitFaultDriver(Driver):
    provider = PROVIDER

    def _ec2(self, cls: ClassContext) -> Any:
        return boto3.client('ec2', endpoint_url=os.environ['AWS_ENDPOINT_URL'], region_name=cls.provider_spec['region'],
                            aws_access_key_id=cls.secret['providerAccessKeyId'],
                            aws_secret_access_key=cls.secret['providerSecretAccessKey'],
                            config=Config(retries={'max_attempts': 1}))

    @staticmethod
    def _pid(machine_class: ClassContext, instance_id: str) -> str:
        return 'aws:///%s/%s' % (machine_class.provider_spec['region'], instance_id)

    def create_machine(self, cls: ClassContext, machine: MachineContext) -> CreateResult:
        tags = dict(cls.provider_spec['tags'], Name=machine.name, **{OWNER_TAG: machine.uid, CLASS_TAG: cls.uid})
        answer = self._ec2(cls).run_instances(
            ImageId=cls.provider_spec['ami'], InstanceType='m5.large', MinCount=1, MaxCount=1,
            SubnetId=cls.provider_spec['subnet'], ClientToken='fault-' + machine.uid,
            TagSpecifications=[{'ResourceType': 'instance', 'Tags': [{'Key': k, 'Value': v} for k, v in tags.items()]}])
        inst = answer['Instances'][0]
        return CreateResult(self._pid(cls, inst['InstanceId']), inst['PrivateDnsName'])

    def initialize_machine(self, cls: ClassContext, machine: MachineContext) -> CreateResult:
        if cls.provider_spec.get('initialize') == 'unimplemented':
            raise DriverError(Code.UNIMPLEMENTED, 'InitializeMachine is not implemented', Call.INITIALIZE)
        instance_id = machine.provider_id.rsplit('/', 1)[-1]
        ec2 = self._ec2(cls)
        inst = ec2.describe_instances(InstanceIds=[instance_id])['Reservations'][0]['Instances'][0]
        tags = {t['Key'] for t in inst.get('Tags') or []}
        if ALLOW_TAG not in tags:
            raise DriverError(Code.UNINITIALIZED, 'instance %s: its network interface is not attached yet' % instance_id,
                              Call.INITIALIZE)
        ec2.create_tags(Resources=[instance_id], Tags=[{'Key': INITIALIZED_TAG, 'Value': 'true'}])
        return CreateResult(machine.provider_id, inst['PrivateDnsName'])

    def delete_machine(self, cls: ClassContext, machine: MachineContext) -> str:
        ids = [vm.provider_id.rsplit('/', 1)[-1] for vm in self.list_vms(cls)
               if vm.provider_id == machine.provider_id or (machine.uid and vm.owner_uid == machine.uid)]
        if not ids:
            return 'no VM'
        try:
            self._ec2(cls).terminate_instances(InstanceIds=ids)
        except ClientError as exc:
            if not exc.response['Error']['Code'].startswith('InvalidInstanceID.NotFound'):
                raise DriverError(Code.INTERNAL, str(exc), Call.DELETE) from None
        return 'terminated'

    def list_vms(self, cls: ClassContext) -> List[VM]:
        out: List[VM] = []
        pages = self._ec2(cls).get_paginator('describe_instances').paginate(Filters=[
            {'Name': 'tag:' + CLASS_TAG, 'Values': [cls.uid]}, {'Name': 'instance-state-name', 'Values': list(LIVE)}])
        for page in pages:
            for reservation in page['Reservations']:
                for inst in reservation['Instances']:
                    tags: Dict[str, str] = {t['Key']: t['Value'] for t in inst.get('Tags') or []}
                    out.append(VM(provider_id=self._pid(cls, inst['InstanceId']), node_name=inst['PrivateDnsName'],
                                  machine_name=tags.get('Name', ''), owner_uid=tags.get(OWNER_TAG, ''),
                                  class_uid=tags.get(CLASS_TAG, ''), state=VMState(inst['State']['Name']),
                                  launched=inst['LaunchTime'].timestamp(),
                                  needs_init=cls.provider_spec.get('initialize') != 'unimplemented'
                                  and INITIALIZED_TAG not in tags))
        return out
