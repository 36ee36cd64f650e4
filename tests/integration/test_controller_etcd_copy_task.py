# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""etcd-druid's EtcdCopyBackupsTask through the real controller (loop etcd-tasks) against the API emulator:
backups of a local store copied to S3 (moto over HTTP) with a druid backup Secret applied as a druid user has it
(etcd-backup-restore's keys, no label of ours); maxBackups honoured; druid's status (Succeeded / Failed,
observedGeneration, lastError) and an Event; a bad spec fails naming the field; a restart copies nothing again."""

from __future__ import annotations

import base64
import hashlib
import os
import time

import boto3
import pytest

from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.naming import SnapshotName
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.stores import open_store
from ansible_collections.steward.cluster.plugins.module_utils.kube.client import api_path
from ansible_collections.steward.cluster.plugins.module_utils.kube.errors import Invalid

from lab.env.controller import ControllerProcess

TASKS = 'druid.gardener.cloud/v1alpha1'
NS = 'default'
NOW = int(time.time())


def _crd_if_missing(kube) -> None:
    """The druid CRD from controller/deploy/crds once it is there; until then a minimal one (the lab installs
    every CRD of that directory)."""
    crds = api_path('apiextensions.k8s.io/v1', 'customresourcedefinitions')
    if kube.get_or_none(crds + '/etcdcopybackupstasks.druid.gardener.cloud') is not None:
        return
    kube.create(crds, {
        'apiVersion': 'apiextensions.k8s.io/v1', 'kind': 'CustomResourceDefinition',
        'metadata': {'name': 'etcdcopybackupstasks.druid.gardener.cloud'},
        'spec': {'group': 'druid.gardener.cloud', 'scope': 'Namespaced',
                 'names': {'plural': 'etcdcopybackupstasks', 'singular': 'etcdcopybackupstask',
                           'kind': 'EtcdCopyBackupsTask', 'listKind': 'EtcdCopyBackupsTaskList'},
                 'versions': [{'name': 'v1alpha1', 'served': True, 'storage': True, 'subresources': {'status': {}},
                               'schema': {'openAPIV3Schema': {'type': 'object',
                                                              'x-kubernetes-preserve-unknown-fields': True}}}]}})


def _fill(store, tmp_path) -> None:
    for i, age in enumerate((5 * 86400, 3600)):
        for kind, start, end, offset in (('Full', 0, 1000 * (i + 1), 0), ('Incr', 1000 * (i + 1) + 1, 1000 * (i + 1) + 9, 60)):
            name = SnapshotName(kind, start, end, NOW - age + offset)
            data = os.urandom(4096)
            src = tmp_path / str(name)
            src.write_bytes(data)
            snap = store.publish_data(name, str(src))
            store.publish_metadata(snap, {'format': 1, 'name': str(name), 'size': len(data),
                                          'sha256': hashlib.sha256(data).hexdigest()})


def _task(kube, name: str, spec) -> None:
    kube.create(api_path(TASKS, 'etcdcopybackupstasks', NS), {
        'apiVersion': TASKS, 'kind': 'EtcdCopyBackupsTask', 'metadata': {'name': name, 'namespace': NS}, 'spec': spec})


def _wait_status(kube, name: str, deadline: float = 60):
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        task = kube.get(api_path(TASKS, 'etcdcopybackupstasks', NS, name))
        conditions = {c['type']: c for c in (task.get('status') or {}).get('conditions') or []}
        if any(c.get('status') == 'True' for c in conditions.values()):
            return task, conditions
        time.sleep(0.3)
    raise AssertionError('no terminal condition on %s within %ss' % (name, deadline))


@pytest.fixture
def controller(kube, tmp_path):
    _crd_if_missing(kube)
    proc = ControllerProcess(kube.server, str(tmp_path / 'controller'),
                             args=['--controllers', 'etcd-tasks', '--local-store-root', str(tmp_path)]).start()
    yield proc
    assert proc.stop() == 0, proc.log()[-3000:]


def test_a_druid_copy_task_copies_the_newest_backups_to_s3_and_reports_as_druid(kube, controller, s3_bucket, tmp_path):
    endpoint, bucket = s3_bucket
    source = open_store(str(tmp_path / 'source' / 'etcd-main'))
    _fill(source, tmp_path)
    secret = {'accessKeyID': 'testing', 'secretAccessKey': 'testing', 'region': 'us-east-1', 'endpoint': endpoint,
              's3ForcePathStyle': 'true'}
    kube.create(api_path('v1', 'secrets', NS), {
        'apiVersion': 'v1', 'kind': 'Secret', 'metadata': {'name': 'backup-target', 'namespace': NS},
        'data': {k: base64.b64encode(v.encode()).decode() for k, v in secret.items()}})
    spec = {'sourceStore': {'provider': 'local', 'container': 'source', 'prefix': 'etcd-main'},   # under the root
            'targetStore': {'provider': 'aws', 'container': bucket, 'prefix': 'copy/etcd-main',
                            'secretRef': {'name': 'backup-target'}},
            'maxBackups': 1, 'waitForFinalSnapshot': {'enabled': True, 'timeout': '1s'}}
    _task(kube, 'copy-1', spec)
    task, conditions = _wait_status(kube, 'copy-1')
    assert conditions['Succeeded']['status'] == 'True' and conditions['Failed']['status'] == 'False', task['status']
    assert task['status']['observedGeneration'] == task['metadata']['generation'] and not task['status'].get('lastError')
    assert 'copied 2 snapshot(s) of 1 backup(s)' in conditions['Succeeded']['message']
    assert 'copied anyway' in conditions['Succeeded']['message'], 'waitForFinalSnapshot timed out, then copied'
    keys = sorted(o['Key'] for o in boto3.client('s3', endpoint_url=endpoint, region_name='us-east-1')
                  .list_objects_v2(Bucket=bucket, Prefix='copy/etcd-main/v2/').get('Contents', []))
    assert [k.rsplit('/', 1)[-1] for k in keys if not k.endswith('.meta.json')] == [
        str(s.name) for s in source.list()[2:]], 'the newest backup: its full snapshot and its delta'
    events = kube.list(api_path('v1', 'events', NS))
    assert any(e.get('reason') == 'BackupsCopied' and e['involvedObject']['name'] == 'copy-1' for e in events)

    controller.stop()
    controller.start()
    time.sleep(3)
    again = kube.get(api_path(TASKS, 'etcdcopybackupstasks', NS, 'copy-1'))
    assert again['status']['conditions'] == task['status']['conditions'], 'a restart does not run a finished task'


def test_a_bad_copy_task_fails_naming_the_field_and_copies_nothing(kube, controller, tmp_path):
    with pytest.raises(Invalid, match='spec.maxBackups'):     # the shipped CRD refuses what its schema can say
        _task(kube, 'copy-negative', {'sourceStore': {'provider': 'local', 'container': 'src', 'prefix': 'p'},
                                      'targetStore': {'provider': 'aws', 'container': 'bucket', 'prefix': 'p'},
                                      'maxBackups': -1})
    spec = {'sourceStore': {'provider': 'local', 'container': 'src', 'prefix': 'p'},
            'targetStore': {'provider': 'gcp', 'container': 'bucket', 'prefix': 'p'}}   # druid's; no client here
    _task(kube, 'copy-bad', spec)
    task, conditions = _wait_status(kube, 'copy-bad')
    assert conditions['Failed']['status'] == 'True' and conditions['Succeeded']['status'] == 'False'
    assert 'spec.targetStore.provider' in task['status']['lastError'] and 'not supported' in task['status']['lastError']
