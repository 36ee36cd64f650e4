# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""EtcdOperatorTask (DEP-05) through the real controller (loop etcd-tasks) against the API emulator, with a real
etcd and steward-etcd-member as the Etcd's pod: an on-demand full and delta snapshot taken by the backup leader,
on-demand maintenance (compaction at the current revision, defragmentation), a snapshot task Rejected while the
Etcd has no quorum, a bad config Rejected naming the field, DEP-05's metrics, and a finished task deleted after
its ttlSecondsAfterFinished."""

from __future__ import annotations

import json
import time

from ansible_collections.steward.cluster.plugins.module_utils.kube.client import api_path

from lab.env.controller import ControllerProcess
from test_etcd_member_program import (  # noqa: E402  (the member program's helpers: one copy)
    Etcd, Program, _etcdctl, _get, _initialize, _wait_serving)
from test_etcd_member_program import member_env  # noqa: F401  # pylint: disable=unused-import

API = 'druid.gardener.cloud/v1alpha1'
NS = 'default'


def _crds(kube) -> None:
    """The druid CRDs from controller/deploy/crds when the emulator has them; else minimal ones."""
    crds = api_path('apiextensions.k8s.io/v1', 'customresourcedefinitions')
    for plural, kind in (('etcds', 'Etcd'), ('etcdoperatortasks', 'EtcdOperatorTask')):
        if kube.get_or_none(crds + '/%s.druid.gardener.cloud' % plural) is not None:
            continue
        kube.create(crds, {
            'apiVersion': 'apiextensions.k8s.io/v1', 'kind': 'CustomResourceDefinition',
            'metadata': {'name': '%s.druid.gardener.cloud' % plural},
            'spec': {'group': 'druid.gardener.cloud', 'scope': 'Namespaced',
                     'names': {'plural': plural, 'singular': kind.lower(), 'kind': kind, 'listKind': kind + 'List'},
                     'versions': [{'name': 'v1alpha1', 'served': True, 'storage': True, 'subresources': {'status': {}},
                                   'schema': {'openAPIV3Schema': {'type': 'object',
                                                                  'x-kubernetes-preserve-unknown-fields': True}}}]}})


def _task(kube, name, kind, config=None, **spec):
    body = dict({'type': kind, 'ownerEtcdRefrence': {'name': 'etcd-main', 'namespace': NS}}, **spec)
    if config is not None:
        body['config'] = config
    kube.create(api_path(API, 'etcdoperatortasks', NS), {
        'apiVersion': API, 'kind': 'EtcdOperatorTask', 'metadata': {'name': name, 'namespace': NS}, 'spec': body})


def _finished(kube, name, deadline=60):
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        task = kube.get_or_none(api_path(API, 'etcdoperatortasks', NS, name))
        if task and (task.get('status') or {}).get('state') in ('Succeeded', 'Failed', 'Rejected'):
            return task
        time.sleep(0.3)
    raise AssertionError('task %s did not finish within %ss' % (name, deadline))


def _ready(kube, status):
    kube.merge_patch(api_path(API, 'etcds', NS, 'etcd-main', 'status'), {'status': {'conditions': [
        {'type': 'Ready', 'status': status, 'reason': 'Quorate' if status == 'True' else 'QuorumLost'}]}})


def test_operator_tasks_on_a_real_member(kube, member_env, tmp_path):
    env = member_env
    _crds(kube)
    program = Program(tmp_path, env['config'], env['store'], env['data'],
                      extra=('--k8s-heartbeat-duration', '1s', '--delta-snapshot-period', '1h',
                             '--work-dir', str(tmp_path / 'work'), '--defragmentation-schedule', ''))
    etcd = None
    controller = ControllerProcess(kube.server, str(tmp_path / 'controller'),
                                   args=['--controllers', 'etcd-tasks', '--local-store-root', str(tmp_path)])
    try:
        assert _initialize(program.base) == 'Successful'
        etcd = Etcd(env['etcd'], _get(program.base + '/config')[1], tmp_path)
        _wait_serving(env)
        client_port = int(env['client'].rsplit(':', 1)[1])
        kube.create(api_path(API, 'etcds', NS), {
            'apiVersion': API, 'kind': 'Etcd', 'metadata': {'name': 'etcd-main', 'namespace': NS},
            'spec': {'replicas': 1, 'selector': {'matchLabels': {'instance': 'etcd-main'}},
                     'labels': {'instance': 'etcd-main'}, 'etcd': {'clientPort': client_port},
                     'backup': {'port': program.port,   # the member's store: <root>/store/etcd-main
                                'store': {'provider': 'local', 'container': 'store', 'prefix': 'etcd-main'}}}})
        _ready(kube, 'True')
        kube.create(api_path('v1', 'pods', NS), {'apiVersion': 'v1', 'kind': 'Pod', 'metadata': {
            'name': 'etcd-main-0', 'namespace': NS, 'labels': {'instance': 'etcd-main'}},
            'spec': {'containers': [{'name': 'etcd', 'image': 'etcd-wrapper:v0.1'}]}})
        kube.merge_patch(api_path('v1', 'pods', NS, 'etcd-main-0', 'status'), {'status': {'podIP': '127.0.0.1'}})
        for i in range(30):
            _etcdctl(env, 'put', 'k%02d' % i, 'x' * 200)
        end = time.monotonic() + 30   # the backup leader's first full snapshot (none existed)
        while time.monotonic() < end and not json.loads(_get(program.base + '/snapshot/latest')[1]).get('fullSnapshot'):
            time.sleep(0.3)
        controller.start()

        _task(kube, 'full', 'OnDemandSnaphotTask', 'type: full', ttlSecondsAfterFinished=2)
        task = _finished(kube, 'full')
        assert task['status']['state'] == 'Succeeded', task['status']
        assert task['status']['initiatedAt'] and task['status']['lastOperation']['state'] == 'Completed'
        assert 'full snapshot Full-' in task['status']['lastOperation']['reason']

        for i in range(10):
            _etcdctl(env, 'put', 'd%02d' % i, 'y')
        _task(kube, 'delta', 'OnDemandSnapshotTask', 'type: delta')
        delta = _finished(kube, 'delta')
        assert delta['status']['state'] == 'Succeeded', delta['status']
        end, deltas = time.monotonic() + 20, []
        while time.monotonic() < end and not deltas:
            deltas = json.loads(_get(program.base + '/snapshot/latest')[1])['deltaSnapshots']
            time.sleep(0.3)
        assert deltas, 'the delta was written although the period is an hour'

        _task(kube, 'maint', 'OnDemandMaintenanceTask',
              'maintenanceType: {etcdCompaction: true, etcdDefragmentation: true}')
        maint = _finished(kube, 'maint', 120)
        assert maint['status']['state'] == 'Succeeded', maint['status']
        assert 'compacted at revision' in maint['status']['lastOperation']['reason']
        assert 'defragmented 1 member' in maint['status']['lastOperation']['reason']

        _task(kube, 'bad', 'OnDemandSnaphotTask', 'type: incremental')
        bad = _finished(kube, 'bad')
        assert bad['status']['state'] == 'Rejected' and 'spec.config.type' in bad['status']['lastErrors'][0]['description']

        _ready(kube, 'False')
        _task(kube, 'noquorum', 'OnDemandSnaphotTask', 'type: full')
        refused = _finished(kube, 'noquorum')
        assert refused['status']['state'] == 'Rejected' and 'no quorum' in refused['status']['lastErrors'][0]['description']
        assert refused['status']['lastErrors'][0]['code'] == 'ERR_PRECONDITION'

        end = time.monotonic() + 20
        while time.monotonic() < end and kube.get_or_none(api_path(API, 'etcdoperatortasks', NS, 'full')) is not None:
            time.sleep(0.5)
        assert kube.get_or_none(api_path(API, 'etcdoperatortasks', NS, 'full')) is None, (
            'deleted after its TTL; the controller log ends:\n' + controller.log()[-4000:])
        assert controller.metric('etcddruid_operator_tasks_total', {'type': 'OnDemandSnaphotTask',
                                                                    'state': 'succeeded', 'etcd': 'etcd-main'}) == 2
        assert controller.metric('etcddruid_operator_tasks_total', {'type': 'OnDemandSnaphotTask',
                                                                    'state': 'rejected'}) == 1
    finally:
        controller.stop()
        if etcd is not None:
            etcd.stop()
        program.stop()


def test_druids_compaction_controller_compacts_past_the_events_threshold(kube, member_env, tmp_path):
    """ETCD-38 with a real backup leader: its snapshot Leases say how many delta events followed the last full
    snapshot; past --etcd-events-threshold the controller rebuilds them into one full snapshot, moves the full
    snapshot Lease to its revision, posts an Event and counts etcddruid_compaction_jobs."""
    env = member_env
    _crds(kube)
    for name in ('etcd-main-full-snap', 'etcd-main-delta-snap'):
        kube.create(api_path('coordination.k8s.io/v1', 'leases', NS), {
            'apiVersion': 'coordination.k8s.io/v1', 'kind': 'Lease', 'metadata': {'name': name, 'namespace': NS},
            'spec': {'leaseDurationSeconds': 60}})
    kubeconfig = tmp_path / 'kubeconfig'
    kube.server.write_kubeconfig(str(kubeconfig))
    program = Program(tmp_path, env['config'], env['store'], env['data'], extra=(
        '--k8s-heartbeat-duration', '1s', '--delta-snapshot-period', '1s', '--enable-snapshot-lease-renewal',
        '--kubeconfig', str(kubeconfig), '--work-dir', str(tmp_path / 'work'), '--defragmentation-schedule', ''))
    etcd = None
    controller = ControllerProcess(kube.server, str(tmp_path / 'controller'), args=[
        '--controllers', 'etcd-tasks', '--enable-backup-compaction', '--etcd-events-threshold', '20',
        '--local-store-root', str(tmp_path)])
    try:
        assert _initialize(program.base) == 'Successful'
        etcd = Etcd(env['etcd'], _get(program.base + '/config')[1], tmp_path)
        _wait_serving(env)
        kube.create(api_path(API, 'etcds', NS), {
            'apiVersion': API, 'kind': 'Etcd', 'metadata': {'name': 'etcd-main', 'namespace': NS},
            'spec': {'replicas': 1, 'labels': {'app': 'etcd-main'}, 'etcd': {},
                     'backup': {'store': {'provider': 'local', 'container': 'store', 'prefix': 'etcd-main'}}}})
        end = time.monotonic() + 30   # the leader's first full snapshot, then deltas
        while time.monotonic() < end and not json.loads(_get(program.base + '/snapshot/latest')[1]).get('fullSnapshot'):
            time.sleep(0.3)
        for i in range(40):
            _etcdctl(env, 'put', 'c%02d' % i, 'z' * 100)
        lease = api_path('coordination.k8s.io/v1', 'leases', NS, 'etcd-main-full-snap')
        first = int(kube.get(lease)['spec'].get('holderIdentity') or 0)   # the leader's first full snapshot
        controller.start()
        # the compaction rebuilds the chain as the store holds it when the controller acts: past the threshold of
        # 20 events, though the newest writes may still be on their way into a delta (a loaded machine)
        end, full = time.monotonic() + 90, None
        while time.monotonic() < end:
            full = kube.get(lease)['spec'].get('holderIdentity')
            if full and int(full) > first + 20:
                break
            time.sleep(0.5)
        assert full and int(full) > first + 20, 'the full snapshot Lease moved to the compacted snapshot (%s, %d)' % (
            full, first)
        events = kube.list(api_path('v1', 'events', NS))
        assert any(e.get('reason') == 'SnapshotCompacted' for e in events), [e.get('reason') for e in events]
        assert controller.metric('etcddruid_compaction_jobs_total', {'succeeded': 'true'}) == 1
    finally:
        controller.stop()
        if etcd is not None:
            etcd.stop()
        program.stop()
