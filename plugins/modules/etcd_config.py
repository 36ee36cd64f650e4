#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r'''
module: etcd_config
short_description: Write an etcd member's config file, its directories and its restart fingerprint in one step
version_added: 0.1.0
description:
  - Used by the C(steward.cluster.etcd) role. Creates the directories with their modes (and owner), writes the
    YAML config file etcd reads with C(--config-file), and a fingerprint file of the settings a restart depends on.
  - Files are replaced atomically, and only when their content changes. RV(fingerprint_changed) says whether
    etcd must restart; a change of bootstrap-only keys (initial-cluster...) changes the file, not the fingerprint.
  - One module run where a template and copies would take five (recovery runs it on its critical path).
options:
  path:
    description: The config file.
    type: path
    required: true
  config:
    description: The etcd configuration, written as block YAML in the given key order.
    type: dict
    required: true
  mode:
    description: Mode of the config file, as ansible.builtin.file reads it (C('0640')).
    type: raw
    default: '0640'
  directories:
    description: Directories to create (or give their mode), each with C(path) and C(mode).
    type: list
    elements: dict
    default: []
  fingerprint_path:
    description: File holding O(fingerprint).
    type: path
    required: true
  fingerprint:
    description: What a restart depends on (a hash of the settings etcd reads at every start).
    type: str
    required: true
  owner:
    description: Owner of O(directories) (unchanged when unset).
    type: str
  group:
    description: Group of O(directories) (unchanged when unset).
    type: str
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.actiongroups
attributes:
  check_mode:
    support: full
    details: Reports what would be created or written; writes nothing.
  diff_mode:
    support: full
    details: The config file's text before and after.
  action_group:
    support: full
    membership: [steward.cluster.etcd]
  platform:
    platforms: posix
author: steward.cluster developers (@steward)
'''

EXAMPLES = r'''
- name: Write a member's config
  steward.cluster.etcd_config:
    path: /etc/etcd/etcd.conf.yml
    config: {name: etcd1, data-dir: /var/lib/etcd}
    directories: [{path: /var/lib/etcd, mode: '0700'}, {path: /etc/etcd, mode: '0755'}]
    fingerprint_path: /etc/etcd/etcd.conf.yml.restart-sha256
    fingerprint: 0123abcd
'''

RETURN = r'''
config_changed:
  description: Whether the config file's content changed (or would).
  returned: always
  type: bool
fingerprint_changed:
  description: Whether the restart fingerprint changed (or would) - etcd must restart to read the new settings.
  returned: always
  type: bool
config_existed:
  description:
    - Whether the config file existed before this run. In check mode a V(false) means that no config file is there
      yet for a following start to read (the role's start skips etcd_process in check mode then, which would refuse).
  returned: always
  type: bool
actions:
  description: What was (or would be) done, one line each.
  returned: always
  type: list
  elements: str
path:
  description: The config file.
  returned: always
  type: str
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.steward.cluster.plugins.module_utils.common import shell
from ansible_collections.steward.cluster.plugins.module_utils.etcd.member.config_file import apply_config
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import EtcdError
from ansible_collections.steward.cluster.plugins.module_utils.etcd.params import parse_etcd_config

SPEC = dict(path=dict(type='path', required=True), config=dict(type='dict', required=True),
            mode=dict(type='raw', default='0640'),
            directories=dict(type='list', elements='dict', default=[]),
            fingerprint_path=dict(type='path', required=True),
            fingerprint=dict(type='str', required=True),
            owner=dict(type='str'), group=dict(type='str'))


def act(p, check_mode):
    result = apply_config(check_mode=check_mode, **parse_etcd_config(p))
    if not result['config_changed']:
        result['diff'] = None
    return result


def main():
    module = AnsibleModule(argument_spec=SPEC, supports_check_mode=True)
    shell.run(module, act, EtcdError)


if __name__ == '__main__':
    main()
