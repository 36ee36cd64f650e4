# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A druid user's journey on the lab's parts, every piece real: the API emulator with the shipped CRDs and the pod
runtime, the controller's `etcd` loop, S3 (moto over HTTP) with a druid backup Secret applied as a druid user has it,
and pods whose containers are real processes (etcd through the lab's etcd-wrapper stand-in, `steward-etcd-member`
as the backup-restore sidecar). An `Etcd` with one replica becomes Ready with BackupReady from a real full snapshot
in S3; keys written; scaled to 3 with the reconcile annotation, the new members join as learners and every key is
on every member."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import subprocess
import time

import boto3
import pytest
import requests

from ansible_collections.steward.cluster.plugins.module_utils.kube.client import api_path

from lab import parts
from lab.env.controller import ControllerProcess, install_crds
from lab.kube.api import KubeServer
from lab.paths import module_argv
from lab.pods import images, network
from lab.pods.runtime import Runtime

pytestmark = pytest.mark.skipif(images.etcd_binary('3.5') is None, reason='no etcd 3.5 binary: run make all')
NS = 'demo'
ETCD = api_path('druid.gardener.cloud/v1alpha1', 'etcds', NS, 'etcd-main')


def _condition(status, kind):
    return next((c for c in status.get('conditions') or [] if c['type'] == kind), {}).get('status')


def _wait(session, url, test, deadline, what):
    end, status = time.monotonic() + deadline, {}
    while time.monotonic() < end:
        status = session.get(url + ETCD).json().get('status') or {}
        if test(status):
            return status
        time.sleep(0.25)   # a poll (one GET): no longer than it must be, the journeys wait here a dozen times
    raise AssertionError('%s not reached within %ss: %s' % (what, deadline, json.dumps(status)[:1500]))


@contextlib.contextmanager
def druid_lab(s3_server, tmp_path, bucket, args):
    """The lab's parts for a druid journey: an S3 bucket, the API emulator with the CRDs and the pod runtime, the
    controller with `args`, and the druid backup Secret `etcd-backup-aws` as a druid user has it; yields the API
    server and a session, and stops everything after."""
    boto3.client('s3', endpoint_url=s3_server, region_name='us-east-1').create_bucket(Bucket=bucket)
    kube = KubeServer(status_delay=0.2, pod_runtime=True).start()
    install_crds(_client(kube.url))
    pod_network = network.reserve()
    cidr = pod_network.cidr
    record = str(tmp_path / 'runtime.pid')
    parts.start(record, module_argv('lab.pods.runtime', 'run', '--kube-url', kube.url, '--state-dir', str(tmp_path),
                                    '--pod-cidr', cidr, '--interval', '0.2'), str(tmp_path / 'runtime.log'))
    controller = ControllerProcess(kube, str(tmp_path / 'controller'), args=args).start()
    session = requests.Session()
    try:
        secret = {'accessKeyID': 'testing', 'secretAccessKey': 'testing', 'region': 'us-east-1',
                  'endpoint': s3_server, 's3ForcePathStyle': 'true'}
        session.post(kube.url + '/api/v1/namespaces/%s/secrets' % NS, json={
            'apiVersion': 'v1', 'kind': 'Secret', 'metadata': {'name': 'etcd-backup-aws', 'namespace': NS},
            'type': 'Opaque', 'data': {k: base64.b64encode(v.encode()).decode() for k, v in secret.items()}})
        yield kube, session
    finally:
        controller.stop()
        parts.stop(record)
        Runtime(kube.url, str(tmp_path), cidr).stop_all()
        kube.stop()
        pod_network.close()


def test_an_etcd_from_one_to_three_members_with_backups_in_s3(s3_server, tmp_path):
    bucket = 'etcd-backups'
    with druid_lab(s3_server, tmp_path, bucket, ['--controllers', 'etcd']) as (kube, session):
        answer = session.post(kube.url + api_path('druid.gardener.cloud/v1alpha1', 'etcds', NS), json={
            'apiVersion': 'druid.gardener.cloud/v1alpha1', 'kind': 'Etcd',
            'metadata': {'name': 'etcd-main', 'namespace': NS, 'labels': {'role': 'main'}},
            'spec': {'replicas': 1, 'labels': {'app': 'etcd-main', 'role': 'main'},
                     'etcd': {'quota': '2Gi', 'defragmentationSchedule': '0 3 * * *'},
                     'backup': {'fullSnapshotSchedule': '0 */24 * * *', 'deltaSnapshotPeriod': '60s',
                                'garbageCollectionPolicy': 'Exponential', 'garbageCollectionPeriod': '43200s',
                                'store': {'provider': 'aws', 'container': bucket, 'prefix': 'demo--etcd-main',
                                          'secretRef': {'name': 'etcd-backup-aws'}}}}})
        assert answer.status_code == 201, answer.text
        status = _wait(session, kube.url, lambda s: s.get('ready') and _condition(s, 'BackupReady') == 'True', 120,
                       'one member Ready with a backup')
        keys = boto3.client('s3', endpoint_url=s3_server, region_name='us-east-1').list_objects_v2(
            Bucket=bucket, Prefix='demo--etcd-main/v2/').get('Contents', [])
        assert any(k['Key'].rsplit('/', 1)[-1].startswith('Full-') for k in keys), 'a real full snapshot in S3'
        member0 = status['members'][0]
        assert member0['name'] == 'etcd-main-0' and member0['role'] == 'Leader' and member0['status'] == 'Ready'

        pods = session.get(kube.url + '/api/v1/namespaces/%s/pods' % NS).json()['items']
        ip0 = pods[0]['status']['podIP']
        etcdctl = os.path.join(os.path.dirname(images.etcd_binary('3.5')), 'etcdctl')
        for i in range(20):
            subprocess.run([etcdctl, '--endpoints', 'http://%s:2379' % ip0, 'put', 'k%02d' % i, 'v%d' % i],
                           check=True, capture_output=True, timeout=30)
        scale = {'metadata': {'annotations': {'gardener.cloud/operation': 'reconcile'}}, 'spec': {'replicas': 3}}
        answer = session.patch(kube.url + ETCD, json=scale, headers={'Content-Type': 'application/merge-patch+json'})
        assert answer.status_code == 200, answer.text
        status = _wait(session, kube.url, lambda s: s.get('ready') and s.get('clusterSize') == 3
                       and s.get('readyReplicas') == 3 and _condition(s, 'AllMembersReady') == 'True', 180,
                       'three members Ready')
        assert sorted(m['name'] for m in status['members']) == ['etcd-main-0', 'etcd-main-1', 'etcd-main-2']
        assert sorted(m['role'] for m in status['members']) == ['Leader', 'Member', 'Member']
        for pod in session.get(kube.url + '/api/v1/namespaces/%s/pods' % NS).json()['items']:
            value = subprocess.run([etcdctl, '--endpoints', 'http://%s:2379' % pod['status']['podIP'], 'get', 'k19',
                                    '--print-value-only', '--consistency=s'], check=True, capture_output=True,
                                   text=True, timeout=30).stdout
            assert value == 'v19\n', pod['metadata']['name']


def _client(url):
    import kubernetes
    from ansible_collections.steward.cluster.plugins.module_utils.kube.client import KubeClient
    configuration = kubernetes.client.Configuration()
    configuration.host = url
    return KubeClient(configuration)
