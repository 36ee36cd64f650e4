# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Rolling defragmentation, the etcd-backup-restore way.

A member being defragmented blocks reads and writes, so members go one at a time, followers first
and the leader last (one leader change at most), and only while the whole cluster is healthy:
health is checked again before each member and the run is postponed when it is not. Each member's
defragmentation is reported to timing.py's listeners (etcdbr_defragmentation_duration_seconds).
"""

from __future__ import annotations

import time
from typing import Any, Callable, Dict, List, Optional

from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.client import EtcdConnection, Gateway
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.cluster import (
    cluster_info,
    fully_healthy,
    member_endpoint,
)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.timing import DEFRAGMENT, EtcdCall, report
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import EtcdError


def fragmentation_ratio(db_size: Optional[int], db_size_in_use: Optional[int]) -> float:
    """Share of the database file that is free pages: (db_size - db_size_in_use) / db_size."""
    if not db_size or db_size_in_use is None:
        return 0.0
    return max(db_size - db_size_in_use, 0) / float(db_size)


def plan_defrag(info: Dict[str, Any], *, min_fragmentation_ratio: float = 0.0) -> List[Dict[str, Any]]:
    """Members to defragment, in order: non-leaders (by name), then the leader.

    Members below `min_fragmentation_ratio`, and members without a probed endpoint, are left out.
    """
    if not 0.0 <= min_fragmentation_ratio <= 1.0:
        raise EtcdError('min_fragmentation_ratio must be between 0.0 and 1.0, got %r' % min_fragmentation_ratio)
    plan = []
    for member in info['members']:
        endpoint = member_endpoint(info, member['id'])
        probe = next((r for r in info['endpoints'] if r['endpoint'] == endpoint), None) if endpoint else None
        if probe is None or not probe['reachable']:
            continue
        ratio = fragmentation_ratio(probe['db_size'], probe['db_size_in_use'])
        if ratio < min_fragmentation_ratio:
            continue
        plan.append({
            'id': member['id'], 'name': member['name'], 'endpoint': endpoint,
            'is_leader': member['id'] == info['leader'], 'is_learner': member['is_learner'],
            'fragmentation_ratio': round(ratio, 4),
            'db_size_before': probe['db_size'], 'db_size_in_use_before': probe['db_size_in_use'],
        })
    plan.sort(key=lambda p: (p['is_leader'], p['name'], p['id']))
    return plan


def rolling_defrag(conn: EtcdConnection, *, min_fragmentation_ratio: float = 0.0, defrag_timeout: float = 300,
                   check_mode: bool = False, clock: Callable[[], float] = time.monotonic) -> Dict[str, Any]:
    """Defragment the planned members one at a time; postpone (changed so far, reason) on ill health."""
    info = cluster_info(conn)
    plan = plan_defrag(info, min_fragmentation_ratio=min_fragmentation_ratio)
    result: Dict[str, Any] = {'changed': False, 'postponed': False, 'reason': '', 'members': plan}
    for entry in plan:
        entry['status'] = 'planned'
    ok, why = fully_healthy(info)
    if not ok:
        result.update(postponed=True, reason='defragmentation postponed: %s' % why)
        return result
    if check_mode or not plan:
        result['changed'] = bool(plan)
        return result

    with Gateway(conn) as gw:
        for index, entry in enumerate(plan):
            if index:
                # Re-check before every member: the previous defrag or anything else may have hurt the cluster.
                info = cluster_info(conn)
                ok, why = fully_healthy(info)
                if not ok:
                    result.update(postponed=True, reason='defragmentation postponed before %s: %s' % (
                        entry['name'] or entry['id'], why))
                    break
            start = clock()
            try:
                gw.call(entry['endpoint'], '/v3/maintenance/defragment', {}, defrag_timeout)
            except EtcdError as exc:
                report(EtcdCall(DEFRAGMENT, entry['endpoint'], False, clock() - start))
                entry.update(status='failed', error=str(exc), duration=round(clock() - start, 3))
                result.update(changed=True, postponed=True,
                              reason='defragmentation of %s failed: %s' % (entry['name'] or entry['id'], exc))
                break
            report(EtcdCall(DEFRAGMENT, entry['endpoint'], True, clock() - start))
            entry['duration'] = round(clock() - start, 3)
            entry['status'] = 'defragmented'
            result['changed'] = True
            try:
                status = gw.status(entry['endpoint'])
                entry['db_size_after'] = int(status.get('dbSize') or 0)
                entry['db_size_in_use_after'] = int(status.get('dbSizeInUse') or 0)
            except EtcdError as exc:
                entry['error'] = 'status after defragmentation failed: %s' % exc
    return result
