# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Durations as every format we read writes them: Go's `time.ParseDuration` (`90s`, `1h30m`, `1.5h`,
`300ms`, `0`) as MCM, DWD, etcd-druid, CKE and maintenance-controller configs use it, Kubernetes'
metav1.Duration (the same syntax), and a bare number meaning seconds (YAML/Ansible options).

The one home of duration parsing: areas call `parse_duration` (or `positive_duration` where 0 makes no sense)
and wrap nothing else around it.
"""

from __future__ import annotations

import math
import re
from typing import Any

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput, shown

NS = 10 ** 9
_UNITS = {'ns': 1, 'us': 10 ** 3, 'µs': 10 ** 3, 'μs': 10 ** 3, 'ms': 10 ** 6, 's': NS, 'm': 60 * NS, 'h': 3600 * NS}
_COMPONENT = re.compile(r'(\d*)(?:\.(\d*))?([a-zµμ]+)')
EXAMPLES = 'e.g. 300ms, 90s, 1m30s, 24h'


def parse_duration_ns(value: Any, field: str, allow_negative: bool = False) -> int:
    """Nanoseconds. Numbers are seconds; strings follow Go's time.ParseDuration exactly."""
    if isinstance(value, bool) or value is None or not isinstance(value, (str, int, float)):
        raise InvalidInput(field, 'duration', 'expected a duration (%s), got %s' % (EXAMPLES, shown(value)), value)
    if isinstance(value, (int, float)):
        if isinstance(value, float) and not math.isfinite(value):
            raise InvalidInput(field, 'duration', 'expected a finite duration, got %s' % shown(value), value)
        total = int(round(value * NS))
    else:
        total = _parse_go(value.strip(), field, value)
    if total < 0 and not allow_negative:
        raise InvalidInput(field, 'non-negative', 'must not be negative, got %s' % shown(value), value)
    return total


def parse_duration(value: Any, field: str, allow_negative: bool = False) -> float:
    """The same in seconds (float)."""
    return parse_duration_ns(value, field, allow_negative) / NS


def metav1_duration(value: Any, field: str, allow_negative: bool = False) -> float:
    """Seconds from a Kubernetes metav1.Duration field as Go decodes it: a string only (`30s`, `1m30s`).
    A bare number is refused rather than guessed at (Go rejects it; seconds or nanoseconds are both plausible)."""
    if not isinstance(value, str):
        raise InvalidInput(field, 'duration', 'expected a duration string (%s), got %s' % (EXAMPLES, shown(value)), value)
    return parse_duration(value, field, allow_negative)


def positive_duration(value: Any, field: str, metav1: bool = False) -> float:
    """Seconds of a duration that must be longer than 0 (an interval, a timeout, a grace period: 0 would spin or
    never wait); `metav1`: a Kubernetes metav1.Duration field (a string only)."""
    seconds = (metav1_duration if metav1 else parse_duration)(value, field)
    if seconds <= 0:
        raise InvalidInput(field, 'positive', 'must be longer than 0s, got %s' % shown(value), value)
    return seconds


def _parse_go(text: str, field: str, original: Any) -> int:
    bad = InvalidInput(field, 'duration', '%s is not a duration (%s)' % (shown(original), EXAMPLES), original)
    body = text[1:] if text[:1] in '+-' else text
    sign = -1 if text[:1] == '-' else 1
    if body == '0':
        return 0
    if not body:
        raise bad
    pos, total = 0, 0
    while pos < len(body):
        match = _COMPONENT.match(body, pos)
        if not match or (not match.group(1) and not match.group(2)) or match.group(3) not in _UNITS:
            raise bad
        unit = _UNITS[match.group(3)]
        whole = int(match.group(1) or 0)
        fraction = match.group(2) or ''
        total += whole * unit + (int(fraction) * unit // 10 ** len(fraction) if fraction else 0)
        pos = match.end()
    return sign * total


def format_duration(seconds: float) -> str:
    """Go's Duration.String(): `1h2m3s`, `1.5s`, `0s`; below one second `250ms`, `300µs`, `10ns`."""
    return format_duration_ns(int(round(seconds * NS)))


def format_duration_ns(value: int) -> str:
    """The same for integer nanoseconds (exact)."""
    if value == 0:
        return '0s'
    sign = '-' if value < 0 else ''
    rest = abs(value)
    if rest < NS:
        unit, size, digits = (('ns', 1, 0) if rest < 10 ** 3 else ('µs', 10 ** 3, 3) if rest < 10 ** 6 else ('ms', 10 ** 6, 6))
        return sign + _with_fraction(rest, size, digits) + unit
    hours, rest = divmod(rest, 3600 * NS)
    minutes, rest = divmod(rest, 60 * NS)
    text = ('%dh' % hours if hours else '') + ('%dm' % minutes if hours or minutes else '')
    return sign + text + _with_fraction(rest, NS, 9) + 's'


def _with_fraction(value: int, size: int, digits: int) -> str:
    whole, fraction = divmod(value, size)
    return str(whole) + ('.' + ('%0*d' % (digits, fraction)).rstrip('0') if fraction else '')
