#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r'''
module: cluster_authority
short_description: Read the cluster authority (CAs and service-account key) from a control-plane node
version_added: 0.1.0
description:
  - Reads C(ca.crt), C(ca.key), C(etcd/ca.crt), C(etcd/ca.key), C(front-proxy-ca.crt), C(front-proxy-ca.key),
    C(sa.key) and C(sa.pub) from C(/etc/kubernetes/pki) below O(root), checks that each CA matches its key, and
    returns them for M(steward.cluster.node_join) (its O(steward.cluster.node_join#module:authority) option). Any
    control-plane node holds the same authority, so any of them can be asked - the genesis node is not special.
  - The result holds private keys - register it only in tasks with C(no_log) set.
  - Read-only. A node without an authority returns RV(found=false).
options:
  root:
    description: Root prefix of the node's files (C(/) on a real host).
    type: path
    default: /
  files:
    description: Which authority files to return (a worker's join needs only C(ca.crt) and C(ca.key)).
    type: list
    elements: str
    choices: [ca.crt, ca.key, etcd/ca.crt, etcd/ca.key, front-proxy-ca.crt, front-proxy-ca.key, sa.key, sa.pub]
    default: [ca.crt, ca.key, etcd/ca.crt, etcd/ca.key, front-proxy-ca.crt, front-proxy-ca.key, sa.key, sa.pub]
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
requirements:
  - cryptography
author: steward.cluster developers (@steward-cluster)
'''

EXAMPLES = r'''
- name: Read the authority from cp2
  steward.cluster.cluster_authority:
  delegate_to: cp2
  register: authority
  no_log: true
'''

RETURN = r'''
found:
  description: Whether the node holds an authority (its C(ca.key)).
  returned: always
  type: bool
authority:
  description: File name to PEM text, for the files asked for that exist; empty when RV(found) is false.
  returned: always
  type: dict
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.steward.cluster.plugins.module_utils.common import shell
from ansible_collections.steward.cluster.plugins.module_utils.provisioning import layout
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.certs import AUTHORITY_FILES, parse_authority
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.errors import ProvisioningError
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.params import parse_cluster_authority

SPEC = dict(root={'type': 'path', 'default': '/'},
            files={'type': 'list', 'elements': 'str', 'choices': list(AUTHORITY_FILES), 'default': list(AUTHORITY_FILES)})


def act(p, check_mode):
    root = parse_cluster_authority(p)
    if root.read(layout.pki('ca.key')) is None:
        return dict(changed=False, found=False, authority={}, msg='no authority below %s' % root.root)
    read = {}
    for name in p['files']:
        data = root.read(layout.pki(name))
        if data is not None:
            read[name] = data.decode('utf-8', 'replace')
    parse_authority(read, layout.PKI_DIR)   # a CA that does not match its key is refused, not handed on
    return dict(changed=False, found=True, authority=read, msg='authority read from %s' % root.root)


def main():
    module = AnsibleModule(argument_spec=SPEC, supports_check_mode=True)
    shell.require_libraries(module, 'cryptography', 'PyYAML')
    shell.run(module, act, ProvisioningError)


if __name__ == '__main__':
    main()
