# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Check plugins that look only at the node and the clock: hasAnnotation, hasLabel, condition,
timeWindow, wait, waitExclude. Semantics follow upstream's plugin/impl (all times UTC)."""

from __future__ import annotations

import dataclasses
from typing import FrozenSet, List, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.common.durations import format_duration
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.environment import PluginParams
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.errors import ConfigError
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.fields import Fields
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.gotime import (
    WEEKDAY_NAMES, parse_clock, parse_month_day, parse_weekday, utc_datetime)
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.plugin_base import (
    CheckPlugin, CheckResult, failed, passed)

DAY = 86400


@dataclasses.dataclass(frozen=True)
class HasAnnotation(CheckPlugin):
    """Passes if the annotation exists (and, with a non-empty `value`, has that value)."""

    key: str
    value: str
    type_name = 'hasAnnotation'

    @classmethod
    def from_config(cls, fields: Fields) -> 'HasAnnotation':
        return cls(fields.string('key', required=True), fields.string('value'))

    def _source(self, params: PluginParams) -> dict:
        return (params.node.get('metadata') or {}).get('annotations') or {}

    def check(self, params: PluginParams) -> CheckResult:
        source = self._source(params)
        if self.key not in source:
            return failed(reason='%s is not set' % self.key)
        if self.value and source[self.key] != self.value:
            return failed(reason='%s is %r, not %r' % (self.key, source[self.key], self.value))
        return passed()


@dataclasses.dataclass(frozen=True)
class HasLabel(HasAnnotation):
    type_name = 'hasLabel'

    def _source(self, params: PluginParams) -> dict:
        return (params.node.get('metadata') or {}).get('labels') or {}


@dataclasses.dataclass(frozen=True)
class Condition(CheckPlugin):
    """Passes if the node condition `type` has `status` (a missing condition fails)."""

    condition_type: str
    status: str
    type_name = 'condition'

    @classmethod
    def from_config(cls, fields: Fields) -> 'Condition':
        return cls(fields.string('type', required=True), fields.string('status', required=True))

    def check(self, params: PluginParams) -> CheckResult:
        for condition in (params.node.get('status') or {}).get('conditions') or []:
            if condition.get('type') == self.condition_type:
                actual = condition.get('status')
                return CheckResult(actual == self.status, {'status': actual})
        return failed(reason='node has no %s condition' % self.condition_type)


def _weekdays(fields: Fields, key: str, required: bool) -> FrozenSet[int]:
    return frozenset(parse_weekday(day, '%s[%d]' % (fields.path(key), index))
                     for index, day in enumerate(fields.string_list(key, required=required)))


@dataclasses.dataclass(frozen=True)
class TimeWindow(CheckPlugin):
    """Passes on the given weekdays strictly between start and end (UTC), except on excluded dates."""

    start: int                       # seconds after midnight
    end: int
    weekdays: FrozenSet[int]
    exclude: Tuple[Tuple[int, int], ...]
    type_name = 'timeWindow'

    @classmethod
    def from_config(cls, fields: Fields) -> 'TimeWindow':
        weekdays = _weekdays(fields, 'weekdays', True)
        start = parse_clock(fields.string('start', required=True), fields.path('start'))
        end = parse_clock(fields.string('end', required=True), fields.path('end'))
        if start > end:
            raise ConfigError(fields.path('end'), 'after-start', 'the end time %s should be after the start time %s '
                              '(windows do not cross midnight)' % (fields.raw.get('end'), fields.raw.get('start')))
        exclude = tuple(parse_month_day(day, '%s[%d]' % (fields.path('exclude'), index))
                        for index, day in enumerate(fields.string_list('exclude')))
        return cls(start, end, weekdays, exclude)

    def check(self, params: PluginParams) -> CheckResult:
        when = utc_datetime(params.now)
        if when.weekday() not in self.weekdays:
            return failed(reason='%s is not an allowed weekday' % WEEKDAY_NAMES[when.weekday()])
        if (when.month, when.day) in self.exclude:
            return failed(reason='%s is excluded' % when.strftime('%b %d'))
        of_day = when.hour * 3600 + when.minute * 60 + when.second + when.microsecond / 1e6
        if self.start < of_day < self.end:
            return passed()
        return failed(reason='%s UTC is outside the window' % when.strftime('%H:%M'))


def shown_duration(seconds: float) -> str:
    """A wait's elapsed time and duration as the check details show them: Go's form, in whole seconds from one
    second up (`1m30s`, not `1m30.123456789s`), in milliseconds below."""
    return format_duration(round(seconds) if seconds >= 1 else round(seconds, 3))


@dataclasses.dataclass(frozen=True)
class Wait(CheckPlugin):
    """Passes once more than `duration` passed since the profile's last transition."""

    duration: float
    type_name = 'wait'

    @classmethod
    def from_config(cls, fields: Fields) -> 'Wait':
        return cls(fields.duration('duration', required=True))

    def check(self, params: PluginParams) -> CheckResult:
        elapsed = params.now - params.last_transition
        return CheckResult(elapsed > self.duration, {'elapsed': shown_duration(max(elapsed, 0)),
                                                     'duration': shown_duration(self.duration)})


def _count_weekday(first: int, stop: int, weekday: int) -> int:
    """How many epoch days d in [first, stop) fall on `weekday` (day 0, 1970-01-01, was a Thursday)."""
    offset = (weekday - 3) % 7
    return (stop - offset - 1) // 7 - (first - offset - 1) // 7


def counted_seconds(start: float, end: float, excluded: FrozenSet[int]) -> float:
    """Seconds in [start, end) that do not fall on an excluded weekday (UTC days)."""
    if end <= start:
        return 0.0
    first_day, last_day = int(start // DAY), int(end // DAY)

    def counts(day: int) -> bool:
        return (day + 3) % 7 not in excluded

    if first_day == last_day:
        return end - start if counts(first_day) else 0.0
    total = ((first_day + 1) * DAY - start if counts(first_day) else 0.0) + (end - last_day * DAY if counts(last_day) else 0.0)
    full_days = last_day - first_day - 1
    if full_days > 0:
        skipped = sum(_count_weekday(first_day + 1, last_day, day) for day in excluded)
        total += (full_days - skipped) * DAY
    return total


@dataclasses.dataclass(frozen=True)
class WaitExclude(CheckPlugin):
    """Like wait, but time stands still on the excluded weekdays (counted exactly, per UTC day)."""

    duration: float
    exclude: FrozenSet[int]
    type_name = 'waitExclude'

    @classmethod
    def from_config(cls, fields: Fields) -> 'WaitExclude':
        return cls(fields.duration('duration', required=True), _weekdays(fields, 'exclude', True))

    def check(self, params: PluginParams) -> CheckResult:
        elapsed = counted_seconds(params.last_transition, params.now, self.exclude)
        return CheckResult(elapsed > self.duration, {'elapsed': shown_duration(elapsed), 'duration': shown_duration(self.duration)})


NODE_CHECKS: List[type] = [HasAnnotation, HasLabel, Condition, TimeWindow, Wait, WaitExclude]
