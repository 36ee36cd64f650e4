# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Status conditions as Kubernetes and etcd-druid write them (type, status, reason, message,
lastTransitionTime, lastUpdateTime): the transition time moves only when the status flips."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

from ansible_collections.steward.cluster.plugins.module_utils.common.times import format_rfc3339

TRUE = 'True'
FALSE = 'False'
UNKNOWN = 'Unknown'


def rfc3339(now: float) -> str:
    """metav1.Time (condition and object times: whole seconds) of `now`, seconds since the epoch."""
    return format_rfc3339(now)


def set_condition(conditions: Optional[Sequence[Dict[str, Any]]], type_: str, status: str, reason: str,
                  message: str, now: float) -> List[Dict[str, Any]]:
    """A new list with `type_` set; other conditions are kept as they are."""
    stamp = rfc3339(now)
    result: List[Dict[str, Any]] = []
    found = False
    for cond in conditions or []:
        if cond.get('type') != type_:
            result.append(dict(cond))
            continue
        found = True
        transition = cond.get('lastTransitionTime') if cond.get('status') == status else stamp
        result.append({'type': type_, 'status': status, 'reason': reason, 'message': message,
                       'lastTransitionTime': transition or stamp, 'lastUpdateTime': stamp})
    if not found:
        result.append({'type': type_, 'status': status, 'reason': reason, 'message': message,
                       'lastTransitionTime': stamp, 'lastUpdateTime': stamp})
    return result


def get_condition(conditions: Optional[Sequence[Dict[str, Any]]], type_: str) -> Optional[Dict[str, Any]]:
    for cond in conditions or []:
        if cond.get('type') == type_:
            return cond
    return None
