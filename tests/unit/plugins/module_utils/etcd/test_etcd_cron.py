"""Cron schedules as tables: parsing errors name the field; next/previous firing times in UTC."""

import calendar

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.etcd.backup.cron import parse_cron
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import CronError


def ts(y, mo, d, h=0, mi=0):
    return float(calendar.timegm((y, mo, d, h, mi, 0)))


@pytest.mark.parametrize('expr, now, expected', [
    ('0 */24 * * *', ts(2026, 11, 22, 13, 5), ts(2026, 11, 23)),          # druid's sample: daily at midnight
    ('*/15 * * * *', ts(2026, 11, 22, 13, 5), ts(2026, 11, 22, 13, 15)),
    ('*/15 * * * *', ts(2026, 11, 22, 13, 15), ts(2026, 11, 22, 13, 30)),  # strictly after
    ('30 2 * * mon', ts(2026, 11, 22, 13), ts(2026, 11, 23, 2, 30)),       # 2026-11-23 is a Monday
    ('0 0 1 jan *', ts(2026, 11, 22), ts(2027, 1, 1)),
    ('@hourly', ts(2026, 11, 22, 13, 59), ts(2026, 11, 22, 14)),
    ('0 12 * * 7', ts(2026, 11, 22, 13), ts(2026, 11, 29, 12)),            # 7 is Sunday too
    ('0 0 13 * 5', ts(2026, 11, 22), ts(2026, 11, 27)),                    # day-of-month OR weekday (Friday 27th)
    ('0 0 29 2 *', ts(2026, 3, 1), ts(2028, 2, 29)),                       # leap day
    ('5-10/5 1 * * *', ts(2026, 11, 22, 1, 6), ts(2026, 11, 22, 1, 10)),
])
def test_next_after(expr, now, expected):
    assert parse_cron(expr).next_after(now) == expected


def test_previous_at_or_before():
    schedule = parse_cron('0 */6 * * *')
    assert schedule.previous_at_or_before(ts(2026, 11, 22, 13, 5)) == ts(2026, 11, 22, 12)
    assert schedule.previous_at_or_before(ts(2026, 11, 22, 12)) == ts(2026, 11, 22, 12)


@pytest.mark.parametrize('expr, message', [
    ('', 'expected 5 fields'),
    ('* * * *', 'got 4 field'),
    ('61 * * * *', 'minute'),
    ('* 24 * * *', 'hour'),
    ('* * 0 * *', 'day-of-month'),
    ('* * * 13 *', 'month'),
    ('* * * * 8', 'day-of-week'),
    ('*/0 * * * *', 'step'),
    ('10-5 * * * *', 'backwards'),
    ('x * * * *', "'x' is not a number"),
    ('1,,2 * * * *', 'empty list item'),
])
def test_errors_name_the_field(expr, message):
    with pytest.raises(CronError, match=message):
        parse_cron(expr)


def test_never_firing_schedule_is_an_error():
    with pytest.raises(CronError, match='never fires'):
        parse_cron('0 0 31 2 *').next_after(ts(2026, 1, 1))
