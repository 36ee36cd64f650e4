#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r'''
module: join_script
short_description: Render Promenade's self-contained join.sh for a node, so it can join without Ansible
version_added: 0.1.0
description:
  - Writes a shell script to O(dest) (mode 0700) that holds everything the node needs - its kubelet client
    certificate and key, the cluster CA certificate, the kubeconfig, the kubelet config, flags (registration labels)
    and systemd unit, the node-local load balancer config and manifest - and the record of those files, exactly
    what M(steward.cluster.node_join) writes for a worker. Run on the node, it writes them, starts the kubelet and
    waits until the Node is Ready (C(--root DIR), C(--no-start), C(--no-wait), C(--wait-timeout SECONDS)).
  - A control-plane node joins with the same script; its control-plane components come from the anchor DaemonSet
    (C(steward-controller --controllers anchor)) that its labels select, as in Promenade.
  - The script holds a private key - it is written 0700 and never returned. The same script is served by the
    controller's provisioning API (C(GET /api/v1.0/join-scripts)).
  - An existing script for the same node is kept (a new one would carry a new key); O(force) renders it again.
    A file at O(dest) that is not a join script of this node is refused (rule C(not-ours)) unless O(force).
options:
  dest:
    description: Where to write the script (on the host the module runs on).
    type: path
    required: true
  force:
    description: Render a new script even when O(dest) holds one (or holds something else).
    type: bool
    default: false
  authority:
    description: The cluster CA certificate and key, as C({ca.crt, ca.key}) PEM text (more authority files are ignored).
    type: dict
    required: true
  now:
    description: Issue as of this time (RFC 3339); the current time by default.
    type: str
extends_documentation_fragment:
  - steward.cluster.provisioning_cluster
  - steward.cluster.provisioning_node
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
  - PyYAML
author: steward.cluster developers (@steward-cluster)
'''

EXAMPLES = r'''
- name: A join script for w7
  steward.cluster.join_script:
    dest: /srv/join/w7.sh
    node_name: w7
    address: 10.0.1.7
    control_plane: [{name: cp1, address: 10.0.0.11}]
    authority: {ca.crt: "{{ ca_crt }}", ca.key: "{{ ca_key }}"}
    labels: {topology.kubernetes.io/zone: rack3}
  delegate_to: localhost
'''

RETURN = r'''
dest:
  description: The script's path.
  returned: always
  type: str
files:
  description: The node paths the script writes.
  returned: always
  type: list
  elements: str
sha256:
  description: Checksum of the script written (null when an existing script was kept or in check mode).
  returned: always
  type: str
'''

import hashlib
import os
import tempfile
import traceback

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.steward.cluster.plugins.module_utils.common import validate
from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.provisioning import join_script, layout
from ansible_collections.steward.cluster.plugins.module_utils.common.argspec import argspec
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.args import (
    CLUSTER_SPEC, NODE_SPEC, cluster_params, failure, parse_now,
)
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.certs import parse_authority
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.errors import ProvisioningError, Refused
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.kubelet import check_registration_labels
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.node_files import plan_node_files
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.deps import missing_libraries
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.spec import parse_cluster, parse_node

SPEC = argspec(CLUSTER_SPEC, NODE_SPEC, dest={'type': 'path', 'required': True}, force={'type': 'bool', 'default': False},
               authority={'type': 'dict', 'required': True, 'no_log': True}, now={'type': 'str'})


def check_dest(value):
    """`dest`: an absolute path to a file (not a directory) in a directory that exists, checked before anything
    is rendered (the script is written beside it first, then renamed into place)."""
    dest = validate.regular_file_or_absent(value, 'dest')   # a directory or a FIFO: refused
    validate.existing_dir(os.path.dirname(dest), 'dest')
    return dest


def existing_script_node(path):
    """The node a join script at `path` was rendered for; '' for another file, None when nothing is there."""
    try:
        with open(path, 'rb') as f:
            head = f.read(512).decode('utf-8', 'replace').splitlines()
    except FileNotFoundError:
        return None
    if len(head) > 1 and head[0] == '#!/bin/bash' and head[1].startswith('# steward.cluster join script for node '):
        return head[1].split()[6]
    return ''


def main():
    module = AnsibleModule(argument_spec=SPEC, supports_check_mode=True)
    missing = missing_libraries()
    if missing:
        module.fail_json(msg=missing_required_lib(' and '.join(missing)))
    p = module.params
    dest = p['dest']
    try:
        dest = check_dest(dest)
        cluster = parse_cluster(cluster_params(p))
        node = parse_node(dict(p, role='worker'), cluster)
        check_registration_labels(node.labels)
        authority = parse_authority({k: v for k, v in p['authority'].items() if k in ('ca.crt', 'ca.key')}, 'authority')
        if authority is None:
            raise InvalidInput('authority', 'required', 'ca.crt and ca.key are needed to sign the kubelet certificate')
        found = existing_script_node(dest)
        if found is not None and not p['force']:
            if found != node.name:
                raise Refused('%s exists and is not a join script of %s (it is %s); use force to replace it'
                              % (dest, node.name, 'one of ' + found if found else 'another file'), 'not-ours', dest)
        now = parse_now(p['now'])
        planned = plan_node_files(cluster, node, authority, lambda path: None, now)
    except (InvalidInput, ProvisioningError) as exc:
        module.fail_json(exception=traceback.format_exc(), **failure(exc))
    paths = sorted(list(planned.files) + [layout.RECORD])
    if found == node.name and not p['force']:
        module.exit_json(changed=False, dest=dest, files=paths, sha256=None,
                         msg='%s already holds a join script of %s (force renders a new one)' % (dest, node.name))
    if module.check_mode:
        module.exit_json(changed=True, dest=dest, files=paths, sha256=None, msg='would write %s' % dest)
    script = join_script.render(cluster, node, planned.files.values(), now, os.path.basename(dest)).encode()
    directory = os.path.dirname(dest) or '.'
    fd, tmp = tempfile.mkstemp(dir=directory, prefix='.join.')
    try:
        with os.fdopen(fd, 'wb') as f:
            os.fchmod(f.fileno(), 0o700)
            f.write(script)
        os.replace(tmp, dest)
    except OSError as exc:
        if os.path.exists(tmp):
            os.unlink(tmp)
        module.fail_json(msg='cannot write %s: %s' % (dest, exc))
    module.exit_json(changed=True, dest=dest, files=paths, sha256=hashlib.sha256(script).hexdigest(),
                     msg='wrote the join script of %s to %s' % (node.name, dest))


if __name__ == '__main__':
    main()
