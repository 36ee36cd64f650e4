# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A spec change that restarts members takes a verified full snapshot first and refuses without one (issue 25 §2),
on the lab's parts, every piece real (the API emulator with the pod runtime, the controller's `etcd` loop, S3 over
HTTP, etcd and `steward-etcd-member` as processes): a one-member `Etcd` with backups in S3 gets a new quota (a new
configuration: its pod restarts).

  - while the store is gone (its bucket deleted) the member's snapshot fails: nothing restarts, the `Etcd` says why
    (an UpdatePostponed Event naming the snapshot and lastErrors ERR_PRE_UPDATE_SNAPSHOT), asked again each pass;
  - once the bucket is back the next request succeeds: the full-snap Lease shows a verified full snapshot holding
    every key written before the change, and only then does the member restart (FullSnapshotRequested before
    MemberRestarted), its keys all there."""

from __future__ import annotations

import json
import os
import subprocess

import boto3
import pytest

from ansible_collections.steward.cluster.plugins.module_utils.kube.client import api_path

from lab.pods import images

from test_druid_lab_journey import ETCD, NS, _condition, _wait, druid_lab   # the druid journey's helpers, one copy
from test_druid_quorum_loss_journey import _events, _wait_event

pytestmark = pytest.mark.skipif(images.etcd_binary('3.5') is None, reason='no etcd 3.5 binary: run make all')
BUCKET = 'etcd-update-snapshot'
LEASES = api_path('coordination.k8s.io/v1', 'leases', NS)
STS = api_path('apps/v1', 'statefulsets', NS, 'etcd-main')
MERGE = {'Content-Type': 'application/merge-patch+json'}


def _etcdctl(*args, endpoint):
    etcdctl = os.path.join(os.path.dirname(images.etcd_binary('3.5')), 'etcdctl')
    return subprocess.run([etcdctl, '--endpoints', endpoint, '--command-timeout', '10s'] + list(args), check=True,
                          capture_output=True, text=True, timeout=30).stdout


def _empty_bucket(s3):
    for item in s3.list_objects_v2(Bucket=BUCKET).get('Contents', []):
        s3.delete_object(Bucket=BUCKET, Key=item['Key'])
    s3.delete_bucket(Bucket=BUCKET)


def test_a_restarting_change_waits_for_its_own_verified_full_snapshot(s3_server, tmp_path):
    s3 = boto3.client('s3', endpoint_url=s3_server, region_name='us-east-1')
    flags = ['--controllers', 'etcd', '--etcd-status-sync-period', '1s', '--etcd-update-snapshot-timeout', '30s']
    with druid_lab(s3_server, tmp_path, BUCKET, flags) as (kube, session):
        url = kube.url
        answer = session.post(url + api_path('druid.gardener.cloud/v1alpha1', 'etcds', NS), json={
            'apiVersion': 'druid.gardener.cloud/v1alpha1', 'kind': 'Etcd',
            'metadata': {'name': 'etcd-main', 'namespace': NS},
            'spec': {'replicas': 1, 'labels': {'app': 'etcd-main'}, 'etcd': {'quota': '2Gi'},
                     'backup': {'fullSnapshotSchedule': '0 */24 * * *', 'deltaSnapshotPeriod': '60s',
                                'store': {'provider': 'aws', 'container': BUCKET, 'prefix': 'demo--etcd-main',
                                          'secretRef': {'name': 'etcd-backup-aws'}}}}})
        assert answer.status_code == 201, answer.text
        _wait(session, url, lambda s: s.get('ready') and _condition(s, 'BackupReady') == 'True', 120,
              'one member Ready with a backup')
        pod = session.get(url + '/api/v1/namespaces/%s/pods/etcd-main-0' % NS).json()
        endpoint = 'http://%s:2379' % pod['status']['podIP']
        for i in range(10):
            _etcdctl('put', 'k%02d' % i, 'v%d' % i, endpoint=endpoint)
        written = json.loads(_etcdctl('get', 'k09', '-w', 'json', endpoint=endpoint))['header']['revision']
        before = session.get(url + LEASES + '/etcd-main-full-snap').json()['metadata']['annotations']
        assert int(before['cluster.steward.io/verified-revision']) < written

        # the store goes away; a new quota restarts the member: refused without its snapshot, and said so
        _empty_bucket(s3)
        answer = session.patch(url + ETCD, headers=MERGE, json={
            'metadata': {'annotations': {'gardener.cloud/operation': 'reconcile'}}, 'spec': {'etcd': {'quota': '3Gi'}}})
        assert answer.status_code == 200, answer.text
        postponed = [m for m in _wait_event(session, url, 'UpdatePostponed', 60)
                     if 'full snapshot taken before the change failed' in m]
        assert postponed and 'etcd-main-0' in postponed[0], _events(session, url)[-10:]
        status = _wait(session, url, lambda s: any(e['code'] == 'ERR_PRE_UPDATE_SNAPSHOT'
                                                   for e in s.get('lastErrors') or []), 20, 'lastErrors')
        assert 'etcd-main-0' in next(e['description'] for e in status['lastErrors']
                                     if e['code'] == 'ERR_PRE_UPDATE_SNAPSHOT')
        assert 'MemberRestarted' not in [r for r, _m in _events(session, url)]
        assert session.get(url + '/api/v1/namespaces/%s/pods/etcd-main-0' % NS).json()['metadata']['uid'] == \
            pod['metadata']['uid']

        # the bucket is back: the next request's snapshot is verified on the Lease, then the member restarts
        s3.create_bucket(Bucket=BUCKET)
        restarted = _wait_event(session, url, 'MemberRestarted', 90)
        assert 'etcd-main-0' in restarted[0]
        reasons = [r for r, _m in _events(session, url)]
        assert reasons.index('FullSnapshotRequested') < reasons.index('MemberRestarted'), reasons
        after = session.get(url + LEASES + '/etcd-main-full-snap').json()['metadata']['annotations']
        assert int(after['cluster.steward.io/verified-revision']) >= written, (after, written)
        record = json.loads(session.get(url + STS).json()['metadata']['annotations']['cluster.steward.io/update-snapshot'])
        assert after['cluster.steward.io/verified-at'] >= record['after'], (after, record)
        assert any(o['Key'].rsplit('/', 1)[-1].startswith('Full-')
                   for o in s3.list_objects_v2(Bucket=BUCKET).get('Contents', [])), 'the snapshot is in S3'
        status = _wait(session, url, lambda s: s.get('ready') and _condition(s, 'AllMembersReady') == 'True'
                       and s.get('observedGeneration') == 2, 90, 'Ready on the new configuration')
        assert not any(e['code'] == 'ERR_PRE_UPDATE_SNAPSHOT' for e in status.get('lastErrors') or [])
        assert _etcdctl('get', 'k09', '--print-value-only', endpoint=endpoint) == 'v9\n'
