# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""etcd-druid's `EtcdOperatorTask` (DEP-05; seed 004 ETCD-47/48/49) as pure decisions: the task read and
checked, its type's config parsed, its preconditions judged against the owning `Etcd`'s status and the other
tasks, FIFO order per `Etcd`, and the end of its life (`ttlSecondsAfterFinished`).

States: Pending → InProgress → Succeeded | Failed, or Pending → Rejected (a precondition or the config said
no). Types, with DEP-05's spellings (`OnDemandSnaphotTask` as the proposal writes it; the correct spelling is
accepted too):
  QuorumLossRecoveryTask          no config; a multi-member cluster that lost quorum; one at a time per Etcd
  OnDemandSnaphotTask             `type: full|delta`; quorum; no other of the same snapshot type running
  OnDemandSnapshotCompactionTask  no config; one at a time per Etcd; needs no healthy member
  OnDemandMaintenanceTask         `maintenanceType: {etcdCompaction, etcdDefragmentation}`; quorum; no duplicate
  CopyBackupsTask                 an EtcdCopyBackupsTask spec without waitForFinalSnapshot; one at a time
The controller (steward_controller/etcd_tasks) does the work; nothing here touches the world.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple


from ansible_collections.steward.cluster.plugins.module_utils.common import validate
from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput, input_errors_as
from ansible_collections.steward.cluster.plugins.module_utils.common.times import parse_rfc3339
from ansible_collections.steward.cluster.plugins.module_utils.common.yaml_text import load_yaml
from ansible_collections.steward.cluster.plugins.module_utils.druid.errors import DruidError

PENDING, IN_PROGRESS, SUCCEEDED, FAILED, REJECTED = 'Pending', 'InProgress', 'Succeeded', 'Failed', 'Rejected'
FINISHED = (SUCCEEDED, FAILED, REJECTED)
QUORUM_LOSS = 'QuorumLossRecoveryTask'
SNAPSHOT = 'OnDemandSnaphotTask'
COMPACTION = 'OnDemandSnapshotCompactionTask'
MAINTENANCE = 'OnDemandMaintenanceTask'
COPY = 'CopyBackupsTask'
ALIASES = {'OnDemandSnapshotTask': SNAPSHOT}
TYPES = (QUORUM_LOSS, SNAPSHOT, COMPACTION, MAINTENANCE, COPY)
DEFAULT_TTL = 3600          # seconds a finished task is kept when it names no ttlSecondsAfterFinished


class TaskError(DruidError, InvalidInput):
    """A task that cannot run as written: `field`, `rule` and `value` say where and why (it ends Rejected)."""

    __init__ = InvalidInput.__init__


@dataclasses.dataclass(frozen=True)
class OperatorTask:
    """name/namespace/uid of the task; `type` canonical; `config` the parsed config (a dict, {} when none);
    `etcd` (namespace, name) of its owner; `created` unix time (FIFO order); `state` from its status."""
    name: str
    namespace: str
    type: str
    config: Mapping[str, Any]
    etcd: Tuple[str, str]
    ttl: int
    created: float
    state: str


@input_errors_as(TaskError)
def _config(kind: str, text: Any) -> Dict[str, Any]:
    if text in (None, ''):
        if kind in (SNAPSHOT, COPY):
            raise TaskError('spec.config', 'required', 'a %s needs a config' % kind)
        return {}
    if kind in (QUORUM_LOSS, COMPACTION):
        raise TaskError('spec.config', 'empty', 'a %s takes no config (got %r)' % (kind, text), text)
    if not isinstance(text, str):
        raise TaskError('spec.config', 'string', 'the config is a YAML document in a string, got %r' % (text,), text)
    config = validate.mapping(load_yaml(text, 'spec.config'), 'spec.config', required=True)
    if kind == SNAPSHOT:
        if config.get('type') not in ('full', 'delta'):
            raise TaskError('spec.config.type', 'one-of', 'expected full or delta, got %r' % (config.get('type'),),
                            config.get('type'))
    elif kind == MAINTENANCE:
        ops = validate.mapping(config.get('maintenanceType'), 'spec.config.maintenanceType', required=True)
        chosen = {key: validate.optional_boolean(ops, key, False, 'spec.config.maintenanceType')
                  for key in ('etcdCompaction', 'etcdDefragmentation')}
        unknown = sorted(set(ops) - set(chosen))
        if unknown:
            raise TaskError('spec.config.maintenanceType.' + unknown[0], 'known', 'not a maintenance operation '
                            '(etcdCompaction, etcdDefragmentation)', unknown[0])
        if not any(chosen.values()):
            raise TaskError('spec.config.maintenanceType', 'one-of', 'names no operation: set etcdCompaction '
                            'or etcdDefragmentation to true')
        config = {'maintenanceType': chosen}
    elif kind == COPY and 'waitForFinalSnapshot' in config:
        raise TaskError('spec.config.waitForFinalSnapshot', 'absent', 'not part of the copy-backups task config '
                        '(use an EtcdCopyBackupsTask to wait for a final snapshot)')
    return config


@input_errors_as(TaskError)
def parse_task(obj: Mapping[str, Any]) -> OperatorTask:
    """The task as written; TaskError names the first wrong field."""
    meta = validate.mapping(obj.get('metadata'), 'metadata', required=True)
    spec = validate.mapping(obj.get('spec'), 'spec', required=True)
    kind = spec.get('type')
    kind = ALIASES.get(kind, kind)
    if kind not in TYPES:
        raise TaskError('spec.type', 'one-of', 'expected one of %s, got %r' % (', '.join(TYPES), spec.get('type')),
                        spec.get('type'))
    owner = validate.mapping(spec.get('ownerEtcdRefrence') or spec.get('ownerEtcdReference'),
                             'spec.ownerEtcdRefrence', required=True)
    etcd_name = validate.text(owner.get('name'), 'spec.ownerEtcdRefrence.name')
    etcd_ns = owner.get('namespace') or meta.get('namespace')
    ttl = spec.get('ttlSecondsAfterFinished')
    if ttl is not None and (isinstance(ttl, bool) or not isinstance(ttl, int) or not 0 <= ttl <= 0x7FFFFFFF):
        raise TaskError('spec.ttlSecondsAfterFinished', 'int32', 'expected seconds from 0, got %r' % (ttl,), ttl)
    stamp = meta.get('creationTimestamp')
    created = parse_rfc3339(stamp, 'metadata.creationTimestamp').timestamp() if stamp else 0.0
    return OperatorTask(name=str(meta.get('name')), namespace=str(meta.get('namespace')), type=kind,
                        config=_config(kind, spec.get('config')), etcd=(str(etcd_ns), etcd_name),
                        ttl=DEFAULT_TTL if ttl is None else ttl, created=created,
                        state=str((obj.get('status') or {}).get('state') or PENDING))


def quorate(etcd: Optional[Mapping[str, Any]]) -> Optional[bool]:
    """The owner's Ready condition: True/False as druid writes it (reason Quorate / QuorumLost); None: unknown."""
    for condition in ((etcd or {}).get('status') or {}).get('conditions') or []:
        if condition.get('type') == 'Ready':
            if condition.get('status') == 'True':
                return True
            if condition.get('status') == 'False':
                return False
    return None


def _same_kind(task: OperatorTask, other: OperatorTask) -> bool:
    """What counts as a duplicate for DEP-05's "no such task already running"."""
    if other.type != task.type or other.etcd != task.etcd:
        return False
    if task.type == SNAPSHOT:
        return other.config.get('type') == task.config.get('type')
    if task.type == MAINTENANCE:
        return other.config.get('maintenanceType') == task.config.get('maintenanceType')
    return True


def rejection(task: OperatorTask, etcd: Optional[Mapping[str, Any]], running: Sequence[OperatorTask]) -> str:
    """Why the task may not run now ('' when it may): DEP-05's preconditions, judged once, when it leaves Pending."""
    if etcd is None and task.type != COPY:
        return 'the owner Etcd %s/%s does not exist' % task.etcd
    if any(_same_kind(task, other) for other in running if other.name != task.name or other.namespace != task.namespace):
        return 'a %s of the same kind is already running for Etcd %s/%s' % (task.type, task.etcd[0], task.etcd[1])
    is_quorate = quorate(etcd)
    if task.type == QUORUM_LOSS:
        replicas = ((etcd or {}).get('spec') or {}).get('replicas') or 0
        if replicas <= 1:
            return 'a single-member cluster recovers itself from its backups: no quorum-loss recovery task is needed'
        if is_quorate is not False:
            return 'the cluster has not lost quorum (its Ready condition is %s)' % (
                'True' if is_quorate else 'unknown')
    if task.type in (SNAPSHOT, MAINTENANCE) and is_quorate is not True:
        return 'the cluster has no quorum (its Ready condition is %s)' % ('False' if is_quorate is False else 'unknown')
    return ''


def next_to_run(tasks: Sequence[OperatorTask]) -> List[OperatorTask]:
    """FIFO per Etcd: for each owner, the oldest Pending task, and only when none of its tasks is InProgress."""
    busy = {t.etcd for t in tasks if t.state == IN_PROGRESS}
    first: Dict[Tuple[str, str], OperatorTask] = {}
    for task in sorted(tasks, key=lambda t: (t.created, t.namespace, t.name)):
        if task.state == PENDING and task.etcd not in busy and task.etcd not in first:
            first[task.etcd] = task
    return list(first.values())


def expired(task: OperatorTask, finished_at: Optional[float], now: float) -> bool:
    """A finished task is deleted `ttl` seconds after it finished."""
    return task.state in FINISHED and finished_at is not None and now >= finished_at + task.ttl


def status(state: str, *, now_text: str, previous: Optional[Mapping[str, Any]] = None, operation: str = '',
           operation_state: str = '', reason: str = '', error: Optional[Tuple[str, str]] = None,
           generation: Optional[int] = None) -> Dict[str, Any]:
    """The status DEP-05 writes: state, initiatedAt (when it left Pending), lastOperation, lastErrors."""
    previous = previous or {}
    out: Dict[str, Any] = {'state': state, 'observedGeneration': generation}
    out['initiatedAt'] = previous.get('initiatedAt') or (now_text if state != PENDING else None)
    if operation:
        out['lastOperation'] = {'name': operation, 'state': operation_state, 'lastTransitionTime': now_text,
                                'reason': reason}
    errors = list(previous.get('lastErrors') or [])
    if error is not None:
        errors = (errors + [{'code': error[0], 'description': error[1], 'observedAt': now_text}])[-10:]
    if errors:
        out['lastErrors'] = errors
    return out
