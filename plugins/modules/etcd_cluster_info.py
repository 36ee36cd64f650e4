#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r'''
module: etcd_cluster_info
short_description: Members, health, leader, alarms and quorum of an etcd cluster
version_added: 0.1.0
description:
  - Probes every endpoint with a status call and a linearizable read (short timeout) and reports
    members, per-endpoint results, the leader, alarms and whether the cluster has quorum.
  - A member counts as healthy only when the linearizable read succeeds; a member without a leader
    still answers status calls.
  - Unreachable endpoints are reported, not failed on; the module fails only when no endpoint answers.
options:
  discover:
    description:
      - Also probe the client URLs found in the member list, so that one reachable endpoint is enough.
    type: bool
    default: true
  wait_healthy:
    description:
      - Seconds to wait until every member is a healthy voting member (no learner left, quorum, no CORRUPT
        alarm), polling several times a second; the module fails with the reason when that does not happen.
      - V(0) (default) reads the cluster once and never fails on its health.
    type: float
    default: 0
extends_documentation_fragment:
  - steward.cluster.etcd_connection
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.actiongroups
attributes:
  action_group:
    support: full
    membership: [steward.cluster.etcd]
  platform:
    platforms: posix
  check_mode:
    support: full
  diff_mode:
    support: none
author: steward.cluster developers (@steward-cluster)
'''

EXAMPLES = r'''
- name: Read the state of the cluster
  steward.cluster.etcd_cluster_info:
    endpoints: ['https://etcd-0:2379']
    ca_cert: /etc/etcd/pki/ca.crt
  register: etcd

- name: Stop unless the cluster has quorum
  ansible.builtin.assert:
    that: etcd.has_quorum
'''

RETURN = r'''
cluster_id:
  description: Cluster ID in hex.
  returned: always
  type: str
members:
  description: Members with C(id) (hex), C(name), C(peer_urls), C(client_urls), C(is_learner), C(healthy), C(reachable), C(is_leader).
  returned: always
  type: list
  elements: dict
endpoints:
  description:
    - One result per probed endpoint, C(endpoint), C(reachable), C(healthy), C(member_id), C(leader), C(raft_index),
      C(raft_term), C(raft_applied_index), C(revision), C(db_size), C(db_size_in_use), C(version), C(is_learner), C(errors).
  returned: always
  type: list
  elements: dict
leader:
  description: Leader member ID in hex as seen by a healthy member, null when none is healthy.
  returned: always
  type: str
alarms:
  description: Active alarms, each with C(member_id) and C(alarm) (C(NOSPACE), C(CORRUPT)).
  returned: always
  type: list
  elements: dict
has_quorum:
  description: Whether the voting members can commit (a linearizable read succeeded).
  returned: always
  type: bool
quorum_size:
  description: Healthy voting members needed for quorum.
  returned: always
  type: int
healthy_members:
  description: IDs of the healthy members.
  returned: always
  type: list
  elements: str
voting_members:
  description: IDs of the voting (non-learner) members.
  returned: always
  type: list
  elements: str
errors:
  description: Errors met while reading the member list or alarms (endpoint errors are in O(endpoints)).
  returned: always
  type: list
  elements: str
learners:
  description: IDs of the learner members.
  returned: always
  type: list
  elements: str
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.steward.cluster.plugins.module_utils.common import shell
from ansible_collections.steward.cluster.plugins.module_utils.etcd.args import ETCD_CONNECTION_SPEC
from ansible_collections.steward.cluster.plugins.module_utils.common.argspec import argspec
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.cluster import (
    cluster_info,
    wait_until_healthy,
)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import EtcdError
from ansible_collections.steward.cluster.plugins.module_utils.etcd.params import parse_etcd_cluster_info

SPEC = argspec(ETCD_CONNECTION_SPEC, discover={'type': 'bool', 'default': True},
               wait_healthy={'type': 'float', 'default': 0})


def act(p, check_mode):
    parsed = parse_etcd_cluster_info(p)
    if parsed['wait_healthy'] > 0:
        info, why = wait_until_healthy(parsed['conn'], parsed['wait_healthy'], discover=parsed['discover'])
        if why:
            raise shell.Failed('the cluster did not become healthy within %ss: %s' % (p['wait_healthy'], why), info)
    else:
        info = cluster_info(parsed['conn'], discover=parsed['discover'])
    return dict(info, changed=False)


def main():
    module = AnsibleModule(argument_spec=SPEC, supports_check_mode=True)
    shell.require_libraries(module, 'requests')
    shell.run(module, act, EtcdError)


if __name__ == '__main__':
    main()
