"""A machines test bench over real parts: the Kubernetes API emulator, moto EC2 over HTTP, the real controller
process (`--controllers machines`, fast timings through its flags) and kubelets that register a Node for every
running instance (name = PrivateDnsName, providerID aws:///<region>/<id>, Ready True, the kubelet version its
`machine.steward.io/kubelet-version` tag names, else v1.31.4; partitioned ones turn Ready=Unknown as the node
lifecycle controller would).
"""

from __future__ import annotations

import base64
import threading
import time
import uuid
from typing import Any, Dict, List, Optional, Set

from ansible_collections.steward.cluster.plugins.module_utils.kube.client import api_path
from ansible_collections.steward.cluster.plugins.module_utils.kube.lease import format_micro

from lab.cloud.node_objects import instance_kubelet_version
from lab.env.controller import ControllerProcess, wait_for
from lab.env.machines_aws import KEYS, ec2_client, instances, make_network, provider_spec, secret_data

API = 'machine.sapcloud.io/v1alpha1'
USABLE = {'cluster.steward.io/usable-by-controller': 'true'}     # the Secret opt-in (--secret-opt-in, on by default)
REGION = 'eu-west-1'
FAST_FLAGS = ['--machine-sync-period', '10s', '--machine-cloud-sync-period', '1s', '--machine-health-timeout', '6s',
              '--machine-creation-timeout', '90s', '--machine-short-retry', '1s', '--machine-medium-retry', '3s',
              '--machine-long-retry', '5s', '--machine-safety-apiserver-statuscheck-period', '2s',
              '--machine-safety-apiserver-statuscheck-timeout', '4s', '--machine-watchdog-check-period', '1s',
              '--machine-safety-orphan-vms-period', '3s', '--machine-orphan-min-age', '2s', '--machine-drain-timeout', '30s']


def when(value: Any, predicate) -> Any:
    """`value` if `predicate(value)` holds, else None: what wait_for polls for when it should return the object."""
    return value if predicate(value) else None


def stamp(t: float) -> str:
    return format_micro(t)[:19] + 'Z'


class Kubelets:
    """Nodes for running instances of one cluster tag, refreshed every `interval` seconds from a thread.

    `register_taints`: taints a Node is registered with from now on (kubelet's --register-with-taints; Gardener's
    kubelets register node.gardener.cloud/critical-components-not-ready this way). `halt(names)`: those kubelets
    stop for good, with their instances still running: their Nodes are neither updated nor registered again.
    A partition or a halt belongs to the instances running under those node names now: EC2 (moto) gives a
    terminated instance's private IP, and so its node name, to the next new instance, whose kubelet is fine."""

    def __init__(self, client, ec2_url: str, cluster: str, interval: float = 1.0):
        self.client = client
        self.ec2_url = ec2_url
        self.cluster = cluster
        self.interval = interval
        self.partitioned: Set[str] = set()     # instance ids
        self.halted: Set[str] = set()          # instance ids
        self.register_taints: List[Dict[str, str]] = []
        self.lock = threading.Lock()          # a sync in flight finishes before halt() returns
        self._ec2: Any = None
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True, name='kubelets')

    def start(self) -> 'Kubelets':
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        if self.thread.is_alive():
            self.thread.join(10)

    def partition(self, names: Optional[List[str]] = None) -> None:
        """Ready=Unknown on these nodes (all: None) now, as the node lifecycle controller does after the grace."""
        self.partitioned.update(self.instance_ids(names))
        self.sync()

    def heal(self) -> None:
        self.partitioned.clear()
        self.sync()

    def halt(self, names: List[str]) -> None:
        ids = self.instance_ids(names)
        with self.lock:
            self.halted.update(ids)

    def node_names(self) -> List[str]:
        return sorted(i['PrivateDnsName'] for i in instances(self.ec2_url, REGION, self.cluster, ('running',)))

    def _running(self, instance_id: str) -> bool:
        if self._ec2 is None:
            self._ec2 = ec2_client(self.ec2_url, REGION, lab=True)
        found = self._ec2.describe_instances(InstanceIds=[instance_id])
        return [i['State']['Name'] for r in found['Reservations'] for i in r['Instances']] == ['running']

    def instance_ids(self, names: Optional[List[str]]) -> Set[str]:
        """The running instances behind these node names (all: None)."""
        return {i['InstanceId'] for i in instances(self.ec2_url, REGION, self.cluster, ('running',))
                if names is None or i['PrivateDnsName'] in names}

    def _run(self) -> None:
        while not self.stopping.is_set():
            try:
                self.sync()
            except Exception:   # the API or EC2 may be down on purpose
                pass
            self.stopping.wait(self.interval)

    def sync(self) -> None:
        with self.lock:
            self._sync()

    def _sync(self) -> None:
        for inst in instances(self.ec2_url, REGION, self.cluster, ('running',)):
            name = inst['PrivateDnsName']
            if inst['InstanceId'] in self.halted:
                continue
            status = 'Unknown' if inst['InstanceId'] in self.partitioned else 'True'
            path = api_path('v1', 'nodes', name=name)
            node = self.client.get_or_none(path)
            ready = {'type': 'Ready', 'status': status, 'reason': 'KubeletReady' if status == 'True' else 'NodeStatusUnknown',
                     'lastTransitionTime': stamp(time.time()), 'lastHeartbeatTime': stamp(time.time())}
            provider_id = 'aws:///%s/%s' % (REGION, inst['InstanceId'])
            if node is not None and (node.get('spec') or {}).get('providerID') != provider_id:
                # The Node of a terminated instance whose private IP (and name) this one got: the cloud node
                # lifecycle controller deletes it. (A sync that listed the old instance just before it was
                # terminated may even have registered it again after the machine's deletion removed it.)
                self.client.delete(path)
                node = None
            if node is None:
                if not self._running(inst['InstanceId']):
                    continue       # terminated since the listing: its kubelet is gone (a Node now would be stale)
                self.client.create(api_path('v1', 'nodes'), {
                    'apiVersion': 'v1', 'kind': 'Node',
                    'metadata': {'name': name, 'labels': {'kubernetes.io/hostname': name}},
                    'spec': dict({'providerID': provider_id},
                                 **({'taints': [dict(t) for t in self.register_taints]} if self.register_taints else {})),
                    'status': {'conditions': [ready], 'nodeInfo': {'kubeletVersion': instance_kubelet_version(inst)}}})
                continue
            current = next((c for c in (node.get('status') or {}).get('conditions') or [] if c.get('type') == 'Ready'), {})
            if current.get('status') != status:
                self.client.merge_patch(path, {'status': {'conditions': [ready]}})


class MachinesBench:
    """A namespace with a Secret and an MCM-style AWS MachineClass, and helpers to watch the machines."""

    def __init__(self, kube, ec2_url: str, work_dir: str, namespace: Optional[str] = None, kubelets: bool = True):
        self.kube = kube
        self.ec2_url = ec2_url
        self.work_dir = work_dir
        self.namespace = namespace or 'shoot--' + uuid.uuid4().hex[:6]
        self.cluster = self.namespace
        self.net = make_network(ec2_url, REGION)
        self.kubelets = Kubelets(kube, ec2_url, self.cluster)
        if kubelets:
            self.kubelets.start()
        self.controllers: List[ControllerProcess] = []

    def controller(self, *flags: str, env: Optional[Dict[str, str]] = None, identity: str = 'replica-0',
                   program: Optional[str] = None, api: Any = None) -> ControllerProcess:
        """The controller (`program`: a launcher script instead of the plain one; `api`: what its kubeconfig points
        at, default the emulator itself)."""
        extra = {'AWS_ENDPOINT_URL': self.ec2_url, 'AWS_DEFAULT_REGION': REGION}
        extra.update(env or {})
        proc = ControllerProcess(api or self.kube.server, self.work_dir, identity=identity, program=program,
                                 args=['--controllers', 'machines'] + FAST_FLAGS + list(flags), extra_env=extra).start()
        self.controllers.append(proc)
        return proc

    def stop(self) -> None:
        for proc in self.controllers:
            proc.stop()
        self.kubelets.stop()

    def path(self, plural: str, name: Optional[str] = None, status: bool = False) -> str:
        return api_path(API, plural, self.namespace, name, 'status' if status else None)

    def create_secret(self, name: str, data: Dict[str, str], usable: bool = True) -> Dict[str, Any]:
        """A Secret of the namespace; `usable`: labelled for the controller (its --secret-opt-in is on by default)."""
        return self.kube.create(api_path('v1', 'secrets', self.namespace), {
            'apiVersion': 'v1', 'kind': 'Secret', 'type': 'Opaque',
            'metadata': {'name': name, 'namespace': self.namespace, 'labels': dict(USABLE) if usable else {}},
            'data': {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}})

    def create_class(self, name: str = 'nodes', provider: str = 'AWS', spec: Optional[Dict[str, Any]] = None,
                     **spec_changes: Any) -> Dict[str, Any]:
        """A Secret `<name>-secret` and an MCM-style MachineClass (AWS: the bench's network; `spec` replaces it)."""
        self.create_secret(name + '-secret', secret_data())
        return self.kube.create(self.path('machineclasses'), {
            'apiVersion': API, 'kind': 'MachineClass', 'metadata': {'name': name, 'namespace': self.namespace},
            'provider': provider, 'providerSpec': spec or provider_spec(self.net, REGION, self.cluster, **spec_changes),
            'secretRef': {'name': name + '-secret', 'namespace': self.namespace}})

    def create_deployment(self, name: str = 'pool', replicas: int = 3, cls: str = 'nodes', **spec: Any) -> Dict[str, Any]:
        body = {'apiVersion': API, 'kind': 'MachineDeployment', 'metadata': {'name': name, 'namespace': self.namespace},
                'spec': dict({'replicas': replicas, 'selector': {'matchLabels': {'name': name}},
                              'strategy': {'type': 'RollingUpdate', 'rollingUpdate': {'maxSurge': 1, 'maxUnavailable': 1}},
                              'template': {'metadata': {'labels': {'name': name}},
                                           'spec': {'class': {'kind': 'MachineClass', 'name': cls}}}}, **spec)}
        return self.kube.create(self.path('machinedeployments'), body)

    def create_set(self, name: str, replicas: int, cls: str = 'nodes') -> Dict[str, Any]:
        """A MachineSet of its own (no MachineDeployment), as MCM allows; its machines are labelled name=<name>."""
        template = {'metadata': {'labels': {'name': name}}, 'spec': {'class': {'kind': 'MachineClass', 'name': cls}}}
        return self.kube.create(self.path('machinesets'), {
            'apiVersion': API, 'kind': 'MachineSet', 'metadata': {'name': name, 'namespace': self.namespace},
            'spec': {'replicas': replicas, 'selector': {'matchLabels': {'name': name}},
                     'machineClass': {'kind': 'MachineClass', 'name': cls}, 'template': template}})

    def machines(self) -> List[Dict[str, Any]]:
        return self.kube.list(self.path('machines'))

    def phases(self) -> List[str]:
        return sorted(((m.get('status') or {}).get('currentStatus') or {}).get('phase') or '' for m in self.machines())

    def running_instances(self) -> List[Dict[str, Any]]:
        return instances(self.ec2_url, REGION, self.cluster)

    def all_instances(self) -> List[Dict[str, Any]]:
        states = ('pending', 'running', 'stopping', 'stopped', 'shutting-down', 'terminated')
        return instances(self.ec2_url, REGION, self.cluster, states)

    def wait_running(self, count: int, timeout: float = 120.0) -> List[Dict[str, Any]]:
        wait_for(lambda: self.phases() == ['Running'] * count and len(self.running_instances()) == count, timeout, 1.0,
                 what='%d Running machines and instances' % count)
        return self.machines()

    def ec2(self):
        """The test's own EC2 client (not counted against the controller's API budget)."""
        return ec2_client(self.ec2_url, REGION, lab=True)

    def launch(self, tags: Dict[str, str]) -> str:
        """An instance made out of band (by hand, by MCM, by another controller) with the cluster and role tags
        plus `tags`; its id."""
        tags = dict({'kubernetes.io/cluster/%s' % self.cluster: '1', 'kubernetes.io/role/node': '1'}, **tags)
        answer = self.ec2().run_instances(ImageId=self.net['ami'], InstanceType='m5.large', MinCount=1, MaxCount=1,
                                          SubnetId=self.net['subnet'], TagSpecifications=[{
                                              'ResourceType': 'instance', 'Tags': [{'Key': k, 'Value': v} for k, v in tags.items()]}])
        return answer['Instances'][0]['InstanceId']

    def machine_named(self, name: str) -> Optional[Dict[str, Any]]:
        return self.kube.get_or_none(self.path('machines', name))


__all__ = ['KEYS', 'MachinesBench', 'Kubelets', 'wait_for', 'when', 'REGION']
