# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""EtcdCopyBackupsTask: read the spec and the two stores' Secrets, wait for a final snapshot if asked, copy
(etcd/backup/copy.py), and write druid's status: conditions `Succeeded` / `Failed`, `observedGeneration`,
`lastError`, with an Event for the outcome.

A task runs once per generation: a task whose status already holds a terminal condition for its generation is
left alone (a controller restart does not copy again; changing the spec runs it again). The Secrets are the
ones druid users have (etcd-backup-restore's keys), read without the controller's opt-in label: a druid
StoreSpec names no endpoint of its own, the endpoint is the Secret's, so the task cannot send a Secret's
credentials anywhere its owner did not write down (docs/etcd-druid.md)."""

from __future__ import annotations

import logging
import os
from typing import Any, Dict, Mapping, Optional, Tuple

import kopf

from ansible_collections.steward.cluster.plugins.module_utils.common import validate
from ansible_collections.steward.cluster.plugins.module_utils.common.durations import metav1_duration
from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.etcd.backup.copy import (
    CopyError, copy_backups, plan_copy, wait_for_final)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import EtcdError
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.druid_store import DruidStore, parse_store
from ansible_collections.steward.cluster.plugins.module_utils.kube.client import api_path
from ansible_collections.steward.cluster.plugins.module_utils.kube.conditions import FALSE, TRUE, set_condition
from ansible_collections.steward.cluster.plugins.module_utils.kube.errors import KubeError, NotFound

from steward_controller.core.druid_store import local_root, open_druid_store
from steward_controller.core.runtime import Runtime, resource_label

GROUP, VERSION, PLURAL = 'druid.gardener.cloud', 'v1alpha1', 'etcdcopybackupstasks'
SUCCEEDED, FAILED = 'Succeeded', 'Failed'
log = logging.getLogger('steward.etcdtasks')


class TaskSpec:
    """The checked spec (field names as druid's)."""

    def __init__(self, spec: Any, field: str = 'spec', local_root: str = ''):
        """`field`: where the spec sits (`spec`, or `spec.config` for an EtcdOperatorTask's CopyBackupsTask)."""
        spec = validate.mapping(spec, field, required=True)
        self.source: DruidStore = parse_store(spec.get('sourceStore'), field + '.sourceStore', local_root)
        self.target: DruidStore = parse_store(spec.get('targetStore'), field + '.targetStore', local_root)
        if self.source.url == self.target.url:
            raise InvalidInput(field + '.targetStore', 'different', 'is the source store (%s)' % self.source.url)
        self.max_backup_age = _uint32(spec.get('maxBackupAge'), field + '.maxBackupAge')
        self.max_backups = _uint32(spec.get('maxBackups'), field + '.maxBackups')
        wait = validate.mapping(spec.get('waitForFinalSnapshot'), field + '.waitForFinalSnapshot')
        self.wait = validate.optional_boolean(wait, 'enabled', False, field + '.waitForFinalSnapshot')
        timeout = wait.get('timeout')
        self.wait_timeout = metav1_duration(timeout, field + '.waitForFinalSnapshot.timeout') if timeout else 0.0


def _uint32(value: Any, field: str) -> Optional[int]:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 0xFFFFFFFF:
        raise InvalidInput(field, 'uint32', 'expected a whole number from 0 to 4294967295, got %r' % (value,), value)
    return value


def finished(body: Mapping[str, Any]) -> bool:
    """A terminal condition for this generation is already written."""
    status = body.get('status') or {}
    if status.get('observedGeneration') != (body.get('metadata') or {}).get('generation'):
        return False
    return any(c.get('type') in (SUCCEEDED, FAILED) and c.get('status') == TRUE for c in status.get('conditions') or [])


def run_task(runtime: Runtime, body: Mapping[str, Any]) -> Tuple[bool, str]:
    """Run one task to its end; (succeeded, message). Every failure is a status, never an exception to kopf."""
    meta = body.get('metadata') or {}
    namespace = meta.get('namespace')
    work_dir = os.path.join(runtime.settings.work_dir, 'copy-%s-%s' % (namespace, meta.get('name')))
    try:
        spec = TaskSpec(body.get('spec'), local_root=local_root(runtime))
        source = open_druid_store(runtime, namespace, spec.source, 'spec.sourceStore')
        target = open_druid_store(runtime, namespace, spec.target, 'spec.targetStore')
        waited = ''
        if spec.wait:
            outcome = wait_for_final(source, spec.wait_timeout)
            waited = (' after the final snapshot %s' % outcome['final'] if outcome['final'] else
                      ' (no final snapshot within %.0fs: copied anyway)' % spec.wait_timeout)
        plan = plan_copy(source.list(), target.list(), now=runtime.clock(), max_backup_age=spec.max_backup_age,
                         max_backups=spec.max_backups)
        os.makedirs(work_dir, mode=0o700, exist_ok=True)
        result = copy_backups(source, target, plan, work_dir=work_dir)
    except (InvalidInput, EtcdError, CopyError, KubeError, OSError) as exc:
        return False, str(exc)
    message = 'copied %d snapshot(s) of %d backup(s) from %s to %s%s; %d already there' % (
        len(result['copied']), result['backups'], spec.source.url, spec.target.url, waited, len(result['present']))
    if result['invalid']:
        message += '; not copied (invalid in the source): %s' % ', '.join(
            '%s (%s)' % (i['name'], i['reason']) for i in result['invalid'])
    return True, message


def report(runtime: Runtime, body: Mapping[str, Any], ok: bool, message: str) -> None:
    meta = body.get('metadata') or {}
    now = runtime.clock()
    conditions = (body.get('status') or {}).get('conditions') or []
    conditions = set_condition(conditions, SUCCEEDED, TRUE if ok else FALSE,
                               'CopySucceeded' if ok else 'CopyFailed', message, now)
    conditions = set_condition(conditions, FAILED, FALSE if ok else TRUE,
                               'CopySucceeded' if ok else 'CopyFailed', message, now)
    status: Dict[str, Any] = {'conditions': conditions, 'observedGeneration': meta.get('generation'),
                              'lastError': None if ok else message}
    try:
        runtime.client.merge_patch(api_path(GROUP + '/' + VERSION, PLURAL, meta.get('namespace'), meta.get('name'),
                                            'status'), {'status': status})
    except NotFound:
        return
    except KubeError as exc:
        log.warning('cannot update status: %s', exc, extra={'object': resource_label(body)})
    runtime.report(body, 'BackupsCopied' if ok else 'CopyFailed', message, warning=not ok,
                   kind='EtcdCopyBackupsTask', outcome='ok' if ok else 'failed')


def handle(runtime: Runtime, body: Mapping[str, Any]) -> None:
    if finished(body):
        return
    ok, message = run_task(runtime, body)
    report(runtime, body, ok, message)


def register(registry: Any, runtime: Runtime) -> None:
    @kopf.on.create(GROUP, VERSION, PLURAL, registry=registry, id='copy-backups')
    @kopf.on.update(GROUP, VERSION, PLURAL, registry=registry, id='copy-backups-update', field='spec')
    @kopf.on.resume(GROUP, VERSION, PLURAL, registry=registry, id='copy-backups-resume')
    def copy_task(body: Any, **_: Any) -> None:
        handle(runtime, body)
