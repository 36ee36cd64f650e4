# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Standard 5-field cron schedules (minute hour day-of-month month day-of-week), in UTC.

Enough of cron for backup schedules, with robfig/cron's (the Go library etcd-backup-restore uses)
reading: `*`, lists, ranges, steps (`*/15`, `1-30/5`), month and weekday names, 7 as Sunday, the
day-of-month/day-of-week "either matches" rule when both are restricted, and the @-macros.
"""

from __future__ import annotations

import calendar
import dataclasses
import time
from typing import FrozenSet, List, Optional

from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import CronError

MACROS = {
    '@yearly': '0 0 1 1 *', '@annually': '0 0 1 1 *', '@monthly': '0 0 1 * *', '@weekly': '0 0 * * 0',
    '@daily': '0 0 * * *', '@midnight': '0 0 * * *', '@hourly': '0 * * * *',
}
MONTHS = {name: i for i, name in enumerate(
    ('jan', 'feb', 'mar', 'apr', 'may', 'jun', 'jul', 'aug', 'sep', 'oct', 'nov', 'dec'), start=1)}
DAYS = {name: i for i, name in enumerate(('sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat'))}
FIELDS = (('minute', 0, 59, {}), ('hour', 0, 23, {}), ('day-of-month', 1, 31, {}), ('month', 1, 12, MONTHS),
          ('day-of-week', 0, 7, DAYS))
SEARCH_MINUTES = 366 * 24 * 60 * 5  # a schedule that never fires within 5 years is an error


def _value(token: str, names: dict, field: str, expr: str) -> int:
    low = token.lower()
    if low in names:
        return names[low]
    if not token.isdigit():
        raise CronError('', 'cron', 'cron %r: %s: %r is not a number%s' % (
            expr, field, token, ' or a name' if names else ''))
    return int(token)


def _parse_field(text: str, field: str, lo: int, hi: int, names: dict, expr: str) -> FrozenSet[int]:
    values = set()
    for part in text.split(','):
        if not part:
            raise CronError('', 'cron', 'cron %r: %s has an empty list item' % (expr, field))
        body, _slash, step_text = part.partition('/')
        step = 1
        if step_text:
            if not step_text.isdigit() or int(step_text) < 1:
                raise CronError('', 'cron', 'cron %r: %s: step %r must be a positive number' % (expr, field, step_text))
            step = int(step_text)
        if body in ('*', '?'):
            start, end = lo, hi if field != 'day-of-week' else 6
        elif '-' in body:
            a, _dash, b = body.partition('-')
            start, end = _value(a, names, field, expr), _value(b, names, field, expr)
        else:
            start = _value(body, names, field, expr)
            end = hi if step_text else start
        if not (lo <= start <= hi and lo <= end <= hi):
            raise CronError('', 'cron', 'cron %r: %s: %r is outside %d-%d' % (expr, field, part, lo, hi))
        if start > end:
            raise CronError('', 'cron', 'cron %r: %s: range %r runs backwards' % (expr, field, part))
        values.update(range(start, end + 1, step))
    if field == 'day-of-week' and 7 in values:
        values.discard(7)
        values.add(0)
    return frozenset(values)


@dataclasses.dataclass(frozen=True)
class CronSchedule:
    expr: str
    minutes: FrozenSet[int]
    hours: FrozenSet[int]
    days: FrozenSet[int]
    months: FrozenSet[int]
    weekdays: FrozenSet[int]  # 0 = Sunday
    day_star: bool
    weekday_star: bool

    def matches(self, unix_minute: int) -> bool:
        t = time.gmtime(unix_minute * 60)
        if t.tm_min not in self.minutes or t.tm_hour not in self.hours or t.tm_mon not in self.months:
            return False
        day_ok = t.tm_mday in self.days
        weekday_ok = ((t.tm_wday + 1) % 7) in self.weekdays
        if self.day_star or self.weekday_star:
            return day_ok and weekday_ok
        return day_ok or weekday_ok

    def next_after(self, now: float) -> float:
        """The first firing time strictly after `now` (unix seconds, whole minutes)."""
        minute = int(now // 60) + 1
        stop = minute + SEARCH_MINUTES
        while minute < stop:
            if self.matches(minute):
                return float(minute * 60)
            minute = self._skip(minute)
        raise CronError('', 'never-fires', 'cron %r never fires' % self.expr)

    def previous_at_or_before(self, now: float) -> Optional[float]:
        """The last firing time at or before `now` within a year, or None."""
        minute = int(now // 60)
        stop = minute - 366 * 24 * 60
        while minute > stop:
            if self.matches(minute):
                return float(minute * 60)
            minute = self._skip_back(minute)
        return None

    def _skip_back(self, minute: int) -> int:
        t = time.gmtime(minute * 60)
        if t.tm_mon not in self.months or not self._day_possible(t):
            return calendar.timegm((t.tm_year, t.tm_mon, t.tm_mday, 0, 0, 0)) // 60 - 1
        if t.tm_hour not in self.hours:
            return (minute // 60) * 60 - 1
        return minute - 1

    def _skip(self, minute: int) -> int:
        """Jump over whole hours/days that cannot match (keeps `next_after` fast for sparse schedules)."""
        t = time.gmtime(minute * 60)
        if t.tm_mon not in self.months or not self._day_possible(t):
            day_start = calendar.timegm((t.tm_year, t.tm_mon, t.tm_mday, 0, 0, 0)) // 60
            return day_start + 24 * 60
        if t.tm_hour not in self.hours:
            return (minute // 60 + 1) * 60
        return minute + 1

    def _day_possible(self, t: time.struct_time) -> bool:
        day_ok = t.tm_mday in self.days
        weekday_ok = ((t.tm_wday + 1) % 7) in self.weekdays
        if self.day_star or self.weekday_star:
            return day_ok and weekday_ok
        return day_ok or weekday_ok


def parse_cron(expr: str) -> CronSchedule:
    text = (expr or '').strip()
    text = MACROS.get(text.lower(), text)
    parts: List[str] = text.split()
    if len(parts) != 5:
        raise CronError('', 'cron', 'cron %r: expected 5 fields (minute hour day-of-month month day-of-week) or a macro like '
                        '@daily, got %d field(s)' % (expr, len(parts)))
    sets = [_parse_field(p, name, lo, hi, names, expr) for p, (name, lo, hi, names) in zip(parts, FIELDS)]
    return CronSchedule(expr, sets[0], sets[1], sets[2], sets[3], sets[4],
                        day_star=parts[2] in ('*', '?'), weekday_star=parts[4] in ('*', '?'))
