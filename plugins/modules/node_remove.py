#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r'''
module: node_remove
short_description: Remove a node from the cluster - drain it, remove its etcd member (exact match, quorum-safe), delete the Node
version_added: 0.1.0
description:
  - Plans first, then acts. The etcd member is found by its exact peer URL (O(peer_url)) or ID (O(member_id)) -
    never by a name or part of one (removing C(etcd1) must not hit C(etcd10), kubespray's bug). Its removal is
    checked against quorum before anything changes - a removal that would leave fewer healthy voting members than a
    quorum is refused (rule C(etcd-quorum)) with nothing drained and nothing removed.
  - Then drains the node through the Eviction API with C(kubectl drain)'s rules (PodDisruptionBudgets respected,
    DaemonSet and mirror pods skipped, pods without a controller only with O(force)), removes the etcd member (the
    etcd area's own quorum check runs again right before) and deletes the Node.
  - The node's own files are removed by M(steward.cluster.node_teardown) on the node; the
    C(steward.cluster.node_remove) playbook runs both and re-renders every other node's load balancer.
  - A member with the same name but other peer URLs is reported as a warning and left alone.
  - Idempotent - once the Node and the member are gone, nothing changes.
options:
  name:
    description: The Node name.
    type: str
    required: true
  peer_url:
    description: The peer URL of the node's etcd member (C(https://<address>:2380)); omit for a worker.
    type: str
  member_id:
    description: The etcd member ID (hex) instead of O(peer_url).
    type: str
  etcd_endpoints:
    description: Client URLs of etcd members that stay (the remaining control-plane nodes).
    type: list
    elements: str
    default: []
  etcd_ca_cert:
    description: The etcd CA certificate (C(/etc/kubernetes/pki/etcd/ca.crt) on a control-plane node).
    type: path
  etcd_client_cert:
    description: An etcd client certificate (C(/etc/kubernetes/pki/apiserver-etcd-client.crt) on a control-plane node).
    type: path
  etcd_client_key:
    description: Its key.
    type: path
  etcd_timeout:
    description: Seconds one etcd request may take.
    type: float
    default: 5.0
  drain:
    description: Drain the node before removing it.
    type: bool
    default: true
  delete_node:
    description: Delete the Node object.
    type: bool
    default: true
  wait_timeout:
    description: Seconds the whole drain may take.
    type: float
    default: 600.0
  eviction_timeout:
    description: Seconds one pod's eviction may be refused by a PodDisruptionBudget before the drain fails.
    type: float
    default: 120.0
  force:
    description: Also evict pods that no controller would recreate.
    type: bool
    default: false
  protected_namespaces:
    description: Namespaces whose pods are not evicted.
    type: list
    elements: str
    default: []
extends_documentation_fragment:
  - steward.cluster.kube_connection
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.actiongroups
attributes:
  action_group:
    support: full
    membership: [steward.cluster.provisioning]
  platform:
    platforms: posix
  check_mode:
    support: full
    details: The quorum check and the drain plan run in check mode too.
  diff_mode:
    support: none
requirements:
  - kubernetes (the Python client)
  - requests
author: steward.cluster developers (@steward-cluster)
'''

EXAMPLES = r'''
- name: Remove cp1 (run on another control-plane node)
  steward.cluster.node_remove:
    name: cp1
    peer_url: https://10.0.0.11:2380
    etcd_endpoints: [https://10.0.0.12:2379, https://10.0.0.13:2379]
    etcd_ca_cert: /etc/kubernetes/pki/etcd/ca.crt
    etcd_client_cert: /etc/kubernetes/pki/apiserver-etcd-client.crt
    etcd_client_key: /etc/kubernetes/pki/apiserver-etcd-client.key
    kubeconfig: /etc/kubernetes/admin.conf
'''

RETURN = r'''
member:
  description: The etcd member removed (or to remove), C(id), C(name), C(peer_urls), C(is_learner); null when none matched.
  returned: always
  type: dict
node_found:
  description: Whether the Node existed.
  returned: always
  type: bool
drain:
  description: The pods evicted (or to evict) and skipped.
  returned: always
  type: dict
actions:
  description: What was done (or would be, in check mode), in order.
  returned: always
  type: list
  elements: str
'''

import traceback

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.steward.cluster.plugins.module_utils.common import validate
from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.common.names import dns_label, dns_subdomain
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.client import EtcdConnection
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import EtcdError
from ansible_collections.steward.cluster.plugins.module_utils.kube.args import KUBE_CONNECTION_SPEC, argspec, client_from_params
from ansible_collections.steward.cluster.plugins.module_utils.kube.errors import KubeError
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.args import failure
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.errors import ProvisioningError
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.remove import remove_node

SPEC = argspec(
    KUBE_CONNECTION_SPEC,
    name={'type': 'str', 'required': True},
    peer_url={'type': 'str'},
    member_id={'type': 'str'},
    etcd_endpoints={'type': 'list', 'elements': 'str', 'default': []},
    etcd_ca_cert={'type': 'path'},
    etcd_client_cert={'type': 'path'},
    etcd_client_key={'type': 'path', 'no_log': False},
    etcd_timeout={'type': 'float', 'default': 5.0},
    drain={'type': 'bool', 'default': True},
    delete_node={'type': 'bool', 'default': True},
    wait_timeout={'type': 'float', 'default': 600.0},
    eviction_timeout={'type': 'float', 'default': 120.0},
    force={'type': 'bool', 'default': False},
    protected_namespaces={'type': 'list', 'elements': 'str', 'default': []},
)


def etcd_connection(p):
    """The etcd connection when a member is to be removed, else None. Every etcd option is checked either way: a
    wrong value is bad input even when this run would not use it (it will when the playbook runs for a control-plane
    node)."""
    for index, endpoint in enumerate(p['etcd_endpoints']):
        validate.endpoint_url(endpoint, 'etcd_endpoints[%d]' % index, default_scheme='http')
    validate.tls_files(p['etcd_ca_cert'], p['etcd_client_cert'], p['etcd_client_key'], 'etcd_')
    timeout = validate.timeout(p['etcd_timeout'], 'etcd_timeout', maximum=300)
    if p['member_id']:
        try:
            member_id = int(p['member_id'], 16)
        except ValueError:
            raise InvalidInput('member_id', 'hex', 'expected a hexadecimal etcd member ID', p['member_id']) from None
        if member_id == 0:   # etcd never gives a member the ID 0
            raise InvalidInput('member_id', 'hex', 'an etcd member ID is never 0', p['member_id'])
    if p['peer_url']:
        validate.endpoint_url(p['peer_url'], 'peer_url')
    if not (p['peer_url'] or p['member_id']):
        return None
    if not p['etcd_endpoints']:
        raise InvalidInput('etcd_endpoints', 'required', 'the etcd members that stay are needed to remove a member')
    return EtcdConnection(endpoints=tuple(p['etcd_endpoints']), ca_cert=p['etcd_ca_cert'],
                          client_cert=p['etcd_client_cert'], client_key=p['etcd_client_key'], timeout=timeout)


def main():
    module = AnsibleModule(argument_spec=SPEC, supports_check_mode=True, mutually_exclusive=[('peer_url', 'member_id')])
    p = module.params
    try:
        name = dns_subdomain(p['name'], 'name')
        for index, namespace in enumerate(p['protected_namespaces']):
            dns_label(namespace, 'protected_namespaces[%d]' % index)
        etcd = etcd_connection(p)
        client = client_from_params(p) if p['drain'] or p['delete_node'] else None
        result = remove_node(name=name, client=client, etcd=etcd, peer_url=p['peer_url'], member_id=p['member_id'],
                             check_mode=module.check_mode, drain_node=p['drain'], delete_node=p['delete_node'],
                             timeout=validate.timeout(p['wait_timeout'], 'wait_timeout'),
                             eviction_timeout=validate.timeout(p['eviction_timeout'], 'eviction_timeout'),
                             protected_namespaces=p['protected_namespaces'], force=p['force'])
    except (InvalidInput, ProvisioningError, EtcdError, KubeError) as exc:
        module.fail_json(exception=traceback.format_exc(), **failure(exc))
    for warning in result.pop('warnings'):
        module.warn(warning)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
