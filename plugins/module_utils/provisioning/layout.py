# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where everything lives on a node: kubeadm's file layout (so kubeadm's docs, `kubeadm certs` and every
runbook written for kubeadm still apply), below a root prefix.

Every path here is absolute as seen on the node (`/etc/kubernetes/pki/ca.crt`). `host_path(root, path)` places
it below a root prefix: `/` on a real host, `.lab/hosts/cp1` in the lab, a fresh directory when a join script is
tried out. Static pod manifests name these same paths in their hostPath volumes; the kubelet (or the lab's
supervisor) resolves them below its root.
"""

from __future__ import annotations

import os
import posixpath

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput, shown

KUBERNETES_DIR = '/etc/kubernetes'
MANIFESTS_DIR = '/etc/kubernetes/manifests'
PKI_DIR = '/etc/kubernetes/pki'
ETCD_PKI_DIR = '/etc/kubernetes/pki/etcd'
LB_DIR = '/etc/kubernetes/haproxy'
LB_CONFIG = '/etc/kubernetes/haproxy/haproxy.cfg'
# HAProxy's master CLI socket (reload without dropping connections); a hostPath of the haproxy static pod.
LB_RUN_DIR = '/run/steward-haproxy'
LB_MASTER_SOCKET = '/run/steward-haproxy/master.sock'
ETCD_DATA_DIR = '/var/lib/etcd'
KUBELET_CONFIG = '/var/lib/kubelet/config.yaml'
KUBELET_FLAGS = '/var/lib/kubelet/kubeadm-flags.env'
KUBELET_CLIENT_PEM = '/var/lib/kubelet/pki/kubelet-client-current.pem'
KUBELET_UNIT = '/etc/systemd/system/kubelet.service'
KUBELET_SERVICE = 'kubelet.service'   # the unit's name, for systemctl
# The record of every file this collection wrote on the node: teardown removes exactly these and nothing else.
RECORD = '/etc/kubernetes/steward-provisioning.json'

MANIFEST = {name: posixpath.join(MANIFESTS_DIR, name + '.yaml')
            for name in ('etcd', 'kube-apiserver', 'kube-controller-manager', 'kube-scheduler', 'haproxy')}
KUBECONFIG = {name: posixpath.join(KUBERNETES_DIR, name + '.conf')
              for name in ('admin', 'controller-manager', 'scheduler', 'kubelet')}


def pki(name: str) -> str:
    """`ca.crt` -> /etc/kubernetes/pki/ca.crt; `etcd/ca.crt` -> /etc/kubernetes/pki/etcd/ca.crt."""
    return posixpath.join(PKI_DIR, name)


def host_path(root: str, path: str) -> str:
    """`path` (absolute, as on the node) below the root prefix `root`."""
    if not posixpath.isabs(path):
        raise InvalidInput('path', 'absolute-path', 'node paths are absolute, got %s' % shown(path), path)
    return os.path.join(root, path.lstrip('/')) if root not in ('', '/') else path


def node_path(root: str, path: str) -> str:
    """The inverse of host_path: `/…` as seen on the node for a path below `root`."""
    if root in ('', '/'):
        return path
    relative = os.path.relpath(path, root)
    if relative == '..' or relative.startswith('../'):
        raise InvalidInput('path', 'below-root', '%s is not below the root %s' % (shown(path), shown(root)), path)
    return '/' + ('' if relative == '.' else relative)
