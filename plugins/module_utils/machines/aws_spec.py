# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""An MCM AWS MachineClass, read and checked, and the EC2 requests it becomes (pure, no boto3).

The providerSpec and Secret keys are machine-controller-manager-provider-aws's, so a class written for MCM
works unchanged: `ami`, `region`, `machineType`, `iam` (name or arn), `keyName`, `networkInterfaces`
(subnetID, securityGroupIDs, ...), `blockDevices` (deviceName, ebs: volumeSize, volumeType, iops, ...),
`tags` (one key containing `kubernetes.io/cluster/`, one containing `kubernetes.io/role/`),
`srcAndDstChecksEnabled`, `instanceMetadataOptions`, `cpuOptions`, `placement`, `capacityReservation`,
`spotPrice` / `instanceMarketOptions`; the Secret holds `userData` and `providerAccessKeyId` /
`providerSecretAccessKey` (or `accessKeyID` / `secretAccessKey`).

Differences from MCM's driver: every RunInstances carries a ClientToken derived from the Machine's UID (a
retry after a crash returns the same instance), and the instance, its volumes and its network interfaces are
tagged with the Machine's UID and the class's UID (what orphan collection and the status lookup trust).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput, field_of
from ansible_collections.steward.cluster.plugins.module_utils.machines.constants import CLASS_TAG, OWNER_TAG

CLUSTER_TAG_PART = 'kubernetes.io/cluster/'
ROLE_TAG_PART = 'kubernetes.io/role/'
VOLUME_TYPES = ('standard', 'io1', 'io2', 'gp2', 'gp3', 'sc1', 'st1')
ROOT_DEVICE = '/root'
DATA_DEVICE = re.compile(r'^/dev/(sd[a-z]|xvd[a-z]{1,2})$')
ALL_STATES = ('pending', 'running', 'shutting-down', 'terminated', 'stopping', 'stopped')
PROVIDER = 'AWS'
CLIENT_TOKEN_PREFIX = 'steward-'


@dataclasses.dataclass(frozen=True)
class AWSCredentials:
    access_key_id: str
    secret_access_key: str

    def __repr__(self) -> str:   # never the secret
        return 'AWSCredentials(%s...)' % self.access_key_id[:4]


@dataclasses.dataclass(frozen=True)
class AWSSpec:
    raw: Mapping[str, Any]
    region: str
    ami: str
    machine_type: str
    cluster_tag: str
    role_tag: str
    tags: Mapping[str, str]
    user_data: str
    credentials: AWSCredentials
    src_dst_checks: Optional[bool]


def _required_text(spec: Mapping[str, Any], key: str, field: str) -> str:
    value = spec.get(key)
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(field_of(field, key), 'required', '%s is required' % key, value)
    return value.strip()


def _secret_value(secret: Mapping[str, str], *keys: str) -> str:
    for key in keys:
        if secret.get(key):
            return secret[key]
    return ''


def parse(provider: str, provider_spec: Any, secret: Mapping[str, str]) -> AWSSpec:
    """Check a class the way MCM's AWS driver validates it; raises InvalidInput naming the field
    (`providerSpec.networkInterfaces[0].subnetID`, `secretRef.userData`)."""
    if provider != PROVIDER:
        raise InvalidInput('provider', 'one-of', "requested for provider %r, this driver supports only 'AWS'" % provider, provider)
    if not isinstance(provider_spec, Mapping):
        raise InvalidInput('providerSpec', 'object', 'must be a mapping', None)
    f = 'providerSpec'
    region = _required_text(provider_spec, 'region', f)
    ami = _required_text(provider_spec, 'ami', f)
    machine_type = _required_text(provider_spec, 'machineType', f)
    iam = provider_spec.get('iam') or {}
    if not isinstance(iam, Mapping) or bool(iam.get('name')) == bool(iam.get('arn')):
        raise InvalidInput('providerSpec.iam', 'one-of', 'either IAM name or arn must be set (not both)', None)
    tags = provider_spec.get('tags') or {}
    if not isinstance(tags, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in tags.items()):
        raise InvalidInput('providerSpec.tags', 'string-map', 'tags must map strings to strings', None)
    cluster = next((k for k in tags if CLUSTER_TAG_PART in k), '')
    role = next((k for k in tags if ROLE_TAG_PART in k), '')
    if not cluster:
        raise InvalidInput('providerSpec.tags', 'required', 'a tag of the form %s**** is required' % CLUSTER_TAG_PART, None)
    if not role:
        raise InvalidInput('providerSpec.tags', 'required', 'a tag of the form %s**** is required' % ROLE_TAG_PART, None)
    _check_network_interfaces(provider_spec.get('networkInterfaces'))
    _check_block_devices(provider_spec.get('blockDevices') or [])
    checks = provider_spec.get('srcAndDstChecksEnabled')
    if checks is not None and not isinstance(checks, bool):
        raise InvalidInput('providerSpec.srcAndDstChecksEnabled', 'boolean', 'expected true or false', checks)
    user_data = secret.get('userData') or ''
    if not user_data:
        raise InvalidInput('secretRef.userData', 'required', 'the secret must contain userData', None)
    if secret.get('workloadIdentityTokenFile'):
        raise InvalidInput('secretRef.workloadIdentityTokenFile', 'unsupported',
                           'workload identity is not supported by this driver; use access keys', None)
    key_id = _secret_value(secret, 'providerAccessKeyId', 'accessKeyID')
    key = _secret_value(secret, 'providerSecretAccessKey', 'secretAccessKey')
    if not key_id:
        raise InvalidInput('secretRef.providerAccessKeyId', 'required', 'mention at least providerAccessKeyId or accessKeyID', None)
    if not key:
        raise InvalidInput('secretRef.providerSecretAccessKey', 'required',
                           'mention at least providerSecretAccessKey or secretAccessKey', None, secret=True)
    return AWSSpec(raw=provider_spec, region=region, ami=ami, machine_type=machine_type, cluster_tag=cluster, role_tag=role,
                   tags=dict(tags), user_data=user_data, credentials=AWSCredentials(key_id, key), src_dst_checks=checks)


def _check_network_interfaces(value: Any) -> None:
    field = 'providerSpec.networkInterfaces'
    if not isinstance(value, list) or not value:
        raise InvalidInput(field, 'required', 'mention at least one network interface', value)
    for i, nic in enumerate(value):
        where = field_of(field, i)
        if not isinstance(nic, Mapping):
            raise InvalidInput(where, 'object', 'must be a mapping', nic)
        _required_text(nic, 'subnetID', where)
        groups = nic.get('securityGroupIDs')
        if not isinstance(groups, list) or not groups or not all(isinstance(g, str) and g for g in groups):
            raise InvalidInput(field_of(where, 'securityGroupIDs'), 'required', 'mention at least one securityGroupID', groups)


def _check_block_devices(devices: Any) -> None:
    field = 'providerSpec.blockDevices'
    if not isinstance(devices, list):
        raise InvalidInput(field, 'list', 'must be a list', devices)
    roots = 0
    names: Dict[str, int] = {}
    for i, disk in enumerate(devices):
        where = field_of(field, i)
        if not isinstance(disk, Mapping):
            raise InvalidInput(where, 'object', 'must be a mapping', disk)
        name = disk.get('deviceName') or ''
        if name == ROOT_DEVICE:
            roots += 1
        elif len(devices) > 1 and not DATA_DEVICE.match(name):
            raise InvalidInput(field_of(where, 'deviceName'), 'pattern', 'device name %r does not match %s' % (
                name, DATA_DEVICE.pattern), name)
        names[name] = names.get(name, 0) + 1
        ebs = disk.get('ebs') or {}
        if ebs.get('volumeType') not in VOLUME_TYPES:
            raise InvalidInput(field_of(where, 'ebs.volumeType'), 'one-of', 'must be one of %s' % ', '.join(VOLUME_TYPES),
                               ebs.get('volumeType'))
        size = ebs.get('volumeSize')
        if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
            raise InvalidInput(field_of(where, 'ebs.volumeSize'), 'positive', 'mention a valid EBS volume size', size)
        iops = ebs.get('iops', 0)
        if isinstance(iops, bool) or not isinstance(iops, int) or iops < 0 or (ebs.get('volumeType') == 'io1' and iops == 0):
            raise InvalidInput(field_of(where, 'ebs.iops'), 'positive', 'mention a valid EBS volume iops', iops)
    if roots > 1 or (roots == 0 and len(devices) > 1):
        raise InvalidInput(field, 'one-root', 'exactly one device must be the root (%s)' % ROOT_DEVICE, None)
    duplicates = sorted(n for n, c in names.items() if c > 1)
    if duplicates:
        raise InvalidInput(field, 'unique', 'device name %r is used more than once' % duplicates[0], duplicates[0])


def client_token(machine_uid: str) -> str:
    """RunInstances' idempotency token: fixed for the Machine's life (EC2 allows 64 ASCII characters)."""
    return (CLIENT_TOKEN_PREFIX + machine_uid)[:64]


def instance_tags(spec: AWSSpec, machine_name: str, machine_uid: str, class_uid: str) -> List[Dict[str, str]]:
    """MCM's tags (the class's, Name forced to the machine) plus the owner and class tags."""
    tags = {k: v for k, v in spec.tags.items() if k != 'Name'}
    tags.update({'Name': machine_name, OWNER_TAG: machine_uid, CLASS_TAG: class_uid})
    return [{'Key': k, 'Value': v} for k, v in sorted(tags.items())]


def block_device_mappings(spec: AWSSpec, root_device_name: Optional[str]) -> List[Dict[str, Any]]:
    devices = spec.raw.get('blockDevices') or []
    out = []
    for disk in devices:
        name = disk.get('deviceName') or ''
        if name == ROOT_DEVICE or len(devices) == 1:
            if not root_device_name:
                raise InvalidInput('providerSpec.blockDevices', 'root-device', 'the AMI %s has no root device name' % spec.ami, None)
            name = root_device_name
        ebs = disk.get('ebs') or {}
        mapped: Dict[str, Any] = {'Encrypted': bool(ebs.get('encrypted')), 'VolumeSize': ebs['volumeSize'],
                                  'VolumeType': ebs['volumeType'],
                                  'DeleteOnTermination': ebs.get('deleteOnTermination', True) is not False}
        if ebs.get('iops'):
            mapped['Iops'] = ebs['iops']
        if ebs.get('throughput'):
            mapped['Throughput'] = ebs['throughput']
        if ebs.get('snapshotID'):
            mapped['SnapshotId'] = ebs['snapshotID']
        if ebs.get('kmsKeyID'):
            mapped['KmsKeyId'] = ebs['kmsKeyID']
        out.append({'DeviceName': name, 'Ebs': mapped})
    return out


def network_interfaces(spec: AWSSpec) -> List[Dict[str, Any]]:
    out = []
    for i, nic in enumerate(spec.raw.get('networkInterfaces') or []):
        item: Dict[str, Any] = {'DeviceIndex': nic.get('deviceIndex', i), 'SubnetId': nic['subnetID'],
                                'Groups': list(nic['securityGroupIDs']),
                                'DeleteOnTermination': nic.get('deleteOnTermination', True) is not False}
        for ours, theirs in (('associatePublicIPAddress', 'AssociatePublicIpAddress'), ('description', 'Description'),
                             ('ipv6AddressCount', 'Ipv6AddressCount'), ('interfaceType', 'InterfaceType'),
                             ('networkCardIndex', 'NetworkCardIndex')):
            if nic.get(ours) is not None:
                item[theirs] = nic[ours]
        out.append(item)
    return out


def run_instances_params(spec: AWSSpec, machine_name: str, machine_uid: str, class_uid: str,
                         root_device_name: Optional[str]) -> Dict[str, Any]:
    """RunInstances for one machine (MinCount = MaxCount = 1) with the ClientToken; boto3 base64-encodes UserData."""
    tags = instance_tags(spec, machine_name, machine_uid, class_uid)
    iam = spec.raw.get('iam') or {}
    params: Dict[str, Any] = {
        'ImageId': spec.ami, 'InstanceType': spec.machine_type, 'MinCount': 1, 'MaxCount': 1,
        'UserData': spec.user_data, 'ClientToken': client_token(machine_uid),
        'IamInstanceProfile': {'Name': iam['name']} if iam.get('name') else {'Arn': iam['arn']},
        'NetworkInterfaces': network_interfaces(spec),
        'TagSpecifications': [{'ResourceType': kind, 'Tags': tags} for kind in ('instance', 'volume', 'network-interface')],
    }
    devices = block_device_mappings(spec, root_device_name)
    if devices:
        params['BlockDeviceMappings'] = devices
    raw = spec.raw
    if raw.get('keyName'):
        params['KeyName'] = raw['keyName']
    if raw.get('ebsOptimized'):
        params['EbsOptimized'] = True
    if raw.get('monitoring'):
        params['Monitoring'] = {'Enabled': True}
    metadata = raw.get('instanceMetadataOptions') or {}
    if metadata:
        params['MetadataOptions'] = {k2: metadata[k1] for k1, k2 in (
            ('httpEndpoint', 'HttpEndpoint'), ('httpPutResponseHopLimit', 'HttpPutResponseHopLimit'),
            ('httpTokens', 'HttpTokens'), ('httpProtocolIpv6', 'HttpProtocolIpv6')) if metadata.get(k1) is not None}
    cpu = raw.get('cpuOptions') or {}
    if cpu.get('coreCount') and cpu.get('threadsPerCore'):
        params['CpuOptions'] = {'CoreCount': cpu['coreCount'], 'ThreadsPerCore': cpu['threadsPerCore']}
    placement = raw.get('placement') or {}
    if placement:
        params['Placement'] = {k2: placement[k1] for k1, k2 in (
            ('tenancy', 'Tenancy'), ('groupId', 'GroupId'), ('hostId', 'HostId'), ('partitionNumber', 'PartitionNumber'),
            ('affinity', 'Affinity')) if placement.get(k1) is not None}
    market = raw.get('instanceMarketOptions') or {}
    if market.get('marketType'):
        params['InstanceMarketOptions'] = {'MarketType': market['marketType']}
    elif raw.get('spotPrice') is not None:
        spot: Dict[str, Any] = {'SpotInstanceType': 'one-time'}
        if raw['spotPrice']:
            spot['MaxPrice'] = raw['spotPrice']
        params['InstanceMarketOptions'] = {'MarketType': 'spot', 'SpotOptions': spot}
    reservation = raw.get('capacityReservation') or {}
    if reservation:
        target = {k2: reservation[k1] for k1, k2 in (
            ('capacityReservationId', 'CapacityReservationId'),
            ('capacityReservationResourceGroupArn', 'CapacityReservationResourceGroupArn')) if reservation.get(k1)}
        params['CapacityReservationSpecification'] = dict(
            {'CapacityReservationPreference': reservation['capacityReservationPreference']}
            if reservation.get('capacityReservationPreference') else {},
            **({'CapacityReservationTarget': target} if target else {}))
    return params


def describe_filters(spec: AWSSpec) -> List[Dict[str, Any]]:
    """The wave: every instance with the class's cluster and role tag keys, in any state (terminated ones are
    evidence), as MCM-aws's orphan listing filters them."""
    return [{'Name': 'tag-key', 'Values': [spec.cluster_tag]}, {'Name': 'tag-key', 'Values': [spec.role_tag]},
            {'Name': 'instance-state-name', 'Values': list(ALL_STATES)}]


def provider_id(region: str, instance: str) -> str:
    return 'aws:///%s/%s' % (region, instance)


def instance_id(provider_id_value: str) -> Tuple[str, str]:
    """(region, instance id) from `aws:///<region>/<id>`; raises InvalidInput for anything else."""
    match = re.match(r'^aws:///([^/]+)/(i-[0-9a-zA-Z]+)$', provider_id_value or '')
    if not match:
        raise InvalidInput('spec.providerID', 'aws-provider-id', 'expected aws:///<region>/<instance-id>, got %r' % (
            provider_id_value,), provider_id_value)
    return match.group(1), match.group(2)


def volume_id(pv_spec: Mapping[str, Any]) -> Optional[str]:
    """GetVolumeIDs for one PV spec: in-tree awsElasticBlockStore or the EBS CSI driver; None for other volumes."""
    ebs = pv_spec.get('awsElasticBlockStore') or {}
    if ebs.get('volumeID'):
        return str(ebs['volumeID']).rsplit('/', 1)[-1]
    csi = pv_spec.get('csi') or {}
    if csi.get('driver') == 'ebs.csi.aws.com' and csi.get('volumeHandle'):
        return str(csi['volumeHandle'])
    return None
