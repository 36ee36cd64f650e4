# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Machine health from its Node, as MCM's machine controller judges it.

Healthy: the Node exists, its Ready condition is True and every configured `nodeConditions` condition
(default KernelDeadlock, ReadonlyFilesystem, DiskPressure, NetworkUnavailable) it reports is False: True,
Unknown or any other status counts as unhealthy, as in MCM's isHealthy. A Pending machine
becomes Running only when, in addition, the Node no longer has the
`node.gardener.cloud/critical-components-not-ready` taint.

`reachable` answers a different question the fleet freeze needs: is the kubelet still talking? A Node whose
Ready is Unknown (the node lifecycle controller's verdict after its lease stopped) or that is missing says
nothing about the machine; a Node that reports Ready=False or DiskPressure=True is a live kubelet telling us
the machine is sick.
"""

from __future__ import annotations

import dataclasses
from typing import Any, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.kube.conditions import get_condition
from ansible_collections.steward.cluster.plugins.module_utils.machines.constants import (
    NODE_READY,
    TAINT_CRITICAL_COMPONENTS_NOT_READY,
)

TRUE = 'True'
FALSE = 'False'


@dataclasses.dataclass(frozen=True)
class Health:
    healthy: bool
    reachable: bool          # False: the Node is missing or its Ready condition is Unknown
    reasons: Tuple[str, ...] = ()

    def describe(self) -> str:
        return '; '.join(self.reasons) if self.reasons else 'healthy'


def node_conditions(node: Optional[Mapping[str, Any]]) -> List[Mapping[str, Any]]:
    return list(((node or {}).get('status') or {}).get('conditions') or [])


def judge(node: Optional[Mapping[str, Any]], checked: Sequence[str]) -> Health:
    """Health of the machine behind `node` (None: the Node is missing)."""
    if node is None:
        return Health(False, False, ('node object missing',))
    conditions = node_conditions(node)
    reasons = []
    ready = get_condition(conditions, NODE_READY)
    reachable = True
    if ready is None:
        reasons.append('Ready condition missing')
    elif ready.get('status') != TRUE:
        reasons.append('Ready=%s%s' % (ready.get('status'), ' (%s)' % ready['reason'] if ready.get('reason') else ''))
        reachable = ready.get('status') not in ('Unknown', None, '')
    for kind in checked:
        cond = get_condition(conditions, kind)
        if cond is not None and cond.get('status') != FALSE:       # True, Unknown or anything else (MCM's isHealthy)
            reasons.append('%s=%s' % (kind, cond.get('status')))
    return Health(not reasons, reachable, tuple(reasons))


def has_critical_components_taint(node: Optional[Mapping[str, Any]]) -> bool:
    for taint in ((node or {}).get('spec') or {}).get('taints') or []:
        if taint.get('key') == TAINT_CRITICAL_COMPONENTS_NOT_READY and taint.get('effect') == 'NoSchedule':
            return True
    return False


def condition_since(node: Optional[Mapping[str, Any]], kind: str, bad_status: Tuple[str, ...]) -> Optional[str]:
    """lastTransitionTime of condition `kind` when its status is one of `bad_status`, else None."""
    cond = get_condition(node_conditions(node), kind)
    if cond is None or cond.get('status') not in bad_status:
        return None
    return cond.get('lastTransitionTime') or ''


def same_conditions(a: Sequence[Mapping[str, Any]], b: Sequence[Mapping[str, Any]]) -> bool:
    """Equal ignoring heartbeat times (which move every few seconds and would make every pass write status)."""
    def strip(conds: Sequence[Mapping[str, Any]]) -> List[Tuple[Any, ...]]:
        return sorted((c.get('type'), c.get('status'), c.get('reason'), c.get('message'), c.get('lastTransitionTime'))
                      for c in conds)
    return strip(a) == strip(b)


def status_conditions(node: Optional[Mapping[str, Any]]) -> List[Mapping[str, Any]]:
    """The Node's conditions as the machine's status.conditions carry them (without heartbeats)."""
    return [{k: v for k, v in c.items() if k != 'lastHeartbeatTime'} for c in node_conditions(node)]
