# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The etcd modules' parameters, parsed once: one `parse_<module>(params)` per module, raising InvalidInput (its
field names the option) before anything acts, in check mode too. The modules do no validation of their own; what
the engine entry checks itself (EtcdConnection.from_params, stores.store_from_params, process.check_spec,
binaries.resolve_tools) is not checked here a second time.

Each parser returns the checked values a module hands on (a dict, or the engine's own request type), so reading
one function shows everything that is checked for a module and in what order.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Mapping, Optional

from ansible_collections.steward.cluster.plugins.module_utils.common import validate
from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.client import EtcdConnection
from ansible_collections.steward.cluster.plugins.module_utils.etcd.member.config_file import check_owner_group
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.members import parse_member_id
from ansible_collections.steward.cluster.plugins.module_utils.etcd.member.process import ProcessSpec, check_spec
from ansible_collections.steward.cluster.plugins.module_utils.etcd.recovery.recovery_steps import (
    MemberSetup,
    check_plan,
)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.recovery.restore import check_member_args
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.stores import check_store_params

PROCESS_OPTIONS = ('pid_file', 'binary', 'config_file', 'log_file', 'wait', 'wait_url', 'wait_timeout',
                   'stop_timeout', 'ca_cert', 'client_cert', 'client_key')


def _tmp_dir(params: Mapping[str, Any]) -> Optional[str]:
    return None if params.get('tmp_dir') is None else validate.existing_dir(params['tmp_dir'], 'tmp_dir')


def directories(value: Any) -> List[Dict[str, Any]]:
    """`directories` of etcd_config and etcd_recover_member: each `path` with its `mode` as a number."""
    return [{'path': d.get('path'), 'mode': validate.file_mode(d.get('mode'), 'directories[%d].mode' % i)}
            for i, d in enumerate(value or [])]


def parse_etcd_backup_verify(params: Mapping[str, Any]) -> Dict[str, Any]:
    check_store_params(params)
    return {'tmp_dir': _tmp_dir(params)}


def parse_etcd_cluster_info(params: Mapping[str, Any]) -> Dict[str, Any]:
    wait = validate.number(params['wait_healthy'], 'wait_healthy', minimum=0, maximum=validate.MAX_TIMEOUT_SECONDS)
    return {'conn': EtcdConnection.from_params(params), 'wait_healthy': wait, 'discover': params['discover']}


def parse_etcd_config(params: Mapping[str, Any]) -> Dict[str, Any]:
    """The rest (paths, keys, owner and group) is checked by config_file.apply_config before it writes anything."""
    return dict(path=params['path'], config=params['config'], mode=validate.file_mode(params['mode'], 'mode'),
                directories=directories(params['directories']), fingerprint_path=params['fingerprint_path'],
                fingerprint=params['fingerprint'], owner=params['owner'], group=params['group'])


def parse_etcd_data_dir(params: Mapping[str, Any]) -> str:
    validate.path_component(params['reason'], 'reason')   # part of the set-aside name, checked even with nothing to move
    return validate.safe_target_dir(params['path'], 'path')


def parse_etcd_defrag(params: Mapping[str, Any]) -> Dict[str, Any]:
    ratio = validate.number(params['min_fragmentation_ratio'], 'min_fragmentation_ratio', minimum=0, maximum=1)
    return {'conn': EtcdConnection.from_params(params), 'min_fragmentation_ratio': ratio,
            'defrag_timeout': validate.timeout(params['defrag_timeout'], 'defrag_timeout')}


def parse_etcd_member(params: Mapping[str, Any]) -> Dict[str, Any]:
    """What etcd would refuse later, or worse, accept: one-line names, URLs, a hex member id, real timeouts."""
    conn = EtcdConnection.from_params(params)
    if params['name'] is not None:
        validate.text(params['name'], 'name', max_length=253)
    for index, url in enumerate(params['peer_urls'] or []):
        validate.endpoint_url(url, 'peer_urls[%d]' % index)
    if params['member_id'] is not None:
        parse_member_id(validate.text(params['member_id'], 'member_id'), 'member_id')
    validate.timeout(params['retry_timeout'], 'retry_timeout')
    validate.timeout(params['promote_timeout'], 'promote_timeout')
    return {'conn': conn}


def parse_etcd_member_facts(params: Mapping[str, Any]) -> Dict[str, Any]:
    validate.text(params['name'], 'name')
    data_dir = validate.absolute_path(params['data_dir'], 'data_dir')
    if os.path.lexists(data_dir) and not os.path.isdir(data_dir):
        raise InvalidInput('data_dir', 'directory', '%s exists and is not a directory' % data_dir, data_dir)
    validate.endpoint_url(params['client_url'], 'client_url')
    validate.endpoint_url(params['peer_url'], 'peer_url')
    if params['pid_file'] is not None:
        validate.regular_file_or_absent(params['pid_file'], 'pid_file')
    return dict(conn=EtcdConnection.from_params(params), name=params['name'], data_dir=data_dir,
                client_url=params['client_url'], peer_url=params['peer_url'], pid_file=params['pid_file'],
                probe_timeout=validate.timeout(params['probe_timeout'], 'probe_timeout'))


def parse_etcd_process(params: Mapping[str, Any]) -> ProcessSpec:
    """The process options as the engine's ProcessSpec; process.ensure_process checks them (check_spec), the one
    home of those rules, before it acts, in check mode too."""
    return ProcessSpec(**dict((k, params[k]) for k in PROCESS_OPTIONS))


def parse_etcd_recover_member(params: Mapping[str, Any]) -> Dict[str, Any]:
    """The plan, this host's member (MemberSetup) and how it runs (service manager and ProcessSpec): every option
    checked once, the process options by process.check_spec as etcd_process checks them."""
    plan = check_plan(params['plan'], validate.text(params['host'], 'host', max_length=253))
    validate.tls_files(params['ca_cert'], params['client_cert'], params['client_key'])
    for field in ('client_url', 'peer_url'):
        validate.endpoint_url(params[field], field)
    check_owner_group(params['owner'], params['group'])
    setup = MemberSetup(name=validate.text(params['name'], 'name', max_length=253), client_url=params['client_url'],
                        peer_url=params['peer_url'], data_dir=validate.absolute_path(params['data_dir'], 'data_dir'),
                        config_file=validate.absolute_path(params['config_file'], 'config_file'),
                        config=params['config'], config_mode=validate.file_mode(params['mode'], 'mode'),
                        directories=directories(params['directories']),
                        fingerprint_path=validate.absolute_path(params['fingerprint_path'], 'fingerprint_path'),
                        fingerprint=validate.text(params['fingerprint'], 'fingerprint'), owner=params['owner'],
                        group=params['group'])
    systemd = params['service_manager'] == 'systemd'
    spec = ProcessSpec(pid_file=params['pid_file'] or '/nonexistent', binary=params['binary'],
                       config_file=params['config_file'], log_file=params['log_file'], wait_url=params['client_url'],
                       wait_timeout=params['wait_timeout'], stop_timeout=params['stop_timeout'],
                       ca_cert=params['ca_cert'], client_cert=params['client_cert'], client_key=params['client_key'])
    service_name = validate.path_component(params['service_name'], 'service_name')   # checked in either mode
    if systemd:
        validate.timeout(params['wait_timeout'], 'wait_timeout')
        validate.timeout(params['stop_timeout'], 'stop_timeout')
    else:
        validate.absolute_path(params['pid_file'], 'pid_file')
        check_spec(spec, 'started', config_written_first=True)   # this module writes the config file before a start
    return dict(plan=plan, setup=setup, spec=spec, service_name=service_name if systemd else None,
                timeout=validate.timeout(params['timeout'], 'timeout'), wait_timeout=params['wait_timeout'])


def parse_etcd_restore(params: Mapping[str, Any]) -> Dict[str, Any]:
    tmp_dir = _tmp_dir(params)
    validate.safe_target_dir(params['data_dir'], 'data_dir')     # check mode too: never /etc, a file or a symlink
    validate.text(params['name'], 'name', max_length=253)
    validate.text(params['initial_cluster_token'], 'initial_cluster_token', max_length=253)
    for field in ('snapshot', 'last_delta'):
        if params[field] is not None:
            validate.text(params[field], field)   # a snapshot's name in the store
    check_member_args(params['name'], params['initial_cluster'], params['initial_advertise_peer_urls'])
    if params['snapshot_file'] is not None:
        validate.existing_file(params['snapshot_file'], 'snapshot_file')
    check_store_params(params)   # the store options are checked even when a snapshot file is restored
    return {'tmp_dir': tmp_dir}


def parse_etcd_snapshot(params: Mapping[str, Any]) -> Dict[str, Any]:
    tmp_dir = _tmp_dir(params)
    timeout = validate.timeout(params['snapshot_timeout'], 'snapshot_timeout')
    check_store_params(params)
    return {'tmp_dir': tmp_dir, 'snapshot_timeout': timeout, 'conn': EtcdConnection.from_params(params)}


def parse_etcd_snapshot_gc(params: Mapping[str, Any]) -> Dict[str, Any]:
    check_store_params(params)
    return dict(
        max_backups=validate.integer(params['max_backups'], 'max_backups',
                                     minimum=1 if params['policy'] == 'LimitBased' else 0),
        delta_retention_seconds=validate.integer(params['delta_snapshot_retention_period'],
                                                 'delta_snapshot_retention_period', minimum=0),
        incomplete_grace_seconds=validate.integer(params['incomplete_grace_period'], 'incomplete_grace_period',
                                                  minimum=0))


def parse_etcd_snapshot_info(params: Mapping[str, Any]) -> Dict[str, Any]:
    tmp_dir = _tmp_dir(params)
    check_store_params(params)
    if params['tool_timeout'] is not None:   # checked even when listing only (no tool runs)
        validate.timeout(params['tool_timeout'], 'tool_timeout')
    return {'tmp_dir': tmp_dir}
