"""Quorum math as tables: majority size, quorum of a member set, and the pre-check of one change."""

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.cluster import (
    fully_healthy,
    has_quorum,
    quorum_size,
    would_keep_quorum,
)


@pytest.mark.parametrize('voting, expected', [
    (0, 0), (1, 1), (2, 2), (3, 2), (4, 3), (5, 3), (6, 4), (7, 4),
])
def test_quorum_size(voting, expected):
    assert quorum_size(voting) == expected


@pytest.mark.parametrize('voting, healthy, expected', [
    pytest.param('abc', 'abc', True, id='3-all-healthy'),
    pytest.param('abc', 'ab', True, id='3-one-down'),
    pytest.param('abc', 'a', False, id='3-two-down'),
    pytest.param('abcde', 'abc', True, id='5-two-down'),
    pytest.param('abcde', 'ab', False, id='5-three-down'),
    pytest.param('ab', 'a', False, id='2-one-down'),
    pytest.param('a', 'a', True, id='single'),
    pytest.param('', '', False, id='no-voters'),
    pytest.param('ab', 'xyz', False, id='healthy-learners-do-not-count'),
])
def test_has_quorum(voting, healthy, expected):
    assert has_quorum(list(voting), list(healthy)) is expected


@pytest.mark.parametrize('voting, healthy, change, ok, numbers', [
    pytest.param('abc', 'ab', {'remove': 'c'}, True, (2, 2, 2), id='remove-dead-of-3'),
    pytest.param('abc', 'ab', {'remove': 'b'}, False, (2, 1, 2), id='remove-healthy-while-one-dead'),
    pytest.param('abc', 'abc', {'remove': 'a'}, True, (2, 2, 2), id='remove-healthy-all-healthy'),
    pytest.param('abcde', 'abc', {'remove': 'e'}, True, (4, 3, 3), id='5-remove-dead'),
    pytest.param('abcde', 'abc', {'remove': 'a'}, False, (4, 2, 3), id='5-remove-healthy-two-dead'),
    pytest.param('abc', 'abc', {'add': 'n'}, True, (4, 3, 3), id='voting-add-healthy-3'),
    pytest.param('abc', 'ab', {'add': 'n'}, False, (4, 2, 3), id='voting-add-one-dead'),
    pytest.param('ab', 'ab', {'add': 'n'}, True, (3, 2, 2), id='voting-add-to-2'),
    pytest.param('ab', 'ab', {'add': 'n', 'add_healthy': True}, True, (3, 3, 2), id='promote-in-sync'),
    pytest.param('a', 'a', {'remove': 'a'}, False, (0, 0, 0), id='remove-last-member'),
])
def test_would_keep_quorum(voting, healthy, change, ok, numbers):
    result, got = would_keep_quorum(list(voting), list(healthy), **change)
    assert result is ok
    assert (got['voting_after'], got['healthy_after'], got['quorum_after']) == numbers


def _info(healthy, quorum=True, alarms=()):
    return {'members': [{'id': i, 'name': 'm' + i, 'healthy': i in healthy} for i in 'abc'],
            'has_quorum': quorum, 'alarms': [{'member_id': 'a', 'alarm': a} for a in alarms]}


@pytest.mark.parametrize('info, ok, why', [
    pytest.param(_info('abc'), True, '', id='all-healthy'),
    pytest.param(_info('ab'), False, 'mc (c)', id='one-down'),
    pytest.param(_info('abc', alarms=['CORRUPT']), False, 'CORRUPT', id='corrupt-alarm'),
    pytest.param(_info('abc', alarms=['NOSPACE']), True, '', id='nospace-is-a-reason-to-defrag'),
])
def test_fully_healthy(info, ok, why):
    got_ok, got_why = fully_healthy(info)
    assert got_ok is ok
    assert why in got_why
