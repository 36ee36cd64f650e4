"""The pod runtime's decisions as pure functions over plain API objects (lab/pods/runtime.py does the I/O).

* StatefulSets: pods `<set>-<ordinal>` with the template's labels plus `statefulset.kubernetes.io/pod-name`,
  `apps.kubernetes.io/pod-index` and `controller-revision-hash`; `spec.hostname` is the pod's name and
  `spec.subdomain` the set's `serviceName`, so the pod's DNS name is `<pod>.<serviceName>.<ns>.svc.cluster.local`.
  PVCs `<claim template>-<set>-<ordinal>` are created before the pod that mounts them. OrderedReady (the default):
  pod i+1 is created only while pods 0..i are Running and Ready, scale-down removes the highest ordinal first, one
  at a time; Parallel: all at once. RollingUpdate replaces the highest ordinal whose revision is old (at or above
  `rollingUpdate.partition`) once every pod is Ready; OnDelete leaves running pods alone.
* Names and paths: inside a pod, the peer DNS names of the runtime's pods and the container's mount paths mean
  nothing to a process on this machine, so `Rewriter` rewrites them in a container's args, env values, probe
  commands and the files of its configMap and secret volumes: DNS names to pod IPs, mount paths to the
  directories behind them, and a listen address of 0.0.0.0 / localhost / 127.0.0.1 in a URL to the pod's IP (every
  pod shares the machine's network namespace, so a wildcard bind would take the port from every other pod).
* Endpoints: a Service selecting the runtime's pods gets Endpoints and an EndpointSlice (ready addresses; not-ready
  ones as notReadyAddresses, or as addresses when the Service has `publishNotReadyAddresses`).
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from typing import Any, Dict, Iterable, List, Optional, Tuple

from lab.pods import images

POD_NAME_LABEL = 'statefulset.kubernetes.io/pod-name'
POD_INDEX_LABEL = 'apps.kubernetes.io/pod-index'
REVISION_LABEL = 'controller-revision-hash'
PVC_PROTECTION = 'kubernetes.io/pvc-protection'
MANAGED_BY = 'lab.steward.io/pod-runtime'
# an EndpointSlice's managed-by label value (a label value holds no '/': the API refuses the annotation's name)
SLICE_MANAGER = 'pod-runtime.lab.steward.io'
CLUSTER_DOMAIN = 'cluster.local'


def managed(sts: Dict[str, Any]) -> bool:
    """The runtime runs this set's pods: one of its template's containers has an image the lab knows."""
    containers = ((((sts.get('spec') or {}).get('template') or {}).get('spec') or {}).get('containers') or [])
    return any(images.known(str(c.get('image', ''))) for c in containers)


def revision(sts: Dict[str, Any]) -> str:
    """The set's update revision: `<set>-<hash of the pod template>`, as the controller names ControllerRevisions."""
    text = json.dumps((sts.get('spec') or {}).get('template') or {}, sort_keys=True)
    return '%s-%s' % (sts['metadata']['name'], hashlib.sha256(text.encode()).hexdigest()[:10])


def ordinal_of(pod_name: str, sts_name: str) -> Optional[int]:
    prefix = sts_name + '-'
    if not pod_name.startswith(prefix) or not pod_name[len(prefix):].isdigit():
        return None
    return int(pod_name[len(prefix):])


def pvc_name(template: Dict[str, Any], sts_name: str, ordinal: int) -> str:
    return '%s-%s-%d' % (template['metadata']['name'], sts_name, ordinal)


def owner_ref(obj: Dict[str, Any], kind: str, api_version: str) -> Dict[str, Any]:
    md = obj['metadata']
    return {'apiVersion': api_version, 'kind': kind, 'name': md['name'], 'uid': md.get('uid', ''),
            'controller': True, 'blockOwnerDeletion': True}


def pvc_for(sts: Dict[str, Any], template: Dict[str, Any], ordinal: int) -> Dict[str, Any]:
    md = sts['metadata']
    labels = dict(((sts.get('spec') or {}).get('selector') or {}).get('matchLabels') or {})
    labels.update((template.get('metadata') or {}).get('labels') or {})
    return {'apiVersion': 'v1', 'kind': 'PersistentVolumeClaim',
            'metadata': {'name': pvc_name(template, md['name'], ordinal), 'namespace': md.get('namespace', 'default'),
                         'labels': labels, 'finalizers': [PVC_PROTECTION],
                         'annotations': {MANAGED_BY: 'true'}},
            'spec': copy.deepcopy(template.get('spec') or {})}


def pod_for(sts: Dict[str, Any], ordinal: int) -> Dict[str, Any]:
    """Pod `<set>-<ordinal>` of the set's current template (PVC volumes included)."""
    md, spec = sts['metadata'], sts.get('spec') or {}
    name = '%s-%d' % (md['name'], ordinal)
    template = copy.deepcopy(spec.get('template') or {})
    tmd = template.get('metadata') or {}
    labels = dict(tmd.get('labels') or {})
    labels.update({POD_NAME_LABEL: name, POD_INDEX_LABEL: str(ordinal), REVISION_LABEL: revision(sts)})
    pod_spec = template.get('spec') or {}
    pod_spec['hostname'] = name
    if spec.get('serviceName'):
        pod_spec['subdomain'] = spec['serviceName']
    pod_spec.setdefault('restartPolicy', 'Always')
    volumes = list(pod_spec.get('volumes') or [])
    for claim in spec.get('volumeClaimTemplates') or []:
        volumes = [v for v in volumes if v.get('name') != claim['metadata']['name']]
        volumes.append({'name': claim['metadata']['name'],
                        'persistentVolumeClaim': {'claimName': pvc_name(claim, md['name'], ordinal)}})
    pod_spec['volumes'] = volumes
    return {'apiVersion': 'v1', 'kind': 'Pod',
            'metadata': {'name': name, 'namespace': md.get('namespace', 'default'), 'labels': labels,
                         'annotations': dict(tmd.get('annotations') or {}, **{MANAGED_BY: 'true'}),
                         'ownerReferences': [owner_ref(sts, 'StatefulSet', 'apps/v1')]},
            'spec': pod_spec}


def pod_ready(pod: Dict[str, Any]) -> bool:
    status = pod.get('status') or {}
    return status.get('phase') == 'Running' and any(
        c.get('type') == 'Ready' and c.get('status') == 'True' for c in status.get('conditions') or [])


def sts_actions(sts: Dict[str, Any], pods: Dict[int, Dict[str, Any]]) -> List[Tuple[str, int]]:
    """What the StatefulSet controller does next: [('create'|'delete', ordinal)], in order. `pods` are the set's
    live pods (not being deleted) by ordinal."""
    spec = sts.get('spec') or {}
    replicas = int(spec.get('replicas') if spec.get('replicas') is not None else 1)
    parallel = spec.get('podManagementPolicy') == 'Parallel'
    actions: List[Tuple[str, int]] = []
    for ordinal in range(replicas):
        if ordinal not in pods:
            actions.append(('create', ordinal))
            if not parallel:
                return actions
        elif not parallel and not pod_ready(pods[ordinal]):
            return actions
    extra = sorted((o for o in pods if o >= replicas), reverse=True)
    if extra:
        if parallel:
            return actions + [('delete', o) for o in extra]
        if all(pod_ready(p) for o, p in pods.items() if o < replicas):
            return [('delete', extra[0])]
        return actions
    strategy = spec.get('updateStrategy') or {}
    if strategy.get('type', 'RollingUpdate') != 'RollingUpdate' or actions:
        return actions
    if not all(pod_ready(p) for p in pods.values()):
        return actions
    partition = int((strategy.get('rollingUpdate') or {}).get('partition') or 0)
    wanted = revision(sts)
    old = sorted((o for o, p in pods.items() if o >= partition and
                  ((p.get('metadata') or {}).get('labels') or {}).get(REVISION_LABEL) != wanted), reverse=True)
    return [('delete', old[0])] if old else actions


def sts_status(sts: Dict[str, Any], pods: Iterable[Dict[str, Any]]) -> Dict[str, Any]:
    """status as the StatefulSet controller writes it, counted from the live pods."""
    pods = list(pods)
    wanted = revision(sts)
    updated = [p for p in pods if ((p.get('metadata') or {}).get('labels') or {}).get(REVISION_LABEL) == wanted]
    ready = [p for p in pods if pod_ready(p)]
    status = {'observedGeneration': int(sts['metadata'].get('generation') or 1), 'replicas': len(pods),
              'readyReplicas': len(ready), 'availableReplicas': len(ready), 'currentReplicas': len(updated),
              'updatedReplicas': len(updated), 'currentRevision': wanted, 'updateRevision': wanted,
              'collisionCount': 0}
    omit_zero = ('readyReplicas', 'currentReplicas', 'updatedReplicas', 'collisionCount')
    return {k: v for k, v in status.items() if not (v == 0 and k in omit_zero)}


# --- names and paths inside a pod -----------------------------------------------------------------------------
def dns_names(pod_name: str, subdomain: str, namespace: str) -> List[str]:
    """The names a pod is reached by from other pods (longest first)."""
    base = '%s.%s' % (pod_name, subdomain)
    return ['%s.%s.svc.%s' % (base, namespace, CLUSTER_DOMAIN), '%s.%s.svc' % (base, namespace),
            '%s.%s' % (base, namespace), base]


_LOCAL_LISTEN = re.compile(r'(?P<scheme>https?|unix|unixs)://(?:0\.0\.0\.0|localhost|127\.0\.0\.1|\[::\])(?P<port>:\d+)?')


class Rewriter:
    """Rewrites text inside a pod (args, env values, config files) for a process on this machine: `hosts` (a DNS
    name -> IP), `mounts` (mountPath -> host directory) and the pod's own IP for wildcard / loopback listen URLs."""

    def __init__(self, hosts: Dict[str, str], mounts: Dict[str, str], pod_ip: str) -> None:
        self.pod_ip = pod_ip
        names = sorted(hosts, key=len, reverse=True)
        self._hosts = hosts
        self._host_re = re.compile(r'(?<![\w.-])(%s)(?![\w-]|\.[\w])' % '|'.join(re.escape(n) for n in names)) \
            if names else None
        paths = sorted((p.rstrip('/') or '/' for p in mounts), key=len, reverse=True)
        self._mounts = {p.rstrip('/') or '/': d for p, d in mounts.items()}
        self._path_re = re.compile(r'(?<![\w.-])(%s)(?![\w.-])' % '|'.join(re.escape(p) for p in paths)) \
            if paths else None

    def __call__(self, text: str) -> str:
        if self._host_re is not None:
            text = self._host_re.sub(lambda m: self._hosts[m.group(1)], text)
        if self._path_re is not None:
            text = self._path_re.sub(lambda m: self._mounts[m.group(1)], text)
        text = _LOCAL_LISTEN.sub(lambda m: '%s://%s%s' % (m.group('scheme'), self.pod_ip, m.group('port') or ''), text)
        return _dedupe_urls(text)


def _dedupe_urls(text: str) -> str:
    """`http://10.0.0.1:2379,http://10.0.0.1:2379` -> one URL (a rewritten localhost listen URL next to the pod's
    IP would make etcd bind the same address twice)."""
    def fix(match: 're.Match[str]') -> str:
        urls = match.group(0).split(',')
        return ','.join(u for i, u in enumerate(urls) if u not in urls[:i])
    return re.sub(r'(?:https?://[^\s,"\']+)(?:,https?://[^\s,"\']+)+', fix, text)


def expand_vars(value: str, env: Dict[str, str]) -> str:
    """Kubernetes' $(VAR) expansion in command, args and env values; `$$(` escapes; unknown names stay."""
    return re.sub(r'\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)',
                  lambda m: '$' if m.group(0) == '$$' else env.get(m.group(1), m.group(0)), value)


# --- endpoints --------------------------------------------------------------------------------------------------
def selects(selector: Optional[Dict[str, str]], labels: Optional[Dict[str, str]]) -> bool:
    return bool(selector) and all((labels or {}).get(k) == v for k, v in selector.items())


def _target_port(port: Dict[str, Any], pods: List[Dict[str, Any]]) -> Optional[int]:
    target = port.get('targetPort', port.get('port'))
    if isinstance(target, int) or (isinstance(target, str) and target.isdigit()):
        return int(target)
    for pod in pods:
        for container in (pod.get('spec') or {}).get('containers') or []:
            for cport in container.get('ports') or []:
                if cport.get('name') == target:
                    return int(cport['containerPort'])
    return None


def endpoints_for(service: Dict[str, Any], pods: List[Dict[str, Any]]) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """(Endpoints, EndpointSlice) of a Service over the pods it selects (pods with an IP only)."""
    md, spec = service['metadata'], service.get('spec') or {}
    publish = bool(spec.get('publishNotReadyAddresses'))
    chosen = sorted((p for p in pods if (p.get('status') or {}).get('podIP')), key=lambda p: p['metadata']['name'])
    ready, not_ready = [], []
    for pod in chosen:
        address = {'ip': pod['status']['podIP'], 'hostname': pod['metadata']['name'],
                   'targetRef': {'kind': 'Pod', 'name': pod['metadata']['name'], 'namespace': md.get('namespace'),
                                 'uid': pod['metadata'].get('uid', '')}}
        (ready if publish or pod_ready(pod) else not_ready).append((address, pod))
    ports = [{k: v for k, v in (('name', p.get('name')), ('port', _target_port(p, chosen)),
                                ('protocol', p.get('protocol', 'TCP'))) if v is not None}
             for p in spec.get('ports') or []]
    subset: Dict[str, Any] = {'ports': ports}
    if ready:
        subset['addresses'] = [a for a, _p in ready]
    if not_ready:
        subset['notReadyAddresses'] = [a for a, _p in not_ready]
    meta = {'name': md['name'], 'namespace': md.get('namespace'), 'labels': dict(md.get('labels') or {}),
            'annotations': {MANAGED_BY: 'true'}}
    endpoints = {'apiVersion': 'v1', 'kind': 'Endpoints', 'metadata': meta,
                 'subsets': [subset] if ready or not_ready else []}
    slice_md = dict(meta, name=md['name'] + '-lab', labels=dict(meta['labels'], **{
        'kubernetes.io/service-name': md['name'], 'endpointslice.kubernetes.io/managed-by': SLICE_MANAGER}))
    endpoint_slice = {
        'apiVersion': 'discovery.k8s.io/v1', 'kind': 'EndpointSlice', 'metadata': slice_md, 'addressType': 'IPv4',
        'ports': ports,
        'endpoints': [{'addresses': [a['ip']], 'hostname': a['hostname'], 'targetRef': a['targetRef'],
                       'conditions': {'ready': pod_ready(p), 'serving': pod_ready(p), 'terminating': False}}
                      for a, p in ready + not_ready]}
    return endpoints, endpoint_slice
