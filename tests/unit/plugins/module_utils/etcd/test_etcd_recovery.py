"""The recovery decision table, one row per situation an operator meets at 3 a.m."""

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.etcd.recovery.recovery import plan_recovery

MEMBERS = [{'id': 'a1', 'name': 'etcd1', 'peer_urls': ['http://10.0.0.1:2380'], 'is_learner': False},
           {'id': 'a2', 'name': 'etcd2', 'peer_urls': ['http://10.0.0.2:2380'], 'is_learner': False},
           {'id': 'a3', 'name': 'etcd3', 'peer_urls': ['http://10.0.0.3:2380'], 'is_learner': False}]


def host(n, *, healthy=False, responding=None, data=True, raft=100, cluster='c1', learner=False, reachable=True):
    responding = healthy if responding is None else responding
    h = {'name': 'etcd%d' % n, 'peer_url': 'http://10.0.0.%d:2380' % n, 'host_reachable': reachable,
         'responding': responding, 'healthy': healthy, 'data_has_data': data or responding,
         'raft_index': raft if responding else None, 'cluster_id': cluster if responding else None,
         'is_learner': learner, 'members': MEMBERS if responding else []}
    if not reachable:
        h = {'name': 'etcd%d' % n, 'host_reachable': False}
    return h


CASES = [
    ('all healthy', [host(1, healthy=True), host(2, healthy=True), host(3, healthy=True)], False,
     dict(action='none', rejoin=[], remove=[])),
    ('one lost with data wiped', [host(1, healthy=True), host(2, healthy=True), host(3, data=False)], False,
     dict(action='replace_members', seed='etcd1', rejoin=['etcd3'], remove=[{'host': 'etcd3', 'member_id': 'a3'}])),
    ('one crashed for good with data', [host(1, data=False), host(2, healthy=True), host(3, healthy=True)], False,
     dict(action='replace_members', seed='etcd2', rejoin=['etcd1'], remove=[{'host': 'etcd1', 'member_id': 'a1'}])),
    ('one powered off is left alone', [host(1, healthy=True), host(2, healthy=True), host(3, reachable=False)], False,
     dict(action='none', unreachable=['etcd3'])),
    ('split brain member is replaced', [host(1, healthy=True), host(2, healthy=True), host(3, healthy=True, cluster='c9')],
     False, dict(action='replace_members', rejoin=['etcd3'])),
    ('healthy learner is promoted', [host(1, healthy=True), host(2, healthy=True), host(3, responding=True, learner=True)],
     False, dict(action='replace_members', rejoin=[], promote=['etcd3'])),
    ('quorum lost, one survivor', [host(1, responding=True, raft=50), host(2, data=False), host(3, data=False)], False,
     dict(action='force_new_cluster', seed='etcd1', rejoin=['etcd2', 'etcd3'])),
    ('quorum lost, most recent survivor wins',
     [host(1, responding=True, raft=50), host(2, responding=True, raft=70),
      host(3, data=False), host(4, data=False), host(5, data=False)], False,
     dict(action='force_new_cluster', seed='etcd2', rejoin=['etcd1', 'etcd3', 'etcd4', 'etcd5'])),
    ('quorum lost, survivor and an unreachable host', [host(1, reachable=False), host(2, responding=True), host(3, data=False)],
     False, dict(action='force_new_cluster', seed='etcd2', rejoin=['etcd3'], unreachable=['etcd1'])),
    ('no data anywhere, store set', [host(1, data=False), host(2, data=False), host(3, data=False)], True,
     dict(action='restore_snapshot', seed='etcd1', rejoin=['etcd2', 'etcd3'])),
    ('no data anywhere, no store', [host(1, data=False), host(2, data=False), host(3, data=False)], False,
     dict(action='blocked')),
    ('data on disk but no member can start', [host(1, data=True), host(2, data=False), host(3, data=False)], True,
     dict(action='restore_snapshot', seed='etcd1')),
    ('nothing reachable', [host(1, reachable=False), host(2, reachable=False), host(3, reachable=False)], True,
     dict(action='blocked', unreachable=['etcd1', 'etcd2', 'etcd3'])),
]


@pytest.mark.parametrize('hosts,store,expected', [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_plan_recovery(hosts, store, expected):
    plan = plan_recovery(hosts, store_configured=store).to_dict()
    for key, value in expected.items():
        assert plan[key] == value, (key, plan)
    assert plan['reasons'], 'every plan explains itself'
    assert plan['changes'] == (plan['action'] not in ('none', 'blocked'))


def test_findings_name_every_host():
    hosts = [host(1, healthy=True), host(2, responding=True, cluster='c9'), host(3, reachable=False)]
    plan = plan_recovery(hosts, store_configured=False)
    assert plan.findings == {'etcd1': 'healthy', 'etcd2': 'split-brain', 'etcd3': 'unreachable'}


def test_foreign_members_are_reported_not_removed():
    extra = MEMBERS + [{'id': 'ff', 'name': 'old', 'peer_urls': ['http://10.9.9.9:2380'], 'is_learner': False}]
    hosts = [dict(host(i, healthy=True), members=extra) for i in (1, 2, 3)]
    plan = plan_recovery(hosts, store_configured=False)
    assert plan.action == 'none'
    assert [m['id'] for m in plan.foreign_members] == ['ff']
    assert plan.remove == []


def test_every_started_host_gets_its_initial_cluster_before_the_first_change():
    # quorum lost: the survivor starts alone; each joiner finds the survivor and the joiners before it
    plan = plan_recovery([host(1, responding=True), host(2, data=False), host(3, data=False)], store_configured=False)
    assert plan.initial_cluster == {
        'etcd1': 'etcd1=http://10.0.0.1:2380',
        'etcd2': 'etcd1=http://10.0.0.1:2380,etcd2=http://10.0.0.2:2380',
        'etcd3': 'etcd1=http://10.0.0.1:2380,etcd2=http://10.0.0.2:2380,etcd3=http://10.0.0.3:2380'}
    # a quorum is healthy: the stale entry of the lost member is gone when it rejoins
    plan = plan_recovery([host(1, healthy=True), host(2, healthy=True), host(3, data=False)], store_configured=False)
    assert plan.initial_cluster == {
        'etcd3': 'etcd1=http://10.0.0.1:2380,etcd2=http://10.0.0.2:2380,etcd3=http://10.0.0.3:2380'}
    # everything lost: every restored host starts with every restored host, together
    plan = plan_recovery([host(1, data=False), host(2, data=False), host(3, reachable=False)], store_configured=True)
    assert plan.initial_cluster == {'etcd1': 'etcd1=http://10.0.0.1:2380,etcd2=http://10.0.0.2:2380',
                                    'etcd2': 'etcd1=http://10.0.0.1:2380,etcd2=http://10.0.0.2:2380'}
