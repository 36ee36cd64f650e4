# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""RFC 3339 times, read and written one way for every area.

Reading (`parse_rfc3339`, `parse_rfc3339_ns`) takes what Go's `time.Time` JSON and the Kubernetes API write:
`2026-03-01T12:00:00Z`, with an optional fraction of up to nine digits and `Z` or a `+hh:mm`/`-hh:mm` offset (`T`
and `Z` in either case, as RFC 3339 allows). Anything else raises InvalidInput naming the field, rule `rfc3339`.
`naive_utc=True` also takes a time without a zone as UTC: sabakan's machine files are YAML, and a YAML timestamp
written without a zone means UTC there (PyYAML hands such values over naive). The result is always UTC.

Writing (`format_rfc3339`) prints whole seconds (metav1.Time, Go's time.RFC3339), microseconds (metav1.MicroTime)
or nanoseconds (etcd-druid's delta event times), `Z` for UTC and the numeric offset otherwise (a sabakan date keeps
its zone); `format_rfc3339_ns` prints integer nanoseconds as Go's RFC3339Nano does (trailing zeros dropped), so a
round trip through maintenance-controller's annotation is exact. Years below 1000 are zero-padded (Go's zero time is
0001-01-01T00:00:00Z; strftime does not pad them).
"""

from __future__ import annotations

import datetime
import re
from typing import Any, Union

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput, shown

NS = 1_000_000_000
UTC = datetime.timezone.utc
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=UTC)
EXAMPLE = '2026-03-01T12:00:00Z'
PRECISIONS = ('s', 'us', 'ns')

_RFC3339 = re.compile(r'(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?([Zz]|[+-]\d{2}:\d{2})?\Z')


def _bad(value: Any, field: str, why: str = '') -> InvalidInput:
    return InvalidInput(field, 'rfc3339', '%s is not an RFC 3339 date-time (such as %s)%s' % (shown(value), EXAMPLE, why),
                        value)


def parse_rfc3339_ns(value: Any, field: str = 'time', naive_utc: bool = False) -> int:
    """Nanoseconds since the epoch (UTC) of an RFC 3339 time, exact to the nanosecond."""
    match = _RFC3339.match(value) if isinstance(value, str) else None
    if not match:
        raise _bad(value, field)
    year, month, day, hour, minute, second = (int(g) for g in match.groups()[:6])
    zone = match.group(8)
    if zone is None and not naive_utc:
        raise _bad(value, field, ' (no zone: add Z or an offset such as +02:00)')
    try:
        when = datetime.datetime(year, month, day, hour, minute, second, tzinfo=UTC)
    except ValueError as exc:   # month 13, February 30, second 60 (Go refuses a leap second too)
        raise _bad(value, field, ' (%s)' % exc) from None
    offset = 0
    if zone and zone not in ('Z', 'z'):
        hours, minutes = int(zone[1:3]), int(zone[4:6])
        if hours > 23 or minutes > 59:
            raise _bad(value, field, ' (offset out of range)')
        offset = (hours * 3600 + minutes * 60) * (-1 if zone[0] == '-' else 1)
    whole = (when - EPOCH) // datetime.timedelta(seconds=1) - offset
    return whole * NS + int((match.group(7) or '').ljust(9, '0'))


def parse_rfc3339(value: Any, field: str = 'time', naive_utc: bool = False,
                  keep_zone: bool = False) -> datetime.datetime:
    """An aware UTC datetime (microseconds: a ninth-digit fraction is cut, as Python cannot hold it). With
    `keep_zone` the datetime keeps the offset it was written with (the same instant), as Go's time.Time does:
    sabakan's dates are printed back in their own zone, as CKE prints them."""
    if isinstance(value, str) and (len(value) == 20 or len(value) == 27) and value[-1] == 'Z' and value[10] == 'T' \
            and value[4] == '-' and value[7] == '-' and value[13] == ':' and value[16] == ':' \
            and (len(value) == 20 or value[19] == '.'):
        # The two forms API servers write (metav1.Time, metav1.MicroTime): C code, ~10x faster than the general
        # path - the watchdog reads thousands of Lease times per probe.
        try:
            return datetime.datetime.fromisoformat(value[:-1] + '+00:00')
        except ValueError:
            pass   # the general path says what is wrong
    ns = parse_rfc3339_ns(value, field, naive_utc)
    when = EPOCH + datetime.timedelta(microseconds=ns // 1000)
    zone = value[-6:]
    if keep_zone and zone[0] in '+-' and zone[3] == ':' and zone not in ('+00:00', '-00:00'):
        minutes = int(zone[1:3]) * 60 + int(zone[4:6])
        return when.astimezone(datetime.timezone(datetime.timedelta(minutes=-minutes if zone[0] == '-' else minutes)))
    return when


def now_or(value: Any, field: str = 'now') -> datetime.datetime:
    """The time an option gives (RFC 3339, a zone required), or the current time when it is absent (None or '')."""
    if value is None or value == '':
        return datetime.datetime.now(UTC)
    return parse_rfc3339(value, field)


def _as_datetime(when: Union[datetime.datetime, float, int]) -> datetime.datetime:
    if isinstance(when, datetime.datetime):
        return when if when.tzinfo is not None else when.replace(tzinfo=UTC)
    return datetime.datetime.fromtimestamp(when, tz=UTC)


def format_rfc3339(when: Union[datetime.datetime, float, int], precision: str = 's') -> str:
    """`when` (a datetime - naive taken as UTC - or seconds since the epoch) as RFC 3339: `precision` 's' (whole
    seconds, cut), 'us' (six digits) or 'ns' (nine digits, the last three 0: a float or a datetime holds no
    more); `Z` when the offset is zero, else `+hh:mm`."""
    if precision not in PRECISIONS:
        raise ValueError('precision must be one of %s' % ', '.join(PRECISIONS))
    value = _as_datetime(when)
    text = '%04d-%02d-%02dT%02d:%02d:%02d' % (value.year, value.month, value.day, value.hour, value.minute,
                                              value.second)
    if precision == 'us':
        text += '.%06d' % value.microsecond
    elif precision == 'ns':
        text += '.%06d000' % value.microsecond
    offset = value.utcoffset() or datetime.timedelta(0)
    if not offset:
        return text + 'Z'
    minutes = int(offset.total_seconds()) // 60
    sign = '+' if minutes >= 0 else '-'
    return text + '%s%02d:%02d' % (sign, abs(minutes) // 60, abs(minutes) % 60)


def format_rfc3339_ns(value: int) -> str:
    """Integer nanoseconds since the epoch as Go's RFC3339Nano (UTC, `Z`, the fraction without trailing zeros)."""
    whole, fraction = divmod(value, NS)
    text = format_rfc3339(EPOCH + datetime.timedelta(seconds=whole))[:-1]
    if fraction:
        text += ('.%09d' % fraction).rstrip('0')
    return text + 'Z'
