"""plan_defrag ordering and skipping as tables: followers first (by name), leader last."""

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.defrag import (
    fragmentation_ratio,
    plan_defrag,
)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import EtcdError


def build(members, leader, reachable=None):
    """members: {name: (db_size, db_size_in_use)}; ids are the names."""
    reachable = set(members) if reachable is None else set(reachable)
    return {
        'leader': leader,
        'members': [{'id': n, 'name': n, 'is_learner': n.startswith('learner')} for n in members],
        'endpoints': [{'endpoint': 'http://%s:2379' % n, 'member_id': n, 'reachable': n in reachable,
                       'healthy': n in reachable, 'db_size': s, 'db_size_in_use': u}
                      for n, (s, u) in members.items()],
    }


@pytest.mark.parametrize('members, leader, ratio, reachable, order', [
    pytest.param({'a': (100, 50), 'b': (100, 50), 'c': (100, 50)}, 'a', 0.0, None, ['b', 'c', 'a'],
                 id='leader-first-in-list-goes-last'),
    pytest.param({'c': (100, 50), 'b': (100, 50), 'a': (100, 50)}, 'b', 0.0, None, ['a', 'c', 'b'],
                 id='followers-by-name'),
    pytest.param({'a': (100, 90), 'b': (100, 40), 'c': (100, 50)}, 'c', 0.5, None, ['b', 'c'],
                 id='skip-below-ratio'),
    pytest.param({'a': (100, 90), 'b': (100, 95), 'c': (100, 99)}, 'a', 0.5, None, [],
                 id='nothing-fragmented'),
    pytest.param({'a': (100, 100), 'b': (100, 100)}, 'a', 0.0, None, ['b', 'a'], id='ratio-zero-takes-all'),
    pytest.param({'a': (100, 50), 'b': (100, 50), 'c': (100, 50)}, 'a', 0.0, ['a', 'b'], ['b', 'a'],
                 id='unreachable-left-out'),
    pytest.param({'a': (100, 50), 'learner1': (100, 50), 'c': (100, 50)}, 'c', 0.0, None, ['a', 'learner1', 'c'],
                 id='learner-is-not-leader'),
    pytest.param({'a': (100, 50), 'b': (100, 50)}, None, 0.0, None, ['a', 'b'], id='no-leader'),
])
def test_plan_defrag_order(members, leader, ratio, reachable, order):
    plan = plan_defrag(build(members, leader, reachable), min_fragmentation_ratio=ratio)
    assert [p['name'] for p in plan] == order
    assert [p['is_leader'] for p in plan] == [n == leader for n in order]


@pytest.mark.parametrize('size, in_use, expected', [
    (100, 25, 0.75), (100, 100, 0.0), (0, 0, 0.0), (None, None, 0.0), (100, 120, 0.0),
])
def test_fragmentation_ratio(size, in_use, expected):
    assert fragmentation_ratio(size, in_use) == expected


@pytest.mark.parametrize('ratio', [-0.1, 1.5])
def test_plan_defrag_rejects_bad_ratio(ratio):
    with pytest.raises(EtcdError, match='min_fragmentation_ratio'):
        plan_defrag(build({'a': (1, 1)}, 'a'), min_fragmentation_ratio=ratio)
