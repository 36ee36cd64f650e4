"""Nodes and node Leases as a kubelet writes them, and the conditions the node lifecycle controller sets, for the
lab's node emulator (lab/cloud/nodes.py). Pure functions over plain dicts; `now` is a Unix time passed in.
"""

from __future__ import annotations

import datetime
import ipaddress
import logging
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Optional

LOG = logging.getLogger('lab.nodes')
MARKER = 'lab.steward.io/node-emulator'
LEASE_NAMESPACE = 'kube-node-lease'
CLAIM_PREFIX = 'sabakan-claim-'
SERIAL_LABEL = 'machine.steward.io/sabakan-serial'
ADDRESS_ANNOTATION = 'machine.steward.io/sabakan-address'
UNREACHABLE = 'node.kubernetes.io/unreachable'
KUBELET_VERSION = 'v1.31.4'
# The kubelet an instance runs: the tag the cluster upgrade puts on a pool's new MachineClass (AWS providerSpec.tags,
# copied to the instance; plugins/module_utils/provisioning/upgrade/pools.py), else KUBELET_VERSION. A real image
# runs the kubelet its AMI or user data installs; the lab has no kubelet to install, so the tag stands in for it.
# A sabakan claim carries the same key as an annotation once an in-place update applied a class naming it
# (plugins/module_utils/machines/sabakan_driver.py UpdateMachine): the kubelet restarts at that version.
KUBELET_VERSION_TAG = 'machine.steward.io/kubelet-version'
EC2_STATES = ['running', 'stopping', 'stopped', 'shutting-down', 'terminated']
PRESSURE = (('MemoryPressure', 'KubeletHasSufficientMemory', 'kubelet has sufficient memory available'),
            ('DiskPressure', 'KubeletHasNoDiskPressure', 'kubelet has no disk pressure'),
            ('PIDPressure', 'KubeletHasSufficientPID', 'kubelet has sufficient PID available'))
# (vCPU, memory GiB) of the instance types a lab is likely to use; others get 2 / 4.
INSTANCE_TYPES = {'t3.nano': (2, 0.5), 't3.micro': (2, 1), 't3.small': (2, 2), 't3.medium': (2, 4),
                  't3.large': (2, 8), 't3.xlarge': (4, 16), 'm5.large': (2, 8), 'm5.xlarge': (4, 16),
                  'm5.2xlarge': (8, 32), 'c5.large': (2, 4), 'c5.xlarge': (4, 8), 'r5.large': (2, 16),
                  'm6g.large': (2, 8), 'm7i.large': (2, 8)}


# --- targets ----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Target:
    """A machine that should (or should no longer) have a Node."""
    name: str
    provider_id: str
    address: str
    alive: bool              # a kubelet runs on it
    gone: bool               # terminated / released: its Node goes after delete_after
    instance_type: str = ''
    region: str = ''
    zone: str = ''
    arch: str = 'amd64'
    kubelet_version: str = KUBELET_VERSION


def instance_kubelet_version(instance: Dict[str, Any]) -> str:
    """The kubelet version an EC2 instance's kubelet reports (KUBELET_VERSION_TAG, else KUBELET_VERSION)."""
    tags = {t.get('Key'): t.get('Value') for t in instance.get('Tags') or []}
    return tags.get(KUBELET_VERSION_TAG) or KUBELET_VERSION


def ec2_targets(instances: Iterable[Dict[str, Any]], region: str) -> Dict[str, Target]:
    targets = {}
    for inst in instances:
        name = inst.get('PrivateDnsName')
        state = (inst.get('State') or {}).get('Name')
        if not name or state not in EC2_STATES:
            continue
        targets[name] = Target(
            name=name, provider_id='aws:///%s/%s' % (region, inst['InstanceId']),
            address=inst.get('PrivateIpAddress', ''), alive=state == 'running', gone=state == 'terminated',
            instance_type=inst.get('InstanceType', ''), region=region,
            zone=(inst.get('Placement') or {}).get('AvailabilityZone', ''),
            arch='arm64' if inst.get('Architecture') == 'arm64' else 'amd64',
            kubelet_version=instance_kubelet_version(inst))
    return targets


def sabakan_targets(claims: Iterable[Dict[str, Any]]) -> Dict[str, Target]:
    targets = {}
    for claim in claims:
        md = claim.get('metadata') or {}
        serial = (md.get('labels') or {}).get(SERIAL_LABEL)
        address = (md.get('annotations') or {}).get(ADDRESS_ANNOTATION, '')
        if not serial or md.get('name') != CLAIM_PREFIX + serial or md.get('deletionTimestamp'):
            continue
        try:
            ipaddress.IPv4Address(address)
        except ValueError:
            LOG.warning('claim %s/%s: %s %r is not an IPv4 address; no node', md.get('namespace'), md.get('name'),
                        ADDRESS_ANNOTATION, address)
            continue
        targets[address] = Target(name=address, provider_id='sabakan:///%s' % serial, address=address, alive=True,
                                  gone=False, kubelet_version=(md.get('annotations') or {}).get(KUBELET_VERSION_TAG)
                                  or KUBELET_VERSION)
    return targets


# --- objects ----------------------------------------------------------------------------------------------------
def micro_time(ts: float) -> str:
    return datetime.datetime.fromtimestamp(ts, datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%S.%fZ')


def rfc3339(ts: float) -> str:
    return datetime.datetime.fromtimestamp(ts, datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ')


def parse_time(text: Optional[str]) -> Optional[float]:
    if not text:
        return None
    try:
        return datetime.datetime.fromisoformat(text.replace('Z', '+00:00')).timestamp()
    except ValueError:
        return None


def ready_conditions(now: float, previous: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """What a healthy kubelet posts: Ready True, the pressure conditions False (transition times kept)."""
    wanted = [(kind, 'False', reason, message) for kind, reason, message in PRESSURE]
    wanted.append(('Ready', 'True', 'KubeletReady', 'kubelet is posting ready status'))
    return _conditions(now, previous, wanted)


def unknown_conditions(now: float, previous: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """What the node lifecycle controller writes when the kubelet stopped posting (heartbeats kept)."""
    wanted = [(kind, 'Unknown', 'NodeStatusUnknown', 'Kubelet stopped posting node status.')
              for kind in [p[0] for p in PRESSURE] + ['Ready']]
    return _conditions(now, previous, wanted, heartbeat=False)


def _conditions(now: float, previous: List[Dict[str, Any]], wanted: List[Any],
                heartbeat: bool = True) -> List[Dict[str, Any]]:
    old = {c.get('type'): c for c in previous}
    out = [c for c in previous if c.get('type') not in {w[0] for w in wanted}]  # others' conditions stay
    for kind, status, reason, message in wanted:
        before = old.get(kind, {})
        out.append({'type': kind, 'status': status, 'reason': reason, 'message': message,
                    'lastHeartbeatTime': rfc3339(now) if heartbeat else before.get('lastHeartbeatTime', rfc3339(now)),
                    'lastTransitionTime': before.get('lastTransitionTime', rfc3339(now))
                    if before.get('status') == status else rfc3339(now)})
    return out


def node_object(target: Target, now: float) -> Dict[str, Any]:
    """The Node a kubelet registers for this machine."""
    cpu, memory = INSTANCE_TYPES.get(target.instance_type, (2, 4))
    labels = {'kubernetes.io/hostname': target.name, 'kubernetes.io/os': 'linux', 'kubernetes.io/arch': target.arch,
              'beta.kubernetes.io/os': 'linux', 'beta.kubernetes.io/arch': target.arch}
    if target.instance_type:
        labels['node.kubernetes.io/instance-type'] = target.instance_type
    if target.region:
        labels['topology.kubernetes.io/region'] = target.region
    if target.zone:
        labels['topology.kubernetes.io/zone'] = target.zone
    resources = {'cpu': str(cpu), 'memory': '%dKi' % int(memory * 1024 * 1024), 'pods': '110',
                 'ephemeral-storage': '20959212Ki'}
    addresses = [{'type': 'InternalIP', 'address': target.address}] if target.address else []
    addresses.append({'type': 'Hostname', 'address': target.name})
    if target.provider_id.startswith('aws:'):
        addresses.append({'type': 'InternalDNS', 'address': target.name})
    return {
        'apiVersion': 'v1', 'kind': 'Node',
        'metadata': {'name': target.name, 'labels': labels,
                     'annotations': {MARKER: 'true', 'node.alpha.kubernetes.io/ttl': '0',
                                     'volumes.kubernetes.io/controller-managed-attach-detach': 'true'}},
        'spec': {'providerID': target.provider_id},
        'status': {'capacity': dict(resources), 'allocatable': dict(resources), 'addresses': addresses,
                   'conditions': ready_conditions(now, []),
                   'daemonEndpoints': {'kubeletEndpoint': {'Port': 10250}},
                   'nodeInfo': {'kubeletVersion': target.kubelet_version, 'kubeProxyVersion': target.kubelet_version,
                                'operatingSystem': 'linux', 'architecture': target.arch,
                                'containerRuntimeVersion': 'containerd://1.7.24', 'osImage': 'Lab Linux',
                                'kernelVersion': '6.6.0-lab', 'machineID': '', 'systemUUID': '', 'bootID': ''}}}


def lease_object(node: Dict[str, Any], now: float, duration: int) -> Dict[str, Any]:
    md = node['metadata']
    return {'apiVersion': 'coordination.k8s.io/v1', 'kind': 'Lease',
            'metadata': {'name': md['name'], 'namespace': LEASE_NAMESPACE,
                         'ownerReferences': [{'apiVersion': 'v1', 'kind': 'Node', 'name': md['name'],
                                              'uid': md.get('uid', '')}]},
            'spec': {'holderIdentity': md['name'], 'leaseDurationSeconds': duration, 'renewTime': micro_time(now)}}


def is_ready(node: Dict[str, Any]) -> Optional[str]:
    return next((c.get('status') for c in (node.get('status') or {}).get('conditions') or []
                 if c.get('type') == 'Ready'), None)


def taints_without_unreachable(node: Dict[str, Any]) -> List[Dict[str, Any]]:
    return [t for t in (node.get('spec') or {}).get('taints') or [] if t.get('key') != UNREACHABLE]
