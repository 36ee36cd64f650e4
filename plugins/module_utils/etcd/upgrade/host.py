# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One member's part of a host-driven upgrade: the `etcd_upgrade` module's parameters checked and run.

Two swap kinds, one plan and one run: `target_binary` (a member the `steward.cluster.etcd` role runs: the binary file
swapped in place, the version read from `--version`) or `target_image` (a provisioning static pod: the manifest's
image tag rewritten, the version read from the tag). The module is a shell (common/shell.py); everything it checks
and does is here, so check mode runs every check and the same entry serves any other caller that drives members
from their hosts."""

from __future__ import annotations

import os
import shutil
import time
from typing import Any, Dict, Mapping

from ansible_collections.steward.cluster.plugins.module_utils.common import validate
from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.common.times import format_rfc3339
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.client import EtcdConnection
from ansible_collections.steward.cluster.plugins.module_utils.etcd.member.binaries import resolve_tools
from ansible_collections.steward.cluster.plugins.module_utils.etcd.member.process import ProcessSpec
from ansible_collections.steward.cluster.plugins.module_utils.etcd.member.service import ProcessService, SystemdService
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.stores import check_store_params, store_from_params
from ansible_collections.steward.cluster.plugins.module_utils.etcd.upgrade.member_ops import (
    BinarySwap,
    ManifestError,
    ManifestImageSwap,
    ServiceMemberOps,
    StaticPodMemberOps,
    binary_version,
)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.upgrade.run import (
    UpgradeError,
    newest_verified_full,
    pre_upgrade_snapshot,
    run_upgrade,
)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.upgrade.versions import format_version, image_version
from ansible_collections.steward.cluster.plugins.module_utils.provisioning import layout
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.errors import PkiError
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.manifests import etcd_flags
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.pki import load_cert

# kubeadm keeps its manifest backups in /etc/kubernetes/tmp: outside the manifests dir the kubelet runs.
STATIC_POD_TMP = '/etc/kubernetes/tmp'
# The member's own certificates, as the static pod's flags name them (server, then peer).
CERT_FLAGS = ('cert-file', 'peer-cert-file')


def _service(p: Mapping[str, Any]) -> Any:
    spec = ProcessSpec(pid_file=p['pid_file'] or '/nonexistent', binary=p['binary'], config_file=p['config_file'],
                       log_file=p['log_file'], wait_url=p['client_url'], stop_timeout=p['stop_timeout'],
                       ca_cert=p['ca_cert'], client_cert=p['client_cert'], client_key=p['client_key'])
    if p['service_manager'] == 'systemd':
        return SystemdService(validate.path_component(p['service_name'], 'service_name'), spec)
    validate.absolute_path(p['pid_file'], 'pid_file')
    return ProcessService(spec)


def _manifest_flags(p: Mapping[str, Any]) -> Dict[str, str]:
    """The static pod's `--flag=value` arguments (its data dir, certificates); {} in binary mode."""
    if not _image_mode(p):
        return {}
    manifest = _host(p, p['manifest'])
    try:
        with open(manifest, 'rb') as f:
            return etcd_flags(f.read()) or {}
    except OSError as exc:
        raise InvalidInput('manifest', 'readable', 'cannot read the etcd static-pod manifest %s: %s' % (
            manifest, exc), value=p['manifest'])


def _facts(p: Mapping[str, Any]) -> Dict[str, Any]:
    """What only the member's host knows: its quota and the free space of its data dir's disk (a static pod's
    data dir and quota are its manifest's flags when the options do not name them)."""
    flags = _manifest_flags(p)
    quota = flags.get('quota-backend-bytes')
    facts: Dict[str, Any] = {'quota_bytes': int(quota) if quota and quota.isdigit() and int(quota) > 0
                             else p['quota_backend_bytes']}
    data_dir = p['data_dir'] or (_host(p, flags['data-dir']) if flags.get('data-dir') else None)
    if data_dir and os.path.isdir(data_dir):
        facts['disk_free_bytes'] = shutil.disk_usage(data_dir).free
    return facts


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


def _host(p: Mapping[str, Any], path: str) -> str:
    return layout.host_path(p['root'], path)


def _cert_paths(p: Mapping[str, Any]) -> list:
    """The member's server and peer certificates: `member_certs`, else (static pod) what the manifest's flags name."""
    if p.get('member_certs'):
        return [(path, path) for path in p['member_certs']]
    flags = _manifest_flags(p)
    return [(flags[flag], _host(p, flags[flag])) for flag in CERT_FLAGS if flags.get(flag)]


def member_certs(p: Mapping[str, Any]) -> list:
    """[{path, not_after (epoch s), not_after_text}] of the member's certificates, for the plan's cert-expiring
    check; one that cannot be read is refused by name (an upgrade restarts the member, which must read it)."""
    certs = []
    for shown, path in _cert_paths(p):
        try:
            with open(path, 'rb') as f:
                cert = load_cert(f.read(), shown)
        except (OSError, PkiError) as exc:
            raise InvalidInput('member_certs', 'certificate', 'cannot read the member certificate %s: %s' % (
                shown, exc), value=shown)
        not_after = cert.not_valid_after_utc
        certs.append({'path': shown, 'not_after': not_after.timestamp(), 'not_after_text': format_rfc3339(not_after)})
    return certs


def _member_ops(p: Mapping[str, Any]) -> Any:
    if _image_mode(p):
        previous = _host(p, STATIC_POD_TMP + '/etcd.yaml.pre-upgrade')
        return StaticPodMemberOps(ManifestImageSwap(_host(p, p['manifest']), p['target_image'], previous))
    return ServiceMemberOps(_service(p), BinarySwap(p['binary'], p['target_binary']))


def _record_path(p: Mapping[str, Any]) -> str:
    if p['record_path']:
        return p['record_path']
    if _image_mode(p):
        return _host(p, STATIC_POD_TMP + '/etcd-upgrade-record.json')
    return os.path.join(os.path.dirname(p['config_file']), 'upgrade-record.json')


def upgrade_member(p: Mapping[str, Any], check_mode: bool) -> Dict[str, Any]:
    """Plan the upgrade of the cluster `p` reaches and run this host's member's part of it (`check_mode`: the plan
    and the verdict only). Raises InvalidInput for bad options and UpgradeError (an EtcdError whose `result()`
    carries the reason, the member, the rollback and the plan) when the run stops."""
    check_params(p)
    tools = None
    if p['etcdutl_path'] or p['etcd_path'] or p['tool_timeout'] is not None:   # every input checked up front
        tools = resolve_tools(p['etcdutl_path'], p['etcd_path'], p['bin_dirs'], p['tool_timeout'])
    target = _target_version(p)
    facts = dict(_facts(p), certs=member_certs(p))
    ops = {p['member']: _member_ops(p)}
    if _image_mode(p):
        try:
            ops[p['member']].manifest.image()   # the manifest names an etcd image: checked before the plan
        except ManifestError as exc:
            raise InvalidInput('manifest', 'etcd-static-pod', str(exc), value=p['manifest'])
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
    record = _record_path(p)
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
