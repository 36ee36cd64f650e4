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

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.steward.cluster.plugins.module_utils.common import shell
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import EtcdError
from ansible_collections.steward.cluster.plugins.module_utils.common.argspec import argspec
from ansible_collections.steward.cluster.plugins.module_utils.kube.args import KUBE_CONNECTION_SPEC, client_from_params
from ansible_collections.steward.cluster.plugins.module_utils.kube.errors import KubeError
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.errors import ProvisioningError
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.params import parse_node_remove
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


def act(p, check_mode):
    parsed = parse_node_remove(p)
    client = client_from_params(p) if p['drain'] or p['delete_node'] else None
    return remove_node(client=client, peer_url=p['peer_url'], member_id=p['member_id'], check_mode=check_mode,
                       drain_node=p['drain'], delete_node=p['delete_node'],
                       protected_namespaces=p['protected_namespaces'], force=p['force'], **parsed)


def main():
    module = AnsibleModule(argument_spec=SPEC, supports_check_mode=True, mutually_exclusive=[('peer_url', 'member_id')])
    shell.run(module, act, ProvisioningError, EtcdError, KubeError)


if __name__ == '__main__':
    main()
