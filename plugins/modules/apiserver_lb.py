#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r'''
module: apiserver_lb
short_description: Keep a node's local apiserver load balancer (HAProxy) in step with the control-plane set
version_added: 0.1.0
description:
  - Renders the node-local HAProxy config from O(control_plane) (one server per control-plane node, named after it,
    sorted) and makes it the live config at C(/etc/kubernetes/haproxy/haproxy.cfg) below O(root) - Promenade's
    apiserver discovery, which survives node loss and full reboots without external DNS or load balancers.
  - The new config is validated with C(haproxy -c) (O(lb_validate_command)) before it replaces the live one; an
    invalid render fails and the live config stays as it was. The file is replaced atomically and HAProxy reloaded
    through its master CLI socket (C(/run/steward-haproxy/master.sock)) - a new worker takes the new config, the
    old one finishes the connections it holds, nothing is dropped.
  - The playbooks run it on every node after a join or a removal. A node that was never provisioned (no
    C(/etc/kubernetes/steward-provisioning.json)) is left alone.
options:
  root:
    description: Root prefix of the node's files (C(/) on a real host).
    type: path
    default: /
  control_plane:
    description: The control-plane nodes, C(name) and C(address) each.
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description: Node name.
        type: str
        required: true
      address:
        description: IPv4 or IPv6 address of its apiserver.
        type: str
        required: true
  apiserver_port:
    description: Port of every kube-apiserver.
    type: int
    default: 6443
  lb_port:
    description: Port the load balancer listens on.
    type: int
    default: 6553
  local_address:
    description: Loopback address the load balancer listens on.
    type: str
    default: 127.0.0.1
  lb_validate_command:
    description: Command that validates the config; C({config}) is the path of a temporary copy.
    type: list
    elements: str
    default: [haproxy, -c, -f, '{config}']
  lb_validate:
    description: Validate before replacing the live config.
    type: bool
    default: true
  reload_timeout:
    description: Seconds to wait for HAProxy to report the reload done.
    type: float
    default: 30.0
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
    details: The new config is validated in check mode too.
  diff_mode:
    support: full
author: steward.cluster developers (@steward-cluster)
'''

EXAMPLES = r'''
- name: Point every node's load balancer at the current control plane
  steward.cluster.apiserver_lb:
    control_plane: [{name: cp2, address: 10.0.0.12}, {name: cp3, address: 10.0.0.13}]
'''

RETURN = r'''
backends:
  description: The server names of the rendered config, sorted.
  returned: always
  type: list
  elements: str
  sample: [cp2, cp3]
validated:
  description: Whether haproxy validated the new config.
  returned: always
  type: bool
reloaded:
  description: Whether a running HAProxy was reloaded.
  returned: always
  type: bool
running:
  description: Whether HAProxy was running (null when nothing changed).
  returned: always
  type: bool
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.steward.cluster.plugins.module_utils.common import shell
from ansible_collections.steward.cluster.plugins.module_utils.provisioning import files, haproxy, layout, lb
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.errors import ProvisioningError
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.params import parse_apiserver_lb

SPEC = dict(
    root={'type': 'path', 'default': '/'},
    control_plane={'type': 'list', 'elements': 'dict', 'required': True,
                   'options': {'name': {'type': 'str', 'required': True}, 'address': {'type': 'str', 'required': True}}},
    apiserver_port={'type': 'int', 'default': 6443},
    lb_port={'type': 'int', 'default': 6553},
    local_address={'type': 'str', 'default': '127.0.0.1'},
    lb_validate_command={'type': 'list', 'elements': 'str', 'default': list(lb.DEFAULT_VALIDATE_COMMAND)},
    lb_validate={'type': 'bool', 'default': True},
    reload_timeout={'type': 'float', 'default': 30.0},
)


def act(p, check_mode):
    parsed = parse_apiserver_lb(p)
    root = parsed['root']
    config = haproxy.render(parsed['cluster'], parsed['local'])
    if not root.exists(layout.RECORD):
        return dict(changed=False, backends=haproxy.backends(config), validated=False, reloaded=False, running=None,
                    msg='this node was never provisioned here: left alone')
    result = lb.ensure_config(root, config, check_mode=check_mode, reload_timeout=parsed['reload_timeout'],
                              validate_command=parsed['validate_command'])
    out = dict(changed=result['changed'], backends=haproxy.backends(config), validated=result['validated'],
               reloaded=result['reloaded'], running=result['running'],
               msg='load balancer config %s' % ('updated' if result['changed'] else 'already current'))
    if result['changed']:
        out['diff'] = files.diff([files.Change(layout.LB_CONFIG, files.UPDATE, 'content', result['before'],
                                               result['after'], 0o644, False)], root.root)
    return out


def main():
    module = AnsibleModule(argument_spec=SPEC, supports_check_mode=True)
    shell.run(module, act, ProvisioningError)


if __name__ == '__main__':
    main()
