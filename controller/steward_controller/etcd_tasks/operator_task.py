# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""EtcdOperatorTask (DEP-05): the decisions are druid/tasks.py's; this file reads the world, runs the task's
work through the engine and writes DEP-05's status, Events and metrics.

A timer per task object: Pending → (its turn in FIFO order per Etcd, preconditions judged once) → InProgress →
Succeeded | Failed, or Rejected; a finished task is deleted `ttlSecondsAfterFinished` after it finished. A task
found InProgress after a controller restart is marked Failed, never run a second time unseen.

The work per type:
  OnDemandSnaphotTask             GET /snapshot/full or /snapshot/delta on the members' steward-etcd-member
                                  (the backup port of each pod); the backup leader answers a delta
  OnDemandMaintenanceTask         etcd compaction at the current revision, and/or defragmentation member by
                                  member with the leader last (etcd/cluster/defrag.rolling_defrag)
  OnDemandSnapshotCompactionTask  the store's newest full snapshot and its deltas rebuilt into one full snapshot
                                  (etcd/backup/compaction.compact_chain)
  CopyBackupsTask                 etcd/backup/copy.py, as EtcdCopyBackupsTask
  QuorumLossRecoveryTask          asks the `etcd` loop to recover now (the reconcile annotation and
                                  cluster.steward.io/recover-quorum-loss: no not-ready grace) and waits, up to
                                  --operator-task-timeout, for Ready=True: the recovery itself is the loop's
                                  (least destructive source, fresh verified backup), never a second copy here
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from typing import Any, Dict, Iterator, List, Mapping, Optional

import kopf
from prometheus_client import Counter, Histogram

from ansible_collections.steward.cluster.plugins.module_utils.common.times import format_rfc3339, parse_rfc3339
from ansible_collections.steward.cluster.plugins.module_utils.druid import tasks as t
from ansible_collections.steward.cluster.plugins.module_utils.druid.recovery import REQUEST as RECOVERY_REQUEST
from ansible_collections.steward.cluster.plugins.module_utils.etcd.backup.compaction import compact_chain
from ansible_collections.steward.cluster.plugins.module_utils.etcd.backup.copy import copy_backups, plan_copy
from ansible_collections.steward.cluster.plugins.module_utils.druid.client_tls import (
    ClientTLSError, member_client_urls, member_connection)
from ansible_collections.steward.cluster.plugins.module_utils.druid.errors import EtcdSpecError
from ansible_collections.steward.cluster.plugins.module_utils.druid.spec import EtcdSpec, parse_etcd
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.client import EtcdConnection, Gateway
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.defrag import rolling_defrag
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import EtcdError
from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot.delta import plan_chain
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.druid_store import parse_store
from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.kube.client import api_path
from ansible_collections.steward.cluster.plugins.module_utils.kube.errors import KubeError, NotFound
from ansible_collections.steward.cluster.plugins.module_utils.kube.selectors import label_selector_string

from steward_controller.core.member_api import SnapshotRequestFailed, request_snapshot
from steward_controller.core.runtime import Runtime
from steward_controller.core.druid_store import local_root, open_druid_store
from steward_controller.etcd_tasks.copy_task import TaskSpec

GROUP, VERSION, PLURAL = 'druid.gardener.cloud', 'v1alpha1', 'etcdoperatortasks'
API = GROUP + '/' + VERSION
INTERVAL = 2.0
RECOVERY_TIMEOUT = 600.0
SNAPSHOT_TIMEOUT = 900.0
log = logging.getLogger('steward.etcdtasks')


class TaskMetrics:
    """DEP-05's two families, labels type, state (failed, succeeded, rejected), etcd, etcd_namespace."""

    def __init__(self, registry: Any):
        labels = ('type', 'state', 'etcd', 'etcd_namespace')
        self.duration = Histogram('etcddruid_operator_task_duration_seconds', 'Runtime of each etcd operator task.',
                                  labels, registry=registry)
        self.total = Counter('etcddruid_operator_tasks', 'etcd operator tasks, by end state.', labels, registry=registry)

    def finished(self, task: t.OperatorTask, state: str, seconds: float) -> None:
        values = (task.type, state.lower(), task.etcd[1], task.etcd[0])
        self.total.labels(*values).inc()
        self.duration.labels(*values).observe(seconds)


class TaskFailed(Exception):
    """The work failed: `code` (lastErrors' code) and the message."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


def _etcd(runtime: Runtime, task: t.OperatorTask) -> Optional[Dict[str, Any]]:
    return runtime.client.get_or_none(api_path(API, 'etcds', task.etcd[0], task.etcd[1]))


def _members(runtime: Runtime, etcd: Mapping[str, Any]) -> List[Dict[str, Any]]:
    """The Etcd's pods with an address, by ordinal."""
    selector = (etcd.get('spec') or {}).get('selector') or {}
    meta = etcd.get('metadata') or {}
    pods = runtime.client.list(api_path('v1', 'pods', meta.get('namespace')),
                               label_selector=label_selector_string(selector) if selector else None)
    name = meta.get('name')
    own = [p for p in pods if (p.get('metadata') or {}).get('name', '').startswith(name + '-')
           and (p.get('status') or {}).get('podIP')]
    return sorted(own, key=lambda p: p['metadata']['name'])


def _backup_port(etcd: Mapping[str, Any]) -> int:
    return int(((etcd.get('spec') or {}).get('backup') or {}).get('port') or 8080)


def _snapshot(runtime: Runtime, task: t.OperatorTask, etcd: Mapping[str, Any]) -> str:
    kind = task.config['type']
    backup_port = _backup_port(etcd)
    targets = [(pod['metadata']['name'], 'http://%s:%d/snapshot/%s' % (pod['status']['podIP'], backup_port, kind))
               for pod in _members(runtime, etcd)]
    try:
        pod, body = request_snapshot(targets, SNAPSHOT_TIMEOUT)
    except SnapshotRequestFailed as exc:
        raise TaskFailed('ERR_SNAPSHOT', 'no member took the %s snapshot (%s)' % (kind, exc)) from exc
    return '%s snapshot %s through %s' % (kind, body.get('name') or 'requested', pod)


@contextlib.contextmanager
def _connection(runtime: Runtime, etcd: Mapping[str, Any], spec: Optional[EtcdSpec] = None) -> Iterator[EtcdConnection]:
    """The members' client URLs; with `spec.etcd.clientUrlTls`, https with the Etcd's CA and client certificate
    Secrets (druid/client_tls.py: the one home of that mapping; a missing one fails the task, ERR_TLS). `spec`: the
    Etcd already parsed by the caller (else parsed here)."""
    spec = spec or _spec(etcd)
    endpoints = member_client_urls(spec, (p['status']['podIP'] for p in _members(runtime, etcd)))
    if not endpoints:
        raise TaskFailed('ERR_NO_MEMBER', 'no member pod has an address')
    try:
        connection = member_connection(spec, endpoints, _secret_reader(runtime))
    except ClientTLSError as exc:
        raise TaskFailed('ERR_TLS', str(exc)) from exc
    with connection as conn:
        yield conn


def _spec(etcd: Mapping[str, Any]) -> EtcdSpec:
    try:
        return parse_etcd(etcd)
    except EtcdSpecError as exc:
        raise TaskFailed('ERR_INVALID_ETCD', 'Etcd %s/%s: %s' % (
            (etcd.get('metadata') or {}).get('namespace'), (etcd.get('metadata') or {}).get('name'), exc)) from exc


def _secret_reader(runtime: Runtime):
    return lambda namespace, name: runtime.client.get_or_none(api_path('v1', 'secrets', namespace, name))


def _maintenance(runtime: Runtime, task: t.OperatorTask, etcd: Mapping[str, Any]) -> str:
    spec = _spec(etcd)
    with _connection(runtime, etcd, spec) as conn:   # the Etcd's etcdDefragTimeout (default 8m), per member
        return _maintain(task, conn, spec.etcd.defrag_timeout)


def _maintain(task: t.OperatorTask, conn: EtcdConnection, defrag_timeout: float = 300.0) -> str:
    ops = task.config['maintenanceType']
    done = []
    if ops['etcdCompaction']:
        with Gateway(conn) as gateway:
            endpoint, status = gateway.first('/v3/maintenance/status')
            revision = int(status['header']['revision'])
            gateway.call(endpoint, '/v3/kv/compaction', {'revision': revision, 'physical': True}, timeout=300)
        done.append('compacted at revision %d' % revision)
    if ops['etcdDefragmentation']:
        result = rolling_defrag(conn, defrag_timeout=defrag_timeout)
        if result.get('postponed'):
            raise TaskFailed('ERR_DEFRAG', result['reason'])
        done.append('defragmented %d member(s), the leader last' % len(result.get('members') or []))
    return '; '.join(done)


def _compaction(runtime: Runtime, task: t.OperatorTask, etcd: Mapping[str, Any], work_dir: str) -> str:
    store_spec = ((etcd.get('spec') or {}).get('backup') or {}).get('store')
    if not store_spec:
        raise TaskFailed('ERR_NO_STORE', 'the Etcd has no backup store (spec.backup.store)')
    store = open_druid_store(runtime, task.etcd[0], parse_store(store_spec, 'spec.backup.store', local_root(runtime)),
                             'spec.backup.store')
    chain = plan_chain(store.list())
    snap = compact_chain(store, chain, work_dir=work_dir, now=runtime.clock())
    return 'compacted full snapshot %s' % snap.name


def _copy(runtime: Runtime, task: t.OperatorTask, work_dir: str) -> str:
    spec = TaskSpec(dict(task.config), field='spec.config', local_root=local_root(runtime))
    source = open_druid_store(runtime, task.namespace, spec.source, 'spec.config.sourceStore')
    target = open_druid_store(runtime, task.namespace, spec.target, 'spec.config.targetStore')
    plan = plan_copy(source.list(), target.list(), now=runtime.clock(), max_backup_age=spec.max_backup_age,
                     max_backups=spec.max_backups)
    result = copy_backups(source, target, plan, work_dir=work_dir)
    return 'copied %d snapshot(s) of %d backup(s); %d already there' % (
        len(result['copied']), result['backups'], len(result['present']))


def _recover(runtime: Runtime, task: t.OperatorTask, deadline: float) -> str:
    path = api_path(API, 'etcds', task.etcd[0], task.etcd[1])
    # the request lets the loop start at once instead of after the not-ready grace (an operator's evidence)
    runtime.client.merge_patch(path, {'metadata': {'annotations': {'gardener.cloud/operation': 'reconcile',
                                                                   RECOVERY_REQUEST: task.name}}})
    while runtime.clock() < deadline:
        etcd = runtime.client.get_or_none(path)
        if etcd is not None and t.quorate(etcd) is True:
            return 'the etcd loop recovered the cluster: Ready=True'
        time.sleep(INTERVAL)
    raise TaskFailed('ERR_RECOVERY_TIMEOUT', 'the cluster did not become Ready within %.0fs' % RECOVERY_TIMEOUT)


def _work(runtime: Runtime, task: t.OperatorTask, etcd: Optional[Mapping[str, Any]], work_dir: str) -> str:
    os.makedirs(work_dir, mode=0o700, exist_ok=True)
    try:
        if task.type == t.SNAPSHOT:
            return _snapshot(runtime, task, etcd)
        if task.type == t.MAINTENANCE:
            return _maintenance(runtime, task, etcd)
        if task.type == t.COMPACTION:
            return _compaction(runtime, task, etcd, work_dir)
        if task.type == t.COPY:
            return _copy(runtime, task, work_dir)
        return _recover(runtime, task, runtime.clock() + RECOVERY_TIMEOUT)
    except TaskFailed:
        raise
    except (EtcdError, KubeError, InvalidInput, OSError) as exc:
        raise TaskFailed('ERR_' + task.type.upper(), str(exc)) from exc


class OperatorTasks:
    """One tick of one task object."""

    def __init__(self, runtime: Runtime, metrics: TaskMetrics):
        self.runtime, self.metrics = runtime, metrics
        # Tasks this process finished, by uid: a timer can still be handed a body from before the final write (its
        # watch event not yet seen), which must neither run the task again nor read as "interrupted by a restart".
        self.finished_here: Dict[str, str] = {}

    def _now(self) -> str:
        return format_rfc3339(self.runtime.clock())

    def _write(self, body: Mapping[str, Any], status: Dict[str, Any]) -> None:
        meta = body.get('metadata') or {}
        try:
            self.runtime.client.merge_patch(api_path(API, PLURAL, meta.get('namespace'), meta.get('name'), 'status'),
                                            {'status': status})
        except NotFound:
            pass

    def tick(self, body: Mapping[str, Any]) -> None:
        meta = body.get('metadata') or {}
        previous = body.get('status') or {}
        generation = meta.get('generation')
        try:
            task = t.parse_task(body)
        except t.TaskError as exc:
            if previous.get('state') not in t.FINISHED:
                self._write(body, t.status(t.REJECTED, now_text=self._now(), previous=previous, generation=generation,
                                           operation='validate', operation_state='Failed', reason=str(exc),
                                           error=('ERR_INVALID_TASK', str(exc))))
                self.runtime.report(body, 'TaskRejected', str(exc), warning=True, kind='EtcdOperatorTask',
                                    outcome='rejected')
            return
        if task.state in t.FINISHED:
            return self._collect(body, task, previous)
        if meta.get('uid') in self.finished_here:
            return  # a stale body: this process finished it; the final write's watch event follows
        if task.state == t.IN_PROGRESS:
            message = 'the controller restarted while the task ran; it is not run again unseen: create a new task'
            self._write(body, t.status(t.FAILED, now_text=self._now(), previous=previous, generation=generation,
                                       operation=task.type, operation_state='Failed', reason=message,
                                       error=('ERR_INTERRUPTED', message)))
            self.runtime.report(body, 'TaskFailed', message, warning=True, kind='EtcdOperatorTask', outcome='failed')
            return self.metrics.finished(task, t.FAILED, 0.0)
        others = [t.parse_task(o) for o in self._siblings(task)]
        if not any(x.name == task.name and x.namespace == task.namespace for x in t.next_to_run(others + [task])):
            return  # not its turn yet (FIFO per Etcd)
        etcd = _etcd(self.runtime, task)
        running = [o for o in others if o.state == t.IN_PROGRESS]
        why = t.rejection(task, etcd, running)
        if why:
            self._write(body, t.status(t.REJECTED, now_text=self._now(), previous=previous, generation=generation,
                                       operation=task.type, operation_state='Failed', reason=why,
                                       error=('ERR_PRECONDITION', why)))
            self.finished_here[meta.get('uid')] = t.REJECTED
            self.runtime.report(body, 'TaskRejected', why, warning=True, kind='EtcdOperatorTask', outcome='rejected')
            return self.metrics.finished(task, t.REJECTED, 0.0)
        started = self.runtime.clock()
        running_status = t.status(t.IN_PROGRESS, now_text=self._now(), previous=previous, generation=generation,
                                  operation=task.type, operation_state='InProgress', reason='started')
        self._write(body, running_status)
        work_dir = os.path.join(self.runtime.settings.work_dir, 'task-%s-%s' % (task.namespace, task.name))
        try:
            message = _work(self.runtime, task, etcd, work_dir)
        except TaskFailed as exc:
            self._write(body, t.status(t.FAILED, now_text=self._now(), previous=running_status, generation=generation,
                                       operation=task.type, operation_state='Failed', reason=str(exc),
                                       error=(exc.code, str(exc))))
            self.finished_here[meta.get('uid')] = t.FAILED
            self.runtime.report(body, 'TaskFailed', str(exc), warning=True, kind='EtcdOperatorTask', outcome='failed')
            return self.metrics.finished(task, t.FAILED, self.runtime.clock() - started)
        self.finished_here[meta.get('uid')] = t.SUCCEEDED
        self._write(body, t.status(t.SUCCEEDED, now_text=self._now(), previous=running_status, generation=generation,
                                   operation=task.type, operation_state='Completed', reason=message))
        self.runtime.report(body, 'TaskSucceeded', message, kind='EtcdOperatorTask')
        self.metrics.finished(task, t.SUCCEEDED, self.runtime.clock() - started)

    def _siblings(self, task: t.OperatorTask) -> List[Dict[str, Any]]:
        found = []
        for obj in self.runtime.client.list(api_path(API, PLURAL, task.namespace)):
            if (obj.get('metadata') or {}).get('name') == task.name:
                continue
            try:
                t.parse_task(obj)
            except t.TaskError:
                continue
            found.append(obj)
        return found

    def _collect(self, body: Mapping[str, Any], task: t.OperatorTask, previous: Mapping[str, Any]) -> None:
        stamp = (previous.get('lastOperation') or {}).get('lastTransitionTime')
        finished_at = parse_rfc3339(stamp, 'status.lastOperation.lastTransitionTime').timestamp() if stamp else None
        if t.expired(task, finished_at, self.runtime.clock()):
            meta = body.get('metadata') or {}
            try:
                self.runtime.client.delete(api_path(API, PLURAL, meta.get('namespace'), meta.get('name')))
                self.finished_here.pop(meta.get('uid'), None)
            except NotFound:
                self.finished_here.pop(meta.get('uid'), None)
            except KubeError as exc:
                log.warning('cannot delete finished task %s/%s: %s', task.namespace, task.name, exc)


def register(registry: Any, runtime: Runtime) -> None:
    tasks = OperatorTasks(runtime, TaskMetrics(runtime.metrics.registry))

    # backoff: a tick that failed (the API server slow or away) is tried again at the next interval, not after
    # kopf's default of a minute, which would hold a finished task past its ttlSecondsAfterFinished.
    @kopf.timer(GROUP, VERSION, PLURAL, registry=registry, id='operator-task', interval=INTERVAL, backoff=INTERVAL)
    def operator_task(body: Any, **_: Any) -> None:
        tasks.tick(body)
