# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The arithmetic of a MachineDeployment rollout: Kubernetes' Deployment controller rules, which MCM keeps.

* maxSurge / maxUnavailable are integers or percentages of `replicas`; surge rounds up, unavailable rounds
  down, and when both come out 0, unavailable is 1 (`resolve_fenceposts`);
* RollingUpdate: the new set grows while the total stays within replicas + surge (`new_set_replicas`); old
  sets shrink while available machines stay at or above replicas - unavailable, unhealthy ones first
  (`scale_down_old`);
* a change of `replicas` mid-rollout (`proportional_scale`): a scale-out goes to the new set only (MCM); a
  scale-in shrinks every active set by its share, computed from the `max-replicas` annotation, and what
  rounding leaves over comes off the largest set (older first among equals);
* Recreate: old sets to 0, then the new one to `replicas` once no old machine is left.

Sets are `SetState`s (only the numbers the rules read); functions return the new replica counts by name.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.kube.intstr import parse_int_or_percent, scaled

DEFAULT_MAX_SURGE = 1          # MCM's default (Kubernetes uses 25%)
DEFAULT_MAX_UNAVAILABLE = 1


@dataclasses.dataclass
class SetState:
    name: str
    created: float
    replicas: int                     # spec.replicas
    available: int = 0                # status.availableReplicas
    status_replicas: int = 0          # status.replicas
    max_replicas: Optional[int] = None   # the max-replicas annotation (replicas + surge when last scaled)


def strategy_values(strategy: Optional[dict]) -> Tuple[str, Any, Any]:
    """(type, maxSurge, maxUnavailable) with MCM's defaults; raises InvalidInput for a bad strategy."""
    strategy = strategy or {}
    kind = strategy.get('type') or 'RollingUpdate'
    if kind not in ('RollingUpdate', 'Recreate', 'InPlaceUpdate'):
        raise InvalidInput('spec.strategy.type', 'one-of', 'must be RollingUpdate, Recreate or InPlaceUpdate, got %r'
                           % (kind,), kind)
    rolling = strategy.get('inPlaceUpdate' if kind == 'InPlaceUpdate' else 'rollingUpdate') or {}
    surge = rolling.get('maxSurge', DEFAULT_MAX_SURGE)
    unavailable = rolling.get('maxUnavailable', DEFAULT_MAX_UNAVAILABLE)
    if surge is None:
        surge = DEFAULT_MAX_SURGE
    if unavailable is None:
        unavailable = DEFAULT_MAX_UNAVAILABLE
    where = 'spec.strategy.' + ('inPlaceUpdate' if kind == 'InPlaceUpdate' else 'rollingUpdate')
    s, _surge_is_percent = parse_int_or_percent(surge, where + '.maxSurge')
    u, _unavailable_is_percent = parse_int_or_percent(unavailable, where + '.maxUnavailable')
    if kind in ('RollingUpdate', 'InPlaceUpdate') and s == 0 and u == 0:
        raise InvalidInput(where, 'not-both-zero', 'maxSurge and maxUnavailable cannot both be 0', rolling)
    if kind == 'InPlaceUpdate':
        orchestration(strategy)
    return kind, surge, unavailable


def resolve_fenceposts(surge_value: Any, unavailable_value: Any, desired: int) -> Tuple[int, int]:
    surge = scaled(surge_value, desired, True, 'spec.strategy.rollingUpdate.maxSurge')
    unavailable = scaled(unavailable_value, desired, False, 'spec.strategy.rollingUpdate.maxUnavailable')
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return surge, unavailable


def max_surge(kind: str, surge: Any, unavailable: Any, desired: int) -> int:
    return resolve_fenceposts(surge, unavailable, desired)[0] if kind == 'RollingUpdate' else 0


def orchestration(strategy: Optional[dict]) -> str:
    """An InPlaceUpdate strategy's `inPlaceUpdate.orchestrationType`: Auto (default) or Manual."""
    value = ((strategy or {}).get('inPlaceUpdate') or {}).get('orchestrationType') or 'Auto'
    if value not in ('Auto', 'Manual'):
        raise InvalidInput('spec.strategy.inPlaceUpdate.orchestrationType', 'one-of', 'must be Auto or Manual, got %r'
                           % (value,), value)
    return value


def max_unavailable(kind: str, surge: Any, unavailable: Any, desired: int) -> int:
    if kind not in ('RollingUpdate', 'InPlaceUpdate') or desired == 0:
        return 0
    unavailable_count = resolve_fenceposts(surge, unavailable, desired)[1]
    if kind == 'InPlaceUpdate':
        # no surge machine is made for an in-place update (docs/machines.md): a node being updated is the only
        # way to move, so at least one may be unavailable
        unavailable_count = max(1, unavailable_count)
    return min(unavailable_count, desired)


def new_set_replicas(desired: int, surge: int, sets: Sequence[SetState], new: SetState) -> int:
    """NewRSNewReplicas for RollingUpdate: grow the new set while the total stays within desired + surge."""
    current = sum(s.replicas for s in sets)
    if current >= desired + surge:
        return new.replicas
    grow = min(desired + surge - current, max(0, desired - new.replicas))
    return new.replicas + grow


def scale_down_old(desired: int, unavailable: int, sets: Sequence[SetState], old: Sequence[SetState],
                   new: Optional[SetState]) -> Dict[str, int]:
    """reconcileOldReplicaSets: old sets' new replica counts (only those that change)."""
    if sum(s.replicas for s in old) == 0:
        return {}
    min_available = desired - unavailable
    new_unavailable = (new.replicas - new.available) if new is not None else 0
    max_down = sum(s.replicas for s in sets) - min_available - new_unavailable
    if max_down <= 0:
        return {}
    result: Dict[str, int] = {}
    ordered = sorted(old, key=lambda s: (s.created, s.name))
    # First the unhealthy machines of old sets (they count for nothing available).
    done = 0
    for s in ordered:
        if done >= max_down:
            break
        if s.replicas == 0 or s.replicas == s.available:
            continue
        down = min(max_down - done, s.replicas - s.available)
        result[s.name] = s.replicas - down
        done += down
    # Then available ones, keeping at least min_available available.
    replicas = {s.name: result.get(s.name, s.replicas) for s in ordered}
    total_available = sum(s.available for s in sets)
    if total_available > min_available:
        budget = total_available - min_available
        taken = 0
        for s in ordered:
            if taken >= budget:
                break
            if replicas[s.name] == 0:
                continue
            down = min(replicas[s.name], budget - taken)
            replicas[s.name] -= down
            result[s.name] = replicas[s.name]
            taken += down
    return dict(result)


def _round_half_away(value: float) -> int:
    return int(math.floor(value + 0.5)) if value >= 0 else -int(math.floor(-value + 0.5))


def _fraction(s: SetState, desired: int, surge: int, status_replicas: int) -> int:
    """getReplicaSetFraction: this set's share of the change (from its max-replicas annotation)."""
    if desired == 0:
        return -s.replicas
    deployment_replicas = desired + surge
    annotated = s.max_replicas if s.max_replicas else status_replicas
    if not annotated:
        return 0
    return _round_half_away(s.replicas * deployment_replicas / float(annotated)) - s.replicas


def proportional_scale(desired: int, surge: int, sets: Sequence[SetState], new: Optional[SetState],
                       status_replicas: int) -> Dict[str, int]:
    """MCM's `scale` for several active sets (RollingUpdate): a scale-out goes to the new set only (MCM PR #765:
    never grow an old template); a scale-in shrinks every active set by its share, larger (then older) sets
    first, and the rounding leftover comes off the largest."""
    active = [s for s in sets if s.replicas > 0]
    allowed = desired + surge if desired > 0 else 0
    to_add = allowed - sum(s.replicas for s in active)
    if to_add >= 0:
        return {new.name: new.replicas + to_add} if new is not None and to_add else {}
    ordered = sorted(active, key=lambda s: (-s.replicas, s.created, s.name))
    sizes: Dict[str, int] = {}
    added = 0
    for s in ordered:
        proportion = 0
        if to_add != added:
            share = _fraction(s, desired, surge, status_replicas)
            proportion = max(share, to_add - added)
        sizes[s.name] = s.replicas + proportion
        added += proportion
    first = ordered[0].name
    sizes[first] = max(0, sizes[first] + to_add - added)
    return sizes


def recreate_plan(desired: int, old: Sequence[SetState], new: Optional[SetState], old_machines_left: int) -> Dict[str, int]:
    """Recreate: old sets to 0; the new set to `desired` only once no old machine exists."""
    result = {s.name: 0 for s in old if s.replicas > 0}
    if result or old_machines_left:
        return result
    if new is not None and new.replicas != desired:
        result[new.name] = desired
    return result


def saturated(new: Optional[SetState], desired: int) -> bool:
    return new is not None and new.replicas == desired and new.available == desired


def complete(desired: int, updated: int, total: int, available: int) -> bool:
    """DeploymentComplete: every machine updated and available, no old one left."""
    return updated == desired and total == desired and available == desired


def revision_of(annotations: Dict[str, str], key: str) -> int:
    try:
        return int(annotations.get(key) or 0)
    except (TypeError, ValueError):
        return 0


def last_revision(revisions: List[int]) -> int:
    """The revision before the newest (what `rollbackTo.revision: 0` means)."""
    ordered = sorted(set(revisions), reverse=True)
    return ordered[1] if len(ordered) > 1 else 0
