"""Rolling etcd upgrades on real clusters: Debian's 3.4 to the wheel's 3.5 under a client's load, a run killed mid-way
and started again, a member that fails and is rolled back before the next one is touched."""

from __future__ import annotations

import json
import os
import time

import pytest
import requests

from support.etcd_cluster import EtcdCluster, etcd_bin_dirs, etcd_version
from support.etcd_rolling import LoadClient, MemberProcessOps

from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.client import EtcdConnection
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import EtcdError
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.local_store import LocalStore
from ansible_collections.steward.cluster.plugins.module_utils.etcd.upgrade.run import (
    UpgradeError,
    observe,
    pre_upgrade_snapshot,
    run_upgrade,
)


def _dirs():
    by_minor = {}
    for d in etcd_bin_dirs():
        by_minor[etcd_version(d).rsplit('.', 1)[0]] = d
    return by_minor


DIRS = _dirs()
pytestmark = pytest.mark.skipif(not {'3.4', '3.5'} <= set(DIRS), reason='needs etcd 3.4 and 3.5 (make all)')


class Killed(BaseException):
    """Stands for the run's process dying at a point: nothing in the run catches it."""


@pytest.fixture
def cluster34(tmp_path):
    cluster = EtcdCluster(str(tmp_path / 'etcd'), size=3, bin_dir=DIRS['3.4']).start()
    yield cluster
    cluster.stop()


def _ops(cluster):
    return {name: MemberProcessOps(cluster, name, DIRS['3.5']) for name in cluster.members}


def _snapshotter(conn, tmp_path):
    store = LocalStore(str(tmp_path / 'backups'))
    tool = os.path.join(DIRS['3.5'], 'etcdutl')
    return lambda: pre_upgrade_snapshot(conn, store, now=1_800_000_000.0, tool=tool, tmp_dir=str(tmp_path))


def test_34_to_35_under_load_without_a_failed_request(cluster34, tmp_path):
    target = etcd_version(DIRS['3.5'])
    cluster34.put_many({'before/%03d' % i: 'x%d' % i for i in range(200)})
    conn = EtcdConnection(endpoints=tuple(cluster34.endpoints))
    ops = _ops(cluster34)
    record = str(tmp_path / 'upgrade.json')
    load = LoadClient(cluster34.endpoints, rate=100).start()
    try:
        result = run_upgrade(conn, ops, target, {}, record_path=record, now=1_800_000_000.0,
                             take_snapshot=_snapshotter(conn, tmp_path))
    finally:
        load.stop()
    assert load.failed == [], load.failed[:5]
    assert load.ok > 50
    print("upgrade figures:", [(u["name"], u["seconds"]) for u in result["upgraded"]], "requests ok", load.ok,
          "retried", len(load.retried), sorted(set(load.retried)), "max latency %.3f" % max(load.latencies))
    state = observe(conn)
    assert {m['version'] for m in state['members']} == {target}
    assert state['cluster_version'] == '3.5'
    plan = result['plan']
    assert [u['name'] for u in result['upgraded']] == [s['name'] for s in plan['steps']]
    assert plan['steps'][-1]['was_leader'] and not any(s['was_leader'] for s in plan['steps'][:-1])
    assert result['snapshot']['verified'] and result['snapshot']['name'].startswith('Full-')
    assert all(ops[n].starts == 1 and ops[n].stops == 1 for n in ops)
    data = cluster34.get_all()
    assert all(data.get('before/%03d' % i) == 'x%d' % i for i in range(200))
    assert all(data.get(k) == v for k, v in load.written.items())
    assert json.load(open(record))['in_flight'] is None
    # a second run changes nothing and restarts nobody
    again = run_upgrade(conn, _ops(cluster34), target, {}, record_path=record, now=1_800_000_100.0)
    assert again['changed'] is False and again['plan']['steps'] == []


def test_a_run_killed_after_a_stop_resumes_and_restarts_no_member_twice(cluster34, tmp_path):
    target = etcd_version(DIRS['3.5'])
    conn = EtcdConnection(endpoints=tuple(cluster34.endpoints))
    record = str(tmp_path / 'upgrade.json')
    ops = _ops(cluster34)
    first_plan = run_upgrade(conn, ops, target, {}, record_path=record, check_mode=True,
                             take_snapshot=_snapshotter(conn, tmp_path))['plan']
    order = [s['name'] for s in first_plan['steps']]

    def kill():
        raise Killed()
    ops[order[1]].after['stop'] = kill          # dies with the second member stopped, its binary not swapped
    with pytest.raises(Killed):
        run_upgrade(conn, ops, target, {}, record_path=record, take_snapshot=_snapshotter(conn, tmp_path))
    assert json.load(open(record))['in_flight']['name'] == order[1]
    pid_first = cluster34.members[order[0]].proc.pid

    again = _ops(cluster34)                      # a new run: new hands, the record and what members report
    result = run_upgrade(conn, again, target, {}, record_path=record, take_snapshot=_snapshotter(conn, tmp_path))
    assert result['plan']['done'] == [order[0]]
    assert [s['name'] for s in result['plan']['steps']] == order[1:]
    assert result['plan']['steps'][0]['resume'] is True
    assert cluster34.members[order[0]].proc.pid == pid_first and again[order[0]].starts == 0
    assert again[order[1]].starts == 1 and again[order[2]].starts == 1
    assert result['snapshot']['name']            # the first run's snapshot, recorded, gates the second
    assert {m['version'] for m in observe(conn)['members']} == {target}


def _first_member_gets_a_binary_that_does_not_start(cluster, tmp_path):
    """(target, conn, ops, plan order, the bad binary's dir): the first member of the plan is given a binary that
    exits at once."""
    target = etcd_version(DIRS['3.5'])
    bad = tmp_path / 'bad'
    bad.mkdir()
    (bad / 'etcd').write_text('#!/bin/sh\necho "panic: this etcd does not start" >&2\nexit 2\n')
    (bad / 'etcd').chmod(0o755)
    conn = EtcdConnection(endpoints=tuple(cluster.endpoints))
    ops = _ops(cluster)
    order = [s['name'] for s in run_upgrade(conn, ops, target, {}, check_mode=True,
                                            take_snapshot=lambda: {})['plan']['steps']]
    ops[order[0]].new_bin_dir = str(bad)
    return target, conn, ops, order, bad


def test_a_failing_member_is_rolled_back_and_the_next_is_not_touched(cluster34, tmp_path):
    target, conn, ops, order, bad = _first_member_gets_a_binary_that_does_not_start(cluster34, tmp_path)
    with pytest.raises(UpgradeError) as err:
        run_upgrade(conn, ops, target, {}, record_path=str(tmp_path / 'r.json'), caught_up_timeout=8,
                    take_snapshot=_snapshotter(conn, tmp_path))
    assert err.value.reason == 'member-failed' and err.value.member == order[0]
    assert err.value.rollback['action'] == 'previous-binary'
    assert ops[order[1]].starts == 0 and ops[order[1]].stops == 0
    state = observe(conn)
    assert {m['version'] for m in state['members']} == {etcd_version(DIRS['3.4'])}
    assert all(m['healthy'] for m in state['members'])


def test_preflight_refuses_a_learner_and_touches_nothing(cluster34, tmp_path):
    conn = EtcdConnection(endpoints=tuple(cluster34.endpoints))
    deadline = time.time() + 20
    while True:   # etcd refuses a membership change within ~5 s of the cluster's start ("unhealthy cluster")
        answer = requests.post(cluster34.endpoints[0] + '/v3/cluster/member/add',
                               json={'peerURLs': ['http://127.0.0.1:1'], 'isLearner': True}, timeout=10)
        if answer.status_code == 200 or time.time() > deadline:
            answer.raise_for_status()
            break
        time.sleep(0.5)
    ops = _ops(cluster34)
    with pytest.raises(UpgradeError) as err:
        run_upgrade(conn, ops, etcd_version(DIRS['3.5']), {}, take_snapshot=_snapshotter(conn, tmp_path))
    assert err.value.reason == 'refused'
    reasons = {r['reason'] for r in err.value.rollback['plan']['verdict']['refusals']}
    assert 'learner' in reasons
    assert all(o.stops == 0 for o in ops.values())


def test_a_member_that_ran_the_new_version_goes_back_while_the_cluster_version_is_old(cluster34, tmp_path):
    """The rollback's first way back relies on etcd letting a member that ran 3.5 rejoin as 3.4 while the cluster
    version is still 3.4 (it rises only once every member runs 3.5): a failure after the member served at 3.5."""
    target = etcd_version(DIRS['3.5'])
    conn = EtcdConnection(endpoints=tuple(cluster34.endpoints))
    cluster34.put_many({'k%03d' % i: 'v' for i in range(100)})
    ops = _ops(cluster34)
    first = run_upgrade(conn, ops, target, {'require_snapshot': False}, check_mode=True)['plan']['steps'][0]['name']

    def served_then_failed():
        del ops[first].after['start']       # once: the rollback starts the member again
        cluster34.wait_healthy([first], timeout=30)
        assert observe_version(conn, first) == target
        raise EtcdError('simulated: the member served at %s, then a check failed' % target)
    ops[first].after['start'] = served_then_failed
    with pytest.raises(UpgradeError) as err:
        run_upgrade(conn, ops, target, {'require_snapshot': False}, record_path=str(tmp_path / 'r.json'))
    assert err.value.member == first and err.value.rollback['action'] == 'previous-binary'
    state = observe(conn)
    assert {m['version'] for m in state['members']} == {etcd_version(DIRS['3.4'])}
    assert all(m['healthy'] for m in state['members']) and state['cluster_version'] == '3.4'
    assert all(cluster34.get_all('k').get('k%03d' % i) == 'v' for i in range(100))


def observe_version(conn, name):
    return next(m['version'] for m in observe(conn)['members'] if m['name'] == name)


def test_a_failed_pre_upgrade_snapshot_refuses_and_touches_nothing(cluster34, tmp_path):
    """No verified recent snapshot: the run takes one itself; when that fails (here the store is below a regular
    file, so nothing can be written) the run stops before any member."""
    conn = EtcdConnection(endpoints=tuple(cluster34.endpoints))
    blocker = tmp_path / 'not-a-dir'
    blocker.write_text('x')
    store = LocalStore(str(blocker / 'backups'))
    tool = os.path.join(DIRS['3.5'], 'etcdutl')
    ops = _ops(cluster34)
    with pytest.raises(UpgradeError) as err:
        run_upgrade(conn, ops, etcd_version(DIRS['3.5']), {}, record_path=str(tmp_path / 'r.json'),
                    take_snapshot=lambda: pre_upgrade_snapshot(conn, store, now=1_800_000_000.0, tool=tool,
                                                               tmp_dir=str(tmp_path)))
    assert err.value.reason == 'snapshot-failed'
    assert all(o.stops == 0 and o.starts == 0 for o in ops.values())
    assert {m['version'] for m in observe(conn)['members']} == {etcd_version(DIRS['3.4'])}


def test_an_active_alarm_refuses_by_reason(cluster34, tmp_path):
    conn = EtcdConnection(endpoints=tuple(cluster34.endpoints))
    member_id = requests.post(cluster34.endpoints[0] + '/v3/maintenance/status', json={}, timeout=10).json()['header'][
        'member_id']
    answer = requests.post(cluster34.endpoints[0] + '/v3/maintenance/alarm',
                           json={'action': 'ACTIVATE', 'memberID': member_id, 'alarm': 'NOSPACE'}, timeout=10)
    answer.raise_for_status()
    ops = _ops(cluster34)
    with pytest.raises(UpgradeError) as err:
        run_upgrade(conn, ops, etcd_version(DIRS['3.5']), {'require_snapshot': False})
    refusals = err.value.rollback['plan']['verdict']['refusals']
    assert [r['reason'] for r in refusals] == ['alarm'] and 'NOSPACE' in refusals[0]['message']
    assert all(o.stops == 0 for o in ops.values())


def test_when_the_previous_binary_does_not_come_back_either_the_way_back_is_the_snapshot_with_its_loss_window(
        cluster34, tmp_path):
    target, conn, ops, order, bad = _first_member_gets_a_binary_that_does_not_start(cluster34, tmp_path)
    ops[order[0]].previous = str(bad)          # its previous binary is gone too
    with pytest.raises(UpgradeError) as err:
        run_upgrade(conn, ops, target, {}, record_path=str(tmp_path / 'r.json'), caught_up_timeout=4,
                    take_snapshot=_snapshotter(conn, tmp_path))
    rollback = err.value.rollback
    assert err.value.reason == 'member-failed' and rollback['action'] == 'restore-snapshot'
    assert rollback['snapshot']['verified'] and rollback['snapshot']['name'].startswith('Full-')
    assert str(rollback['snapshot']['revision']) in rollback['loss_window']
    assert ops[order[1]].stops == 0 and ops[order[2]].stops == 0
    assert json.load(open(str(tmp_path / 'r.json')))['failed']['rollback']['action'] == 'restore-snapshot'
