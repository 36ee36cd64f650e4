"""Pure membership helpers as tables: member lookup, initial_cluster rendering, retry classification."""

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import MembershipError
from ansible_collections.steward.cluster.plugins.module_utils.etcd.members import (
    RETRYABLE_CHANGE,
    _retry,
    find_member,
    initial_cluster,
)

MEMBERS = [
    {'id': 'a1', 'name': 'e1', 'peer_urls': ['http://h1:2380'], 'client_urls': ['http://h1:2379'], 'is_learner': False},
    {'id': 'b2', 'name': 'e2', 'peer_urls': ['http://h2:2380'], 'client_urls': ['http://h2:2379'], 'is_learner': False},
    {'id': 'c3', 'name': '', 'peer_urls': ['http://h3:2380'], 'client_urls': [], 'is_learner': True},
]


@pytest.mark.parametrize('kwargs, expected', [
    pytest.param({'name': 'e1'}, 'a1', id='by-name'),
    pytest.param({'member_id': 'B2'}, 'b2', id='by-id-any-case'),
    pytest.param({'peer_urls': ['http://h3:2380/']}, 'c3', id='by-peer-url-trailing-slash'),
    pytest.param({'name': 'e3', 'peer_urls': ['http://h3:2380']}, 'c3', id='unstarted-takes-given-name'),
    pytest.param({'name': 'e9'}, None, id='absent'),
    pytest.param({'name': 'e1', 'peer_urls': ['http://h1:2380']}, 'a1', id='name-and-url-agree'),
])
def test_find_member(kwargs, expected):
    found = find_member(MEMBERS, **kwargs)
    assert (found['id'] if found else None) == expected


@pytest.mark.parametrize('kwargs, message', [
    pytest.param({'name': 'e1', 'peer_urls': ['http://h2:2380']}, 'different members', id='name-and-url-disagree'),
    pytest.param({'name': 'e1', 'peer_urls': ['http://h9:2380']}, 'remove it first', id='same-name-other-url'),
    pytest.param({'name': 'x', 'peer_urls': ['http://h1:2380']}, "named 'e1'", id='same-url-other-name'),
])
def test_find_member_conflicts(kwargs, message):
    with pytest.raises(MembershipError, match=message):
        find_member(MEMBERS, **kwargs)


@pytest.mark.parametrize('members, name, urls, expected', [
    pytest.param(MEMBERS, 'e3', ['http://h3:2380'], 'e1=http://h1:2380,e2=http://h2:2380,e3=http://h3:2380',
                 id='unstarted-new-member-gets-name'),
    pytest.param(MEMBERS[:2], 'e3', ['http://h3:2380'], 'e1=http://h1:2380,e2=http://h2:2380,e3=http://h3:2380',
                 id='check-mode-appends'),
    pytest.param(list(reversed(MEMBERS)), 'e3', ['http://h3:2380'],
                 'e1=http://h1:2380,e2=http://h2:2380,e3=http://h3:2380', id='order-independent'),
    pytest.param(MEMBERS, 'e4', ['http://h4:2380'],
                 'c3=http://h3:2380,e1=http://h1:2380,e2=http://h2:2380,e4=http://h4:2380',
                 id='other-unstarted-gets-hex-id'),
])
def test_initial_cluster(members, name, urls, expected):
    assert initial_cluster(members, name, urls) == expected


def test_retry_gives_up_with_numbers_and_keeps_class():
    calls = []

    def refuse():
        calls.append(1)
        raise MembershipError('etcdserver: unhealthy cluster')

    with pytest.raises(MembershipError, match='still refused after'):
        _retry(refuse, RETRYABLE_CHANGE, 2, 'add member', sleep=lambda s: None)
    assert len(calls) >= 2


def test_retry_does_not_retry_permanent_errors():
    calls = []

    def refuse():
        calls.append(1)
        raise MembershipError('etcdserver: Peer URLs already exists')

    with pytest.raises(MembershipError, match='already exists'):
        _retry(refuse, RETRYABLE_CHANGE, 30, 'add member', sleep=lambda s: None)
    assert calls == [1]
