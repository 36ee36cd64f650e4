# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The provisioning modules' parameters, parsed once: one `parse_<module>(params)` per module, raising InvalidInput
(its field names the option) before anything acts, in check mode too. cluster_genesis and node_join use
runner.provision_request, which the controller's provisioning API shares. The modules do no validation of their own.
"""

from __future__ import annotations

import os
from typing import Any, Dict, Mapping, Optional

from ansible_collections.steward.cluster.plugins.module_utils.common import names, validate
from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.client import EtcdConnection
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.members import parse_member_id
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.args import cluster_params, parse_now
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.certs import parse_authority
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.files import Root
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.join_script import JoinScriptRequest
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.kubelet import check_registration_labels
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.spec import parse_cluster, parse_node


def _root(params: Mapping[str, Any]) -> Root:
    return Root(validate.absolute_path(params['root'], 'root'))


def parse_apiserver_lb(params: Mapping[str, Any]) -> Dict[str, Any]:
    cluster = parse_cluster({'control_plane': params['control_plane'], 'apiserver_port': params['apiserver_port'],
                             'lb_port': params['lb_port']})
    return dict(cluster=cluster, local=validate.ip_address(params['local_address'], 'local_address'),
                root=_root(params), reload_timeout=validate.timeout(params['reload_timeout'], 'reload_timeout'),
                validate_command=params['lb_validate_command'] if params['lb_validate'] else None)


def parse_cert_info(params: Mapping[str, Any]) -> Dict[str, Any]:
    return dict(root=_root(params), now=parse_now(params['now']),
                days=validate.integer(params['renew_before_days'], 'renew_before_days', minimum=0, maximum=36500))


def parse_cluster_authority(params: Mapping[str, Any]) -> Root:
    return _root(params)


def parse_join_script(params: Mapping[str, Any]) -> JoinScriptRequest:
    """`dest`: an absolute path to a file (not a directory) in a directory that exists, checked before anything is
    rendered (the script is written beside it first, then renamed into place); then the cluster, the worker and the
    authority that signs its kubelet certificate."""
    dest = validate.regular_file_or_absent(params['dest'], 'dest')   # a directory or a FIFO: refused
    validate.existing_dir(os.path.dirname(dest), 'dest')
    cluster = parse_cluster(cluster_params(params))
    node = parse_node(dict(params, role='worker'), cluster)
    check_registration_labels(node.labels)
    authority = parse_authority({k: v for k, v in params['authority'].items() if k in ('ca.crt', 'ca.key')},
                                'authority')
    if authority is None:
        raise InvalidInput('authority', 'required', 'ca.crt and ca.key are needed to sign the kubelet certificate')
    return JoinScriptRequest(dest=dest, cluster=cluster, node=node, authority=authority, now=parse_now(params['now']))


def parse_node_labels(params: Mapping[str, Any]) -> str:
    return names.dns_subdomain(params['name'], 'name')


def remove_connection(params: Mapping[str, Any]) -> Optional[EtcdConnection]:
    """node_remove's etcd connection when a member is to be removed, else None. Every etcd option is checked either
    way: a wrong value is bad input even when this run would not use it (it will when the playbook runs for a
    control-plane node)."""
    conn = EtcdConnection.from_params(dict(params, etcd_endpoints=params['etcd_endpoints'] or ['127.0.0.1:2379']),
                                      prefix='etcd_')
    validate.timeout(params['etcd_timeout'], 'etcd_timeout', maximum=300)
    if params['member_id']:
        parse_member_id(params['member_id'], 'member_id')
    if params['peer_url']:
        validate.endpoint_url(params['peer_url'], 'peer_url')
    if not (params['peer_url'] or params['member_id']):
        return None
    if not params['etcd_endpoints']:
        raise InvalidInput('etcd_endpoints', 'required', 'the etcd members that stay are needed to remove a member')
    return conn


def parse_node_remove(params: Mapping[str, Any]) -> Dict[str, Any]:
    name = names.dns_subdomain(params['name'], 'name')
    for index, namespace in enumerate(params['protected_namespaces']):
        names.dns_label(namespace, 'protected_namespaces[%d]' % index)
    return dict(name=name, etcd=remove_connection(params),
                timeout=validate.timeout(params['wait_timeout'], 'wait_timeout'),
                eviction_timeout=validate.timeout(params['eviction_timeout'], 'eviction_timeout'))


def parse_node_teardown(params: Mapping[str, Any]) -> Dict[str, Any]:
    root = _root(params)
    for index, endpoint in enumerate(params['etcd_endpoints']):   # checked even when no member is asked about
        validate.endpoint_url(endpoint, 'etcd_endpoints[%d]' % index, default_scheme='https')
    return dict(root=root, now=parse_now(params['now']),
                wait_timeout=validate.timeout(params['wait_timeout'], 'wait_timeout'))
