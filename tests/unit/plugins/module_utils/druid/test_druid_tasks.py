# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""EtcdOperatorTask (DEP-05): types and configs, preconditions, FIFO per Etcd, TTL."""

from __future__ import annotations

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.druid import tasks as t


def task(name='t1', kind=t.SNAPSHOT, config='type: full', created='2026-11-27T10:00:00Z', state=None, etcd='etcd-main',
         **spec):
    obj = {'metadata': {'name': name, 'namespace': 'shoot', 'creationTimestamp': created},
           'spec': dict({'type': kind, 'config': config, 'ownerEtcdRefrence': {'name': etcd, 'namespace': 'shoot'}},
                        **spec)}
    if state:
        obj['status'] = {'state': state}
    return obj


def etcd(ready='True', replicas=3):
    return {'spec': {'replicas': replicas}, 'status': {'conditions': [{'type': 'Ready', 'status': ready}]}}


def test_types_configs_and_the_proposals_spelling():
    snap = t.parse_task(task())
    expected = (t.SNAPSHOT, {'type': 'full'}, ('shoot', 'etcd-main'), t.DEFAULT_TTL, t.PENDING)
    assert (snap.type, snap.config, snap.etcd, snap.ttl, snap.state) == expected
    assert t.parse_task(task(kind='OnDemandSnapshotTask')).type == t.SNAPSHOT
    maint = t.parse_task(task(kind=t.MAINTENANCE, config='maintenanceType: {etcdDefragmentation: true}'))
    assert maint.config == {'maintenanceType': {'etcdCompaction': False, 'etcdDefragmentation': True}}
    assert t.parse_task(task(kind=t.QUORUM_LOSS, config=None, ttlSecondsAfterFinished=60)).ttl == 60


@pytest.mark.parametrize('kind,config,field', [
    ('Reboot', None, 'spec.type'),
    (t.SNAPSHOT, None, 'spec.config'),
    (t.SNAPSHOT, 'type: incremental', 'spec.config.type'),
    (t.SNAPSHOT, 'type: [full', 'spec.config'),
    (t.QUORUM_LOSS, 'x: 1', 'spec.config'),
    (t.MAINTENANCE, 'maintenanceType: {}', 'spec.config.maintenanceType'),
    (t.MAINTENANCE, 'maintenanceType: {etcdDefrag: true}', 'spec.config.maintenanceType.etcdDefrag'),
    (t.COPY, 'waitForFinalSnapshot: {enabled: true}', 'spec.config.waitForFinalSnapshot'),
])
def test_bad_tasks_are_refused_naming_the_field(kind, config, field):
    with pytest.raises(t.TaskError) as refused:
        t.parse_task(task(kind=kind, config=config))
    assert refused.value.field == field


def test_a_config_that_is_not_yaml_is_a_task_error_naming_the_line():
    with pytest.raises(t.TaskError) as refused:
        t.parse_task(task(kind=t.SNAPSHOT, config='type: full\nx: [1'))
    assert (refused.value.field, refused.value.rule) == ('spec.config', 'yaml')
    assert 'is not valid YAML at line' in str(refused.value)


def test_a_bad_ttl_and_a_missing_owner_are_named():
    with pytest.raises(t.TaskError, match='ttlSecondsAfterFinished'):
        t.parse_task(task(ttlSecondsAfterFinished=-1))
    bad = task()
    del bad['spec']['ownerEtcdRefrence']
    with pytest.raises(t.TaskError, match='ownerEtcdRefrence'):
        t.parse_task(bad)


def test_preconditions_as_dep05_writes_them():
    snap = t.parse_task(task())
    assert t.rejection(snap, etcd('True'), []) == ''
    assert 'no quorum' in t.rejection(snap, etcd('False'), [])
    assert 'does not exist' in t.rejection(snap, None, [])
    running = t.parse_task(task(name='t0', state=t.IN_PROGRESS))
    assert 'already running' in t.rejection(snap, etcd(), [running])
    delta = t.parse_task(task(name='t2', config='type: delta'))
    assert t.rejection(delta, etcd(), [running]) == '', 'a delta snapshot is not a duplicate of a full one'
    loss = t.parse_task(task(kind=t.QUORUM_LOSS, config=None))
    assert 'not lost quorum' in t.rejection(loss, etcd('True'), [])
    assert 'single-member' in t.rejection(loss, etcd('False', replicas=1), [])
    assert t.rejection(loss, etcd('False'), []) == ''
    compaction = t.parse_task(task(kind=t.COMPACTION, config=None))
    assert t.rejection(compaction, etcd('False'), []) == '', 'compaction works on the bucket, not the members'


def test_fifo_per_etcd_and_one_at_a_time():
    tasks = [t.parse_task(task(name='b', created='2026-11-27T10:00:02Z')),
             t.parse_task(task(name='a', created='2026-11-27T10:00:01Z')),
             t.parse_task(task(name='c', created='2026-11-27T10:00:00Z', etcd='etcd-events')),
             t.parse_task(task(name='d', created='2026-11-27T09:00:00Z', etcd='etcd-other', state=t.IN_PROGRESS)),
             t.parse_task(task(name='e', created='2026-11-27T09:30:00Z', etcd='etcd-other'))]
    assert sorted(x.name for x in t.next_to_run(tasks)) == ['a', 'c']


def test_ttl_and_status():
    done = t.parse_task(task(state=t.SUCCEEDED, ttlSecondsAfterFinished=10))
    assert not t.expired(done, 100.0, 105.0) and t.expired(done, 100.0, 110.0)
    assert not t.expired(t.parse_task(task()), 100.0, 1e9), 'a pending task never expires'
    first = t.status(t.IN_PROGRESS, now_text='T1', operation='snapshot', operation_state='InProgress', generation=1)
    assert first['initiatedAt'] == 'T1' and first['lastOperation']['name'] == 'snapshot'
    failed = t.status(t.FAILED, now_text='T2', previous=first, error=('ERR_SNAPSHOT', 'no leader'), generation=1)
    assert failed['initiatedAt'] == 'T1' and failed['lastErrors'] == [{'code': 'ERR_SNAPSHOT', 'description': 'no leader',
                                                                      'observedAt': 'T2'}]
    assert t.status(t.PENDING, now_text='T0')['initiatedAt'] is None
