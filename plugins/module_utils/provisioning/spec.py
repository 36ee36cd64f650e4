# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cluster and the node being provisioned, validated like an API: every option passes here before
anything is read or written (in check mode too), and a bad one names the option, the value and the rule.

Field names are the module option names (doc fragment `steward.cluster.provisioning_cluster`), so an error
says `control_plane[1].address: ...` exactly as the operator wrote it.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import re
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.common import validate
from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput, field_of, shown
from ansible_collections.steward.cluster.plugins.module_utils.common.names import dns_subdomain, label_value, qualified_name
from ansible_collections.steward.cluster.plugins.module_utils.common.netaddr import url_host

CONTROL_PLANE = 'control-plane'
WORKER = 'worker'
ROLES = (CONTROL_PLANE, WORKER)
KEY_ALGORITHMS = ('ecdsa-p256', 'rsa-2048')
_VERSION = re.compile(r'^v\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$')
_IMAGE = re.compile(r'^[a-z0-9][a-z0-9._/:@-]*[a-z0-9]$')

# Defaults, one place (the doc fragment and the argspec repeat them; a unit test keeps them equal).
DEFAULTS: Dict[str, Any] = {
    'cluster_name': 'kubernetes',
    'kubernetes_version': 'v1.31.4',
    'image_repository': 'registry.k8s.io',
    'etcd_image': 'registry.k8s.io/etcd:3.5.16-0',
    'lb_image': 'docker.io/library/haproxy:2.6',
    'service_cidr': '10.96.0.0/12',
    'pod_cidr': '10.244.0.0/16',
    'dns_domain': 'cluster.local',
    'apiserver_port': 6443,
    'lb_port': 6553,
    'etcd_client_port': 2379,
    'etcd_peer_port': 2380,
    'etcd_metrics_port': 2381,
    'cert_days': 365,
    'ca_days': 3650,
    'renew_before_days': 30,
    'apiserver_extra_sans': [],
    'key_algorithm': 'ecdsa-p256',
    'local_address': '127.0.0.1',
}


@dataclasses.dataclass(frozen=True)
class Member:
    """A control-plane node: its Node / etcd member name and the address its apiserver and etcd listen on."""
    name: str
    address: str

    @property
    def key(self) -> str:
        return self.name


@dataclasses.dataclass(frozen=True)
class ClusterSpec:
    cluster_name: str
    control_plane: Tuple[Member, ...]
    kubernetes_version: str
    image_repository: str
    etcd_image: str
    lb_image: str
    service_cidr: str
    pod_cidr: str
    dns_domain: str
    apiserver_port: int
    lb_port: int
    etcd_client_port: int
    etcd_peer_port: int
    etcd_metrics_port: int
    cert_days: int
    ca_days: int
    renew_before_days: int
    apiserver_extra_sans: Tuple[str, ...]
    key_algorithm: str

    @property
    def kubernetes_service_ip(self) -> str:
        """The first address of the service range: the `kubernetes` Service, a SAN of every apiserver."""
        return str(ipaddress.ip_network(self.service_cidr)[1])

    @property
    def cluster_dns_ip(self) -> str:
        """The tenth address of the service range (kubeadm's choice for the cluster DNS Service)."""
        return str(ipaddress.ip_network(self.service_cidr)[10])

    def member(self, name: str) -> Optional[Member]:
        return next((m for m in self.control_plane if m.name == name), None)

    def image(self, component: str) -> str:
        return '%s/%s:%s' % (self.image_repository, component, self.kubernetes_version)

    def peer_url(self, address: str) -> str:
        return 'https://%s:%d' % (url_host(address), self.etcd_peer_port)

    def client_url(self, address: str) -> str:
        return 'https://%s:%d' % (url_host(address), self.etcd_client_port)


@dataclasses.dataclass(frozen=True)
class NodeSpec:
    """The node being provisioned. `local_address` is the loopback address its node-local listeners bind
    (the apiserver load balancer, etcd's local client and metrics listeners): 127.0.0.1 on a real host; each lab
    host, sharing one loopback interface with the others, uses its own address."""
    name: str
    address: str
    role: str
    local_address: str
    labels: Tuple[Tuple[str, str], ...] = ()

    @property
    def control_plane(self) -> bool:
        return self.role == CONTROL_PLANE

    @property
    def lb_url(self) -> str:
        return 'https://%s' % url_host(self.local_address)


def _image(value: Any, field: str) -> str:
    text = validate.text(value, field)
    if not _IMAGE.match(text):
        raise InvalidInput(field, 'image', 'expected an image reference such as registry.k8s.io/etcd:3.5.16-0, got %s'
                           % shown(value), value)
    return text


def _repository(value: Any, field: str) -> str:
    """A registry and path that `<repository>/<component>:<version>` makes an image reference of."""
    text = validate.text(value, field)
    if not _IMAGE.match('%s/kube-apiserver:v1' % text.rstrip('/')):
        raise InvalidInput(field, 'image', 'expected a registry and path such as registry.k8s.io, got %s' % shown(value),
                           value)
    return text.rstrip('/')


def _members(value: Any, field: str) -> Tuple[Member, ...]:
    if not isinstance(value, list) or not value:
        raise InvalidInput(field, 'non-empty-list', 'expected a non-empty list of {name, address}, got %s'
                           % shown(value), value)
    members: List[Member] = []
    for index, item in enumerate(value):
        where = field_of(field, index)
        if not isinstance(item, Mapping):
            raise InvalidInput(where, 'mapping', 'expected {name, address}, got %s' % shown(item), item)
        unknown = sorted(set(item) - {'name', 'address'})
        if unknown:
            raise InvalidInput(field_of(where, unknown[0]), 'unknown-key', 'unknown key (expected name and address)',
                               unknown[0])
        members.append(Member(dns_subdomain(item.get('name'), field_of(where, 'name')),
                              validate.ip_address(item.get('address'), field_of(where, 'address'))))
    for attr in ('name', 'address'):
        seen: Dict[str, int] = {}
        for index, m in enumerate(members):
            value_ = getattr(m, attr)
            if value_ in seen:
                raise InvalidInput(field_of(field_of(field, index), attr), 'unique',
                                   '%s is also control_plane[%d].%s' % (shown(value_), seen[value_], attr), value_)
            seen[value_] = index
    return tuple(members)


def labels_of(value: Any, field: str) -> Tuple[Tuple[str, str], ...]:
    """A label map ({key: value}, values as strings) as sorted pairs; keys and values by Kubernetes' rules."""
    if value is None:
        return ()
    if not isinstance(value, Mapping):
        raise InvalidInput(field, 'mapping', 'expected a mapping of label keys to values, got %s' % shown(value), value)
    pairs = []
    for key in sorted(value):
        where = field_of(field, key)
        qualified_name(key, where)
        raw = value[key]
        if isinstance(raw, bool) or raw is None or not isinstance(raw, (str, int, float)):
            raise InvalidInput(where, 'label-value', 'expected a string, got %s' % shown(raw), raw)
        pairs.append((key, label_value(str(raw), where)))
    return tuple(pairs)


def parse_cluster(params: Mapping[str, Any]) -> ClusterSpec:
    """The cluster options (defaults applied) as a ClusterSpec; InvalidInput names the first bad option."""
    p = dict(DEFAULTS)
    p.update({k: v for k, v in params.items() if v is not None})
    service_cidr = validate.cidr(p['service_cidr'], 'service_cidr')
    if ipaddress.ip_network(service_cidr).num_addresses < 16:
        raise InvalidInput('service_cidr', 'size', 'needs at least 16 addresses (the cluster DNS is the tenth), got %s'
                           % shown(service_cidr), service_cidr)
    pod_cidr = validate.cidr(p['pod_cidr'], 'pod_cidr')
    if ipaddress.ip_network(service_cidr).overlaps(ipaddress.ip_network(pod_cidr)):
        raise InvalidInput('pod_cidr', 'disjoint', '%s overlaps service_cidr %s' % (pod_cidr, service_cidr), pod_cidr)
    version = validate.text(p['kubernetes_version'], 'kubernetes_version')
    if not _VERSION.match(version):
        raise InvalidInput('kubernetes_version', 'version', 'expected a version such as v1.31.4, got %s' % shown(version),
                           version)
    sans = p['apiserver_extra_sans']
    if not isinstance(sans, list):
        raise InvalidInput('apiserver_extra_sans', 'list', 'expected a list of DNS names or IP addresses, got %s'
                           % shown(sans), sans)
    clean_sans = []
    for index, san in enumerate(sans):
        where = field_of('apiserver_extra_sans', index)
        text = validate.text(san, where)
        try:
            clean_sans.append(str(ipaddress.ip_address(text)))
        except ValueError:
            clean_sans.append(dns_subdomain(text.lower(), where))
    port_names = ('apiserver_port', 'lb_port', 'etcd_client_port', 'etcd_peer_port', 'etcd_metrics_port')
    ports = {name: validate.port(p[name], name) for name in port_names}
    taken: Dict[int, str] = {}
    for name, port in ports.items():
        if port in taken:
            raise InvalidInput(name, 'unique', 'port %d is also %s' % (port, taken[port]), port)
        taken[port] = name
    cert_days = validate.integer(p['cert_days'], 'cert_days', minimum=1, maximum=3650)
    ca_days = validate.integer(p['ca_days'], 'ca_days', minimum=cert_days, maximum=36500)
    return ClusterSpec(
        cluster_name=dns_subdomain(p['cluster_name'], 'cluster_name'),
        control_plane=_members(p.get('control_plane'), 'control_plane'),
        kubernetes_version=version,
        image_repository=_repository(p['image_repository'], 'image_repository'),
        etcd_image=_image(p['etcd_image'], 'etcd_image'),
        lb_image=_image(p['lb_image'], 'lb_image'),
        service_cidr=service_cidr,
        pod_cidr=pod_cidr,
        dns_domain=dns_subdomain(p['dns_domain'], 'dns_domain'),
        cert_days=cert_days,
        ca_days=ca_days,
        renew_before_days=validate.integer(p['renew_before_days'], 'renew_before_days', minimum=0,
                                           maximum=max(cert_days - 1, 0)),
        apiserver_extra_sans=tuple(clean_sans),
        key_algorithm=validate.one_of(p['key_algorithm'], 'key_algorithm', KEY_ALGORITHMS),
        **ports)


def parse_node(params: Mapping[str, Any], cluster: ClusterSpec) -> NodeSpec:
    """The node options; a control-plane node must be in `control_plane` with the same address."""
    name = dns_subdomain(params.get('node_name'), 'node_name')
    address = validate.ip_address(params.get('address'), 'address')
    role = validate.one_of(params.get('role') or WORKER, 'role', ROLES)
    local = validate.ip_address(params.get('local_address') or DEFAULTS['local_address'], 'local_address')
    if not ipaddress.ip_address(local).is_loopback:
        raise InvalidInput('local_address', 'loopback', 'node-local listeners bind a loopback address, got %s'
                           % shown(local), local)
    member = cluster.member(name)
    if role == CONTROL_PLANE and member is None:
        raise InvalidInput('node_name', 'control-plane-member', '%s is not in control_plane (%s): a control-plane node '
                           'must be listed there' % (shown(name), ', '.join(m.name for m in cluster.control_plane)), name)
    if member is not None and member.address != address:
        raise InvalidInput('address', 'control-plane-address', '%s: control_plane lists %s with address %s'
                           % (shown(address), name, member.address), address)
    if role == WORKER and member is not None:
        raise InvalidInput('role', 'control-plane-member', '%s is listed in control_plane but role is worker' % name,
                           role)
    return NodeSpec(name=name, address=address, role=role, local_address=local,
                    labels=labels_of(params.get('labels'), 'labels'))
