"""Rolling defragmentation on real 3-member clusters: leader last, sizes recorded, postponed when unhealthy."""

from __future__ import annotations

import base64
import time

import requests

from support.ansible import local_play, run_playbook

from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.client import EtcdConnection
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.cluster import cluster_info
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.defrag import rolling_defrag


def fragment(cluster):
    """Write ~2 MB, delete it and compact, so every member has free pages to give back."""
    cluster.put_many({'/frag/%04d' % i: 'x' * 4096 for i in range(500)})
    url = cluster.healthy_endpoint()
    key = base64.b64encode(b'/frag/').decode()
    end = base64.b64encode(b'/frag0').decode()
    rev = requests.post(url + '/v3/kv/deleterange', json={'key': key, 'range_end': end}, timeout=10).json()
    requests.post(url + '/v3/kv/compaction', json={'revision': rev['header']['revision'], 'physical': True},
                  timeout=10).raise_for_status()
    # Each member compacts its own backend in the background and reports dbSizeInUse as of its last
    # backend commit: keep writing one small key so every member commits, until all show the free pages.
    deadline = time.time() + 30
    while True:
        cluster.put_many({'/frag-tick': str(time.time())})
        ratios = []
        for endpoint in cluster.endpoints:
            status = requests.post(endpoint + '/v3/maintenance/status', json={}, timeout=5).json()
            ratios.append(1 - int(status['dbSizeInUse']) / int(status['dbSize']))
        if min(ratios) >= 0.3:
            return
        assert time.time() < deadline, 'members did not compact: %s' % ratios
        time.sleep(0.2)


def test_rolling_defrag_leader_last_and_sizes(etcd3):
    fragment(etcd3)
    conn = EtcdConnection(endpoints=(etcd3.endpoints[0],), timeout=2.0)
    leader = cluster_info(conn)['leader']

    planned = rolling_defrag(conn, check_mode=True)
    assert planned['changed'] is True and [m['status'] for m in planned['members']] == ['planned'] * 3
    assert 'db_size_after' not in planned['members'][0]

    result = rolling_defrag(conn, min_fragmentation_ratio=0.1)
    assert result['postponed'] is False and result['changed'] is True
    order = [m['id'] for m in result['members']]
    assert len(order) == 3 and order[-1] == leader and leader not in order[:-1]
    assert [m['is_leader'] for m in result['members']] == [False, False, True]
    for m in result['members']:
        assert m['status'] == 'defragmented' and m['duration'] >= 0
        assert m['fragmentation_ratio'] >= 0.1
        assert m['db_size_after'] < m['db_size_before']

    # Now nothing is fragmented enough: nothing to do.
    again = rolling_defrag(conn, min_fragmentation_ratio=0.5)
    assert again['changed'] is False and again['members'] == []


def test_rolling_defrag_postponed_when_member_down(etcd3):
    fragment(etcd3)
    etcd3.kill('etcd2')
    conn = EtcdConnection(endpoints=tuple(etcd3.endpoints), timeout=2.0)
    result = rolling_defrag(conn)
    assert result['postponed'] is True and result['changed'] is False
    assert 'etcd2' in result['reason']
    assert all(m['status'] == 'planned' for m in result['members'])


def test_etcd_defrag_module_check_mode_then_real(etcd3):
    fragment(etcd3)
    conn = {'endpoints': [etcd3.endpoints[1]], 'timeout': 2.0}
    res = run_playbook(local_play([
        {'name': 'info', 'steward.cluster.etcd_cluster_info': conn},
        {'name': 'plan', 'steward.cluster.etcd_defrag': conn, 'check_mode': True},
        {'name': 'defrag', 'steward.cluster.etcd_defrag': conn},
        {'name': 'bad', 'steward.cluster.etcd_defrag': dict(conn, min_fragmentation_ratio=2.0), 'ignore_errors': True},
    ]))
    assert res.rc == 0, res.stderr
    leader = res.result('info')['leader']
    plan = res.result('plan')
    assert plan['changed'] is True and plan['members'][-1]['id'] == leader
    assert all('db_size_after' not in m for m in plan['members'])
    done = res.result('defrag')
    assert done['changed'] is True and [m['id'] for m in done['members']] == [m['id'] for m in plan['members']]
    assert all(m['status'] == 'defragmented' for m in done['members'])
    assert res.result('bad')['failed'] is True and 'min_fragmentation_ratio: must be at most 1' in res.result('bad')['msg']
