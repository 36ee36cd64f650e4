# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cluster's PKI plan, kubeadm's certificates by kubeadm's names: the authority (cluster CA, etcd CA,
front-proxy CA, service-account key) and every leaf a node needs, with its subject, SANs, usages and file.

The authority is passed around as a mapping of PKI-relative file names to PEM text (`ca.crt`, `ca.key`,
`etcd/ca.crt`, ...): exactly what lies in /etc/kubernetes/pki on a control-plane node, so a playbook can read
it from any control-plane node and hand it to the next one (the genesis node is not special).
"""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput, field_of
from ansible_collections.steward.cluster.plugins.module_utils.provisioning import layout
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.errors import PkiError
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.pki import (
    CLIENT, SERVER, KeyPair, Subject, load_cert, load_key, is_ca, new_ca, new_service_account_key,
)
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.spec import ClusterSpec, NodeSpec

# The three CAs: name -> (subject CN, certificate file, key file), kubeadm's names and files.
CAS: Dict[str, Tuple[str, str, str]] = {
    'ca': ('kubernetes', 'ca.crt', 'ca.key'),
    'etcd/ca': ('etcd-ca', 'etcd/ca.crt', 'etcd/ca.key'),
    'front-proxy-ca': ('front-proxy-ca', 'front-proxy-ca.crt', 'front-proxy-ca.key'),
}
SA_KEY, SA_PUB = 'sa.key', 'sa.pub'
AUTHORITY_FILES = tuple(f for _cn, crt, key in CAS.values() for f in (crt, key)) + (SA_KEY, SA_PUB)
# kubeadm >= 1.29 binds admin.conf to this group (super-admin.conf keeps system:masters).
CLUSTER_ADMINS = 'kubeadm:cluster-admins'


@dataclasses.dataclass(frozen=True)
class Authority:
    """The CAs and the service-account key pair; a worker's join needs only `ca` (to sign its kubelet cert)."""
    cas: Mapping[str, KeyPair]
    sa_key: Optional[bytes] = None
    sa_pub: Optional[bytes] = None

    def ca(self, name: str) -> KeyPair:
        if name not in self.cas:
            raise PkiError('the authority has no %s (%s): a control-plane node needs all of %s' % (
                name, CAS[name][1], ', '.join(AUTHORITY_FILES)), name)
        return self.cas[name]

    @property
    def complete(self) -> bool:
        return set(self.cas) == set(CAS) and bool(self.sa_key) and bool(self.sa_pub)

    def files(self) -> Dict[str, bytes]:
        """PKI-relative name -> content of everything the authority holds."""
        out: Dict[str, bytes] = {}
        for name, pair in self.cas.items():
            out[CAS[name][1]] = pair.cert_pem
            out[CAS[name][2]] = pair.key_pem
        if self.sa_key and self.sa_pub:
            out[SA_KEY], out[SA_PUB] = self.sa_key, self.sa_pub
        return out


def new_authority(algorithm: str, now: datetime.datetime, ca_days: int) -> Authority:
    cas = {name: new_ca(cn, algorithm, now, ca_days) for name, (cn, _crt, _key) in CAS.items()}
    sa_key, sa_pub = new_service_account_key(algorithm)
    return Authority(cas, sa_key, sa_pub)


def _pem(value: Any, field: str) -> bytes:
    if isinstance(value, bytes):
        return value
    if not isinstance(value, str) or '-----BEGIN ' not in value:
        # Never echo the value: it may be a private key.
        raise InvalidInput(field, 'pem', 'expected PEM text (-----BEGIN ...), got a %s' % type(value).__name__,
                           secret=True)
    return value.encode()


def parse_authority(value: Any, field: str = 'authority') -> Optional[Authority]:
    """The authority from {PKI-relative file name: PEM}; None when empty. Each CA must be a CA and match its key;
    any subset of the CAs is accepted here (what a node needs is checked when its certificates are planned)."""
    if not value:
        return None
    if not isinstance(value, Mapping):
        raise InvalidInput(field, 'mapping', 'expected a mapping of file names (%s) to PEM text'
                           % ', '.join(AUTHORITY_FILES), secret=True)
    unknown = sorted(set(value) - set(AUTHORITY_FILES))
    if unknown:
        raise InvalidInput(field_of(field, unknown[0]), 'unknown-key', 'not an authority file (expected %s)'
                           % ', '.join(AUTHORITY_FILES), unknown[0])
    cas: Dict[str, KeyPair] = {}
    for name, (_cn, crt, key) in CAS.items():
        if (crt in value) != (key in value):
            missing = key if crt in value else crt
            raise InvalidInput(field_of(field, missing), 'required', 'missing: %s and %s go together' % (crt, key))
        if crt not in value:
            continue
        pair = KeyPair(_pem(value[crt], field_of(field, crt)), _pem(value[key], field_of(field, key)))
        try:
            cert, private = load_cert(pair.cert_pem, crt), load_key(pair.key_pem, key)
        except PkiError as exc:
            raise InvalidInput(field_of(field, exc.where or crt), 'pem', str(exc), secret=True) from None
        if not is_ca(cert):
            raise InvalidInput(field_of(field, crt), 'ca', 'is not a CA certificate', secret=True)
        if cert.public_key().public_numbers() != private.public_key().public_numbers():
            raise InvalidInput(field_of(field, key), 'key-match', 'does not belong to %s' % crt, secret=True)
        cas[name] = pair
    if (SA_KEY in value) != (SA_PUB in value):
        raise InvalidInput(field_of(field, SA_PUB if SA_KEY in value else SA_KEY), 'required',
                           'missing: %s and %s go together' % (SA_KEY, SA_PUB))
    sa_key = _pem(value[SA_KEY], field_of(field, SA_KEY)) if SA_KEY in value else None
    sa_pub = _pem(value[SA_PUB], field_of(field, SA_PUB)) if SA_PUB in value else None
    return Authority(cas, sa_key, sa_pub) if cas or sa_key else None


def read_authority(read: Any) -> Optional[Authority]:
    """The authority from a node's /etc/kubernetes/pki (`read(node_path) -> bytes | None`), or None when it has none."""
    found = {name: read(layout.pki(name)) for name in AUTHORITY_FILES}
    present = {name: data.decode() for name, data in found.items() if data}
    return parse_authority(present, layout.PKI_DIR) if present else None


@dataclasses.dataclass(frozen=True)
class Leaf:
    """One leaf certificate of a node. `storage`: `pair` (path .crt + key_path .key), `kubeconfig` (embedded in the
    kubeconfig at path), `combined` (certificate and key in one PEM at path, as the kubelet keeps its client cert)."""
    name: str
    ca: str
    subject: Subject
    storage: str
    path: str
    key_path: Optional[str] = None


def _pair(name: str, ca: str, subject: Subject, stem: str) -> Leaf:
    return Leaf(name, ca, subject, 'pair', layout.pki(stem + '.crt'), layout.pki(stem + '.key'))


def apiserver_sans(cluster: ClusterSpec, node: NodeSpec) -> Tuple[Tuple[str, ...], Tuple[str, ...]]:
    """(DNS names, IPs) of a node's apiserver certificate: kubeadm's set, plus 127.0.0.1 and localhost because
    every node reaches the apiservers through its node-local load balancer (a node whose load balancer listens
    on another loopback address names `kubernetes` as the TLS server name in its kubeconfigs)."""
    dns = ['kubernetes', 'kubernetes.default', 'kubernetes.default.svc', 'kubernetes.default.svc.' + cluster.dns_domain,
           node.name, 'localhost']
    ips = [cluster.kubernetes_service_ip, node.address, '127.0.0.1']
    for san in cluster.apiserver_extra_sans:
        (ips if san[0].isdigit() or ':' in san else dns).append(san)
    return tuple(sorted(set(dns))), tuple(sorted(set(ips)))


def _etcd_sans(node: NodeSpec) -> Dict[str, Tuple[str, ...]]:
    return {'dns_names': tuple(sorted({node.name, 'localhost'})),
            'ip_addresses': tuple(sorted({node.address, '127.0.0.1', '::1', node.local_address}))}


def node_leaves(cluster: ClusterSpec, node: NodeSpec) -> List[Leaf]:
    """Every leaf certificate of `node`, in kubeadm's order (`kubeadm certs check-expiration` names)."""
    kubelet = Leaf('kubelet-client', 'ca', Subject('system:node:' + node.name, ('system:nodes',)), 'combined',
                   layout.KUBELET_CLIENT_PEM)
    if not node.control_plane:
        return [kubelet]
    dns, ips = apiserver_sans(cluster, node)
    both = (SERVER, CLIENT)
    return [
        Leaf('admin.conf', 'ca', Subject('kubernetes-admin', (CLUSTER_ADMINS,)), 'kubeconfig', layout.KUBECONFIG['admin']),
        _pair('apiserver', 'ca', Subject('kube-apiserver', (), dns, ips, (SERVER,)), 'apiserver'),
        _pair('apiserver-etcd-client', 'etcd/ca', Subject('kube-apiserver-etcd-client'), 'apiserver-etcd-client'),
        _pair('apiserver-kubelet-client', 'ca', Subject('kube-apiserver-kubelet-client', (CLUSTER_ADMINS,)),
              'apiserver-kubelet-client'),
        Leaf('controller-manager.conf', 'ca', Subject('system:kube-controller-manager'), 'kubeconfig',
             layout.KUBECONFIG['controller-manager']),
        _pair('etcd-healthcheck-client', 'etcd/ca', Subject('kube-etcd-healthcheck-client'), 'etcd/healthcheck-client'),
        _pair('etcd-peer', 'etcd/ca', Subject(node.name, (), usages=both, **_etcd_sans(node)), 'etcd/peer'),
        _pair('etcd-server', 'etcd/ca', Subject(node.name, (), usages=both, **_etcd_sans(node)), 'etcd/server'),
        _pair('front-proxy-client', 'front-proxy-ca', Subject('front-proxy-client'), 'front-proxy-client'),
        Leaf('scheduler.conf', 'ca', Subject('system:kube-scheduler'), 'kubeconfig', layout.KUBECONFIG['scheduler']),
        kubelet,
    ]


def authority_for(node: NodeSpec, authority: Authority) -> Dict[str, bytes]:
    """The authority files a node keeps on disk: all of them on a control-plane node, only the cluster CA's
    certificate on a worker (its key never lands on a worker)."""
    if node.control_plane:
        if not authority.complete:
            missing = [f for f in AUTHORITY_FILES if f not in authority.files()]
            raise PkiError('a control-plane node needs the whole authority; missing %s' % ', '.join(missing),
                           node.name)
        return authority.files()
    return {'ca.crt': authority.ca('ca').cert_pem}
