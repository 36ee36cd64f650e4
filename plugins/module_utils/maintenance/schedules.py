# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Notification schedules: when a notification instance sends (upstream's plugin/notification.go).

Inputs per instance and profile: the profile's current state and the state the previous reconcile
started in (they differ right after a transition), `now`, when this instance last sent (the data
annotation's Notifications) and when the profile last changed state.

* periodic(interval, default 1h): after a state change, and again every `interval` while the node is
  not operational;
* scheduled(instant hh:mm, weekdays): once a day at or after `instant` (UTC) on the given weekdays
  (upstream compares only the day of the month with the last send; here the whole date);
* oneshot(delay, default 1m as upstream): once per state change, on the first reconcile at least
  `delay` after it, unless this instance already sent after the change (strictly after: a send at the
  very instant of the change belongs to the state before). Upstream's versions differ here: an earlier
  one only fired if the first reconcile after the change came after the delay; its later one, like
  this, remembers whether it already sent for the current state.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar, FrozenSet, Optional

from ansible_collections.steward.cluster.plugins.module_utils.maintenance.constants import OPERATIONAL
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.fields import Fields
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.gotime import (
    NS, ZERO_TIME_NS, parse_clock, parse_weekday, utc_datetime)


@dataclasses.dataclass(frozen=True)
class ScheduleInput:
    current: str
    previous: str
    now: float
    last_sent: Optional[int]      # ns; None: never
    state_change: int             # ns


class Schedule:
    type_name: ClassVar[str] = ''

    @classmethod
    def from_config(cls, fields: Fields) -> 'Schedule':
        raise NotImplementedError

    def should_notify(self, at: ScheduleInput) -> bool:
        raise NotImplementedError


@dataclasses.dataclass(frozen=True)
class Periodic(Schedule):
    interval: float
    type_name = 'periodic'

    @classmethod
    def from_config(cls, fields: Fields) -> 'Periodic':
        return cls(fields.duration('interval', default=3600.0))

    def should_notify(self, at: ScheduleInput) -> bool:
        if at.current != at.previous:
            return True
        last = at.last_sent if at.last_sent is not None else ZERO_TIME_NS
        return int(at.now * NS) - last >= self.interval * NS and at.previous != OPERATIONAL


@dataclasses.dataclass(frozen=True)
class Scheduled(Schedule):
    instant: int                  # seconds after midnight
    weekdays: FrozenSet[int]
    type_name = 'scheduled'

    @classmethod
    def from_config(cls, fields: Fields) -> 'Scheduled':
        weekdays = frozenset(parse_weekday(day, '%s[%d]' % (fields.path('weekdays'), i))
                             for i, day in enumerate(fields.string_list('weekdays', required=True)))
        return cls(parse_clock(fields.string('instant', required=True), fields.path('instant')), weekdays)

    def should_notify(self, at: ScheduleInput) -> bool:
        now = utc_datetime(at.now)
        if now.weekday() not in self.weekdays:
            return False
        if now.hour * 3600 + now.minute * 60 + now.second < self.instant:
            return False
        if at.last_sent is None or at.last_sent <= ZERO_TIME_NS:
            return True
        return utc_datetime(at.last_sent / NS).date() != now.date()


@dataclasses.dataclass(frozen=True)
class Oneshot(Schedule):
    delay: float
    type_name = 'oneshot'

    @classmethod
    def from_config(cls, fields: Fields) -> 'Oneshot':
        return cls(fields.duration('delay', default=60.0))

    def should_notify(self, at: ScheduleInput) -> bool:
        if at.state_change <= ZERO_TIME_NS:
            return False
        if at.last_sent is not None and at.last_sent > at.state_change:
            return False
        return int(at.now * NS) - at.state_change >= self.delay * NS


SCHEDULES = {cls.type_name: cls for cls in (Periodic, Scheduled, Oneshot)}
