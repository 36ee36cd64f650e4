#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r'''
module: etcd_process
short_description: Run one etcd member as a detached process with a pid file
version_added: 0.1.0
description:
  - Starts, stops or restarts one etcd member on a host without systemd (containers, the local lab).
  - etcd is run as C(etcd --config-file <config_file>); etcd ignores every other flag when a config file
    is given, so all settings belong in that file.
  - The process is detached (own session, stdin from C(/dev/null), output to O(log_file)) and outlives the
    Ansible run. Its pid is written to O(pid_file).
  - A stale pid file (the process is gone, or the pid now belongs to a program whose command line does not
    name the binary and O(config_file)) counts as stopped.
  - A process that exits right after start makes the module fail with the last lines of O(log_file).
options:
  state:
    description:
      - V(started) starts etcd unless it runs; V(stopped) stops it (SIGTERM, then SIGKILL after
        O(stop_timeout)); V(restarted) always stops and starts it.
    type: str
    choices: [started, stopped, restarted]
    default: started
  binary:
    description: Path of the etcd binary. Required for O(state=started) and O(state=restarted).
    type: path
  config_file:
    description:
      - etcd's YAML config file, passed as C(--config-file). Required for O(state=started) and
        O(state=restarted); also used to recognise the process.
    type: path
  pid_file:
    description: Where the pid of the process is kept.
    type: path
    required: true
  log_file:
    description: File that receives etcd's stdout and stderr (appended). Without it the output is discarded.
    type: path
  wait:
    description: After a start, wait until O(wait_url) answers C(GET /health) (or at least C(GET /version)).
    type: bool
    default: true
  wait_url:
    description: The member's client URL, for example C(http://10.0.0.1:2379). Without it nothing is awaited.
    type: str
  wait_timeout:
    description: Seconds to wait for O(wait_url).
    type: int
    default: 60
  stop_timeout:
    description: Seconds between SIGTERM and SIGKILL.
    type: int
    default: 10
  ca_cert:
    description: CA bundle to verify O(wait_url) when it is C(https).
    type: path
  client_cert:
    description: Client certificate for O(wait_url) when the member requires client certificates.
    type: path
  client_key:
    description: Key of O(client_cert).
    type: path
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
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.actiongroups
author: steward.cluster developers (@steward-cluster)
'''

EXAMPLES = r'''
- name: Run the member
  steward.cluster.etcd_process:
    binary: /usr/local/bin/etcd
    config_file: /etc/etcd/etcd.conf.yml
    pid_file: /run/etcd.pid
    log_file: /var/log/etcd.log
    wait_url: http://10.0.0.1:2379

- name: Stop the member
  steward.cluster.etcd_process:
    state: stopped
    pid_file: /run/etcd.pid
    config_file: /etc/etcd/etcd.conf.yml
'''

RETURN = r'''
pid:
  description: Pid of the running process; null when stopped (or not started in check mode).
  returned: always
  type: int
  sample: 4242
state:
  description: The requested state.
  returned: always
  type: str
  sample: started
msg:
  description: What was done.
  returned: always
  type: str
  sample: started etcd
ready:
  description: Which endpoint answered while waiting on an already running member (C(/health) or C(/version)).
  returned: when O(state=started), the process was already running and O(wait_url) is set
  type: str
  sample: /health
signal:
  description: The signal that ended the process on stop (C(SIGTERM), C(SIGKILL) or C(gone)).
  returned: when a running process was stopped
  type: str
  sample: SIGTERM
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.steward.cluster.plugins.module_utils.common import shell
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import EtcdError
from ansible_collections.steward.cluster.plugins.module_utils.etcd.params import parse_etcd_process
from ansible_collections.steward.cluster.plugins.module_utils.etcd.member.process import ensure_process

SPEC = dict(
    state=dict(type='str', choices=['started', 'stopped', 'restarted'], default='started'),
    binary=dict(type='path'),
    config_file=dict(type='path'),
    pid_file=dict(type='path', required=True),
    log_file=dict(type='path'),
    wait=dict(type='bool', default=True),
    wait_url=dict(type='str'),
    wait_timeout=dict(type='int', default=60),
    stop_timeout=dict(type='int', default=10),
    ca_cert=dict(type='path'),
    client_cert=dict(type='path'),
    client_key=dict(type='path', no_log=False),
)


def act(p, check_mode):
    result = ensure_process(parse_etcd_process(p), p['state'], check_mode=check_mode)
    before, after = result.pop('before'), result.pop('after')
    if result['changed']:
        result['diff'] = {'before': before, 'after': after}
    return result


def main():
    module = AnsibleModule(argument_spec=SPEC, supports_check_mode=True,
                           required_if=[('state', 'started', ('binary', 'config_file')),
                                        ('state', 'restarted', ('binary', 'config_file'))])
    shell.run(module, act, EtcdError)


if __name__ == '__main__':
    main()
