"""common/times: one RFC 3339 reader and writer for every area - exact nanoseconds, the zone rules, the forms the
API server writes on the fast path, and errors that name the field."""

from __future__ import annotations

import datetime

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.common.times import (
    format_rfc3339, format_rfc3339_ns, now_or, parse_rfc3339, parse_rfc3339_ns)

UTC = datetime.timezone.utc


@pytest.mark.parametrize('text, ns', [
    ('1970-01-01T00:00:00Z', 0),
    ('1970-01-01T00:00:01.5Z', 1_500_000_000),
    ('1970-01-01t00:00:00.000000001z', 1),
    ('1970-01-01T02:00:00+02:00', 0),
    ('1969-12-31T19:30:00-04:30', 0),
    ('0001-01-01T00:00:00Z', -62135596800 * 10 ** 9),            # Go's zero time
])
def test_parse_ns_is_exact(text, ns):
    assert parse_rfc3339_ns(text) == ns


@pytest.mark.parametrize('text, expected', [
    ('2024-01-31T12:00:00Z', datetime.datetime(2024, 1, 31, 12, tzinfo=UTC)),                          # metav1.Time
    ('2024-01-31T12:00:00.123456Z', datetime.datetime(2024, 1, 31, 12, 0, 0, 123456, tzinfo=UTC)),     # MicroTime
    ('2024-01-31T12:00:00.123456789Z', datetime.datetime(2024, 1, 31, 12, 0, 0, 123456, tzinfo=UTC)),
    ('2024-01-31T12:00:00.5+09:00', datetime.datetime(2024, 1, 31, 3, 0, 0, 500000, tzinfo=UTC)),
    ('2024-01-31T12:00:00-01:30', datetime.datetime(2024, 1, 31, 13, 30, tzinfo=UTC)),
])
def test_parse_gives_aware_utc(text, expected):
    parsed = parse_rfc3339(text)
    assert parsed == expected and parsed.utcoffset() == datetime.timedelta(0)


@pytest.mark.parametrize('bad', [
    '2024-01-31', '2024-01-31T12:00:00', '2024-01-31 12:00:00Z', '2024-13-01T00:00:00Z', '2024-02-30T00:00:00Z',
    '2024-01-31T12:00:60Z', '2024-01-31T12:00:00.1234567890Z', '2024-01-31T12:00:00+24:00', '2024-01-31T12:00:00ZZ',
    'yesterday', '', None, 17, '2024-01-31T12:00:0xZ', '20240131T120000Z',
])
def test_parse_refuses_with_the_field_named(bad):
    with pytest.raises(InvalidInput) as caught:
        parse_rfc3339(bad, 'spec.retireDate')
    assert caught.value.field == 'spec.retireDate' and caught.value.rule == 'rfc3339'
    assert str(caught.value).startswith('spec.retireDate: %r is not an RFC 3339 date-time' % (bad,))


def test_naive_utc_and_keep_zone():
    assert parse_rfc3339('2024-01-31T12:00:00', naive_utc=True) == datetime.datetime(2024, 1, 31, 12, tzinfo=UTC)
    kept = parse_rfc3339('2024-01-31T12:00:00+09:00', keep_zone=True)
    assert kept.utcoffset() == datetime.timedelta(hours=9) and kept == datetime.datetime(2024, 1, 31, 3, tzinfo=UTC)
    assert format_rfc3339(kept) == '2024-01-31T12:00:00+09:00'
    assert format_rfc3339(parse_rfc3339('2024-01-31T12:00:00-00:00', keep_zone=True)) == '2024-01-31T12:00:00Z'


def test_format_precisions():
    now = 1_700_000_000.25
    assert format_rfc3339(now) == '2023-11-14T22:13:20Z'
    assert format_rfc3339(now, 'us') == '2023-11-14T22:13:20.250000Z'
    assert format_rfc3339(now, 'ns') == '2023-11-14T22:13:20.250000000Z'
    assert format_rfc3339(datetime.datetime(1, 1, 1)) == '0001-01-01T00:00:00Z'      # naive is UTC; year padded
    assert format_rfc3339(datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone(-datetime.timedelta(hours=4, minutes=30)))) \
        == '2024-01-01T00:00:00-04:30'
    with pytest.raises(ValueError):
        format_rfc3339(now, 'ms')


@pytest.mark.parametrize('text, canonical', [
    ('2024-05-01T10:00:00Z', '2024-05-01T10:00:00Z'),
    ('2024-05-01T10:00:00.123456789Z', '2024-05-01T10:00:00.123456789Z'),
    ('2024-05-01T10:00:00.500Z', '2024-05-01T10:00:00.5Z'),
    ('2024-05-01T12:00:00.100+02:00', '2024-05-01T10:00:00.1Z'),
    ('0001-01-01T00:00:00Z', '0001-01-01T00:00:00Z'),
])
def test_ns_round_trip_is_go_rfc3339nano(text, canonical):
    assert format_rfc3339_ns(parse_rfc3339_ns(text)) == canonical


def test_now_or():
    assert now_or('2026-03-01T12:00:00Z') == datetime.datetime(2026, 3, 1, 12, tzinfo=UTC)
    before = datetime.datetime.now(UTC)
    assert before <= now_or(None) <= datetime.datetime.now(UTC) and now_or('').tzinfo is not None
    with pytest.raises(InvalidInput, match='^now: '):
        now_or('2026-03-01T12:00:00')
