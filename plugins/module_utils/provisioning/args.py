# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Argument specs shared by the provisioning modules (each group has a same-named doc fragment:
`provisioning_cluster`, `provisioning_node`, `provisioning_write`), and the small parsers every module uses.
Light on purpose (no etcd or Kubernetes client): the read-only modules import only this.

Defaults live once, in spec.DEFAULTS; the argspec repeats them for ansible-doc and a unit test keeps both equal.
"""

from __future__ import annotations

import datetime
from typing import Any, Dict, Mapping, Optional

from ansible_collections.steward.cluster.plugins.module_utils.common.times import now_or
from ansible_collections.steward.cluster.plugins.module_utils.provisioning import lb
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.kubelet import KUBELET_BINARY
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.spec import DEFAULTS, KEY_ALGORITHMS

__all__ = ['CLUSTER_SPEC', 'NODE_SPEC', 'PROVISION_SPEC', 'cluster_params', 'parse_now']

CLUSTER_SPEC: Dict[str, Any] = {
    'control_plane': {'type': 'list', 'elements': 'dict', 'required': True,
                      'options': {'name': {'type': 'str', 'required': True}, 'address': {'type': 'str', 'required': True}}},
    'cluster_name': {'type': 'str', 'default': DEFAULTS['cluster_name']},
    'kubernetes_version': {'type': 'str', 'default': DEFAULTS['kubernetes_version']},
    'image_repository': {'type': 'str', 'default': DEFAULTS['image_repository']},
    'etcd_image': {'type': 'str', 'default': DEFAULTS['etcd_image']},
    'lb_image': {'type': 'str', 'default': DEFAULTS['lb_image']},
    'service_cidr': {'type': 'str', 'default': DEFAULTS['service_cidr']},
    'pod_cidr': {'type': 'str', 'default': DEFAULTS['pod_cidr']},
    'dns_domain': {'type': 'str', 'default': DEFAULTS['dns_domain']},
    'apiserver_port': {'type': 'int', 'default': DEFAULTS['apiserver_port']},
    'lb_port': {'type': 'int', 'default': DEFAULTS['lb_port']},
    'etcd_client_port': {'type': 'int', 'default': DEFAULTS['etcd_client_port']},
    'etcd_peer_port': {'type': 'int', 'default': DEFAULTS['etcd_peer_port']},
    'etcd_metrics_port': {'type': 'int', 'default': DEFAULTS['etcd_metrics_port']},
    'cert_days': {'type': 'int', 'default': DEFAULTS['cert_days']},
    'ca_days': {'type': 'int', 'default': DEFAULTS['ca_days']},
    'renew_before_days': {'type': 'int', 'default': DEFAULTS['renew_before_days']},
    'apiserver_extra_sans': {'type': 'list', 'elements': 'str', 'default': []},
    'key_algorithm': {'type': 'str', 'choices': list(KEY_ALGORITHMS), 'default': DEFAULTS['key_algorithm']},
}

NODE_SPEC: Dict[str, Any] = {
    'node_name': {'type': 'str', 'required': True},
    'address': {'type': 'str', 'required': True},
    'local_address': {'type': 'str', 'default': DEFAULTS['local_address']},
    'labels': {'type': 'dict', 'default': {}},
}

# Options of the modules that write a node's files (cluster_genesis, node_join).
PROVISION_SPEC: Dict[str, Any] = {
    'root': {'type': 'path', 'default': '/'},
    'authority': {'type': 'dict', 'no_log': True},
    'renew_ca': {'type': 'bool', 'default': False},
    'wait': {'type': 'bool', 'default': True},
    'wait_timeout': {'type': 'float', 'default': 300.0},
    'etcd_timeout': {'type': 'float', 'default': 5.0},
    'lb_validate_command': {'type': 'list', 'elements': 'str', 'default': list(lb.DEFAULT_VALIDATE_COMMAND)},
    'lb_validate': {'type': 'bool', 'default': True},
    'manage_kubelet': {'type': 'bool', 'default': True},
    'kubelet_binary': {'type': 'path', 'default': KUBELET_BINARY},
    'allow_downgrade': {'type': 'bool', 'default': False},
    'now': {'type': 'str'},
}


def parse_now(value: Optional[str], field: str = 'now') -> datetime.datetime:
    """The modules' `now` option: an RFC 3339 time with a zone, or the current time when absent (common/times)."""
    return now_or(value, field)


def cluster_params(params: Mapping[str, Any]) -> Dict[str, Any]:
    return {k: params.get(k) for k in CLUSTER_SPEC}
