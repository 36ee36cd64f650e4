# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Promenade-compatible provisioning API as pure functions (the controller's server does the HTTP): request
validation, the cluster the join scripts are rendered for, and who may call.

Promenade's `GET /api/v1.0/join-scripts` takes `hostname`, `ip`, `design_ref` and repeated `labels.static` /
`labels.dynamic` entries of the form `key=value`. Here both kinds of labels are registration labels of the kubelet;
`design_ref` is accepted and ignored (the cluster comes from a ConfigMap, not Deckhand).
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput, shown
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.kubelet import check_registration_labels
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.render import from_yaml
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.spec import (
    ClusterSpec, NodeSpec, parse_cluster, parse_node,
)

CONTROL_PLANE_LABEL = 'node-role.kubernetes.io/control-plane'
CLUSTER_KEY = 'cluster.yaml'


def _one(query: Mapping[str, Sequence[str]], name: str, required: bool = True) -> Optional[str]:
    values = list(query.get(name) or [])
    if not values or values[0] == '':
        if required:
            raise InvalidInput(name, 'required', 'the query parameter %s is required' % name)
        return None
    if len(values) > 1:
        raise InvalidInput(name, 'single', 'give %s once, got %d values' % (name, len(values)))
    return values[0]


def _labels(query: Mapping[str, Sequence[str]]) -> Dict[str, str]:
    labels: Dict[str, str] = {}
    for name in ('labels.static', 'labels.dynamic'):
        for entry in query.get(name) or []:
            key, sep, value = entry.partition('=')
            if not sep:
                raise InvalidInput(name, 'key=value', 'expected key=value, got %s' % shown(entry), entry)
            labels[key] = value
    return labels


def join_request(query: Mapping[str, Sequence[str]], cluster: ClusterSpec) -> NodeSpec:
    """The node a join script is asked for; InvalidInput names the query parameter."""
    node = parse_node({'node_name': _one(query, 'hostname'), 'address': _one(query, 'ip'), 'role': 'worker',
                       'labels': _labels(query)}, cluster)
    check_registration_labels(node.labels)
    return node


def _node_ip(node: Mapping[str, Any]) -> Optional[str]:
    for address in (node.get('status') or {}).get('addresses') or []:
        if address.get('type') == 'InternalIP':
            return address.get('address')
    return None


def control_plane_from_nodes(nodes: Iterable[Mapping[str, Any]]) -> List[Dict[str, str]]:
    """Promenade's join_ips: the Nodes labelled as control plane, with their InternalIP."""
    out = []
    for node in nodes:
        meta = node.get('metadata') or {}
        if CONTROL_PLANE_LABEL in (meta.get('labels') or {}) and _node_ip(node):
            out.append({'name': meta['name'], 'address': _node_ip(node)})
    return sorted(out, key=lambda m: m['name'])


def cluster_from_config(data: Optional[Mapping[str, str]], nodes: Iterable[Mapping[str, Any]],
                        where: str) -> ClusterSpec:
    """The cluster options of the ConfigMap's cluster.yaml; without `control_plane` there, the control-plane Nodes."""
    text = (data or {}).get(CLUSTER_KEY)
    options = from_yaml(text.encode(), where) if text else {}
    if not isinstance(options, Mapping):
        raise InvalidInput('%s: %s' % (where, CLUSTER_KEY), 'mapping', 'expected a mapping of cluster options')
    options = dict(options)
    if not options.get('control_plane'):
        options['control_plane'] = control_plane_from_nodes(nodes)
    try:
        return parse_cluster(options)
    except InvalidInput as exc:
        raise exc.at('%s: %s' % (where, CLUSTER_KEY)) from None


def allowed(user: Mapping[str, Any], users: Sequence[str], groups: Sequence[str]) -> Tuple[bool, str]:
    """Whether a TokenReview's user may call the API, and who it is (for logs)."""
    name = user.get('username') or ''
    member_of = set(user.get('groups') or [])
    return (name in users or bool(member_of & set(groups))), name
