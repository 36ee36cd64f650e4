#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function
__metaclass__ = type

DOCUMENTATION = r'''
module: etcd_upgrade
short_description: Upgrade this host's etcd member to a new minor or patch version, safely and resumably
version_added: 0.1.0
description:
  - Plans the rolling upgrade of the whole cluster to the version of O(target_binary) (read from the binary itself),
    runs etcd's pre-flight checks and, when this host's member O(member) is due, upgrades it - move leadership away
    when it leads, stop, swap the binary in place at O(binary) (the previous one kept as C(<binary>.pre-upgrade)),
    start, and wait until it serves at the target version, has applied the leader's revision and C(HashKV) at that
    revision is equal on every member.
  - Pre-flight refuses, naming the reason (C(verdict.refusals[].reason)), a version path etcd does not support
    (a skipped minor, a downgrade, a patch below etcd's documented minimum before the next minor, auth enabled on
    3.4 to 3.5), a learner or a never-started member, a member that does not serve, member lists that differ
    between members, an active alarm, a quota (O(quota_backend_bytes)) or free disk under O(headroom_factor) times
    the database, and no verified full snapshot in O(store) newer than O(snapshot_max_age) seconds (it takes one
    first unless O(take_snapshot=false), and refuses if that fails). etcd 3.5.0-3.5.2 are a warning, not a refusal.
  - Resumable. The run's record (O(record_path)) names the member being touched; with the versions members report,
    a run killed at any point and started again finishes that member first and never restarts one already at the
    target. A member that fails stops the run; its previous binary is put back while the cluster version allows it,
    otherwise RV(rollback) names the pre-upgrade snapshot to restore and the loss window.
  - The playbook C(steward.cluster.etcd_upgrade) runs it on every member in the plan's order (followers first, the
    leader last), one host at a time.
options:
  member:
    description: Name of this host's member (the role's C(etcd_name)). Only this member is touched.
    type: str
    required: true
  target_binary:
    description: Absolute path, on this host, of the etcd binary to upgrade to; its C(--version) is the target.
    type: path
    required: true
  binary:
    description: The binary the member runs (the role's C(etcd_binary)); replaced in place by O(target_binary).
    type: path
    required: true
  service_manager:
    description: How the member is run (the role's C(etcd_service_manager)).
    type: str
    choices: [process, systemd]
    default: process
  service_name:
    description: systemd unit name (O(service_manager=systemd)).
    type: str
    default: etcd
  config_file:
    description: The member's config file (process mode starts C(binary --config-file config_file)).
    type: path
    required: true
  pid_file:
    description: Pid file (O(service_manager=process)).
    type: path
  log_file:
    description: Log file of the process (O(service_manager=process)).
    type: path
  client_url:
    description: This member's client URL (its own health is read there while it starts).
    type: str
    required: true
  data_dir:
    description: The member's data dir; its disk's free space is checked against O(headroom_factor).
    type: path
  quota_backend_bytes:
    description: The member's C(quota-backend-bytes) (the role's C(etcd_quota_backend_bytes)).
    type: int
    default: 2147483648
  stop_timeout:
    description: Seconds the member gets to stop before SIGKILL (process mode).
    type: int
    default: 10
  caught_up_timeout:
    description: Seconds the restarted member gets to serve and catch up (revision and C(HashKV)).
    type: float
    default: 120
  store:
    description:
      - Snapshot store (directory or C(s3://bucket/prefix)) of the pre-upgrade snapshot; the newest verified full
        snapshot there gates the run.
      - Without it the run refuses unless O(require_snapshot=false).
    type: str
    required: false
  take_snapshot:
    description: Take the pre-upgrade snapshot when the store has none newer than O(snapshot_max_age).
    type: bool
    default: true
  require_snapshot:
    description: Gate the run on a verified recent snapshot (false only with a backup of your own).
    type: bool
    default: true
  snapshot_max_age:
    description: Seconds a full snapshot counts as recent.
    type: int
    default: 3600
  headroom_factor:
    description: Quota and free disk must each be at least this many times the database size.
    type: float
    default: 2.0
  record_path:
    description: The run's record (JSON), for resume. Default C(upgrade-record.json) beside O(config_file).
    type: path
  in_flight:
    description:
      - Name of the member a killed run left in flight, when it is not this host's (its record is on its own host;
        the playbook reads every host's record and passes the name). Pre-flight lets that member be down, and the plan
        finishes it first.
    type: str
  tmp_dir:
    description: Directory for the snapshot while it is verified.
    type: path
extends_documentation_fragment:
  - steward.cluster.etcd_connection
  - steward.cluster.etcd_store
  - steward.cluster.etcd_tools
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
    details: Check mode returns the plan, the target version and the verdict, and changes nothing.
  diff_mode:
    support: full
    details: The version of every member the plan changes, before and after.
author: steward.cluster developers (@steward-cluster)
'''

EXAMPLES = r'''
- name: Show the plan and the verdict
  steward.cluster.etcd_upgrade:
    endpoints: ['https://10.0.0.11:2379', 'https://10.0.0.12:2379', 'https://10.0.0.13:2379']
    ca_cert: /etc/etcd/pki/ca.crt
    member: etcd1
    target_binary: /opt/etcd-v3.5.21/etcd
    binary: /usr/local/bin/etcd
    config_file: /etc/etcd/etcd.conf.yml
    pid_file: /run/etcd.pid
    client_url: https://10.0.0.11:2379
    store: /var/backups/etcd
  check_mode: true
  register: etcd_upgrade_plan

- name: Upgrade this host's member (the playbook steward.cluster.etcd_upgrade orders the hosts)
  steward.cluster.etcd_upgrade:
    endpoints: ['http://10.0.0.11:2379', 'http://10.0.0.12:2379', 'http://10.0.0.13:2379']
    member: etcd2
    target_binary: /opt/etcd-v3.5.21/etcd
    binary: /usr/local/bin/etcd
    service_manager: systemd
    config_file: /etc/etcd/etcd.conf.yml
    client_url: http://10.0.0.12:2379
    store: s3://backups/etcd
'''

RETURN = r'''
target_version:
  description: The version O(target_binary) reports.
  returned: success
  type: str
  sample: 3.5.21
plan:
  description:
    - The plan of the whole cluster, C(steps) in order (C(id), C(name), C(from_version), C(to_version),
      C(was_leader), C(resume), C(actions)), C(done) (members already at the target), C(take_snapshot).
  returned: always
  type: dict
verdict:
  description: C(ok), C(refusals) (each C(reason), C(member), C(message)) and C(warnings) of pre-flight.
  returned: always
  type: dict
upgraded:
  description: Members upgraded by this run, each C(name), C(seconds) and C(caught_up) (C(revision), C(hash)).
  returned: success
  type: list
  elements: dict
snapshot:
  description: The pre-upgrade snapshot (C(name), C(key), C(revision), C(taken_at), C(verified)), or null.
  returned: success
  type: dict
rollback:
  description: On a failed member, what was done (C(action) C(previous-binary) or C(restore-snapshot), C(reason)).
  returned: failure
  type: dict
'''

import os
import shutil
import time

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.steward.cluster.plugins.module_utils.common import validate
from ansible_collections.steward.cluster.plugins.module_utils.common.module_errors import failing_cleanly
from ansible_collections.steward.cluster.plugins.module_utils.etcd.args import (
    ETCD_CONNECTION_SPEC,
    ETCD_STORE_SPEC,
    ETCD_TOOLS_SPEC,
    argspec,
)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.client import HAS_REQUESTS, EtcdConnection
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import EtcdError
from ansible_collections.steward.cluster.plugins.module_utils.etcd.member.binaries import resolve_tools
from ansible_collections.steward.cluster.plugins.module_utils.etcd.member.process import ProcessSpec
from ansible_collections.steward.cluster.plugins.module_utils.etcd.member.service import ProcessService, SystemdService
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.stores import store_from_params
from ansible_collections.steward.cluster.plugins.module_utils.etcd.upgrade.member_ops import (
    BinarySwap,
    ServiceMemberOps,
    binary_version,
)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.upgrade.run import (
    UpgradeError,
    newest_verified_full,
    pre_upgrade_snapshot,
    run_upgrade,
)

STORE_SPEC = dict(ETCD_STORE_SPEC, store={'type': 'str'})


def _service(p):
    spec = ProcessSpec(pid_file=p['pid_file'] or '/nonexistent', binary=p['binary'], config_file=p['config_file'],
                       log_file=p['log_file'], wait_url=p['client_url'], stop_timeout=p['stop_timeout'],
                       ca_cert=p['ca_cert'], client_cert=p['client_cert'], client_key=p['client_key'])
    if p['service_manager'] == 'systemd':
        return SystemdService(validate.path_component(p['service_name'], 'service_name'), spec)
    validate.absolute_path(p['pid_file'], 'pid_file')
    return ProcessService(spec)


def _facts(p):
    facts = {'quota_bytes': p['quota_backend_bytes']}
    if p['data_dir'] and os.path.isdir(p['data_dir']):
        facts['disk_free_bytes'] = shutil.disk_usage(p['data_dir']).free
    return facts


def main():
    module = AnsibleModule(
        argument_spec=argspec(
            ETCD_CONNECTION_SPEC, STORE_SPEC, ETCD_TOOLS_SPEC,
            member={'type': 'str', 'required': True},
            target_binary={'type': 'path', 'required': True},
            binary={'type': 'path', 'required': True},
            service_manager={'type': 'str', 'choices': ['process', 'systemd'], 'default': 'process'},
            service_name={'type': 'str', 'default': 'etcd'},
            config_file={'type': 'path', 'required': True},
            pid_file={'type': 'path'},
            log_file={'type': 'path'},
            client_url={'type': 'str', 'required': True},
            data_dir={'type': 'path'},
            quota_backend_bytes={'type': 'int', 'default': 2147483648},
            stop_timeout={'type': 'int', 'default': 10},
            caught_up_timeout={'type': 'float', 'default': 120},
            take_snapshot={'type': 'bool', 'default': True},
            require_snapshot={'type': 'bool', 'default': True},
            snapshot_max_age={'type': 'int', 'default': 3600},
            headroom_factor={'type': 'float', 'default': 2.0},
            record_path={'type': 'path'},
            in_flight={'type': 'str'},
            tmp_dir={'type': 'path'},
        ),
        required_if=[('service_manager', 'process', ('pid_file',))],
        supports_check_mode=True,
    )
    if not HAS_REQUESTS:
        module.fail_json(msg=missing_required_lib('requests'))
    p = module.params
    result = {'changed': False}
    with failing_cleanly(module, EtcdError):
        validate.text(p['member'], 'member', max_length=253)
        validate.absolute_path(p['binary'], 'binary')
        validate.absolute_path(p['config_file'], 'config_file')
        validate.endpoint_url(p['client_url'], 'client_url')
        validate.timeout(p['stop_timeout'], 'stop_timeout')
        validate.timeout(p['caught_up_timeout'], 'caught_up_timeout')
        validate.timeout(p['snapshot_max_age'], 'snapshot_max_age')
        validate.number(p['headroom_factor'], 'headroom_factor', minimum=1)
        validate.number(p['quota_backend_bytes'], 'quota_backend_bytes', minimum=1)
        validate.timeout(p['store_timeout'], 'store_timeout')
        if p['tmp_dir'] is not None:
            validate.existing_dir(p['tmp_dir'], 'tmp_dir')
        tools = None
        if p['etcdutl_path'] or p['etcd_path'] or p['tool_timeout'] is not None:   # every input checked up front
            tools = resolve_tools(p['etcdutl_path'], p['etcd_path'], p['bin_dirs'], p['tool_timeout'])
        target = binary_version(p['target_binary'])
        conn = EtcdConnection.from_params(p)
        service = _service(p)
        store = store_from_params(p, must_exist=False) if p['store'] else None
        tool = tools.snapshot_tool if tools else None
        options = {'snapshot_max_age': p['snapshot_max_age'], 'headroom_factor': p['headroom_factor'],
                   'require_snapshot': p['require_snapshot'], 'take_snapshot': p['take_snapshot'] and store is not None}
        if store is not None and p['require_snapshot']:
            tool = tool or resolve_tools(None, None, p['bin_dirs']).snapshot_tool
            options['snapshot'] = newest_verified_full(store, tool=tool, tmp_dir=p['tmp_dir'])
        record = p['record_path'] or os.path.join(os.path.dirname(p['config_file']), 'upgrade-record.json')
        ops = {p['member']: ServiceMemberOps(service, BinarySwap(p['binary'], p['target_binary']))}
        try:
            outcome = run_upgrade(
                conn, ops, target, options, record_path=record, now=time.time(), in_flight=p['in_flight'],
                take_snapshot=(lambda: pre_upgrade_snapshot(conn, store, time.time(), tool, p['tmp_dir']))
                if store is not None else None,
                only=[p['member']], member_facts={p['member']: _facts(p)},
                caught_up_timeout=p['caught_up_timeout'], check_mode=module.check_mode)
        except UpgradeError as exc:
            plan = exc.rollback.pop('plan', None) or {}
            module.fail_json(msg=str(exc), reason=exc.reason, member=exc.member, rollback=exc.rollback,
                             plan=plan, verdict=plan.get('verdict'), target_version=target)
    plan = outcome['plan']
    for warning in plan['verdict']['warnings']:
        module.warn(warning)
    mine = [s for s in plan['steps'] if s['name'] == p['member']]
    result.update(changed=outcome['changed'], target_version=target, plan=plan, verdict=plan['verdict'],
                  upgraded=outcome['upgraded'], snapshot=outcome['snapshot'])
    if module._diff:
        result['diff'] = {'before': ''.join('%s: %s\n' % (s['name'], s['from_version']) for s in mine),
                          'after': ''.join('%s: %s\n' % (s['name'], s['to_version']) for s in mine)}
    module.exit_json(**result)


if __name__ == '__main__':
    main()
