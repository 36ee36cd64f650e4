# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Teardown of a node (Promenade's promenade-teardown, kubeadm reset): remove exactly the files this collection
recorded as its own, static pod manifests first so the kubelet stops the pods, and move the etcd data directory
aside rather than deleting it (never lose data: a member removed by mistake can still be recovered from it).

A control-plane node whose etcd member is still in the cluster is refused (`still-a-member`): removing its
manifest would leave a dead voter that counts against quorum. Remove the member first (steward.cluster.node_remove).
"""

from __future__ import annotations

import datetime
import os
import socket
import time
from typing import Any, Callable, Dict, List, Optional, Tuple
from urllib.parse import urlsplit

from ansible_collections.steward.cluster.plugins.module_utils.provisioning import files, layout
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.errors import NotReady, Refused
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.manifests import etcd_flags


def etcd_urls(root: files.Root) -> Optional[Dict[str, str]]:
    """{'peer': ..., 'client': ...} from the node's etcd manifest, or None when it has none."""
    flags = etcd_flags(root.read(layout.MANIFEST['etcd']))
    if not flags or 'initial-advertise-peer-urls' not in flags:
        return None
    return {'peer': flags['initial-advertise-peer-urls'].split(',')[0],
            'client': flags.get('advertise-client-urls', '').split(',')[0]}


def listening(url: str, timeout: float = 0.5) -> bool:
    parts = urlsplit(url)
    try:
        with socket.create_connection((parts.hostname, parts.port or 2379), timeout=timeout):
            return True
    except OSError:
        return False


def plan_teardown(root: files.Root) -> Dict[str, Any]:
    """What teardown would do: the recorded files that exist (manifests first), and the etcd data dir to move."""
    record = files.read_record(root)
    if record.get('unreadable'):
        raise Refused('%s is unreadable: cannot tell which files are ours' % layout.RECORD, 'not-ours', layout.RECORD)
    present = [p for p in record['files'] if p != layout.RECORD and root.exists(p)]
    manifests = [p for p in present if p.startswith(layout.MANIFESTS_DIR + '/')]
    others = [p for p in present if p not in manifests]
    data_dir = None
    if record['role'] == 'control-plane' and os.path.isdir(root.host(layout.ETCD_DATA_DIR + '/member')):
        data_dir = layout.ETCD_DATA_DIR
    return {'node': record['node'], 'role': record['role'], 'manifests': manifests, 'files': others,
            'record': root.exists(layout.RECORD), 'etcd_data_dir': data_dir, 'etcd': etcd_urls(root)}


def _prune(root: files.Root, removed: List[str]) -> List[str]:
    """Directories left empty by the removal, deepest first; never a directory something else still uses."""
    candidates = sorted({os.path.dirname(p) for p in removed}, key=lambda d: -d.count('/'))
    pruned = []
    seen = set()
    while candidates:
        directory = candidates.pop(0)
        if directory in ('', '/') or directory in seen or directory.count('/') < 2:
            continue
        seen.add(directory)
        try:
            os.rmdir(root.host(directory))
        except OSError:
            continue   # not empty (or gone): not ours to remove
        pruned.append(directory)
        candidates.append(os.path.dirname(directory))
        candidates.sort(key=lambda d: -d.count('/'))
    return pruned


def teardown(root: files.Root, *, check_mode: bool, now: datetime.datetime, member_check: Callable[[str], bool],
             wait_timeout: float = 120.0, sleep: Callable[[float], None] = time.sleep,
             is_listening: Callable[[str], bool] = listening) -> Dict[str, Any]:
    """Remove the node's recorded files. `member_check(peer_url)` says whether the node's etcd member is still in
    the cluster (it raises when that cannot be told); True refuses the teardown."""
    plan = plan_teardown(root)
    result: Dict[str, Any] = {'changed': False, 'removed': [], 'moved': None, 'pruned': [], 'node': plan['node']}
    if plan['etcd'] and plan['manifests'] and member_check(plan['etcd']['peer']):
        raise Refused('the etcd member of this node (%s) is still in the cluster: remove it first with '
                      'steward.cluster.node_remove; tearing its manifest down would leave a dead voter'
                      % plan['etcd']['peer'], 'still-a-member', plan['node'])
    removed = plan['manifests'] + plan['files'] + ([layout.RECORD] if plan['record'] else [])
    moved: Optional[Tuple[str, str]] = None
    if plan['etcd_data_dir']:
        moved = (plan['etcd_data_dir'], '%s.removed-%s' % (plan['etcd_data_dir'], now.strftime('%Y%m%dT%H%M%SZ')))
    result.update(changed=bool(removed or moved), removed=removed, moved=list(moved) if moved else None)
    if check_mode or not result['changed']:
        return result
    for path in plan['manifests']:
        root.remove(path)
    if plan['etcd'] and plan['etcd']['client']:
        deadline = time.monotonic() + wait_timeout
        while is_listening(plan['etcd']['client']):   # the kubelet stops etcd once its manifest is gone
            if time.monotonic() > deadline:
                raise NotReady('etcd still answers at %s %ss after its manifest was removed; the data dir was not '
                               'moved (run again once the kubelet stopped it)' % (plan['etcd']['client'], wait_timeout),
                               plan['node'])
            sleep(0.2)
    for path in plan['files'] + ([layout.RECORD] if plan['record'] else []):
        root.remove(path)
    if moved:
        os.rename(root.host(moved[0]), root.host(moved[1]))
    result['pruned'] = _prune(root, removed)
    return result


def teardown_message(result: Dict[str, Any]) -> str:
    """The one-line summary of a teardown's result."""
    if not result['changed']:
        return 'nothing of ours here'
    return 'removed %d file(s)%s' % (len(result['removed']), ', moved %s aside' % result['moved'][0]
                                     if result['moved'] else '')
