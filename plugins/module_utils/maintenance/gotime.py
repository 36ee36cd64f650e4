# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Go's time syntaxes, as maintenance.yaml and the data annotation use them.

* durations are not here: common/durations.py reads them for every area (`time.ParseDuration`; a bare
  YAML number is seconds, as go-ucfg reads numbers into a `time.Duration`) and prints them as Go does.
* instants: Go's JSON form of `time.Time` (RFC 3339 with up to nine fraction digits), kept as integer
  nanoseconds since the epoch so a round trip through the annotation is exact; read and written by
  common/times.py (parse_rfc3339_ns, format_rfc3339_ns).
* `hh:mm` (Go layout `15:04`), weekday names (`monday`/`mon`, any case) and `Jan 2` dates (`Dec 24`).
"""

from __future__ import annotations

import calendar
import datetime
import re
from typing import Any, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.common.durations import NS
from ansible_collections.steward.cluster.plugins.module_utils.common.times import format_rfc3339_ns
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.errors import ConfigError

_CLOCK = re.compile(r'^(\d{1,2}):(\d{2})$')
WEEKDAYS = {'monday': 0, 'mon': 0, 'tuesday': 1, 'tue': 1, 'wednesday': 2, 'wed': 2, 'thursday': 3, 'thu': 3,
            'friday': 4, 'fri': 4, 'saturday': 5, 'sat': 5, 'sunday': 6, 'sun': 6}
WEEKDAY_NAMES = ('monday', 'tuesday', 'wednesday', 'thursday', 'friday', 'saturday', 'sunday')
MONTHS = {name.lower(): number for number, name in enumerate(calendar.month_abbr) if name}
ZERO_TIME_NS = -62135596800 * NS  # Go's time.Time{} ("0001-01-01T00:00:00Z")


# --- instants --------------------------------------------------------------------------------------

def seconds_to_ns(seconds: float) -> int:
    whole = int(seconds // 1)
    return whole * NS + int(round((seconds - whole) * NS))


def ns_to_seconds(value: int) -> float:
    return value / NS


def go_time_string(value: int) -> str:
    """What `{{ .LastTransition }}` prints in Go: `2024-05-01 10:00:00.5 +0000 UTC`."""
    text = format_rfc3339_ns(value)[:-1].replace('T', ' ')
    return text + ' +0000 UTC'


def utc_datetime(seconds: float) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(seconds, tz=datetime.timezone.utc)


# --- calendar ---------------------------------------------------------------------------------------

def parse_clock(value: Any, where: str) -> int:
    """Go layout `15:04` (hour 1-2 digits, minute 2 digits) -> seconds after midnight."""
    match = _CLOCK.match(str(value if value is not None else '').strip())
    if not match or int(match.group(1)) > 23 or int(match.group(2)) > 59:
        raise ConfigError(where, 'clock', '%r is not a time of day in hh:mm format (e.g. 09:30)' % (value,))
    return int(match.group(1)) * 3600 + int(match.group(2)) * 60


def parse_weekday(value: Any, where: str) -> int:
    """`monday`/`mon` (any case) -> 0 (Python's numbering)."""
    day = WEEKDAYS.get(str(value).strip().lower())
    if day is None:
        raise ConfigError(where, 'weekday', '%r is not a weekday (monday ... sunday, or mon ... sun)' % (value,))
    return day


def parse_month_day(value: Any, where: str) -> Tuple[int, int]:
    """Go layout `Jan 2`: `Dec 24` -> (12, 24); the day must exist in that month (Feb 29 does)."""
    parts = str(value).split(' ')
    month = MONTHS.get(parts[0].lower()) if len(parts) == 2 else None
    day = int(parts[1]) if month and parts[1].isdigit() and 1 <= len(parts[1]) <= 2 else 0
    if not month or not 1 <= day <= calendar.monthrange(2000, month)[1]:
        raise ConfigError(where, 'month-day', '%r is not a month and day like "Dec 24"' % (value,))
    return month, day
