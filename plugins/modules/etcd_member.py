#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r'''
module: etcd_member
short_description: Add (as learner), promote or remove an etcd member without losing quorum
version_added: 0.1.0
description:
  - With O(state=present), adds the member with O(peer_urls) (as a learner by default) and promotes it to a
    voting member once it has caught up with the leader. A member with the same peer URLs (and name, when it
    has one) is not added again; a voting member is not promoted again.
  - The result has RV(initial_cluster) and RV(initial_cluster_state) to start the new member with.
    Typical use is two tasks, V(promote=false) then start the member, then V(promote=true).
  - A learner added by the same task cannot have been started by it; its promotion is waited for up to
    O(promote_timeout) seconds and, when the member has not started by then, reported as a warning with
    RV(promoted=false) instead of a failure. For a learner that already existed, a promotion that does not
    succeed within O(promote_timeout) fails.
  - With O(state=absent), removes the member given by O(member_id), O(name) or the first of O(peer_urls).
  - Refuses a removal, or a voting add, that would leave fewer healthy voting members than the quorum
    of the resulting cluster, unless O(force=true). etcd's own reconfiguration checks still apply.
  - etcd refuses a membership change within about 5 seconds of the previous one and allows one learner at a time;
    both are retried with backoff for O(retry_timeout) seconds.
options:
  name:
    description: Member name (the new member's C(--name)). Required with O(state=present).
    type: str
  peer_urls:
    description: Peer URLs of the member. Required with O(state=present).
    type: list
    elements: str
  member_id:
    description: Member ID in hex, to select the member to remove.
    type: str
  state:
    description: Whether the member should be present or absent.
    type: str
    choices: [present, absent]
    default: present
  learner:
    description: Add the member as a learner (it does not count for quorum until promoted).
    type: bool
    default: true
  promote:
    description: Promote the member to a voting member once it is in sync with the leader.
    type: bool
    default: true
  force:
    description: Skip the quorum safety check.
    type: bool
    default: false
  retry_timeout:
    description: Seconds to keep retrying an add or remove that etcd refuses for now.
    type: int
    default: 60
  promote_timeout:
    description: Seconds to keep retrying the promotion of a learner that is not in sync yet.
    type: int
    default: 60
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
    support: full
author: steward.cluster developers (@steward-cluster)
'''

EXAMPLES = r'''
- name: Add etcd-3 as a learner
  steward.cluster.etcd_member:
    endpoints: ['https://etcd-0:2379']
    name: etcd-3
    peer_urls: ['https://etcd-3:2380']
    promote: false
  register: added

- name: Start etcd-3 with --initial-cluster {{ added.initial_cluster }} --initial-cluster-state existing
  ansible.builtin.debug:
    msg: "{{ added.initial_cluster }}"

- name: Promote etcd-3 once it is in sync
  steward.cluster.etcd_member:
    endpoints: ['https://etcd-0:2379']
    name: etcd-3
    peer_urls: ['https://etcd-3:2380']

- name: Remove a dead member
  steward.cluster.etcd_member:
    endpoints: ['https://etcd-0:2379']
    member_id: 8e9e05c52164694d
    state: absent
'''

RETURN = r'''
member:
  description: The member, with C(id) (hex), C(name), C(peer_urls), C(client_urls), C(is_learner), C(started); null if absent.
  returned: always
  type: dict
added:
  description: Whether the member was (or, in check mode, would be) added.
  returned: when O(state=present)
  type: bool
promoted:
  description: Whether the learner was (or would be) promoted.
  returned: when O(state=present)
  type: bool
removed:
  description: Whether the member was (or would be) removed.
  returned: when O(state=absent)
  type: bool
initial_cluster:
  description: The C(name=peerURL,...) value to start the new member with.
  returned: when O(state=present)
  type: str
  sample: etcd-0=https://etcd-0:2380,etcd-1=https://etcd-1:2380,etcd-3=https://etcd-3:2380
initial_cluster_state:
  description: Always C(existing) for a member joining a running cluster.
  returned: when O(state=present)
  type: str
members:
  description: The member list after the change.
  returned: always
  type: list
  elements: dict
actions:
  description: The changes made (or planned in check mode), one line each.
  returned: always
  type: list
  elements: str
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.steward.cluster.plugins.module_utils.common import shell
from ansible_collections.steward.cluster.plugins.module_utils.etcd.args import ETCD_CONNECTION_SPEC
from ansible_collections.steward.cluster.plugins.module_utils.common.argspec import argspec
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import EtcdError
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.members import (
    ensure_member_absent,
    ensure_member_present,
)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.params import parse_etcd_member

SPEC = argspec(
    ETCD_CONNECTION_SPEC,
    name={'type': 'str'},
    peer_urls={'type': 'list', 'elements': 'str'},
    member_id={'type': 'str'},
    state={'type': 'str', 'choices': ['present', 'absent'], 'default': 'present'},
    learner={'type': 'bool', 'default': True},
    promote={'type': 'bool', 'default': True},
    force={'type': 'bool', 'default': False},
    retry_timeout={'type': 'int', 'default': 60},
    promote_timeout={'type': 'int', 'default': 60},
)


def act(p, check_mode):
    conn = parse_etcd_member(p)['conn']
    if p['state'] == 'present':
        result = ensure_member_present(conn, name=p['name'], peer_urls=p['peer_urls'], learner=p['learner'],
                                       promote=p['promote'], force=p['force'], retry_timeout=p['retry_timeout'],
                                       promote_timeout=p['promote_timeout'], check_mode=check_mode)
    else:
        result = ensure_member_absent(conn, name=p['name'], member_id=p['member_id'],
                                      peer_url=(p['peer_urls'] or [None])[0], force=p['force'],
                                      check_mode=check_mode, retry_timeout=p['retry_timeout'])
    if not result['changed']:
        result['diff'] = None
    return result


def main():
    module = AnsibleModule(argument_spec=SPEC, supports_check_mode=True,
                           required_if=[('state', 'present', ('name', 'peer_urls'))],
                           required_one_of=[('name', 'member_id', 'peer_urls')])
    shell.require_libraries(module, 'requests')
    shell.run(module, act, EtcdError)


if __name__ == '__main__':
    main()
