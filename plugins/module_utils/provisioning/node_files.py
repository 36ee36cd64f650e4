# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every file a node needs, as data: path (as on the node), content, mode, and whether it is secret.

One function decides them for genesis, join, the join script, certificate renewal and the anchors, so a node
joined by a playbook and one joined by a script end up with the same files. It reads what is on the node
(`read(path) -> bytes | None`) and keeps every certificate that is still right (same CA, subject, SANs and
usages, not due), so a second run plans no change. It never replaces a CA or service-account key on a node
with a different one: a node that already trusts another authority is refused (`authority-mismatch`).
"""

from __future__ import annotations

import dataclasses
import datetime
from typing import Callable, Dict, List, Optional, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.common.netaddr import url_host
from ansible_collections.steward.cluster.plugins.module_utils.provisioning import (
    haproxy, kubeconfig, kubelet, layout, manifests,
)
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.certs import (
    Authority, Leaf, authority_for, node_leaves,
)
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.errors import PkiError, Refused
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.pki import (
    KeyPair, check, issue, load_cert, load_key, split_pem,
)
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.spec import ClusterSpec, NodeSpec

Reader = Callable[[str], Optional[bytes]]
PUBLIC, PRIVATE = 0o644, 0o600
LOOPBACK_DEFAULTS = ('127.0.0.1', '::1')


@dataclasses.dataclass(frozen=True)
class FileSpec:
    path: str
    content: bytes
    mode: int
    secret: bool = False


@dataclasses.dataclass
class NodeFiles:
    files: Dict[str, FileSpec]
    certificates: List[Dict[str, str]]   # [{name, path, action (keep|issue|renew), reason}]


def _add(files: Dict[str, FileSpec], path: str, content: bytes, secret: bool = False, mode: Optional[int] = None) -> None:
    files[path] = FileSpec(path, content, mode if mode is not None else (PRIVATE if secret else PUBLIC), secret)


def _existing(leaf: Leaf, read: Reader) -> Optional[KeyPair]:
    if leaf.storage == 'pair':
        cert, key = read(leaf.path), read(leaf.key_path or '')
        return KeyPair(cert, key) if cert and key else None
    if leaf.storage == 'kubeconfig':
        return kubeconfig.embedded_client(read(leaf.path), leaf.path)
    data = read(leaf.path)
    if not data:
        return None
    cert, key = split_pem(data)
    return KeyPair(cert, key) if cert and key else None


def _public_key(pem: bytes, where: str, private: bool) -> bytes:
    from cryptography.hazmat.primitives import serialization
    key = load_key(pem, where).public_key() if private else load_cert(pem, where).public_key()
    return key.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def check_authority_on_disk(wanted: Dict[str, bytes], read: Reader) -> None:
    """Refuse when the node already holds another CA or service-account key than the one given (a renewed CA with
    the same key is fine: it replaces the old certificate)."""
    for name, content in sorted(wanted.items()):
        path = layout.pki(name)
        current = read(path)
        if not current or current == content:
            continue
        if name in ('sa.key', 'sa.pub'):
            same = False
        else:
            try:
                private = name.endswith('.key')
                same = _public_key(current, path, private) == _public_key(content, path, private)
            except PkiError:
                same = False   # an unreadable CA file is not ours to overwrite either
        if not same:
            raise Refused('%s on this node belongs to another authority than the one given; refusing to replace it '
                          '(a node of another cluster, or an authority read from the wrong node)' % path,
                          'authority-mismatch', path)


def plan_node_files(cluster: ClusterSpec, node: NodeSpec, authority: Authority, read: Reader,
                    now: datetime.datetime, etcd_bootstrap: Optional[Tuple[str, str]] = None,
                    kubelet_binary: str = kubelet.KUBELET_BINARY) -> NodeFiles:
    """The node's complete file set. A control-plane node needs `etcd_bootstrap` = (initial-cluster,
    initial-cluster-state) for its etcd manifest; the caller decides it from the manifest on disk or the
    current membership."""
    files: Dict[str, FileSpec] = {}
    wanted = authority_for(node, authority)
    check_authority_on_disk(wanted, read)
    for name, content in sorted(wanted.items()):
        _add(files, layout.pki(name), content, secret=name.endswith('.key'))

    pairs: Dict[str, KeyPair] = {}
    outcomes: List[Dict[str, str]] = []
    for leaf in node_leaves(cluster, node):
        ca = authority.ca(leaf.ca)
        current = _existing(leaf, read)
        decision = check(current, leaf.subject, ca, now, cluster.renew_before_days, leaf.path)
        pair = current if not decision.changes and current is not None else issue(
            leaf.subject, ca, cluster.key_algorithm, now, cluster.cert_days)
        pairs[leaf.name] = pair
        outcomes.append({'name': leaf.name, 'path': leaf.path, 'action': decision.action, 'reason': decision.reason})
        if leaf.storage == 'pair':
            _add(files, leaf.path, pair.cert_pem)
            _add(files, leaf.key_path or '', pair.key_pem, secret=True)
        elif leaf.storage == 'combined':
            _add(files, leaf.path, pair.cert_pem + pair.key_pem, secret=True)

    ca_pem = authority.ca('ca').cert_pem
    lb_server = '%s:%d' % (node.lb_url, cluster.lb_port)
    server_name = None if node.local_address in LOOPBACK_DEFAULTS else 'kubernetes'
    _add(files, layout.KUBECONFIG['kubelet'], kubeconfig.render(
        cluster.cluster_name, lb_server, ca_pem, 'system:node:' + node.name, client_file=layout.KUBELET_CLIENT_PEM,
        tls_server_name=server_name), secret=True)
    if node.control_plane:
        local_server = 'https://%s:%d' % (url_host(node.address), cluster.apiserver_port)
        for leaf_name, conf, server, name in (('admin.conf', 'admin', lb_server, server_name),
                                              ('controller-manager.conf', 'controller-manager', local_server, None),
                                              ('scheduler.conf', 'scheduler', local_server, None)):
            leaf = next(item for item in node_leaves(cluster, node) if item.name == leaf_name)
            _add(files, layout.KUBECONFIG[conf], kubeconfig.render(
                cluster.cluster_name, server, ca_pem, leaf.subject.common_name, client=pairs[leaf_name],
                tls_server_name=name), secret=True)
        _control_plane_manifests(files, cluster, node, etcd_bootstrap)

    _add(files, layout.LB_CONFIG, haproxy.render(cluster, node.local_address))
    _add(files, layout.MANIFEST['haproxy'], manifests.haproxy(cluster), mode=PRIVATE)
    _add(files, layout.KUBELET_CONFIG, kubelet.config(cluster))
    _add(files, layout.KUBELET_FLAGS, kubelet.flags(node))
    _add(files, layout.KUBELET_UNIT, kubelet.unit(kubelet_binary))
    return NodeFiles(files, outcomes)


# The files each control-plane static pod reads, in the order their digest (the manifest's inputs annotation) takes
# them: rendering here and the upgrade's renewal on the way (upgrade/renewal.py) compute it from this one list.
MANIFEST_INPUTS: Dict[str, Tuple[str, ...]] = {
    'kube-apiserver': tuple(layout.pki(n) for n in (
        'ca.crt', 'apiserver.crt', 'apiserver.key', 'apiserver-etcd-client.crt', 'apiserver-etcd-client.key',
        'apiserver-kubelet-client.crt', 'apiserver-kubelet-client.key', 'front-proxy-ca.crt',
        'front-proxy-client.crt', 'front-proxy-client.key', 'etcd/ca.crt', 'sa.key', 'sa.pub')),
    'kube-controller-manager': (layout.KUBECONFIG['controller-manager'], layout.pki('ca.crt'), layout.pki('ca.key'),
                                layout.pki('front-proxy-ca.crt'), layout.pki('sa.key')),
    'kube-scheduler': (layout.KUBECONFIG['scheduler'],),
}


def _inputs(files: Dict[str, FileSpec], *paths: str) -> List[bytes]:
    return [files[p].content for p in paths]


def _control_plane_manifests(files: Dict[str, FileSpec], cluster: ClusterSpec, node: NodeSpec,
                             etcd_bootstrap: Optional[Tuple[str, str]]) -> None:
    if etcd_bootstrap is None:
        raise PkiError('a control-plane node needs its etcd bootstrap flags (initial cluster and state)', node.name)
    pki = layout.pki
    etcd_inputs = _inputs(files, pki('etcd/ca.crt'), pki('etcd/server.crt'), pki('etcd/server.key'),
                          pki('etcd/peer.crt'), pki('etcd/peer.key'))
    _add(files, layout.MANIFEST['etcd'], manifests.etcd(cluster, node, etcd_bootstrap[0], etcd_bootstrap[1],
                                                        etcd_inputs), mode=PRIVATE)
    apiserver_inputs = _inputs(files, *MANIFEST_INPUTS['kube-apiserver'])
    _add(files, layout.MANIFEST['kube-apiserver'], manifests.kube_apiserver(cluster, node, apiserver_inputs),
         mode=PRIVATE)
    cm_inputs = _inputs(files, *MANIFEST_INPUTS['kube-controller-manager'])
    _add(files, layout.MANIFEST['kube-controller-manager'], manifests.kube_controller_manager(cluster, cm_inputs),
         mode=PRIVATE)
    _add(files, layout.MANIFEST['kube-scheduler'],
         manifests.kube_scheduler(cluster, _inputs(files, *MANIFEST_INPUTS['kube-scheduler'])), mode=PRIVATE)
