# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Go's time syntaxes: ParseDuration, RFC 3339 with nanoseconds, hh:mm, weekdays, "Jan 2"."""

from __future__ import annotations

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.common.times import format_rfc3339_ns, parse_rfc3339_ns
from ansible_collections.steward.cluster.plugins.module_utils.common.durations import parse_duration, parse_duration_ns
from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.checks_node import shown_duration
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.errors import ConfigError
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.fields import Fields
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.gotime import (
    ZERO_TIME_NS, go_time_string, parse_clock, parse_month_day, parse_weekday, seconds_to_ns)


# Durations in maintenance.yaml are read by the one parser (common/durations.py); these rows pin the syntax
# maintenance-controller configs use (go-ucfg: Go's time.ParseDuration, YAML numbers as seconds).
@pytest.mark.parametrize('text, seconds', [
    ('0', 0.0), ('+0', 0.0), ('200ms', 0.2), ('60s', 60.0), ('5m', 300.0), ('24h', 86400.0), ('1h30m', 5400.0),
    ('1.5h', 5400.0), ('.5s', 0.5), ('1h0m0.5s', 3600.5), ('300us', 0.0003), ('300µs', 0.0003), ('10ns', 1e-8),
    (90, 90.0), (1.5, 1.5),   # YAML numbers are seconds, as go-ucfg reads them
])
def test_durations(text, seconds):
    assert parse_duration(text, 'f') == pytest.approx(seconds)
    assert Fields({'duration': text}, 'instances.check[0].config').duration('duration') == pytest.approx(seconds)


def test_duration_fraction_is_exact_in_nanoseconds():
    assert parse_duration_ns('1.000000001s', 'f') == 1000000001


@pytest.mark.parametrize('text', ['', '60', '5 m', '1d', 'h', '1.h5', '-5m', 'abc', True, '1h-5m'])
def test_bad_durations_name_the_field(text):
    with pytest.raises(InvalidInput) as err:
        Fields({'duration': text}, 'instances.check[0] (name "w").config').duration('duration')
    assert str(err.value).startswith('instances.check[0] (name "w").config.duration: ')
    assert err.value.field == 'instances.check[0] (name "w").config.duration'
    assert err.value.rule in ('duration', 'non-negative')


def test_a_missing_required_duration_is_a_config_error():
    with pytest.raises(ConfigError) as err:
        Fields({'duration': None}, 'x').duration('duration', required=True)
    assert (err.value.field, err.value.rule) == ('x.duration', 'required')


@pytest.mark.parametrize('seconds, text', [(0, '0s'), (0.25, '250ms'), (30, '30s'), (300, '5m0s'), (5400, '1h30m0s'),
                                           (90.4, '1m30s'), (59.6, '1m0s')])
def test_check_details_show_whole_seconds(seconds, text):
    assert shown_duration(seconds) == text


@pytest.mark.parametrize('text, canonical', [
    ('2024-05-01T10:00:00Z', '2024-05-01T10:00:00Z'),
    ('2024-05-01T10:00:00.123456789Z', '2024-05-01T10:00:00.123456789Z'),
    ('2024-05-01T10:00:00.5Z', '2024-05-01T10:00:00.5Z'),
    ('2024-05-01T12:00:00.100+02:00', '2024-05-01T10:00:00.1Z'),    # Go writes local offsets; we write UTC
    ('2024-05-01T05:30:00-04:30', '2024-05-01T10:00:00Z'),
    ('0001-01-01T00:00:00Z', '0001-01-01T00:00:00Z'),               # Go's zero time
])
def test_rfc3339_round_trip(text, canonical):
    assert format_rfc3339_ns(parse_rfc3339_ns(text)) == canonical


def test_zero_time_and_seconds():
    assert parse_rfc3339_ns('0001-01-01T00:00:00Z') == ZERO_TIME_NS
    assert parse_rfc3339_ns('1970-01-01T00:00:01.5Z') == 1500000000
    assert seconds_to_ns(1.5) == 1500000000
    assert go_time_string(parse_rfc3339_ns('2024-05-01T10:00:00.5Z')) == '2024-05-01 10:00:00.5 +0000 UTC'


@pytest.mark.parametrize('bad', ['2024-05-01', '2024-05-01 10:00:00Z', 'yesterday', '', None])
def test_rfc3339_rejects(bad):
    with pytest.raises(ValueError):
        parse_rfc3339_ns(bad)


@pytest.mark.parametrize('text, seconds', [('00:00', 0), ('9:30', 34200), ('09:30', 34200), ('23:59', 86340)])
def test_clock(text, seconds):
    assert parse_clock(text, 'f') == seconds


@pytest.mark.parametrize('text', ['24:00', '12:60', '9:3', '0930', '12:00:00', '', None])
def test_bad_clock(text):
    with pytest.raises(ConfigError, match='^f: .* hh:mm'):
        parse_clock(text, 'f')


@pytest.mark.parametrize('text, day', [('monday', 0), ('Mon', 0), ('SUNDAY', 6), ('sat', 5), ('thu', 3)])
def test_weekdays(text, day):
    assert parse_weekday(text, 'f') == day


def test_bad_weekday():
    with pytest.raises(ConfigError, match=r"^w\[1\]: 'funday' is not a weekday"):
        parse_weekday('funday', 'w[1]')


@pytest.mark.parametrize('text, month_day', [('Dec 24', (12, 24)), ('oct 31', (10, 31)), ('Feb 29', (2, 29)), ('Jan 2', (1, 2))])
def test_month_day(text, month_day):
    assert parse_month_day(text, 'f') == month_day


@pytest.mark.parametrize('text', ['Dec 32', 'Feb 30', 'December 24', '24 Dec', 'Dec  24', 'Dec'])
def test_bad_month_day(text):
    with pytest.raises(ConfigError, match='is not a month and day'):
        parse_month_day(text, 'f')
