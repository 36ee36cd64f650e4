# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One member's part of a host-driven upgrade: the `etcd_upgrade` module's parameters checked and run.

Two swap kinds, one plan and one run: `target_binary` (a member the `steward.cluster.etcd` role runs: the binary file
swapped in place, the version read from `--version`; `RoleMember` here) or `target_image` (a provisioning static pod:
the manifest's image tag rewritten, the version read from the tag; `StaticPodMember` in provisioning/etcd_static_pod.py,
passed in by the caller: the etcd area does not import provisioning, which sits above it). The member certificates
are read by the caller's `read_certs` for the same reason (the collection's x509 reader is provisioning/pki.py). The
module is a shell (common/shell.py); everything it checks and does is here or there, so check mode runs every check
and the same entry serves any other caller that drives members from their hosts."""

from __future__ import annotations

import os
import shutil
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.common import validate
from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
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
from ansible_collections.steward.cluster.plugins.module_utils.etcd.upgrade.versions import format_version, image_version


def _service(p: Mapping[str, Any]) -> Any:
    spec = ProcessSpec(pid_file=p['pid_file'] or '/nonexistent', binary=p['binary'], config_file=p['config_file'],
                       log_file=p['log_file'], wait_url=p['client_url'], stop_timeout=p['stop_timeout'],
                       ca_cert=p['ca_cert'], client_cert=p['client_cert'], client_key=p['client_key'])
    if p['service_manager'] == 'systemd':
        return SystemdService(validate.path_component(p['service_name'], 'service_name'), spec)
    validate.absolute_path(p['pid_file'], 'pid_file')
    return ProcessService(spec)


class RoleMember:
    """A member the `steward.cluster.etcd` role runs, seen from its host: its service and binary, its quota and data
    dir's disk, its certificates (`member_certs`), its run record beside its config file."""

    def __init__(self, p: Mapping[str, Any]):
        self.p = p

    def check(self) -> None:
        """Nothing beyond check_params: the binary's version is read before."""

    def facts(self) -> Dict[str, Any]:
        facts: Dict[str, Any] = {'quota_bytes': self.p['quota_backend_bytes']}
        if self.p['data_dir'] and os.path.isdir(self.p['data_dir']):
            facts['disk_free_bytes'] = shutil.disk_usage(self.p['data_dir']).free
        return facts

    def cert_paths(self) -> List[Tuple[str, str]]:
        return [(path, path) for path in self.p.get('member_certs') or []]

    def ops(self) -> Any:
        return ServiceMemberOps(_service(self.p), BinarySwap(self.p['binary'], self.p['target_binary']))

    def record_path(self) -> str:
        return self.p['record_path'] or os.path.join(os.path.dirname(self.p['config_file']), 'upgrade-record.json')


def _image_mode(p: Mapping[str, Any]) -> bool:
    return p.get('target_image') is not None


def check_params(p: Mapping[str, Any]) -> None:
    """Every option the module takes, before anything is read from or done to a member."""
    validate.text(p['member'], 'member', max_length=253)
    if (p.get('target_binary') is None) == (p.get('target_image') is None):
        raise InvalidInput('target_binary', 'one-of', 'name exactly one of target_binary (a member the etcd role '
                           'runs) and target_image (a static pod)', value=p.get('target_binary'))
    validate.absolute_path(p['manifest'], 'manifest')
    validate.absolute_path(p['root'], 'root')
    if not _image_mode(p):
        for option in ('binary', 'config_file'):
            if p.get(option) is None:
                raise InvalidInput(option, 'required', '%s is required with target_binary' % option)
            validate.absolute_path(p[option], option)
        if p['service_manager'] == 'process' and p.get('pid_file') is None:
            raise InvalidInput('pid_file', 'required', 'pid_file is required with service_manager=process')
    for index, path in enumerate(p.get('member_certs') or []):
        validate.absolute_path(path, 'member_certs[%d]' % index)
    validate.number(p['cert_window'], 'cert_window', minimum=0)
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
    for option in ('data_dir', 'log_file', 'record_path', 'pid_file'):
        if p[option] is not None:
            validate.absolute_path(p[option], option)
    if p['in_flight'] is not None:
        validate.text(p['in_flight'], 'in_flight', max_length=253)
    if p['tmp_dir'] is not None:
        validate.existing_dir(p['tmp_dir'], 'tmp_dir')


def _target_version(p: Mapping[str, Any]) -> str:
    """The target, read where it is written: the binary's `--version`, or the image's tag."""
    if not _image_mode(p):
        return binary_version(p['target_binary'])
    version = image_version(p['target_image'])
    if version is None:
        raise InvalidInput('target_image', 'version-tag', 'must be an etcd image whose tag names its version (like '
                           'registry.k8s.io/etcd:3.5.21-0), got %r' % p['target_image'], value=p['target_image'])
    return format_version(version)


def upgrade_member(p: Mapping[str, Any], check_mode: bool, static_pod: Optional[Callable[[Mapping[str, Any]], Any]] = None,
                   read_certs: Optional[Callable[[List[Tuple[str, str]]], List[Dict[str, Any]]]] = None
                   ) -> Dict[str, Any]:
    """Plan the upgrade of the cluster `p` reaches and run this host's member's part of it (`check_mode`: the plan
    and the verdict only). `static_pod(p)` is the member of a static pod (target_image), `read_certs([(shown, path)])`
    reads the member certificates ([{path, not_after, not_after_text}]); provisioning/etcd_static_pod.py passes both.
    Raises InvalidInput for bad options and UpgradeError (an EtcdError whose `result()` carries the reason, the
    member, the rollback and the plan) when the run stops."""
    check_params(p)
    tools = None
    if p['etcdutl_path'] or p['etcd_path'] or p['tool_timeout'] is not None:   # every input checked up front
        tools = resolve_tools(p['etcdutl_path'], p['etcd_path'], p['bin_dirs'], p['tool_timeout'])
    target = _target_version(p)
    if _image_mode(p) and static_pod is None:
        raise InvalidInput('target_image', 'supported', 'this caller upgrades members run by the etcd role only',
                           value=p['target_image'])
    member = static_pod(p) if _image_mode(p) else RoleMember(p)
    member.check()
    paths = member.cert_paths()
    if paths and read_certs is None:
        raise InvalidInput('member_certs', 'supported', 'this caller cannot read certificates', value=paths[0][0])
    facts = dict(member.facts(), certs=read_certs(paths) if paths else [])
    ops = {p['member']: member.ops()}
    conn = EtcdConnection.from_params(p)
    store = store_from_params(p, must_exist=False) if p['store'] else None
    tool = tools.snapshot_tool if tools else None
    options: Dict[str, Any] = {'snapshot_max_age': p['snapshot_max_age'], 'headroom_factor': p['headroom_factor'],
                               'require_snapshot': p['require_snapshot'], 'cert_window': p['cert_window'],
                               'swap': 'image' if _image_mode(p) else 'binary',
                               'take_snapshot': p['take_snapshot'] and store is not None}
    if store is not None and p['require_snapshot']:
        tool = tool or resolve_tools(None, None, p['bin_dirs']).snapshot_tool
        options['snapshot'] = newest_verified_full(store, tool=tool, tmp_dir=p['tmp_dir'])
    record = member.record_path()
    try:
        outcome = run_upgrade(
            conn, ops, target, options, record_path=record, now=time.time(), in_flight=p['in_flight'],
            take_snapshot=(lambda: pre_upgrade_snapshot(conn, store, time.time(), tool, p['tmp_dir']))
            if store is not None else None,
            only=[p['member']], member_facts={p['member']: facts},
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
