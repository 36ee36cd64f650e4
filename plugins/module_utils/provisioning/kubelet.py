# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The kubelet's files in kubeadm's layout: /var/lib/kubelet/config.yaml (KubeletConfiguration),
/var/lib/kubelet/kubeadm-flags.env (node IP, labels at registration) and the systemd unit that reads both.

Labels given here are applied by the kubelet when it registers the Node. The NodeRestriction admission plugin
refuses a kubelet that sets labels under kubernetes.io / k8s.io other than the few it allows, so those are
refused here, at input time, with the rule; set them with steward.cluster.node_labels.
"""

from __future__ import annotations

from typing import Sequence, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput, field_of
from ansible_collections.steward.cluster.plugins.module_utils.provisioning import layout
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.render import to_yaml
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.spec import ClusterSpec, NodeSpec

# What NodeRestriction lets a kubelet set on its own Node (k8s.io/kubernetes plugin/pkg/admission/noderestriction).
KUBELET_ALLOWED_PREFIXES = ('kubelet.kubernetes.io/', 'node.kubernetes.io/')
KUBELET_ALLOWED_KEYS = ('beta.kubernetes.io/arch', 'beta.kubernetes.io/instance-type', 'beta.kubernetes.io/os',
                        'failure-domain.beta.kubernetes.io/region', 'failure-domain.beta.kubernetes.io/zone',
                        'kubernetes.io/arch', 'kubernetes.io/hostname', 'kubernetes.io/os',
                        'node.kubernetes.io/instance-type', 'topology.kubernetes.io/region',
                        'topology.kubernetes.io/zone')
CONTAINER_RUNTIME_ENDPOINT = 'unix:///var/run/containerd/containerd.sock'
KUBELET_BINARY = '/usr/bin/kubelet'


def _restricted(key: str) -> bool:
    prefix = key.rpartition('/')[0]
    namespace = prefix.endswith(('kubernetes.io', 'k8s.io'))
    return namespace and key not in KUBELET_ALLOWED_KEYS and not key.startswith(KUBELET_ALLOWED_PREFIXES)


def check_registration_labels(labels: Sequence[Tuple[str, str]], field: str = 'labels') -> None:
    for key, _value in labels:
        if _restricted(key):
            raise InvalidInput(field_of(field, key), 'kubelet-label', 'the kubelet may not set %s on its own Node '
                               '(NodeRestriction); set it with steward.cluster.node_labels instead' % key, key)


def config(cluster: ClusterSpec) -> bytes:
    doc = {
        'apiVersion': 'kubelet.config.k8s.io/v1beta1',
        'kind': 'KubeletConfiguration',
        'authentication': {'anonymous': {'enabled': False}, 'webhook': {'cacheTTL': '0s', 'enabled': True},
                           'x509': {'clientCAFile': layout.pki('ca.crt')}},
        'authorization': {'mode': 'Webhook', 'webhook': {'cacheAuthorizedTTL': '0s', 'cacheUnauthorizedTTL': '0s'}},
        'cgroupDriver': 'systemd',
        'clusterDNS': [cluster.cluster_dns_ip],
        'clusterDomain': cluster.dns_domain,
        'rotateCertificates': True,
        'staticPodPath': layout.MANIFESTS_DIR,
    }
    return to_yaml(doc)


def flags(node: NodeSpec) -> bytes:
    args = ['--container-runtime-endpoint=%s' % CONTAINER_RUNTIME_ENDPOINT, '--hostname-override=%s' % node.name,
            '--node-ip=%s' % node.address]
    if node.labels:
        args.append('--node-labels=%s' % ','.join('%s=%s' % pair for pair in node.labels))
    return ('KUBELET_KUBEADM_ARGS="%s"\n' % ' '.join(args)).encode()


def unit(binary: str = KUBELET_BINARY) -> bytes:
    return ('[Unit]\n'
            'Description=kubelet: The Kubernetes Node Agent (steward.cluster)\n'
            'Documentation=https://kubernetes.io/docs/\n'
            'Wants=network-online.target\n'
            'After=network-online.target\n'
            '\n'
            '[Service]\n'
            'EnvironmentFile=-%s\n'
            'EnvironmentFile=-/etc/default/kubelet\n'
            'ExecStart=%s --kubeconfig=%s --config=%s $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS\n'
            'Restart=always\n'
            'StartLimitInterval=0\n'
            'RestartSec=10\n'
            '\n'
            '[Install]\n'
            'WantedBy=multi-user.target\n'
            % (layout.KUBELET_FLAGS, binary, layout.KUBECONFIG['kubelet'], layout.KUBELET_CONFIG)).encode()
