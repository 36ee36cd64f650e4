#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r'''
module: cert_info
short_description: Every certificate of a node with subject, SANs, issuer, expiry and days left
version_added: 0.1.0
description:
  - Reads the certificates under C(/etc/kubernetes/pki) (CAs included), the client certificates embedded in
    C(/etc/kubernetes/*.conf) and the kubelet's C(/var/lib/kubelet/pki/kubelet-client-current.pem), below O(root).
  - Each row says whether the certificate is C(due) - it expires within O(renew_before_days) of O(now). Run it
    across the cluster before certificates expire (the usual way clusters stop) and renew with the
    C(steward.cluster.cert_renew) playbook.
  - Read-only.
options:
  root:
    description: Root prefix of the node's files (C(/) on a real host).
    type: path
    default: /
  renew_before_days:
    description: A certificate expiring within this many days counts as due.
    type: int
    default: 30
  now:
    description: Evaluate as of this time (RFC 3339) instead of now, for example the date of a maintenance window.
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
requirements:
  - cryptography
  - PyYAML
author: steward.cluster developers (@steward-cluster)
'''

EXAMPLES = r'''
- name: Which certificates expire within 60 days?
  steward.cluster.cert_info:
    renew_before_days: 60
  register: certs

- name: Show them
  ansible.builtin.debug:
    msg: "{{ certs.certificates | selectattr('due') | map(attribute='path') | list }}"
'''

RETURN = r'''
certificates:
  description:
    - One row per certificate, sorted by path, with C(path), C(name) (kubeadm's), C(subject), C(common_name),
      C(organizations), C(issuer), C(dns_names), C(ip_addresses), C(usages), C(is_ca), C(serial), C(not_before),
      C(not_after), C(days_left), C(expired), C(due); an unreadable one has C(error) instead.
  returned: always
  type: list
  elements: dict
due:
  description: The paths of the certificates that are due.
  returned: always
  type: list
  elements: str
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.steward.cluster.plugins.module_utils.common import shell
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.certinfo import certificates
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.errors import ProvisioningError
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.params import parse_cert_info

SPEC = dict(root={'type': 'path', 'default': '/'}, renew_before_days={'type': 'int', 'default': 30}, now={'type': 'str'})


def act(p, check_mode):
    parsed = parse_cert_info(p)
    rows = certificates(parsed['root'], parsed['now'], parsed['days'])
    due = [row['path'] for row in rows if row['due']]
    return dict(changed=False, certificates=rows, due=due,
                msg='%d certificate(s), %d due within %d days' % (len(rows), len(due), parsed['days']))


def main():
    module = AnsibleModule(argument_spec=SPEC, supports_check_mode=True)
    shell.require_libraries(module, 'cryptography', 'PyYAML')
    shell.run(module, act, ProvisioningError)


if __name__ == '__main__':
    main()
