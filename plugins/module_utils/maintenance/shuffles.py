# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The seed's shuffle metrics: which workload pods a node sent into maintenance likely moved (pure rules; the
controller's maintenance loop reads the pods and owners and exports the records).

When a profile takes a node into `in-maintenance`, every pod on the node owned by a DaemonSet, a
ReplicaSet (named after its Deployment, or after itself when it has no Deployment) or a StatefulSet
counts once for its owner (`maintenance_controller_shuffle_count{owner,profile}`) and adds
1/replicas (`maintenance_controller_shuffles_per_replica`), with the owner label spelled as upstream
does: `daemon_set_<name>`, `deployment_<name>`, `replica_set_<name>`, `stateful_set_<name>`.
Replicas are a DaemonSet's ready pods (`status.numberReady`) and `spec.replicas` (default 1) otherwise.
As upstream, all owners are read first and nothing is counted when one read fails. Unlike upstream,
a DaemonSet without ready pods divides by 1, not 0 (an infinite sample would poison the series).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

from ansible_collections.steward.cluster.plugins.module_utils.maintenance.errors import MaintenanceError

# (api_version, plural) of the owners we count
OWNER_KINDS = {'DaemonSet': ('apps/v1', 'daemonsets'), 'ReplicaSet': ('apps/v1', 'replicasets'),
               'StatefulSet': ('apps/v1', 'statefulsets'), 'Deployment': ('apps/v1', 'deployments')}
Lookup = Callable[[str, str, str], Optional[Dict[str, Any]]]    # (kind, namespace, name) -> object or None


class ShuffleError(MaintenanceError):
    """An owner could not be read or is not what it should be; nothing is counted."""


@dataclasses.dataclass(frozen=True)
class ShuffleRecord:
    owner: str
    per_replica: float


def _replicas(obj: Mapping[str, Any]) -> int:
    value = (obj.get('spec') or {}).get('replicas')
    return 1 if value is None else int(value)


def _share(count: int) -> float:
    return 1.0 / count if count > 0 else 1.0


def _owner(lookup: Lookup, kind: str, namespace: str, name: str) -> Dict[str, Any]:
    obj = lookup(kind, namespace, name)
    if obj is None:
        raise ShuffleError('%s %s/%s not found' % (kind, namespace, name))
    return obj


def shuffle_records(pods: Sequence[Mapping[str, Any]], lookup: Lookup) -> List[ShuffleRecord]:
    """One record per (pod, counted owner reference); raises ShuffleError if any owner cannot be resolved."""
    records: List[ShuffleRecord] = []
    for pod in pods:
        meta = pod.get('metadata') or {}
        namespace = meta.get('namespace') or 'default'
        for ref in meta.get('ownerReferences') or []:
            kind, name = ref.get('kind'), ref.get('name') or ''
            if kind == 'DaemonSet':
                daemonset = _owner(lookup, kind, namespace, name)
                ready = int((daemonset.get('status') or {}).get('numberReady') or 0)
                records.append(ShuffleRecord('daemon_set_' + name, _share(ready)))
            elif kind == 'StatefulSet':
                records.append(ShuffleRecord('stateful_set_' + name, _share(_replicas(_owner(lookup, kind, namespace, name)))))
            elif kind == 'ReplicaSet':
                records.append(_replicaset_record(lookup, namespace, name))
    return records


def _replicaset_record(lookup: Lookup, namespace: str, name: str) -> ShuffleRecord:
    replicaset = _owner(lookup, 'ReplicaSet', namespace, name)
    owners = (replicaset.get('metadata') or {}).get('ownerReferences') or []
    if not owners:
        return ShuffleRecord('replica_set_' + name, _share(_replicas(replicaset)))
    for ref in owners:
        if ref.get('kind') == 'Deployment':
            deployment = _owner(lookup, 'Deployment', namespace, ref.get('name') or '')
            return ShuffleRecord('deployment_' + (ref.get('name') or ''), _share(_replicas(deployment)))
    raise ShuffleError('the owner of ReplicaSet %s/%s is not a Deployment' % (namespace, name))
