# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Genesis and join, one engine entry point: plan the node's files, add its etcd member as a learner before its
manifest exists, write the files (PKI first, static pod manifests last, so the kubelet never starts a pod before
its certificates are there), replace the load balancer config only after `haproxy -c` accepted it, then wait for
the member to start and promote it.

Genesis differs from a join in two ways only: it may create the authority when none exists, and it may start a
new etcd cluster when no member answers. Afterwards nothing marks the genesis node: it can be removed and joined
again like any other.

Check mode computes the same plan (etcd is read, `haproxy -c` runs) and changes nothing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.provisioning import files, layout, lb
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.certs import (
    Authority, new_authority, read_authority,
)
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.errors import PkiError, Refused
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.manifests import etcd_bootstrap_flags
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.node_files import plan_node_files
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.pki import check_ca, renew_ca
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.spec import ClusterSpec, NodeSpec
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.upgrade.floor import keep_installed


@dataclasses.dataclass(frozen=True)
class Request:
    cluster: ClusterSpec
    node: NodeSpec
    root: str
    now: datetime.datetime
    authority: Optional[Authority] = None
    bootstrap: bool = False            # cluster_genesis
    renew_ca: bool = False
    wait: bool = True
    wait_timeout: float = 300.0
    etcd_timeout: float = 5.0
    lb_validate_command: Optional[Sequence[str]] = lb.DEFAULT_VALIDATE_COMMAND
    kubelet_binary: str = '/usr/bin/kubelet'
    allow_downgrade: bool = False      # render older releases than the node's manifests name (upgrade/floor.py)


def _manifest_last(change: files.Change) -> tuple:
    return (change.path.startswith(layout.MANIFESTS_DIR + '/'), change.path)


def _guard_root(root: files.Root, node: NodeSpec) -> Dict[str, Any]:
    record = files.read_record(root)
    if record.get('unreadable'):
        raise Refused('%s is unreadable: cannot tell which files are ours; fix or remove it by hand' % layout.RECORD,
                      'not-ours', layout.RECORD)
    if record['node'] and record['node'] != node.name:
        raise Refused('this root holds node %s, not %s: remove that node first' % (record['node'], node.name),
                      'other-node', layout.RECORD)
    if record['role'] == 'control-plane' and not node.control_plane:
        raise Refused('%s is a control-plane node: remove it (steward.cluster.node_remove) before joining it as a '
                      'worker, so its etcd member leaves the cluster first' % node.name, 'role-change', node.name)
    return record


def _authority(req: Request, root: files.Root) -> Tuple[Authority, bool]:
    on_disk = read_authority(root.read) if req.node.control_plane else None
    authority = req.authority or (on_disk if on_disk is not None and on_disk.complete else None)
    created = False
    if authority is None:
        if not req.bootstrap:
            raise PkiError('no authority given: pass the cluster CA files (authority) read from a control-plane node',
                           req.node.name)
        authority = new_authority(req.cluster.key_algorithm, req.now, req.cluster.ca_days)
        created = True
    if req.renew_ca and req.node.control_plane:
        cas = dict(authority.cas)
        for name, pair in authority.cas.items():
            if check_ca(pair, req.now, req.cluster.renew_before_days, True, name).changes:
                cas[name] = renew_ca(pair, req.now, req.cluster.ca_days)
        authority = Authority(cas, authority.sa_key, authority.sa_pub)
    return authority, created


def provision(req: Request, check_mode: bool,
              after_write: Optional[Callable[[List[str]], None]] = None) -> Dict[str, Any]:
    """Bring the node under `req.root` to its planned state; returns changed, per-file lines, certificates, etcd and
    load balancer outcomes, and the diff (secrets show only their size). `after_write(changed paths)` runs once the
    files are in place and before waiting for etcd: the module starts or restarts the kubelet there."""
    root = files.Root(req.root)
    record = _guard_root(root, req.node)
    authority, created = _authority(req, root)
    result: Dict[str, Any] = {'changed': False, 'authority_created': created, 'etcd': None, 'warnings': []}
    with contextlib.ExitStack() as stack:
        etcd_conn = None
        boot = None
        if req.node.control_plane:
            # Imported here: etcd's clients (gRPC, requests) take seconds to load and a worker needs none of them.
            from ansible_collections.steward.cluster.plugins.module_utils.provisioning import etcd_membership
            etcd_conn = stack.enter_context(etcd_membership.client_connection(
                etcd_membership.cluster_endpoints(req.cluster), authority.ca('etcd/ca'), req.now, req.etcd_timeout,
                req.cluster.key_algorithm))
            boot = etcd_bootstrap_flags(root.read(layout.MANIFEST['etcd']))
            etcd_report: Dict[str, Any] = {'actions': [], 'members': []}
            if boot is None:
                boot, etcd_report = etcd_membership.join_flags(etcd_conn, req.cluster, req.node, req.bootstrap,
                                                               check_mode)
                result['warnings'].extend(etcd_report.pop('warnings', []))
            result['etcd'] = dict(etcd_report, initial_cluster=boot[0], initial_cluster_state=boot[1])
        planned = plan_node_files(req.cluster, req.node, authority, root.read, req.now, boot, req.kubelet_binary)
        floored, floor_warnings = keep_installed(planned.files, root.read, req.allow_downgrade)
        result['warnings'].extend(floor_warnings)
        desired = {p: f for p, f in floored.items() if p != layout.LB_CONFIG}
        desired[layout.RECORD] = files.FileSpec(layout.RECORD, files.record_content(
            req.node.name, req.node.role, list(planned.files) + [layout.RECORD]), 0o644)
        stale = [p for p in record['files'] if p not in planned.files and p != layout.RECORD]
        changes = sorted(files.plan(root, desired, stale), key=_manifest_last)
        lb_config = planned.files[layout.LB_CONFIG].content
        # Validated before anything is written: an invalid render changes nothing at all.
        lb_result = lb.ensure_config(root, lb_config, check_mode=True, validate_command=req.lb_validate_command)
        if not check_mode:
            files.apply(root, [c for c in changes if not c.path.startswith(layout.MANIFESTS_DIR + '/')])
            validated = lb_result['validated']
            lb_result = lb.ensure_config(root, lb_config, check_mode=False, validate_command=None)
            lb_result['validated'] = validated
            files.apply(root, [c for c in changes if c.path.startswith(layout.MANIFESTS_DIR + '/')])
        lb_change = [files.Change(layout.LB_CONFIG, files.CREATE if lb_result['before'] is None else files.UPDATE,
                                  'content', lb_result['before'], lb_result['after'], 0o644, False)] \
            if lb_result['changed'] else []
        all_changes = sorted(changes + lb_change, key=lambda c: c.path)
        result.update(
            changed=bool(all_changes) or bool(result['etcd'] and result['etcd']['actions']),
            files=[c.line() for c in all_changes],
            certificates=planned.certificates,
            lb={'validated': lb_result['validated'], 'reloaded': lb_result['reloaded'], 'running': lb_result['running']},
            diff=files.diff(all_changes, req.root),
        )
        if after_write is not None and not check_mode:
            after_write([c.path for c in all_changes])
        if etcd_conn is not None and req.wait and not check_mode:
            outcome = etcd_membership.promote(etcd_conn, req.node, req.cluster.peer_url(req.node.address),
                                              req.wait_timeout)
            result['etcd']['actions'] = result['etcd']['actions'] + outcome['actions']
            result['etcd']['member'] = outcome['member']
            result['changed'] = result['changed'] or bool(outcome['actions'])
    result['msg'] = _summary(req.node, result)
    return result


def _summary(node: NodeSpec, result: Dict[str, Any]) -> str:
    parts: List[str] = []
    if result.get('files'):
        parts.append('%d file(s) changed' % len(result['files']))
    renewed = [c['name'] for c in result.get('certificates') or [] if c['action'] != 'keep']
    if renewed:
        parts.append('certificates issued or renewed: %s' % ', '.join(renewed))
    if result.get('etcd') and result['etcd']['actions']:
        parts.extend(result['etcd']['actions'])
    return '%s: %s' % (node.name, '; '.join(parts) if parts else 'nothing to change')
