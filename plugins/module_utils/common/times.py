# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""RFC 3339 times: the one home (a minimal version; the helpers branch holds the full one)."""

from __future__ import annotations

import datetime
import re
from typing import Any

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput, shown

_RFC3339 = re.compile(r'^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?([Zz]|[+-]\d{2}:\d{2})$')


def parse_rfc3339(text: Any, field: str) -> datetime.datetime:
    """`2026-03-01T12:00:00Z` (an optional fraction, up to nanoseconds, kept to microseconds; `Z` or an offset) as
    an aware UTC datetime; InvalidInput(field, 'rfc3339', ...) for anything else, a time without a zone included."""
    match = _RFC3339.match(text) if isinstance(text, str) else None
    if not match:
        raise InvalidInput(field, 'rfc3339', 'expected an RFC 3339 time such as 2026-03-01T12:00:00Z, got %s'
                           % shown(text), text)
    year, month, day, hour, minute, second = (int(g) for g in match.groups()[:6])
    zone = match.group(8)
    offset = datetime.timedelta(0) if zone in ('Z', 'z') else \
        (-1 if zone[0] == '-' else 1) * datetime.timedelta(hours=int(zone[1:3]), minutes=int(zone[4:6]))
    try:
        when = datetime.datetime(year, month, day, hour, minute, second,
                                 int((match.group(7) or '').ljust(9, '0')[:6] or 0),
                                 tzinfo=datetime.timezone(offset))
    except ValueError as exc:
        raise InvalidInput(field, 'rfc3339', '%s is not a real time: %s' % (shown(text), exc), text) from None
    return when.astimezone(datetime.timezone.utc)


def format_rfc3339(dt: datetime.datetime, precision: str = 's') -> str:
    """`dt` in UTC as RFC 3339 with `precision` 's', 'us' or 'ns' (a datetime holds microseconds: 'ns' pads)."""
    when = dt.astimezone(datetime.timezone.utc)
    text = '%04d-%02d-%02dT%02d:%02d:%02d' % (when.year, when.month, when.day, when.hour, when.minute, when.second)
    if precision == 'us':
        text += '.%06d' % when.microsecond
    elif precision == 'ns':
        text += '.%06d000' % when.microsecond
    elif precision != 's':
        raise ValueError('precision must be s, us or ns, got %r' % (precision,))
    return text + 'Z'
