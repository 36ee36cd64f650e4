#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r'''
module: etcd_member_facts
short_description: Inspect the etcd member on this host (data dir, process, raft state)
version_added: 0.1.0
description:
  - Reports what only the host itself can tell about its etcd member, the input of
    M(steward.cluster.etcd_recovery_plan) - whether the data dir still holds data, whether the
    process runs, and what the member says about itself (member and cluster id, raft index and
    term, leader, learner, member list, and whether a linearizable read succeeds).
  - A member of a cluster that lost quorum still answers status requests, so the raft index of a
    leaderless survivor can be compared with the others.
  - Never changes anything.
  - The result is also set as the host fact C(etcd_member) (RV(ansible_facts.etcd_member)), so later plays
    and other hosts (C(hostvars[host].etcd_member)) can read it without registering the task.
extends_documentation_fragment:
  - steward.cluster.etcd_connection
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.actiongroups
  - ansible.builtin.action_common_attributes.facts
attributes:
  action_group:
    support: full
    membership: [steward.cluster.etcd]
  check_mode:
    support: full
  diff_mode:
    support: none
  facts:
    support: full
  platform:
    platforms: posix
options:
  name:
    description: Member name.
    type: str
    required: true
  data_dir:
    description: The member's data directory.
    type: path
    required: true
  client_url:
    description: The member's own client URL.
    type: str
    required: true
  peer_url:
    description: The member's peer URL, used to find its entry in the member list.
    type: str
    required: true
  pid_file:
    description: Pid file of a member run by the C(process) service manager; tells whether the process is alive.
    type: path
  probe_timeout:
    description: Seconds to wait for the member's answers; a leaderless member fails the linearizable read after this.
    type: float
    default: 2.0
author: steward.cluster developers (@steward-cluster)
'''

EXAMPLES = r'''
- name: Inspect the local etcd member
  steward.cluster.etcd_member_facts:
    name: etcd1
    data_dir: /var/lib/etcd
    client_url: https://10.0.0.11:2379
    peer_url: https://10.0.0.11:2380
    ca_cert: /etc/etcd/pki/ca.crt
    client_cert: /etc/etcd/pki/client.crt
    client_key: /etc/etcd/pki/client.key

- name: Every host's member as others see it (the etcd_member fact)
  ansible.builtin.debug:
    msg: "{{ groups['etcd'] | map('extract', hostvars, ['etcd_member', 'raft_index']) | list }}"
'''

RETURN = r'''
ansible_facts:
  description: The host fact C(etcd_member), the same dictionary as RV(member).
  returned: always
  type: dict
  contains:
    etcd_member:
      description: Facts about the member on this host (see RV(member)).
      type: dict
      returned: always
member:
  description: Facts about the member on this host.
  returned: always
  type: dict
  contains:
    name: {description: Member name., type: str, returned: always}
    host_reachable: {description: Always true (the module ran on the host)., type: bool, returned: always}
    data_state: {description: 'What is at the data dir: absent, empty, present or not-a-directory.', type: str, returned: always}
    data_exists: {description: The data dir exists., type: bool, returned: always}
    data_has_data: {description: The data dir holds a WAL or a backend db., type: bool, returned: always}
    process_running: {description: The member process is alive - from the pid file or else from the answer., type: bool, returned: always}
    responding: {description: The member answered a status request., type: bool, returned: always}
    healthy: {description: A linearizable read through this member succeeded (its cluster has quorum)., type: bool, returned: always}
    member_id: {description: Member id in hex., type: str, returned: when responding}
    cluster_id: {description: Cluster id in hex., type: str, returned: when responding}
    raft_index: {description: Raft index of the member., type: int, returned: when responding}
    raft_term: {description: Raft term of the member., type: int, returned: when responding}
    is_learner: {description: The member is a learner., type: bool, returned: always}
    members: {description: The member list as this member sees it., type: list, elements: dict, returned: always}
    errors: {description: What failed while probing., type: list, elements: str, returned: always}
  sample:
    name: etcd1
    healthy: false
    responding: true
    raft_index: 1042
    data_has_data: true
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.steward.cluster.plugins.module_utils.common import shell
from ansible_collections.steward.cluster.plugins.module_utils.etcd.args import ETCD_CONNECTION_SPEC
from ansible_collections.steward.cluster.plugins.module_utils.common.argspec import argspec
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import EtcdError
from ansible_collections.steward.cluster.plugins.module_utils.etcd.member.local_member import inspect_member
from ansible_collections.steward.cluster.plugins.module_utils.etcd.params import parse_etcd_member_facts

SPEC = argspec(
    ETCD_CONNECTION_SPEC,
    name=dict(type='str', required=True),
    data_dir=dict(type='path', required=True),
    client_url=dict(type='str', required=True),
    peer_url=dict(type='str', required=True),
    pid_file=dict(type='path'),
    probe_timeout=dict(type='float', default=2.0),
)


def act(p, check_mode):
    parsed = parse_etcd_member_facts(p)
    member = inspect_member(**parsed)
    return dict(changed=False, member=member, ansible_facts={'etcd_member': member})


def main():
    module = AnsibleModule(argument_spec=SPEC, supports_check_mode=True)
    shell.require_libraries(module, 'requests')
    shell.run(module, act, EtcdError)


if __name__ == '__main__':
    main()
