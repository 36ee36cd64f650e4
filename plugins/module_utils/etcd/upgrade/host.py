# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One member's part of a host-driven upgrade: the `etcd_upgrade` module's parameters checked and run.

The module is a shell (common/shell.py); everything it checks and does is here, so check mode runs every check
and the same entry serves any other caller that drives members from their hosts."""

from __future__ import annotations

import os
import shutil
import time
from typing import Any, Dict, Mapping

from ansible_collections.steward.cluster.plugins.module_utils.common import validate
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.client import EtcdConnection
from ansible_collections.steward.cluster.plugins.module_utils.etcd.member.binaries import resolve_tools
from ansible_collections.steward.cluster.plugins.module_utils.etcd.member.process import ProcessSpec
from ansible_collections.steward.cluster.plugins.module_utils.etcd.member.service import ProcessService, SystemdService
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.stores import check_store_params, store_from_params
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


def _service(p: Mapping[str, Any]) -> Any:
    spec = ProcessSpec(pid_file=p['pid_file'] or '/nonexistent', binary=p['binary'], config_file=p['config_file'],
                       log_file=p['log_file'], wait_url=p['client_url'], stop_timeout=p['stop_timeout'],
                       ca_cert=p['ca_cert'], client_cert=p['client_cert'], client_key=p['client_key'])
    if p['service_manager'] == 'systemd':
        return SystemdService(validate.path_component(p['service_name'], 'service_name'), spec)
    validate.absolute_path(p['pid_file'], 'pid_file')
    return ProcessService(spec)


def _facts(p: Mapping[str, Any]) -> Dict[str, Any]:
    facts: Dict[str, Any] = {'quota_bytes': p['quota_backend_bytes']}
    if p['data_dir'] and os.path.isdir(p['data_dir']):
        facts['disk_free_bytes'] = shutil.disk_usage(p['data_dir']).free
    return facts


def check_params(p: Mapping[str, Any]) -> None:
    """Every option the module takes, before anything is read from or done to a member."""
    validate.text(p['member'], 'member', max_length=253)
    validate.absolute_path(p['binary'], 'binary')
    validate.absolute_path(p['config_file'], 'config_file')
    validate.endpoint_url(p['client_url'], 'client_url')
    validate.timeout(p['stop_timeout'], 'stop_timeout')
    validate.timeout(p['caught_up_timeout'], 'caught_up_timeout')
    validate.timeout(p['snapshot_max_age'], 'snapshot_max_age')
    validate.number(p['headroom_factor'], 'headroom_factor', minimum=1)
    validate.number(p['quota_backend_bytes'], 'quota_backend_bytes', minimum=1)
    check_store_params(p)
    for option in ('encryption_kms_key_id', 'sse_customer_key'):
        if p.get(option) is not None:
            validate.credential(p[option], option)
    validate.path_component(p['service_name'], 'service_name')
    for option in ('data_dir', 'log_file', 'record_path'):
        if p[option] is not None:
            validate.absolute_path(p[option], option)
    if p['in_flight'] is not None:
        validate.text(p['in_flight'], 'in_flight', max_length=253)
    if p['tmp_dir'] is not None:
        validate.existing_dir(p['tmp_dir'], 'tmp_dir')


def upgrade_member(p: Mapping[str, Any], check_mode: bool) -> Dict[str, Any]:
    """Plan the upgrade of the cluster `p` reaches and run this host's member's part of it (`check_mode`: the plan
    and the verdict only). Raises InvalidInput for bad options and UpgradeError (an EtcdError whose `result()`
    carries the reason, the member, the rollback and the plan) when the run stops."""
    check_params(p)
    tools = None
    if p['etcdutl_path'] or p['etcd_path'] or p['tool_timeout'] is not None:   # every input checked up front
        tools = resolve_tools(p['etcdutl_path'], p['etcd_path'], p['bin_dirs'], p['tool_timeout'])
    target = binary_version(p['target_binary'])
    conn = EtcdConnection.from_params(p)
    service = _service(p)
    store = store_from_params(p, must_exist=False) if p['store'] else None
    tool = tools.snapshot_tool if tools else None
    options: Dict[str, Any] = {'snapshot_max_age': p['snapshot_max_age'], 'headroom_factor': p['headroom_factor'],
                               'require_snapshot': p['require_snapshot'],
                               'take_snapshot': p['take_snapshot'] and store is not None}
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
            caught_up_timeout=p['caught_up_timeout'], check_mode=check_mode)
    except UpgradeError as exc:
        exc.target_version = target
        raise
    plan = outcome['plan']
    mine = [s for s in plan['steps'] if s['name'] == p['member']]
    return dict(changed=outcome['changed'], target_version=target, plan=plan, verdict=plan['verdict'],
                upgraded=outcome['upgraded'], snapshot=outcome['snapshot'], warnings=list(plan['verdict']['warnings']),
                diff={'before': ''.join('%s: %s\n' % (s['name'], s['from_version']) for s in mine),
                      'after': ''.join('%s: %s\n' % (s['name'], s['to_version']) for s in mine)})
