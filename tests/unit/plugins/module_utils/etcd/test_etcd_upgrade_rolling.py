# -*- coding: utf-8 -*-
"""The one rolling plan both rolling changes walk (steward.cluster.etcd_upgrade and the `Etcd` resource's restart row):
its order, its gate between members, and the catch-up verdict, as tables over plain data."""

from ansible_collections.steward.cluster.plugins.module_utils.etcd.upgrade.plan import (
    ALL_MEMBERS_READY,
    IN_FLIGHT,
    Lag,
    hash_verdict,
    next_member,
    plan_upgrade,
    revision_verdict,
    rolling_order,
)


def test_order_resume_first_followers_by_number_leader_last():
    members = [{'name': 'etcd-main-10'}, {'name': 'etcd-main-0', 'leader': True}, {'name': 'etcd-main-2'},
               {'name': 'etcd-main-1', 'resume': True}]
    assert [m['name'] for m in rolling_order(members)] == ['etcd-main-1', 'etcd-main-2', 'etcd-main-10', 'etcd-main-0']


def test_plan_upgrade_orders_its_steps_with_the_same_order():
    members = [{'id': i, 'name': n, 'version': '3.4.23', 'healthy': True, 'revision': 5}
               for i, n in (('a', 'm-10'), ('b', 'm-2'), ('c', 'm-1'))]
    plan = plan_upgrade({'members': members, 'leader': 'c', 'alarms': []}, '3.5.1', {'require_snapshot': False})
    assert [s['name'] for s in plan['steps']] == ['m-2', 'm-10', 'm-1']


def _m(name, pending=True, leader=False, ready=True, restarting=False):
    return {'name': name, 'pending': pending, 'leader': leader, 'ready': ready, 'restarting': restarting}


def test_next_member_goes_when_nothing_holds_it():
    turn = next_member([_m('e-0', leader=True), _m('e-1'), _m('e-2', pending=False)])
    assert (turn.member, turn.leader, turn.left, turn.hold) == ('e-1', False, 2, None)
    turn = next_member([_m('e-0', leader=True), _m('e-1', pending=False), _m('e-2', pending=False)])
    assert (turn.member, turn.leader, turn.left, turn.hold) == ('e-0', True, 1, None)
    assert next_member([_m('e-0', pending=False)]).member is None


def test_next_member_holds_in_order_restarting_then_not_ready_then_the_callers_gates():
    members = [_m('e-0', leader=True), _m('e-1', pending=False, ready=False, restarting=True), _m('e-2')]
    turn = next_member(members, [('BackupReady', False, '')])
    assert (turn.member, turn.hold) == ('e-2', IN_FLIGHT) and 'e-1 is restarting' in turn.why
    members[1]['restarting'] = False      # back, but not caught up yet: the next one waits
    turn = next_member(members, [('BackupReady', False, '')])
    assert turn.hold == ALL_MEMBERS_READY and 'e-1' in turn.why
    members[1]['ready'] = True
    turn = next_member(members, [('BackupReady', True, ''), ('VerifiedBackup', False, 'too old')])
    assert (turn.hold, turn.why) == ('VerifiedBackup', 'too old')


def _probe(revision, member='a', version='3.5.1', learner=False):
    return {'member_id': member, 'revision': revision, 'version': version, 'is_learner': learner}


def test_revision_verdict_table():
    leader = _probe(100, 'l')
    cases = [
        (None, leader, None, 0, Lag.NOT_SERVING),
        (_probe(100, learner=True), leader, None, 0, Lag.LEARNER),
        (_probe(100, version='3.4.23'), leader, '3.5.1', 0, Lag.VERSION),
        (_probe(100), None, None, 0, Lag.NO_LEADER),
        (_probe(99), leader, None, 0, Lag.BEHIND),
        (_probe(40), leader, None, 50, Lag.BEHIND),
    ]
    for mine, lead, version, bound, reason in cases:
        verdict, revision = revision_verdict(mine, lead, version, bound)
        assert verdict is not None and verdict.reason is reason and revision == 0, (mine, reason, verdict)
    assert revision_verdict(_probe(60), leader, '3.5.1', 50) == (None, 60)     # the lower one: both have it
    assert revision_verdict(_probe(101), leader) == (None, 100)
    assert revision_verdict(_probe(60), leader, max_lag=50)[0] is None


def test_hash_verdict_compares_only_at_one_compaction_and_names_a_difference():
    ok = hash_verdict({'a': {'hash': 7, 'compact_revision': 3}, 'b': {'hash': 7, 'compact_revision': 3}}, 50, 2)
    assert ok.ok and (ok.revision, ok.hash, ok.lag) == (50, 7, 2)
    differs = hash_verdict({'a': {'hash': 7, 'compact_revision': 3}, 'b': {'hash': 8, 'compact_revision': 3}}, 50)
    assert not differs.ok and differs.reason is Lag.HASH_DIFFERS
    compaction = hash_verdict({'a': {'hash': 7, 'compact_revision': 3}, 'b': {'hash': 8, 'compact_revision': 9}}, 50)
    assert not compaction.ok and compaction.reason is Lag.COMPACTION_DIFFERS
