# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cloud.sap/maintenance-data annotation: upstream's DataV2 format, byte-exact round trips, migrations."""

from __future__ import annotations

import json

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.common.times import parse_rfc3339_ns
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.data import (
    NodeData, ProfileData, format_data, node_data, parse_data)
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.errors import DataError

# As upstream's json.Marshal(DataV2) writes it (nanosecond timestamps, sorted map keys, no spaces).
UPSTREAM_V2 = ('{"Profiles":{"flatcar":{"Transition":"2024-05-01T10:00:00.123456789Z","Current":"maintenance-required",'
               '"Previous":"operational"},"k8s":{"Transition":"2024-04-30T08:00:00Z","Current":"operational",'
               '"Previous":"operational"}},"Notifications":{"approval_required":"2024-05-01T10:01:00.5Z"}}')


def test_upstream_v2_round_trips_byte_for_byte():
    data = parse_data(UPSTREAM_V2)
    assert data.profiles['flatcar'] == ProfileData(parse_rfc3339_ns('2024-05-01T10:00:00.123456789Z'), 'maintenance-required', 'operational')
    assert data.notifications == {'approval_required': parse_rfc3339_ns('2024-05-01T10:01:00.5Z')}
    assert data.version == 2
    assert format_data(data) == UPSTREAM_V2


def test_format_is_go_json_of_datav2():
    data = NodeData({'b': ProfileData(0, 'operational', 'operational'), 'a': ProfileData(10 ** 9, 'in-maintenance', 'maintenance-required')})
    assert format_data(data) == ('{"Profiles":{"a":{"Transition":"1970-01-01T00:00:01Z","Current":"in-maintenance",'
                                 '"Previous":"maintenance-required"},"b":{"Transition":"1970-01-01T00:00:00Z",'
                                 '"Current":"operational","Previous":"operational"}},"Notifications":{}}')


def test_field_names_are_case_insensitive_like_go():
    data = parse_data('{"profiles":{"p":{"transition":"2024-05-01T10:00:00Z","current":"in-maintenance","previous":"in-maintenance"}},'
                      '"notifications":null}')
    assert data.profiles['p'].current == 'in-maintenance'
    assert data.notifications == {}


def test_v1_is_migrated_like_parse_migrate_data_v2():
    v1 = json.dumps({'LastTransition': '2024-05-01T10:00:00Z', 'LastNotificationTimes': {'mail': '2024-05-01T11:00:00Z'},
                     'ProfileStates': {'a': 'maintenance-required', 'b': 'operational'}, 'PreviousStates': {'a': 'operational'}})
    data = parse_data(v1)
    assert data.version == 1
    at = parse_rfc3339_ns('2024-05-01T10:00:00Z')
    assert data.profiles == {'a': ProfileData(at, 'maintenance-required', 'operational'), 'b': ProfileData(at, 'operational', 'operational')}
    assert data.notifications == {'mail': parse_rfc3339_ns('2024-05-01T11:00:00Z')}


def test_v0_takes_the_state_from_the_label():
    v0 = '{"LastTransition":"2021-01-01T00:00:00Z","LastNotification":"0001-01-01T00:00:00Z","LastNotificationState":"required"}'
    data = parse_data(v0, {'cloud.sap/maintenance-state': 'required', 'cloud.sap/maintenance-profile': 'x--y'})
    assert data.version == 0
    assert sorted(data.profiles) == ['x', 'y']
    assert data.profiles['x'].current == 'maintenance-required' == data.profiles['x'].previous


@pytest.mark.parametrize('text, message', [
    ('not json', 'is not JSON'),
    ('[]', 'expected a JSON object'),
    ('{"Profiles":{},"Extra":1}', 'unknown field "Extra"'),
    ('{"Profiles":5}', 'data.Profiles: expected a JSON object, got int'),
    ('{"Profiles":{"p":[]}}', 'data.Profiles.p: expected a JSON object, got list'),
    ('{"ProfileStates":"x"}', 'data.ProfileStates: expected a JSON object'),
    ('{"Profiles":{"p":{"Current":"broken"}}}', "unknown state 'broken'"),
    ('{"Profiles":{"p":{"Transition":"yesterday"}}}', 'data.Profiles.p.Transition'),
])
def test_unreadable_data_is_an_error(text, message):
    with pytest.raises(DataError, match=message):
        parse_data(text)


def test_empty_annotation_is_no_data_and_other_nodes_with_bad_data_read_as_none():
    assert parse_data('') == NodeData() == parse_data(None)
    node = {'metadata': {'annotations': {'cloud.sap/maintenance-data': '{broken'}}}
    assert node_data(node) == NodeData()
