# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Static pod manifests in kubeadm's shape (etcd, kube-apiserver, kube-controller-manager, kube-scheduler) plus
the node-local HAProxy in front of every apiserver.

The kubelet runs these from /etc/kubernetes/manifests even when no apiserver answers, which is what lets a
cluster come back after a full power cut. Each pod carries the annotation `cluster.steward.io/inputs`: a digest
of the certificates and kubeconfigs it reads, so renewing a certificate changes the manifest and the kubelet
restarts exactly the pods that use it. etcd's `--initial-cluster*` flags are read only at the member's first
start; they are passed in (the member list when it joined) and kept on later renders.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.provisioning import layout
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.render import digest, from_yaml, to_yaml
from ansible_collections.steward.cluster.plugins.module_utils.common.netaddr import url_host
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.spec import ClusterSpec, NodeSpec

INPUTS_ANNOTATION = 'cluster.steward.io/inputs'
ETCD_CLIENT_URLS_ANNOTATION = 'kubeadm.kubernetes.io/etcd.advertise-client-urls'
APISERVER_ENDPOINT_ANNOTATION = 'kubeadm.kubernetes.io/kube-apiserver.advertise-address.endpoint'
LB_CONTAINER_DIR = '/usr/local/etc/haproxy'
LB_CONTAINER_RUN = '/run/haproxy'

# (volume name, host path, mount path, hostPath type, read only)
Volume = Tuple[str, str, str, str, bool]
PKI_VOLUMES: Tuple[Volume, ...] = (
    ('k8s-certs', layout.PKI_DIR, layout.PKI_DIR, 'DirectoryOrCreate', True),
    ('ca-certs', '/etc/ssl/certs', '/etc/ssl/certs', 'DirectoryOrCreate', True),
)


def _flags(pairs: Mapping[str, Any]) -> List[str]:
    return ['--%s=%s' % (k, v) for k, v in sorted(pairs.items())]


def static_pod(name: str, component: str, image: str, command: Sequence[str], volumes: Sequence[Volume],
               inputs: Sequence[bytes], annotations: Optional[Mapping[str, str]] = None,
               tier: str = 'control-plane', probe_port: Optional[int] = None, probe_host: str = '127.0.0.1',
               probe_path: str = '/healthz', probe_scheme: str = 'HTTPS') -> bytes:
    """One pod as kubeadm writes it: hostNetwork, system-node-critical, hostPath volumes, an optional probe."""
    meta_annotations = dict(annotations or {})
    meta_annotations[INPUTS_ANNOTATION] = 'sha256:' + digest(inputs)
    container: Dict[str, Any] = {
        'name': name,
        'image': image,
        'imagePullPolicy': 'IfNotPresent',
        'command': list(command),
        'resources': {'requests': {'cpu': '100m'}},
        'volumeMounts': [dict({'name': v[0], 'mountPath': v[2]}, **({'readOnly': True} if v[4] else {}))
                         for v in volumes],
    }
    if probe_port is not None:
        probe = {'httpGet': {'host': probe_host, 'path': probe_path, 'port': probe_port, 'scheme': probe_scheme},
                 'initialDelaySeconds': 10, 'periodSeconds': 10, 'timeoutSeconds': 15, 'failureThreshold': 8}
        container['livenessProbe'] = probe
        container['startupProbe'] = dict(probe, failureThreshold=24)
    doc = {
        'apiVersion': 'v1',
        'kind': 'Pod',
        'metadata': {'name': name, 'namespace': 'kube-system', 'labels': {'component': component, 'tier': tier},
                     'annotations': meta_annotations},
        'spec': {
            'containers': [container],
            'hostNetwork': True,
            'priority': 2000001000,
            'priorityClassName': 'system-node-critical',
            'securityContext': {'seccompProfile': {'type': 'RuntimeDefault'}},
            'volumes': [{'name': v[0], 'hostPath': {'path': v[1], 'type': v[3]}} for v in volumes],
        },
    }
    return to_yaml(doc)


# --- etcd ----------------------------------------------------------------------------------------
def etcd(cluster: ClusterSpec, node: NodeSpec, initial_cluster: str, initial_state: str,
         inputs: Sequence[bytes]) -> bytes:
    """The node's etcd member with TLS for clients and peers (client certificates required on both)."""
    address = url_host(node.address)
    local = url_host(node.local_address)
    client = 'https://%s:%d' % (address, cluster.etcd_client_port)
    listen_client = sorted({'https://%s:%d' % (local, cluster.etcd_client_port), client})
    peer = cluster.peer_url(node.address)
    pki = layout.ETCD_PKI_DIR
    flags = {
        'advertise-client-urls': client,
        'cert-file': pki + '/server.crt',
        'client-cert-auth': 'true',
        'data-dir': layout.ETCD_DATA_DIR,
        'initial-advertise-peer-urls': peer,
        'initial-cluster': initial_cluster,
        'initial-cluster-state': initial_state,
        'key-file': pki + '/server.key',
        'listen-client-urls': ','.join(listen_client),
        'listen-metrics-urls': 'http://%s:%d' % (local, cluster.etcd_metrics_port),
        'listen-peer-urls': peer,
        'name': node.name,
        'peer-cert-file': pki + '/peer.crt',
        'peer-client-cert-auth': 'true',
        'peer-key-file': pki + '/peer.key',
        'peer-trusted-ca-file': pki + '/ca.crt',
        'snapshot-count': '10000',
        'trusted-ca-file': pki + '/ca.crt',
    }
    volumes = (('etcd-certs', pki, pki, 'DirectoryOrCreate', False),
               ('etcd-data', layout.ETCD_DATA_DIR, layout.ETCD_DATA_DIR, 'DirectoryOrCreate', False))
    return static_pod('etcd', 'etcd', cluster.etcd_image, ['etcd'] + _flags(flags), volumes, inputs,
                      {ETCD_CLIENT_URLS_ANNOTATION: client}, probe_port=cluster.etcd_metrics_port,
                      probe_host=node.local_address, probe_path='/health?serializable=true', probe_scheme='HTTP')


def etcd_flags(manifest: Optional[bytes]) -> Optional[Dict[str, str]]:
    """The `--flag=value` arguments of an etcd manifest on disk, or None when there is none (or it is unreadable)."""
    if not manifest:
        return None
    try:
        command = from_yaml(manifest, layout.MANIFEST['etcd'])['spec']['containers'][0]['command']
    except Exception:  # a manifest we cannot read is rewritten from the current membership
        return None
    return dict(arg[2:].split('=', 1) for arg in command if isinstance(arg, str) and arg.startswith('--') and '=' in arg)


def etcd_bootstrap_flags(manifest: Optional[bytes]) -> Optional[Tuple[str, str]]:
    """(initial-cluster, initial-cluster-state) from an etcd manifest on disk, or None when there is none."""
    flags = etcd_flags(manifest) or {}
    if 'initial-cluster' in flags and flags.get('initial-cluster-state') in ('new', 'existing'):
        return flags['initial-cluster'], flags['initial-cluster-state']
    return None


# --- kube-apiserver, controller-manager, scheduler ---------------------------------------------
def kube_apiserver(cluster: ClusterSpec, node: NodeSpec, inputs: Sequence[bytes]) -> bytes:
    pki = layout.pki
    flags = {
        'advertise-address': node.address,
        'allow-privileged': 'true',
        'authorization-mode': 'Node,RBAC',
        'client-ca-file': pki('ca.crt'),
        'enable-admission-plugins': 'NodeRestriction',
        'enable-bootstrap-token-auth': 'true',
        'etcd-cafile': pki('etcd/ca.crt'),
        'etcd-certfile': pki('apiserver-etcd-client.crt'),
        'etcd-keyfile': pki('apiserver-etcd-client.key'),
        # The node's own member, as kubeadm's stacked etcd: its address is stable across membership changes.
        'etcd-servers': cluster.client_url(node.address),
        'kubelet-client-certificate': pki('apiserver-kubelet-client.crt'),
        'kubelet-client-key': pki('apiserver-kubelet-client.key'),
        'kubelet-preferred-address-types': 'InternalIP,ExternalIP,Hostname',
        'proxy-client-cert-file': pki('front-proxy-client.crt'),
        'proxy-client-key-file': pki('front-proxy-client.key'),
        'requestheader-allowed-names': 'front-proxy-client',
        'requestheader-client-ca-file': pki('front-proxy-ca.crt'),
        'requestheader-extra-headers-prefix': 'X-Remote-Extra-',
        'requestheader-group-headers': 'X-Remote-Group',
        'requestheader-username-headers': 'X-Remote-User',
        'secure-port': cluster.apiserver_port,
        'service-account-issuer': 'https://kubernetes.default.svc.' + cluster.dns_domain,
        'service-account-key-file': pki('sa.pub'),
        'service-account-signing-key-file': pki('sa.key'),
        'service-cluster-ip-range': cluster.service_cidr,
        'tls-cert-file': pki('apiserver.crt'),
        'tls-private-key-file': pki('apiserver.key'),
    }
    endpoint = '%s:%d' % (node.address, cluster.apiserver_port)
    return static_pod('kube-apiserver', 'kube-apiserver', cluster.image('kube-apiserver'),
                      ['kube-apiserver'] + _flags(flags), PKI_VOLUMES, inputs, {APISERVER_ENDPOINT_ANNOTATION: endpoint},
                      probe_port=cluster.apiserver_port, probe_host=node.address, probe_path='/livez')


def kube_controller_manager(cluster: ClusterSpec, inputs: Sequence[bytes]) -> bytes:
    conf = layout.KUBECONFIG['controller-manager']
    pki = layout.pki
    flags = {
        'allocate-node-cidrs': 'true',
        'authentication-kubeconfig': conf,
        'authorization-kubeconfig': conf,
        'bind-address': '127.0.0.1',
        'client-ca-file': pki('ca.crt'),
        'cluster-cidr': cluster.pod_cidr,
        'cluster-name': cluster.cluster_name,
        'cluster-signing-cert-file': pki('ca.crt'),
        'cluster-signing-key-file': pki('ca.key'),
        'controllers': '*,bootstrapsigner,tokencleaner',
        'kubeconfig': conf,
        'leader-elect': 'true',
        'requestheader-client-ca-file': pki('front-proxy-ca.crt'),
        'root-ca-file': pki('ca.crt'),
        'service-account-private-key-file': pki('sa.key'),
        'service-cluster-ip-range': cluster.service_cidr,
        'use-service-account-credentials': 'true',
    }
    volumes = PKI_VOLUMES + (('kubeconfig', conf, conf, 'FileOrCreate', True),)
    return static_pod('kube-controller-manager', 'kube-controller-manager', cluster.image('kube-controller-manager'),
                      ['kube-controller-manager'] + _flags(flags), volumes, inputs, probe_port=10257)


def kube_scheduler(cluster: ClusterSpec, inputs: Sequence[bytes]) -> bytes:
    conf = layout.KUBECONFIG['scheduler']
    flags = {'authentication-kubeconfig': conf, 'authorization-kubeconfig': conf, 'bind-address': '127.0.0.1',
             'kubeconfig': conf, 'leader-elect': 'true'}
    volumes = (('kubeconfig', conf, conf, 'FileOrCreate', True),)
    return static_pod('kube-scheduler', 'kube-scheduler', cluster.image('kube-scheduler'),
                      ['kube-scheduler'] + _flags(flags), volumes, inputs, probe_port=10259)


# --- node-local apiserver load balancer -----------------------------------------------------------
def haproxy(cluster: ClusterSpec) -> bytes:
    """HAProxy in master-worker mode with its master CLI on a host socket: a reload (a new config) goes through
    that socket, so the pod itself never restarts for a membership change and open connections stay up.
    The config is not an input of the manifest for the same reason."""
    command = ['haproxy', '-W', '-db', '-f', LB_CONTAINER_DIR + '/haproxy.cfg', '-S', LB_CONTAINER_RUN + '/master.sock']
    volumes = (('config', layout.LB_DIR, LB_CONTAINER_DIR, 'DirectoryOrCreate', True),
               ('run', layout.LB_RUN_DIR, LB_CONTAINER_RUN, 'DirectoryOrCreate', False))
    return static_pod('haproxy', 'haproxy', cluster.lb_image, command, volumes, (), tier='node')
