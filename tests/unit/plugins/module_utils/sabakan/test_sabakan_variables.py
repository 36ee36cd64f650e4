# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""sabakan query variables: CKE's defaults, the user override rule and input checks (nothing is sent)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.common.times import parse_rfc3339
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.client import (
    GENERATOR_VARIABLES,
    REPAIR_VARIABLES,
    SEARCH_QUERY,
    SabakanClient,
    graphql_url,
    query_variables,
)
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.errors import SabakanError, SabakanVariablesError


# --- the defaults are CKE's (seeds 000 and 001) ------------------------------------------------------
def test_generator_defaults_exclude_boot_and_retired():
    assert GENERATOR_VARIABLES == {'having': None, 'notHaving': {'roles': ['boot'], 'states': ['RETIRED']}}


def test_repair_defaults_select_unhealthy_and_unreachable_except_boot():
    assert REPAIR_VARIABLES == {'having': {'states': ['UNHEALTHY', 'UNREACHABLE']}, 'notHaving': {'roles': ['boot']}}


def test_search_query_is_ckes():
    assert SEARCH_QUERY.startswith('query ckeSearch($having: MachineParams, $notHaving: MachineParams) {')
    assert 'searchMachines(having: $having, notHaving: $notHaving)' in SEARCH_QUERY
    for field in ('serial', 'labels { name value }', 'rack', 'indexInRack', 'role', 'ipv4', 'registerDate',
                  'retireDate', 'bmc { bmcType }', 'status { state timestamp duration }'):
        assert field in SEARCH_QUERY


# --- merging ---------------------------------------------------------------------------------------
@pytest.mark.parametrize('defaults', [GENERATOR_VARIABLES, REPAIR_VARIABLES], ids=['generator', 'repair'])
@pytest.mark.parametrize('given', [None, {}, '', '  '], ids=['none', 'empty-object', 'empty-text', 'blank-text'])
def test_nothing_given_means_the_defaults(defaults, given):
    assert query_variables(given, defaults) == defaults


@pytest.mark.parametrize('given, expected', [
    # a given key replaces the default for that key as a whole (no deep merge)
    ({'notHaving': {'states': ['UNINITIALIZED', 'RETIRED']}},
     {'having': None, 'notHaving': {'states': ['UNINITIALIZED', 'RETIRED']}}),
    # the key left out keeps its default
    ({'having': {'labels': [{'name': 'foo', 'value': 'bar'}], 'roles': ['worker', 'gpu']}},
     {'having': {'labels': [{'name': 'foo', 'value': 'bar'}], 'roles': ['worker', 'gpu']},
      'notHaving': {'roles': ['boot'], 'states': ['RETIRED']}}),
    # explicit null removes the default condition
    ({'notHaving': None}, {'having': None, 'notHaving': None}),
    # both given: the example object of seed 000
    ({'having': {'labels': [{'name': 'foo', 'value': 'bar'}], 'roles': ['worker', 'gpu']},
      'notHaving': {'states': ['UNINITIALIZED', 'RETIRED']}},
     {'having': {'labels': [{'name': 'foo', 'value': 'bar'}], 'roles': ['worker', 'gpu']},
      'notHaving': {'states': ['UNINITIALIZED', 'RETIRED']}}),
    # every MachineParams field, and null fields
    ({'having': {'racks': [0, 3], 'minDaysBeforeRetire': -30, 'states': None}},
     {'having': {'racks': [0, 3], 'minDaysBeforeRetire': -30, 'states': None},
      'notHaving': {'roles': ['boot'], 'states': ['RETIRED']}}),
])
def test_given_keys_replace_defaults(given, expected):
    assert query_variables(given, GENERATOR_VARIABLES) == expected


def test_json_text_is_accepted():
    text = json.dumps({'having': {'states': ['UNREACHABLE']}})
    assert query_variables(text, REPAIR_VARIABLES) == {'having': {'states': ['UNREACHABLE']},
                                                       'notHaving': {'roles': ['boot']}}


def test_result_is_a_copy():
    merged = query_variables(None, GENERATOR_VARIABLES)
    merged['notHaving']['roles'].append('cs')
    given = {'having': {'roles': ['cs']}}
    query_variables(given, GENERATOR_VARIABLES)['having']['roles'].append('ss')
    assert GENERATOR_VARIABLES['notHaving']['roles'] == ['boot']
    assert given == {'having': {'roles': ['cs']}}


# --- bad input: a clear error naming the place -----------------------------------------------------
@pytest.mark.parametrize('given, fragment', [
    ('{"having": ', 'not valid JSON'),
    ('[1]', 'must be an object'),
    (['having'], 'must be an object'),
    ({'having': {}, 'nothaving': {}}, "unknown key(s) 'nothaving'"),
    ({'filter': {}}, "unknown key(s) 'filter'"),
    ({'having': ['HEALTHY']}, 'having: must be an object (MachineParams)'),
    ({'having': {'state': ['HEALTHY']}}, "having: unknown field(s) 'state'"),
    ({'notHaving': {'role': 'boot'}}, "notHaving: unknown field(s) 'role'"),
    ({'having': {'states': ['HEALTHY', 'BROKEN']}}, "having.states[1]: 'BROKEN' is not a machine state"),
    ({'having': {'states': ['healthy']}}, "did you mean 'HEALTHY'?"),
    ({'having': {'states': 'HEALTHY'}}, 'having.states: must be a list'),
    ({'notHaving': {'roles': ['boot', 3]}}, 'notHaving.roles[1]: must be a role name'),
    ({'having': {'racks': ['1']}}, 'having.racks[0]: must be an integer'),
    ({'having': {'racks': [True]}}, 'having.racks[0]: must be an integer'),
    ({'having': {'minDaysBeforeRetire': '30'}}, 'having.minDaysBeforeRetire: must be an integer'),
    ({'having': {'minDaysBeforeRetire': 1.5}}, 'having.minDaysBeforeRetire: must be an integer'),
    ({'having': {'labels': [{'name': 'a'}]}}, 'having.labels[0]: must be {"name": string, "value": string}'),
    ({'having': {'labels': [{'name': 'a', 'value': 1}]}}, 'having.labels[0]: must be'),
    ({'having': {'labels': [{'name': 'a', 'value': 'b', 'op': 'eq'}]}}, 'having.labels[0]: must be'),
])
def test_bad_variables_are_rejected_with_the_path(given, fragment):
    with pytest.raises(SabakanVariablesError) as info:
        query_variables(given, GENERATOR_VARIABLES)
    assert fragment in str(info.value)
    assert isinstance(info.value, SabakanError) and isinstance(info.value, InvalidInput)
    assert str(info.value).startswith(info.value.field + ': ' if info.value.field else 'query variables ')


def test_every_machine_state_is_accepted():
    states = ['UNINITIALIZED', 'HEALTHY', 'UNHEALTHY', 'UNREACHABLE', 'UPDATING', 'RETIRING', 'RETIRED']
    assert query_variables({'having': {'states': states}}, {})['having']['states'] == states


# --- client construction (no request is made) ------------------------------------------------------
@pytest.mark.parametrize('url, expected', [
    ('http://sabakan:10080', 'http://sabakan:10080/graphql'),
    ('http://sabakan:10080/', 'http://sabakan:10080/graphql'),
    ('https://sabakan.example/graphql', 'https://sabakan.example/graphql'),
    ('http://10.0.0.1:10080/api/graphql', 'http://10.0.0.1:10080/api/graphql'),
    (' http://[::1]:10080 ', 'http://[::1]:10080/graphql'),
])
def test_graphql_url(url, expected):
    assert graphql_url(url) == expected
    assert SabakanClient(url).url == expected


@pytest.mark.parametrize('url', ['', 'sabakan:10080', 'ftp://sabakan/graphql', 'http:///graphql', None])
def test_bad_url_is_rejected(url):
    with pytest.raises(SabakanError, match='^url: ') as info:
        SabakanClient(url)
    assert (info.value.field, info.value.rule) == ('url', 'url')


@pytest.mark.parametrize('timeout, rule', [(0, 'minimum'), (-1, 'minimum'), ('ten', 'number'), (True, 'number'),
                                           (float('nan'), 'finite'), (1e999, 'finite'), (8 * 86400, 'maximum')])
def test_bad_timeout_is_rejected(timeout, rule):
    with pytest.raises(SabakanError, match='^timeout: ') as info:
        SabakanClient('http://sabakan:10080', timeout=timeout)
    assert (info.value.field, info.value.rule) == ('timeout', rule)


def test_set_machine_state_rejects_unknown_state_before_sending():
    # A request to this TEST-NET address would end in SabakanUnavailable; SabakanVariablesError means none was sent.
    with pytest.raises(SabakanVariablesError, match="'BROKEN' is not a machine state"):
        SabakanClient('http://192.0.2.1:9', timeout=0.1).set_machine_state('abc', 'BROKEN')


# --- DateTime parsing (sabakan answers are read by common/times.parse_rfc3339) ----------------------------------------------------------------------------
@pytest.mark.parametrize('text, expected', [
    ('2024-01-31T12:00:00Z', datetime(2024, 1, 31, 12, tzinfo=timezone.utc)),
    ('2024-01-31T12:00:00.123456789Z', datetime(2024, 1, 31, 12, 0, 0, 123456, tzinfo=timezone.utc)),
    ('2024-01-31T12:00:00.5+09:00', datetime(2024, 1, 31, 3, 0, 0, 500000, tzinfo=timezone.utc)),
    ('2024-01-31T12:00:00-01:30', datetime(2024, 1, 31, 13, 30, tzinfo=timezone.utc)),
])
def test_parse_rfc3339(text, expected):
    assert parse_rfc3339(text) == expected
    assert parse_rfc3339(text).utcoffset() is not None


@pytest.mark.parametrize('text', ['2024-01-31', '2024-01-31T12:00:00', '2024-13-01T00:00:00Z', 'yesterday', None, 17])
def test_parse_datetime_rejects(text):
    with pytest.raises(ValueError):
        parse_rfc3339(text)


def test_parse_datetime_keeps_order_across_offsets():
    a = parse_rfc3339('2024-01-31T12:00:00+09:00')
    b = parse_rfc3339('2024-01-31T04:00:00Z')
    assert b - a == timedelta(hours=1)
