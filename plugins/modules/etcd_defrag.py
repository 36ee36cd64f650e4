#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r'''
module: etcd_defrag
short_description: Rolling defragmentation of an etcd cluster, leader last
version_added: 0.1.0
description:
  - Defragments the members one at a time, followers first and the leader last, as etcd-backup-restore does.
  - Runs only while every member is healthy; health is checked again before each member, and the run is
    postponed (RV(postponed), RV(reason), a warning) as soon as the cluster is not fully healthy.
  - Members whose free share of the database, (dbSize - dbSizeInUse) / dbSize, is below O(min_fragmentation_ratio)
    are skipped.
options:
  min_fragmentation_ratio:
    description: Defragment only members with at least this share of free pages (0.0 to 1.0).
    type: float
    default: 0.0
  defrag_timeout:
    description: Seconds to wait for the defragmentation of one member.
    type: int
    default: 300
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
    details: Check mode returns the order only.
  diff_mode:
    support: none
author: steward.cluster developers (@steward-cluster)
'''

EXAMPLES = r'''
- name: Defragment members that are at least 30 % free pages
  steward.cluster.etcd_defrag:
    endpoints: ['https://etcd-0:2379']
    ca_cert: /etc/etcd/pki/ca.crt
    min_fragmentation_ratio: 0.3
  register: defrag
'''

RETURN = r'''
members:
  description:
    - Planned members in order, with C(id), C(name), C(endpoint), C(is_leader), C(fragmentation_ratio),
      C(db_size_before), C(db_size_in_use_before), C(status) (C(planned), C(defragmented), C(failed)),
      and after a defragmentation C(duration), C(db_size_after), C(db_size_in_use_after).
  returned: always
  type: list
  elements: dict
postponed:
  description: Whether the run stopped (or did not start) because the cluster was not fully healthy.
  returned: always
  type: bool
reason:
  description: Why the run was postponed.
  returned: always
  type: str
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.steward.cluster.plugins.module_utils.common import shell
from ansible_collections.steward.cluster.plugins.module_utils.etcd.args import ETCD_CONNECTION_SPEC
from ansible_collections.steward.cluster.plugins.module_utils.common.argspec import argspec
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.defrag import rolling_defrag
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import EtcdError
from ansible_collections.steward.cluster.plugins.module_utils.etcd.params import parse_etcd_defrag

SPEC = argspec(ETCD_CONNECTION_SPEC,
               min_fragmentation_ratio={'type': 'float', 'default': 0.0},
               defrag_timeout={'type': 'int', 'default': 300})


def act(p, check_mode):
    result = rolling_defrag(check_mode=check_mode, **parse_etcd_defrag(p))
    if result['postponed']:
        result['warnings'] = [result['reason']]
    return result


def main():
    module = AnsibleModule(argument_spec=SPEC, supports_check_mode=True)
    shell.require_libraries(module, 'requests')
    shell.run(module, act, EtcdError)


if __name__ == '__main__':
    main()
