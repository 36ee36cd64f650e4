"""Pure membership helpers as tables: member lookup, initial_cluster rendering, retry classification."""

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.client import gateway_error
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import EtcdError, EtcdUnavailable, MembershipError, Refusal
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.members import (
    RETRYABLE_ADD,
    RETRYABLE_CHANGE,
    RETRYABLE_PROMOTE,
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
    pytest.param({'name': 'e1', 'member_id': 'b2'}, 'different members', id='name-and-id-disagree'),
    pytest.param({'name': 'e1', 'member_id': 'ff'}, 'member_id ff matches no member, but name=.e1. names member e1',
                 id='name-and-unknown-id'),
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
        raise gateway_error('http://e1:2379/v3/cluster/member/add', 400, 'etcdserver: unhealthy cluster')

    with pytest.raises(MembershipError, match='still refused after'):
        _retry(refuse, RETRYABLE_CHANGE, 2, 'add member', sleep=lambda s: None)
    assert len(calls) >= 2


def test_retry_does_not_retry_permanent_errors():
    calls = []

    def refuse():
        calls.append(1)
        raise gateway_error('http://e1:2379/v3/cluster/member/add', 400, 'etcdserver: Peer URLs already exists')

    with pytest.raises(EtcdError, match='already exists'):
        _retry(refuse, RETRYABLE_CHANGE, 30, 'add member', sleep=lambda s: None)
    assert calls == [1]


@pytest.mark.parametrize('status, message, cls, refusal', [
    pytest.param(400, 'etcdserver: unhealthy cluster', MembershipError, Refusal.UNHEALTHY, id='strict-reconfig'),
    pytest.param(503, 'etcdserver: no leader', EtcdUnavailable, Refusal.NO_LEADER, id='no-leader'),
    pytest.param(500, 'etcdserver: leader changed', EtcdError, Refusal.NO_LEADER, id='leader-changed'),
    pytest.param(504, 'etcdserver: request timed out', EtcdUnavailable, Refusal.TIMEOUT, id='timeout'),
    pytest.param(400, 'etcdserver: can only promote a learner member which is in sync with leader', MembershipError,
                 Refusal.LEARNER_NOT_READY, id='learner-behind'),
    pytest.param(400, 'etcdserver: too many learner members in cluster', MembershipError, Refusal.TOO_MANY_LEARNERS,
                 id='one-learner'),
    pytest.param(400, 'etcdserver: Peer URLs already exists', EtcdError, None, id='permanent'),
    pytest.param(401, 'etcdserver: user name is empty', None, None, id='other'),
])
def test_gateway_errors_are_typed_once(status, message, cls, refusal):
    """etcd's answer text is read in one place (client.gateway_error); callers match the type and `refusal`."""
    error = gateway_error('http://e1:2379/v3/x', status, message)
    assert (cls is None or error.__class__ is cls) and error.refusal is refusal
    assert message in str(error)


def test_retryable_sets():
    assert Refusal.LEARNER_NOT_READY in RETRYABLE_PROMOTE and Refusal.LEARNER_NOT_READY not in RETRYABLE_CHANGE
    assert {Refusal.TOO_MANY_LEARNERS, Refusal.LEARNER_PENDING} <= RETRYABLE_ADD
    assert RETRYABLE_CHANGE <= RETRYABLE_ADD and RETRYABLE_CHANGE <= RETRYABLE_PROMOTE


def test_retry_keeps_the_refusal_when_it_gives_up():
    def refuse():
        raise MembershipError('learner x is not promoted yet', Refusal.LEARNER_PENDING)

    with pytest.raises(MembershipError, match='still refused after') as info:
        _retry(refuse, RETRYABLE_ADD, 1, 'add member', sleep=lambda s: None)
    assert info.value.refusal is Refusal.LEARNER_PENDING
