# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The `cloud.sap/maintenance-data` annotation: per-profile state and notification times.

Upstream's current format (state.DataV2, Go `encoding/json` of the struct, so keys are Go field names)::

    {"Profiles": {"flatcar": {"Transition": "2024-05-01T10:00:00.123456789Z",
                              "Current": "maintenance-required", "Previous": "operational"}},
     "Notifications": {"approval_required": "2024-05-01T10:01:00Z"}}

`Current` is the profile's state, `Transition` when it last changed, `Previous` the state the previous
reconciliation started in (the enter chain and the notification schedules compare the two).
`Notifications` maps a notification instance name to when it last sent (shared by all profiles, as
upstream). Older annotations are migrated on read, as upstream's ParseMigrateDataV2 does:

* v1 `{"LastTransition", "LastNotificationTimes", "ProfileStates", "PreviousStates"}`: every profile
  gets the one LastTransition; Previous defaults to Current;
* v0 `{"LastTransition", "LastNotification", "LastNotificationState", "LastProfile"}` (one state, kept in
  the node label, "required" meaning maintenance-required): the label's profiles get the label's state.

Go decodes field names case-insensitively and refuses unknown ones; so does `parse_data`.
Times are integer nanoseconds (see gotime) so an unchanged annotation serialises byte for byte.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Dict, List, Mapping, Optional

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.common.times import format_rfc3339_ns, parse_rfc3339_ns
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.constants import (
    DATA_ANNOTATION, IN_MAINTENANCE, OPERATIONAL, PROFILE_LABEL, REQUIRED, STATE_LABEL, STATES, split_profiles)
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.errors import DataError
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.gotime import ZERO_TIME_NS

_V0_STATES = {'operational': OPERATIONAL, 'required': REQUIRED, 'maintenance-required': REQUIRED,
              'in-maintenance': IN_MAINTENANCE}


@dataclasses.dataclass
class ProfileData:
    transition: int           # ns since the epoch
    current: str
    previous: str


@dataclasses.dataclass
class NodeData:
    profiles: Dict[str, ProfileData] = dataclasses.field(default_factory=dict)
    notifications: Dict[str, int] = dataclasses.field(default_factory=dict)
    version: int = dataclasses.field(default=2, compare=False)   # format it was read from (0, 1, 2)

    def copy(self) -> 'NodeData':
        return NodeData({k: dataclasses.replace(v) for k, v in self.profiles.items()}, dict(self.notifications), self.version)


def _fold(obj: Any, fields: List[str], what: str) -> Dict[str, Any]:
    """Go's case-insensitive field matching with DisallowUnknownFields."""
    # json.loads gives dicts: the exact type check skips the Mapping ABC's (5,000 nodes, two objects each, per pass)
    if type(obj) is not dict and not isinstance(obj, Mapping):  # pylint: disable=unidiomatic-typecheck
        raise DataError(what, 'type', 'expected a JSON object, got %s' % (type(obj).__name__,))
    by_lower = {f.lower(): f for f in fields}
    out: Dict[str, Any] = {}
    for key, value in obj.items():
        field = by_lower.get(str(key).lower())
        if field is None:
            raise DataError(what, 'known', 'unknown field "%s"' % (key,))
        out[field] = value
    return out


def _map(value: Any, what: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise DataError(what, 'type', 'expected a JSON object, got %s' % (type(value).__name__,))
    return value


def _time(value: Any, what: str) -> int:
    if value is None:
        return ZERO_TIME_NS
    try:
        return parse_rfc3339_ns(value, what)
    except InvalidInput as exc:
        raise DataError(what, 'time', exc.detail) from None


def _state(value: Any, what: str) -> str:
    if value in (None, ''):
        return OPERATIONAL
    if value not in STATES:
        raise DataError(what, 'known', 'unknown state %r' % (value,))
    return value


def _parse_v2(obj: Mapping[str, Any]) -> NodeData:
    top = _fold(obj, ['Profiles', 'Notifications'], 'data')
    data = NodeData()
    for name, entry in _map(top.get('Profiles'), 'data.Profiles').items():
        if entry is None:
            continue
        fields = _fold(entry, ['Transition', 'Current', 'Previous'], 'data.Profiles.%s' % name)
        where = 'data.Profiles.%s' % name
        data.profiles[name] = ProfileData(_time(fields.get('Transition'), where + '.Transition'),
                                          _state(fields.get('Current'), where + '.Current'),
                                          _state(fields.get('Previous'), where + '.Previous'))
    for name, when in _map(top.get('Notifications'), 'data.Notifications').items():
        data.notifications[name] = _time(when, 'data.Notifications.%s' % name)
    return data


def _parse_v1(obj: Mapping[str, Any]) -> NodeData:
    top = _fold(obj, ['LastTransition', 'LastNotificationTimes', 'ProfileStates', 'PreviousStates'], 'data (v1)')
    transition = _time(top.get('LastTransition'), 'data.LastTransition')
    previous = _map(top.get('PreviousStates'), 'data.PreviousStates')
    data = NodeData()
    for name, current in _map(top.get('ProfileStates'), 'data.ProfileStates').items():
        state = _state(current, 'data.ProfileStates.%s' % name)
        data.profiles[name] = ProfileData(transition, state, _state(previous.get(name, state), 'data.PreviousStates.%s' % name))
    data.version = 1
    for name, when in _map(top.get('LastNotificationTimes'), 'data.LastNotificationTimes').items():
        data.notifications[name] = _time(when, 'data.LastNotificationTimes.%s' % name)
    return data


def _parse_v0(obj: Mapping[str, Any], labels: Mapping[str, str]) -> NodeData:
    top = _fold(obj, ['LastTransition', 'LastNotification', 'LastNotificationState', 'LastProfile'], 'data (v0)')
    state = _V0_STATES.get(labels.get(STATE_LABEL) or OPERATIONAL, OPERATIONAL)
    transition = _time(top.get('LastTransition'), 'data.LastTransition')
    return NodeData({name: ProfileData(transition, state, state) for name in split_profiles(labels.get(PROFILE_LABEL, ''))},
                    version=0)


def parse_data(text: Optional[str], labels: Optional[Mapping[str, str]] = None) -> NodeData:
    """Read the annotation (any known version); empty -> no data. Raises DataError."""
    if not text:
        return NodeData()
    try:
        obj = json.loads(text)
    except ValueError as exc:
        raise DataError(DATA_ANNOTATION, 'json', 'is not JSON: %s' % exc) from None
    if not isinstance(obj, Mapping):
        raise DataError(DATA_ANNOTATION, 'type', 'expected a JSON object')
    keys = {str(k).lower() for k in obj}
    if keys & {'profilestates', 'previousstates', 'lastnotificationtimes'}:
        return _parse_v1(obj)
    if keys & {'lastnotification', 'lastnotificationstate', 'lastprofile'} or keys == {'lasttransition'}:
        return _parse_v0(obj, labels or {})
    return _parse_v2(obj)


def format_data(data: NodeData) -> str:
    """Go's json.Marshal of DataV2: struct fields in declaration order, map keys sorted, no spaces."""
    profiles = {name: {'Transition': format_rfc3339_ns(p.transition), 'Current': p.current, 'Previous': p.previous}
                for name, p in sorted(data.profiles.items())}
    notifications = {name: format_rfc3339_ns(when) for name, when in sorted(data.notifications.items())}
    return json.dumps({'Profiles': profiles, 'Notifications': notifications}, separators=(',', ':'), ensure_ascii=False)


def node_data(node: Mapping[str, Any]) -> NodeData:
    """The data of another node (for cluster checks); unreadable data reads as none, as upstream skips it."""
    md = node.get('metadata') or {}
    try:
        return parse_data((md.get('annotations') or {}).get(DATA_ANNOTATION), md.get('labels') or {})
    except DataError:
        return NodeData()
