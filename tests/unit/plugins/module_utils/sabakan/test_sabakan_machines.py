# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Sabakan machines as the engine reads them: malformed ones are named with the bad field, absent fields
take Go's zero values (as CKE decodes them), and nothing else is changed."""

from __future__ import annotations

import copy
from datetime import datetime, timedelta, timezone

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.sabakan.errors import GeneratorError, MachineError
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.generator import generate, update
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.machines import (
    ZERO_TIME,
    address_key,
    machines_by_address,
    parse_machine,
    parse_machines,
    parse_time,
)

NOW = datetime(2024, 5, 1, tzinfo=timezone.utc)
TEMPLATE = {'name': 'c', 'service_subnet': '10.68.0.0/16',
            'nodes': [{'user': 'u', 'control_plane': True}, {'user': 'u'}]}


def good(serial: str = 'sn-1', address: str = '10.0.0.1', **spec) -> dict:
    base = {'serial': serial, 'labels': [{'name': 'product', 'value': 'R640'}], 'rack': 1, 'indexInRack': 2,
            'role': 'cs', 'ipv4': [address], 'registerDate': '2020-01-01T00:00:00Z',
            'retireDate': '2026-01-01T00:00:00Z', 'bmc': {'bmcType': 'IPMI-2.0'}}
    base.update(spec)
    return {'spec': base, 'status': {'state': 'HEALTHY', 'timestamp': '2024-04-30T00:00:00Z', 'duration': 86400.0}}


def with_spec(**changes) -> dict:
    raw = good()
    for key, value in changes.items():
        if value is DELETE:
            del raw['spec'][key]
        else:
            raw['spec'][key] = value
    return raw


def with_status(**changes) -> dict:
    raw = good()
    for key, value in changes.items():
        if value is DELETE:
            del raw['status'][key]
        else:
            raw['status'][key] = value
    return raw


DELETE = object()


# --- a well-formed machine -------------------------------------------------------------------------
def test_every_field_is_read():
    m = parse_machine(good(), NOW)
    assert (m.serial, m.address, m.rack, m.index_in_rack, m.role, m.labels, m.bmc_type, m.state, m.duration) == \
        ('sn-1', '10.0.0.1', 1, 2, 'cs', (('product', 'R640'),), 'IPMI-2.0', 'HEALTHY', 86400.0)
    assert m.register_date == datetime(2020, 1, 1, tzinfo=timezone.utc)
    assert m.retire_date == datetime(2026, 1, 1, tzinfo=timezone.utc)
    assert m.healthy and m.days_to_retire(NOW) == 610
    assert 'sn-1' in repr(m) and '10.0.0.1' in repr(m)


def test_parsing_does_not_change_the_input():
    raw = good()
    before = copy.deepcopy(raw)
    parse_machines([raw], NOW)
    assert raw == before


# --- malformed: MachineError names the machine (index and serial or address) and the field -------------
@pytest.mark.parametrize('raw, message', [
    ('HEALTHY', r'machines\[0\]: expected an object, got str'),
    ({'status': {'state': 'HEALTHY'}}, r'machines\[0\]: missing object "spec"'),
    ({'spec': {'serial': 'x'}}, r'machines\[0\]: missing object "status"'),
    ({'spec': [], 'status': {'state': 'HEALTHY'}}, r'missing object "spec"'),
    (with_spec(serial=42), r'machines\[0\]: spec.serial must be a string, got 42'),
    (with_spec(ipv4='10.0.0.1'), r'machines\[0\] sn-1: spec.ipv4 must be a list of strings'),
    (with_spec(ipv4=['10.0.0.1', 7]), r'machines\[0\] sn-1: spec.ipv4 must be a list of strings'),
    (with_spec(role=['cs']), r'machines\[0\] sn-1: spec.role must be a string'),
    (with_spec(labels=[{'name': 'a'}, 'b=c']), r'machines\[0\] sn-1: spec.labels entries'),
    (with_spec(labels=[{'name': 3, 'value': 'x'}]), r'machines\[0\] sn-1: spec.labels entries'),
    (with_spec(rack='first'), r"machines\[0\] sn-1: spec.rack must be an integer, got 'first'"),
    (with_spec(rack=True), r'machines\[0\] sn-1: spec.rack must be an integer, got True'),
    (with_spec(rack=1.5), r'machines\[0\] sn-1: spec.rack must be an integer'),
    (with_spec(indexInRack='2b'), r'machines\[0\] sn-1: spec.indexInRack must be an integer'),
    (with_spec(registerDate='yesterday'), r"machines\[0\] sn-1: spec.registerDate: 'yesterday' is not an RFC 3339"),
    (with_spec(retireDate='2026-13-01T00:00:00Z'), r'machines\[0\] sn-1: spec.retireDate'),
    (with_spec(retireDate=20260101), r'machines\[0\] sn-1: spec.retireDate'),
    (with_spec(retireDate=''), r'machines\[0\] sn-1: spec.retireDate'),
    (with_spec(bmc='IPMI'), r'machines\[0\] sn-1: spec.bmc must be an object'),
    (with_spec(bmc={'bmcType': 2}), r'machines\[0\] sn-1: spec.bmc.bmcType must be a string'),
    (with_status(state='BROKEN'), r"machines\[0\] sn-1: status.state 'BROKEN' is not one of UNINITIALIZED"),
    (with_status(state='healthy'), r'status.state'),
    (with_status(state=DELETE), r'machines\[0\] sn-1: status.state None'),
    (with_status(duration='long'), r"machines\[0\] sn-1: status.duration must be a number of seconds, got 'long'"),
    (with_status(duration=True), r'status.duration must be a number'),
    (with_status(duration=DELETE, timestamp='soon'), r"machines\[0\] sn-1: status.timestamp: 'soon'"),
    (with_spec(serial=DELETE, rack='x'), r'machines\[0\] 10.0.0.1: spec.rack'),   # no serial: named by address
], ids=lambda value: value if isinstance(value, str) else None)
def test_malformed_machine(raw, message):
    with pytest.raises(MachineError, match=message):
        parse_machines([raw], NOW)


def test_the_index_of_the_bad_machine_is_named():
    with pytest.raises(MachineError, match=r'machines\[2\] sn-3: spec.rack'):
        parse_machines([good('sn-1', '10.0.0.1'), good('sn-2', '10.0.0.2'), good('sn-3', '10.0.0.3', rack='x')], NOW)


@pytest.mark.parametrize('raws', ['machines', b'x', 42], ids=['str', 'bytes', 'int'])
def test_machines_must_be_a_list(raws):
    with pytest.raises(MachineError, match='^machines: must be a list'):
        parse_machines(raws, NOW)


def test_no_machines():
    assert parse_machines(None, NOW) == [] and parse_machines([], NOW) == []


@pytest.mark.parametrize('call', [
    lambda bad: generate(TEMPLATE, None, [good(), bad], now=NOW),
    lambda bad: update({'name': 'c', 'nodes': [{'address': '10.0.0.1', 'control_plane': True}]}, TEMPLATE, None,
                       [good(), bad], now=NOW),
], ids=['generate', 'update'])
def test_the_generator_stops_on_a_malformed_machine(call):
    with pytest.raises(MachineError, match=r'machines\[1\] sn-2: status.state') as err:
        call(dict(good('sn-2', '10.0.0.2'), status={'state': 'OK'}))
    assert isinstance(err.value, GeneratorError)


# --- absent fields are Go's zero values, as CKE decodes them ---------------------------------------
def test_absent_fields_are_zero_values():
    m = parse_machine({'spec': {}, 'status': {'state': 'UNHEALTHY'}}, NOW)
    assert (m.serial, m.address, m.rack, m.index_in_rack, m.role, m.labels, m.bmc_type, m.duration) == \
        ('', None, 0, 0, '', (), '', 0.0)
    assert m.register_date == m.retire_date == ZERO_TIME == datetime(1, 1, 1, tzinfo=timezone.utc)


@pytest.mark.parametrize('field', ['serial', 'role', 'labels', 'rack', 'indexInRack', 'registerDate', 'retireDate',
                                   'bmc', 'ipv4'])
def test_null_is_the_same_as_absent(field):
    absent = with_spec(**{field: DELETE})
    null = with_spec(**{field: None})
    one, other = parse_machine(absent, NOW), parse_machine(null, NOW)
    assert (one.serial, one.address, one.rack, one.index_in_rack, one.role, one.labels, one.register_date,
            one.retire_date, one.bmc_type) == \
        (other.serial, other.address, other.rack, other.index_in_rack, other.role, other.labels, other.register_date,
         other.retire_date, other.bmc_type)


def test_integers_as_strings_are_read():
    m = parse_machine(with_spec(rack='3', indexInRack='-1'), NOW)
    assert (m.rack, m.index_in_rack) == (3, -1)


def test_bmc_type_also_read_from_type():
    assert parse_machine(with_spec(bmc={'type': 'iDRAC-9'}), NOW).bmc_type == 'iDRAC-9'


def test_only_the_first_address_is_the_node_address():
    assert parse_machine(with_spec(ipv4=['10.0.0.9', '10.0.1.9']), NOW).address == '10.0.0.9'


def test_machines_without_ipv4_are_left_out_of_the_address_map():
    machines = parse_machines([good('a', '10.0.0.1'), with_spec(serial='b', ipv4=[])], NOW)
    assert list(machines_by_address(machines)) == ['10.0.0.1']


# --- status duration --------------------------------------------------------------------------------
def test_duration_is_taken_as_given():
    assert parse_machine(with_status(duration=12), NOW).duration == 12.0


def test_duration_from_timestamp_when_absent():
    raw = with_status(duration=DELETE, timestamp='2024-04-30T23:00:00Z')
    assert parse_machine(raw, NOW).duration == 3600.0
    assert parse_machine(raw, None).duration == 0.0   # no clock given: unknown, not an error


# --- dates ------------------------------------------------------------------------------------------
@pytest.mark.parametrize('text, expected', [
    ('2020-01-02T03:04:05Z', datetime(2020, 1, 2, 3, 4, 5, tzinfo=timezone.utc)),
    ('2020-01-02t03:04:05z', datetime(2020, 1, 2, 3, 4, 5, tzinfo=timezone.utc)),
    ('2020-01-02T03:04:05.123456789Z', datetime(2020, 1, 2, 3, 4, 5, 123456, tzinfo=timezone.utc)),
    ('2020-01-02T03:04:05.1Z', datetime(2020, 1, 2, 3, 4, 5, 100000, tzinfo=timezone.utc)),
    ('2020-01-02T03:04:05.25+09:00', datetime(2020, 1, 2, 3, 4, 5, 250000, tzinfo=timezone(timedelta(hours=9)))),
    ('2020-01-02T03:04:05-05:30', datetime(2020, 1, 2, 3, 4, 5, tzinfo=timezone(-timedelta(hours=5, minutes=30)))),
    ('2020-01-02T03:04:05', datetime(2020, 1, 2, 3, 4, 5, tzinfo=timezone.utc)),   # no zone: UTC
])
def test_parse_time(text, expected):
    parsed = parse_time(text)
    assert parsed == expected and parsed.utcoffset() == expected.utcoffset()


@pytest.mark.parametrize('text', ['', 'now', '2020-01-02T25:00:00Z', '2020-02-30T00:00:00Z', None, 3])
def test_parse_time_rejects(text):
    with pytest.raises(MachineError, match='is not an RFC 3339 date-time'):
        parse_time(text, 'where')


# --- address order (the deterministic tie-breaker) is numeric, not textual -------------------------------
def test_address_key_orders_numerically():
    addresses = ['10.0.0.10', '10.0.0.9', '9.255.255.255', '10.0.1.0', 'fd00::1', '10.0.0.100', 'not-an-ip']
    assert sorted(addresses, key=address_key) == \
        ['9.255.255.255', '10.0.0.9', '10.0.0.10', '10.0.0.100', '10.0.1.0', 'fd00::1', 'not-an-ip']
