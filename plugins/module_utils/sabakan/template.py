# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Cluster templates and cluster files (CKE `cluster.yml` as a dict) and their validation."""

from __future__ import annotations

import ipaddress
import math
import socket
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional

from ansible_collections.steward.cluster.plugins.module_utils.common.names import is_dns_subdomain, is_label_name
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.errors import TemplateError

LABEL_ROLE = 'cke.cybozu.com/role'
LABEL_WEIGHT = 'cke.cybozu.com/weight'
TAINT_EFFECTS = ('NoSchedule', 'PreferNoSchedule', 'NoExecute')


# Verdicts for strings already checked: a cluster repeats the same keys and values on every node.
_NAME_VERDICTS: Dict[str, Optional[str]] = {}
_VALUE_VERDICTS: Dict[str, Optional[str]] = {}
_MISSING = object()


def _memo(cache: Dict[str, Optional[str]], check: Any, text: Any) -> Optional[str]:
    if not isinstance(text, str):  # unhashable or odd input: check it every time
        return check(text)
    verdict = cache.get(text, _MISSING)
    if verdict is _MISSING:
        if len(cache) >= 65536:
            cache.clear()
        verdict = cache[text] = check(text)
    return verdict  # type: ignore[return-value]


def qualified_name_problem(key: Any) -> Optional[str]:
    """Kubernetes label/annotation/taint key syntax (`[prefix/]name`); None when valid."""
    return _memo(_NAME_VERDICTS, _qualified_name_problem, key)


def label_value_problem(value: Any) -> Optional[str]:
    """Kubernetes label value syntax (empty, or 1-63 name characters); None when valid."""
    return _memo(_VALUE_VERDICTS, _label_value_problem, value)


def ip_address_problem(address: Any) -> Optional[str]:
    """None when `address` is an IPv4 or IPv6 address."""
    if isinstance(address, str):
        try:
            if socket.inet_ntoa(socket.inet_aton(address)) == address:
                return None  # canonical dotted quad, the usual case, without ipaddress' slower parser
        except (OSError, ValueError):
            pass
    try:
        ipaddress.ip_address(address)
    except ValueError:
        return f'invalid IP address {address!r}'
    return None


def _qualified_name_problem(key: Any) -> Optional[str]:
    if not isinstance(key, str) or not key:
        return 'must be a non-empty string'
    prefix, slash, name = key.rpartition('/')
    if slash and not is_dns_subdomain(prefix):
        return 'prefix must be a DNS subdomain of at most 253 characters'
    if not is_label_name(name):
        return 'name must be 1-63 alphanumerics, "-", "_" or "." starting and ending with an alphanumeric'
    return None


def _label_value_problem(value: Any) -> Optional[str]:
    if not isinstance(value, str):
        return 'must be a string'
    if value and not is_label_name(value):
        return 'must be empty or 1-63 alphanumerics, "-", "_" or "." starting and ending with an alphanumeric'
    return None


def _node_problems(node: Any, where: str, is_template: bool) -> None:
    if not isinstance(node, Mapping):
        raise TemplateError(where, 'type', 'a node must be a mapping')
    address = node.get('address') or ''
    if is_template and address:
        raise TemplateError(f'{where}.address', 'absent', f'a template node must not have an address (got {address!r})',
                            address)
    if not is_template:
        problem = ip_address_problem(address)
        if problem:
            raise TemplateError(f'{where}.address', 'ip-address', problem, address)
    if not isinstance(node.get('user'), str) or not node.get('user'):
        raise TemplateError(f'{where}.user', 'required', 'user name is empty')
    if not isinstance(node.get('control_plane', False), bool):
        raise TemplateError(f'{where}.control_plane', 'type', 'must be true or false', node.get('control_plane'))
    for kind in ('labels', 'annotations'):
        items = node.get(kind) or {}
        if not isinstance(items, Mapping):
            raise TemplateError(f'{where}.{kind}', 'type', 'must be a mapping')
        for key, value in items.items():
            problem = qualified_name_problem(key)
            if problem:
                raise TemplateError(f'{where}.{kind}', 'qualified-name', f'key {key!r} {problem}', key)
            problem = label_value_problem(value) if kind == 'labels' else (None if isinstance(value, str) else 'must be a string')
            if problem:
                raise TemplateError(f'{where}.{kind}[{key}]', 'label-value', f'value {value!r} {problem}', value)
    taints = node.get('taints') or []
    if not isinstance(taints, list):
        raise TemplateError(f'{where}.taints', 'type', 'must be a list')
    for index, taint in enumerate(taints):
        at = f'{where}.taints[{index}]'
        if not isinstance(taint, Mapping):
            raise TemplateError(at, 'type', 'must be a mapping with key, value and effect')
        problem = qualified_name_problem(taint.get('key'))
        if problem:
            raise TemplateError(f'{at}.key', 'qualified-name', f'{taint.get("key")!r} {problem}', taint.get('key'))
        problem = label_value_problem(taint.get('value') or '')
        if problem:
            raise TemplateError(f'{at}.value', 'label-value', f'{taint.get("value")!r} {problem}', taint.get('value'))
        if taint.get('effect') not in TAINT_EFFECTS:
            raise TemplateError(f'{at}.effect', 'one-of', f'{taint.get("effect")!r} is not one of {", ".join(TAINT_EFFECTS)}')


def validate_cluster(cluster: Any, *, is_template: bool = False, where: Optional[str] = None) -> None:
    """CKE's Cluster.Validate for the parts the generator touches; TemplateError's field says where, under
    `where` (default: `template` or `cluster`)."""
    what = where or ('template' if is_template else 'cluster')
    if not isinstance(cluster, Mapping):
        raise TemplateError(what, 'type', f'must be a mapping (CKE cluster.yml), got {type(cluster).__name__}')
    if not isinstance(cluster.get('name'), str) or not cluster.get('name'):
        raise TemplateError(f'{what}.name', 'required', 'cluster name is empty')
    try:
        ipaddress.ip_network(str(cluster.get('service_subnet') or ''), strict=False)
        if '/' not in str(cluster.get('service_subnet')):
            raise ValueError
    except ValueError:
        raise TemplateError(f'{what}.service_subnet', 'cidr', f'{cluster.get("service_subnet")!r} is not a CIDR such as 10.68.0.0/16',
                            cluster.get('service_subnet')) from None
    nodes = cluster.get('nodes')
    if nodes is None:
        nodes = []
    if not isinstance(nodes, list):
        raise TemplateError(f'{what}.nodes', 'type', 'must be a list')
    seen = set()
    for index, node in enumerate(nodes):
        _node_problems(node, f'{what}.nodes[{index}]', is_template)
        if not is_template:
            if node['address'] in seen:
                raise TemplateError(f'{what}.nodes[{index}].address', 'unique', f'duplicate node address {node["address"]}')
            seen.add(node['address'])
    tolerations = cluster.get('control_plane_tolerations') or []
    if not isinstance(tolerations, list):
        raise TemplateError(f'{what}.control_plane_tolerations', 'type', 'must be a list of taint keys')
    for index, key in enumerate(tolerations):
        problem = qualified_name_problem(key)
        if problem:
            raise TemplateError(f'{what}.control_plane_tolerations[{index}]', 'qualified-name', f'{key!r} {problem}', key)
    for index, server in enumerate(cluster.get('dns_servers') or []):
        try:
            ipaddress.ip_address(server)
        except ValueError:
            raise TemplateError(f'{what}.dns_servers[{index}]', 'ip-address', f'invalid IP address {server!r}', server) from None
    dns_service = cluster.get('dns_service') or ''
    if dns_service and len(str(dns_service).split('/')) != 2:
        raise TemplateError(f'{what}.dns_service', 'namespaced-name', f'{dns_service!r} must be NAMESPACE/NAME', dns_service)


def validate_template(template: Any, where: str = 'template') -> None:
    """CKE's ValidateTemplate: the shape the generator needs (check_template_shape) plus the
    cluster.yml rules for templates (name, service_subnet, users, label syntax, no addresses).
    Errors name fields under `where` (`template.nodes[1].user`, `spec.template.nodes[1].user`)."""
    check_template_shape(template, where)
    validate_cluster(template, is_template=True, where=where)


def check_template_shape(template: Any, where: str = 'template') -> None:
    """What the generator itself relies on: one control plane template, at least one worker
    template, distinct roles when there are several, valid weights. Like CKE's generator, it
    leaves the rest of cluster.yml validation to whoever loads the template (validate_template)."""
    if not isinstance(template, Mapping):
        raise TemplateError(where, 'type', f'must be a mapping (CKE cluster.yml), got {type(template).__name__}')
    nodes = template.get('nodes') or []
    if not isinstance(nodes, list) or len(nodes) < 2:
        raise TemplateError(f'{where}.nodes', 'minimum', 'template must contain at least two nodes')
    roles = set()
    cps = workers = 0
    for index, node in enumerate(nodes):
        if not isinstance(node, Mapping):
            raise TemplateError(f'{where}.nodes[{index}]', 'type', 'a node must be a mapping')
        if node.get('control_plane'):
            cps += 1
            continue
        workers += 1
        role = (node.get('labels') or {}).get(LABEL_ROLE, '')
        if role:
            roles.add(role)
        _weight(node, f'{where}.nodes[{index}]')
    if cps != 1:
        raise TemplateError(f'{where}.nodes', 'one-control-plane', f'template must contain only one control plane node (found {cps})')
    if workers >= 2 and workers != len(roles):
        raise TemplateError(f'{where}.nodes', 'unique-roles', f'non-control plane nodes must be associated with unique roles '
                            f'(label {LABEL_ROLE}) when there are several')


def _weight(node: Mapping[str, Any], where: str) -> float:
    raw = (node.get('labels') or {}).get(LABEL_WEIGHT)
    if raw is None:
        return 1.0
    try:
        weight = float(raw)
    except (TypeError, ValueError):
        raise TemplateError(f'{where}.labels[{LABEL_WEIGHT}]', 'number', f'{raw!r} is not a number', raw) from None
    if not math.isfinite(weight) or weight <= 0:
        raise TemplateError(f'{where}.labels[{LABEL_WEIGHT}]', 'positive', f'weight must be a positive number, got {raw!r}', raw)
    return weight


@dataclass(frozen=True)
class NodeTemplate:
    node: Mapping[str, Any]
    role: str
    weight: float


@dataclass(frozen=True)
class Templates:
    control_plane: NodeTemplate
    workers: List[NodeTemplate]

    def for_worker_role(self, role: str) -> NodeTemplate:
        """The worker template a machine of `role` is rendered with."""
        if len(self.workers) == 1:
            return self.workers[0]
        for tmpl in self.workers:
            if tmpl.role == role:
                return tmpl
        raise TemplateError('', 'role', f'no worker template has role {role!r} (label {LABEL_ROLE}); a worker of that role '
                            'cannot be rendered: add a worker template for it')


def split_templates(template: Mapping[str, Any]) -> Templates:
    """Control plane template and worker templates (in template order), after validate_template."""
    control_plane: Optional[NodeTemplate] = None
    workers: List[NodeTemplate] = []
    for index, node in enumerate(template['nodes']):
        role = (node.get('labels') or {}).get(LABEL_ROLE, '')
        tmpl = NodeTemplate(node=node, role=role, weight=_weight(node, f'template.nodes[{index}]'))
        if node.get('control_plane'):
            control_plane = tmpl
        else:
            workers.append(tmpl)
    if control_plane is None:
        raise TemplateError('template.nodes', 'one-control-plane', 'template must contain only one control plane node (found 0)')
    return Templates(control_plane=control_plane, workers=workers)


def cluster_from_template(template: Mapping[str, Any], nodes: List[Dict[str, Any]]) -> Dict[str, Any]:
    """The generated cluster is the template with its nodes replaced."""
    cluster = {key: value for key, value in template.items() if key != 'nodes'}
    cluster['nodes'] = nodes
    return cluster
