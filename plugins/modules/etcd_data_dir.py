#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r'''
module: etcd_data_dir
short_description: Set an etcd data dir aside, never deleting it
version_added: 0.1.0
description:
  - A member that re-joins a cluster must start from an empty data dir. This module moves the old
    one to C(<data_dir>.<reason>-<unix time>) so that nothing is ever lost, and can create the empty
    directory the member starts from.
  - An empty directory is removed rather than moved, since it holds nothing.
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.actiongroups
attributes:
  action_group:
    support: full
    membership: [steward.cluster.etcd]
  check_mode:
    support: full
  diff_mode:
    support: full
  platform:
    platforms: posix
options:
  path:
    description: The member's data directory.
    type: path
    required: true
  state:
    description:
      - C(absent) moves the directory aside (if it exists).
      - C(empty) moves it aside and creates a fresh empty directory (mode 0700).
    type: str
    choices: [absent, empty]
    default: absent
  reason:
    description: Word put in the name of the moved directory.
    type: str
    default: set-aside
author: steward.cluster developers (@steward-cluster)
'''

EXAMPLES = r'''
- name: Make room for a fresh member
  steward.cluster.etcd_data_dir:
    path: /var/lib/etcd
    state: absent
    reason: lost
'''

RETURN = r'''
moved_to:
  description: Where the old data dir now is (null when there was nothing to move).
  returned: always
  type: str
  sample: /var/lib/etcd.lost-1763800000
'''

import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.steward.cluster.plugins.module_utils.common import shell
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import EtcdError
from ansible_collections.steward.cluster.plugins.module_utils.etcd.member.local_member import (
    data_dir_state,
    reset_data_dir,
)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.params import parse_etcd_data_dir

SPEC = dict(
    path=dict(type='path', required=True),
    state=dict(type='str', choices=['absent', 'empty'], default='absent'),
    reason=dict(type='str', default='set-aside'),
)


def act(p, check_mode):
    path, state = p['path'], p['state']
    before = data_dir_state(parse_etcd_data_dir(p))
    changed, moved = reset_data_dir(path, state=state, reason=p['reason'], now=time.time(), check_mode=check_mode)
    return dict(changed=changed, moved_to=moved,
                diff=dict(before={'path': path, 'exists': before['exists'], 'has_data': before['has_data']},
                          after={'path': path, 'exists': state == 'empty', 'has_data': False, 'moved_to': moved}))


def main():
    module = AnsibleModule(argument_spec=SPEC, supports_check_mode=True)
    shell.run(module, act, EtcdError, OSError, path=module.params['path'])


if __name__ == '__main__':
    main()
