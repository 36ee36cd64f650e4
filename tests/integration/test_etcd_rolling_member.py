# -*- coding: utf-8 -*-
"""One member's turn in a rolling change, on three real etcd members (tests/support/etcd_cluster.py): the catch-up
verdict a member's readiness gives (etcd/upgrade/member_ops.member_caught_up: this member and the leader only) and
the leadership hand-off both callers make before a leader stops (move_leadership_away: to the most caught-up
follower, preferring the ones named)."""

from __future__ import annotations

import time

from support.etcd_cluster import EtcdCluster

from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.client import EtcdConnection
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.cluster import cluster_info
from ansible_collections.steward.cluster.plugins.module_utils.etcd.upgrade.member_ops import (
    member_caught_up,
    move_leadership_away,
)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.upgrade.plan import Lag


def test_caught_up_verdicts_and_a_leader_hand_off(tmp_path):
    cluster = EtcdCluster(str(tmp_path), size=3).start()
    try:
        conn = EtcdConnection(endpoints=tuple(cluster.endpoints))
        cluster.put_many({'k%03d' % i: 'v' for i in range(50)})
        info = cluster_info(conn)
        names = {m['id']: m['name'] for m in info['members']}
        for url in cluster.endpoints:
            verdict = member_caught_up(conn, url)
            assert verdict.ok, (url, verdict)
        leader = info['leader']
        follower = sorted(n for i, n in names.items() if i != leader)[0]
        assert move_leadership_away(conn, sorted(i for i in names if i != leader)[0], timeout=10) is None   # a follower
        moved = move_leadership_away(conn, leader, prefer=[follower], timeout=10)
        assert moved != leader and names[moved] == follower
        assert cluster_info(conn)['leader'] == moved

        other = next(n for i, n in names.items() if i not in (leader, moved))
        cluster.kill(other)
        stopped = member_caught_up(conn, cluster.members[other].client_url, timeout=1.0)
        assert not stopped.ok and stopped.reason is Lag.NOT_SERVING
        cluster.put_many({'later%03d' % i: 'v' for i in range(50)})
        cluster.start_member(other, state='existing')
        deadline = time.monotonic() + 30
        verdict = member_caught_up(conn, cluster.members[other].client_url)
        while not verdict.ok and time.monotonic() < deadline:
            time.sleep(0.2)
            verdict = member_caught_up(conn, cluster.members[other].client_url)
        assert verdict.ok and verdict.revision > 0 and 'caught up at revision' in verdict.message, verdict
    finally:
        cluster.stop()
