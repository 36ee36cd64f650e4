# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A druid `Etcd` as gardener runs it, with client and peer TLS (`spec.etcd.clientUrlTls`, `spec.etcd.peerUrlTls`:
a CA Secret, a server certificate Secret and a client certificate Secret), three replicas, on the lab's parts: the
API emulator with the pod runtime, S3 (moto over HTTP) and the controller's `etcd` loop. The certificates are made
here as a druid user makes them: druid's DNS names plus the pod addresses (the lab rewrites peer DNS names to pod
IPs, docs/lab.md). The cluster becomes Ready, takes a full snapshot over TLS, every member serves https only to a
client with a certificate, the status and the member Leases say the peers speak TLS, and an on-demand maintenance
task (compaction, defragmentation) reaches the members over https."""

from __future__ import annotations

import base64
import time

import boto3
import pytest
import requests

from lab.pods import images
from support.druid_lab import WRAPPER, DruidLab

pytestmark = pytest.mark.skipif(images.etcd_binary('3.5') is None, reason='no etcd 3.5 binary: run make all')

BUCKET = 'etcd-tls-backups'


def _b64(text):
    return base64.b64encode(text.encode()).decode()


def test_a_tls_etcd_with_three_members_becomes_ready_serves_https_and_backs_up(s3_server, tmp_path):
    boto3.client('s3', endpoint_url=s3_server, region_name='us-east-1').create_bucket(Bucket=BUCKET)
    lab = DruidLab(str(tmp_path), controller_args=['--controllers', 'etcd,etcd-tasks', '--etcd-status-sync-period', '2s'])
    try:
        lab.start()
        pem = lab.pod_pki(str(tmp_path))
        lab.secret('etcd-backup-aws', {'accessKeyID': 'testing', 'secretAccessKey': 'testing',
                                       'region': 'us-east-1', 'endpoint': s3_server, 's3ForcePathStyle': 'true'})
        lab.secret('ca-etcd', {'ca.crt': pem['ca.crt']})
        lab.secret('etcd-server-tls', {'tls.crt': pem['server.crt'], 'tls.key': pem['server.key']},
                   'kubernetes.io/tls')
        lab.secret('etcd-client-tls', {'tls.crt': pem['client.crt'], 'tls.key': pem['client.key']},
                   'kubernetes.io/tls')
        tls = {'tlsCASecretRef': {'name': 'ca-etcd', 'dataKey': 'ca.crt'},
               'serverTLSSecretRef': {'name': 'etcd-server-tls'}, 'clientTLSSecretRef': {'name': 'etcd-client-tls'}}
        answer = lab.session.post(lab.kube.url + lab.etcd_path.rsplit('/', 1)[0], json={
            'apiVersion': 'druid.gardener.cloud/v1alpha1', 'kind': 'Etcd',
            'metadata': {'name': lab.name, 'namespace': lab.ns, 'labels': {'role': 'main'}},
            'spec': {'replicas': 3, 'labels': {'app': lab.name, 'role': 'main'},
                     'etcd': {'image': WRAPPER + 'v3.5.21', 'quota': '2Gi', 'defragmentationSchedule': '0 3 * * *',
                              'clientUrlTls': tls, 'peerUrlTls': tls},
                     'backup': {'fullSnapshotSchedule': '0 */24 * * *', 'deltaSnapshotPeriod': '60s',
                                'store': {'provider': 'aws', 'container': BUCKET, 'prefix': 'demo--etcd-main',
                                          'secretRef': {'name': 'etcd-backup-aws'}}}}})
        assert answer.status_code == 201, answer.text

        lab.wait(lambda: lab.all_ready(3), 240, 'three TLS members Ready')

        def backup_ready():
            current = lab.status()
            return current if any(c['type'] == 'BackupReady' and c['status'] == 'True'
                                  for c in current.get('conditions') or []) else None
        status = lab.wait(backup_ready, 120, 'BackupReady')
        assert status['peerUrlTLSEnabled'] is True
        keys = boto3.client('s3', endpoint_url=s3_server, region_name='us-east-1').list_objects_v2(
            Bucket=BUCKET, Prefix='demo--etcd-main/v2/').get('Contents', [])
        assert any(k['Key'].rsplit('/', 1)[-1].startswith('Full-') for k in keys), 'a real full snapshot in S3'

        leases = lab.session.get(lab.kube.url + '/apis/coordination.k8s.io/v1/namespaces/%s/leases' % lab.ns).json()
        members = {i['metadata']['name']: i for i in leases['items'] if i['metadata']['name'][-1].isdigit()}
        assert sorted(members) == ['etcd-main-0', 'etcd-main-1', 'etcd-main-2']
        end = time.monotonic() + 30   # the annotation comes with a member's next heartbeat
        while not all((m['metadata'].get('annotations') or {}).get('member.etcd.gardener.cloud/tls-enabled') == 'true'
                      for m in members.values()) and time.monotonic() < end:
            time.sleep(0.5)
            leases = lab.session.get(lab.kube.url + '/apis/coordination.k8s.io/v1/namespaces/%s/leases' % lab.ns)
            members = {i['metadata']['name']: i for i in leases.json()['items'] if i['metadata']['name'] in members}
        assert all(m['metadata']['annotations']['member.etcd.gardener.cloud/tls-enabled'] == 'true'
                   for m in members.values()), members

        ips = sorted(p['status']['podIP'] for p in lab.pods())
        assert len(ips) == 3
        # per request: REQUESTS_CA_BUNDLE would override a Session's `verify`
        tls = {'verify': str(tmp_path / 'ca.crt'), 'cert': (str(tmp_path / 'client.crt'), str(tmp_path / 'client.key')),
               'timeout': 10}
        for index, ip in enumerate(ips):
            url = 'https://%s:2379' % ip
            put = requests.post(url + '/v3/kv/put', json={'key': _b64('k%d' % index), 'value': _b64('v%d' % index)},
                                **tls)
            assert put.status_code == 200, put.text
        for ip in ips:
            url = 'https://%s:2379' % ip
            for index in range(3):
                deadline = time.monotonic() + 10   # a serializable read may trail the leader by a heartbeat
                while True:
                    kvs = requests.post(url + '/v3/kv/range', json={'key': _b64('k%d' % index), 'serializable': True},
                                        **tls).json()
                    if kvs.get('kvs') or time.monotonic() > deadline:
                        break
                    time.sleep(0.2)
                assert base64.b64decode(kvs['kvs'][0]['value']).decode() == 'v%d' % index, (ip, index)
            # client-cert-auth: without a client certificate etcd refuses the connection; plain http is not served
            with pytest.raises(requests.RequestException):
                requests.post(url + '/v3/kv/range', json={'key': _b64('k0')}, verify=str(tmp_path / 'ca.crt'),
                              timeout=5).raise_for_status()
            with pytest.raises(requests.RequestException):
                requests.post('http://%s:2379/v3/kv/range' % ip, json={'key': _b64('k0')}, timeout=5).raise_for_status()

        # on-demand maintenance reaches the members over https with the Etcd's CA and client certificate Secrets
        answer = lab.session.post(lab.kube.url + '/apis/druid.gardener.cloud/v1alpha1/namespaces/%s/etcdoperatortasks'
                                  % lab.ns, json={
                                      'apiVersion': 'druid.gardener.cloud/v1alpha1', 'kind': 'EtcdOperatorTask',
                                      'metadata': {'name': 'maint', 'namespace': lab.ns},
                                      'spec': {'type': 'OnDemandMaintenanceTask',
                                               'ownerEtcdRefrence': {'name': lab.name, 'namespace': lab.ns},
                                               'config': 'maintenanceType: {etcdCompaction: true, '
                                                         'etcdDefragmentation: true}'}})
        assert answer.status_code == 201, answer.text
        task_url = lab.kube.url + '/apis/druid.gardener.cloud/v1alpha1/namespaces/%s/etcdoperatortasks/maint' % lab.ns

        def finished():
            current = lab.session.get(task_url).json()
            return current if (current.get('status') or {}).get('state') in ('Succeeded', 'Failed', 'Rejected') \
                else None
        task = lab.wait(finished, 120, 'the maintenance task finished')
        assert task['status']['state'] == 'Succeeded', task['status']
        assert 'defragmented 3 member(s)' in task['status']['lastOperation']['reason'], task['status']
    finally:
        lab.stop()
