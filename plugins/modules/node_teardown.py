#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r'''
module: node_teardown
short_description: Remove a node's provisioned files - exactly those this collection recorded, nothing else
version_added: 0.1.0
description:
  - Promenade's C(promenade-teardown) and C(kubeadm reset), limited to what is provably ours - every file listed in
    C(/etc/kubernetes/steward-provisioning.json) (written by the genesis, join and join script), and nothing an
    operator or another tool put in the same directories.
  - Static pod manifests go first so the kubelet stops the pods; once etcd has stopped listening, the other files
    go, and the etcd data directory is moved aside to C(/var/lib/etcd.removed-<time>) rather than deleted (a member
    removed by mistake can still be recovered from it). Directories left empty are removed.
  - A control-plane node whose etcd member is still in the cluster is refused (rule C(still-a-member)) - remove it
    first with M(steward.cluster.node_remove) - and so is one whose cluster cannot be asked (rule
    C(etcd-unreachable)), unless O(force).
  - With O(root=/) and O(manage_kubelet), the kubelet is stopped and disabled at the end.
options:
  root:
    description: Root prefix of the node's files (C(/) on a real host).
    type: path
    default: /
  etcd_endpoints:
    description:
      - Client URLs of the cluster's other etcd members, to check that this node's member is gone. The node's own
        etcd certificates are used.
    type: list
    elements: str
    default: []
  force:
    description: Skip the membership check (a cluster that is gone for good).
    type: bool
    default: false
  wait_timeout:
    description: Seconds to wait for etcd to stop after its manifest is removed.
    type: float
    default: 120.0
  manage_kubelet:
    description: With O(root=/), stop and disable the kubelet at the end.
    type: bool
    default: true
  now:
    description: The time in the name of the moved etcd data directory (RFC 3339); the current time by default.
    type: str
extends_documentation_fragment:
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
  diff_mode:
    support: none
author: steward.cluster developers (@steward-cluster)
'''

EXAMPLES = r'''
- name: Tear cp1 down after node_remove took its member out
  steward.cluster.node_teardown:
    etcd_endpoints: [https://10.0.0.12:2379, https://10.0.0.13:2379]
'''

RETURN = r'''
removed:
  description: The files removed (or to remove), manifests first.
  returned: always
  type: list
  elements: str
moved:
  description: The etcd data directory and where it was moved, or null.
  returned: always
  type: list
  elements: str
pruned:
  description: Directories removed because they were left empty.
  returned: always
  type: list
  elements: str
'''

import os
import traceback

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.steward.cluster.plugins.module_utils.common import validate
from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.client import EtcdConnection
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.cluster import cluster_info
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import EtcdError
from ansible_collections.steward.cluster.plugins.module_utils.provisioning import layout
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.args import failure, parse_now
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.errors import ProvisioningError, Refused
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.etcd_membership import member_of
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.files import Root
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.teardown import teardown

SPEC = dict(root={'type': 'path', 'default': '/'}, etcd_endpoints={'type': 'list', 'elements': 'str', 'default': []},
            force={'type': 'bool', 'default': False}, wait_timeout={'type': 'float', 'default': 120.0},
            manage_kubelet={'type': 'bool', 'default': True}, now={'type': 'str'})


def member_check(root, endpoints, force):
    def check(peer_url):
        if force:
            return False
        if not endpoints:
            raise Refused('etcd_endpoints is empty: cannot tell whether the etcd member %s left the cluster' % peer_url,
                          'etcd-unreachable')
        conn = EtcdConnection(endpoints=tuple(endpoints), ca_cert=root.host(layout.pki('etcd/ca.crt')),
                              client_cert=root.host(layout.pki('etcd/healthcheck-client.crt')),
                              client_key=root.host(layout.pki('etcd/healthcheck-client.key')))
        try:
            return member_of(cluster_info(conn), peer_url) is not None
        except EtcdError as exc:
            raise Refused('cannot ask the cluster whether the etcd member %s left it (%s); use force if the cluster is '
                          'gone for good' % (peer_url, exc), 'etcd-unreachable') from exc
    return check


def main():
    module = AnsibleModule(argument_spec=SPEC, supports_check_mode=True)
    p = module.params
    try:
        root = Root(validate.absolute_path(p['root'], 'root'))
        for index, endpoint in enumerate(p['etcd_endpoints']):   # checked even when no member is asked about
            validate.endpoint_url(endpoint, 'etcd_endpoints[%d]' % index, default_scheme='https')
        had_kubelet = root.exists(layout.KUBELET_UNIT)
        result = teardown(root, check_mode=module.check_mode, now=parse_now(p['now']),
                          member_check=member_check(root, p['etcd_endpoints'], p['force']),
                          wait_timeout=validate.timeout(p['wait_timeout'], 'wait_timeout'))
    except (InvalidInput, ProvisioningError) as exc:
        module.fail_json(exception=traceback.format_exc(), **failure(exc))
    if result['changed'] and not module.check_mode and had_kubelet and p['manage_kubelet'] \
            and os.path.normpath(root.root) == '/':
        rc, out, err = module.run_command(['systemctl', 'disable', '--now', 'kubelet.service'])
        if rc != 0:
            module.warn('stopping the kubelet failed (rc=%d): %s' % (rc, (err or out).strip()))
    result['msg'] = ('removed %d file(s)%s' % (len(result['removed']), ', moved %s aside' % result['moved'][0]
                                               if result['moved'] else '')) if result['changed'] else 'nothing of ours here'
    module.exit_json(**result)


if __name__ == '__main__':
    main()
