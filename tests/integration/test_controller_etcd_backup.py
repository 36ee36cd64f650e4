"""The real controller (subprocess) against the Kubernetes API emulator, real etcd and S3 on a moto
server: EtcdBackup takes full and delta snapshots; the cluster is lost and restored with the real
etcd_restore module; a killed controller (or leader) resumes with no gap and no duplicate."""

from __future__ import annotations

import base64
import re
import threading
import time

import pytest
import requests

from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot.delta import plan_chain
from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot.fetch import fetch_delta
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.s3_store import S3Store
from ansible_collections.steward.cluster.plugins.module_utils.kube.errors import Invalid

from support.ansible import local_play, run_playbook
from lab.env.controller import ControllerProcess, wait_for
from support.etcd_cluster import EtcdCluster

NS = 'backups'
BACKUPS = '/apis/cluster.steward.io/v1alpha1/namespaces/%s/etcdbackups' % NS


def revision(cluster):
    r = requests.post(cluster.healthy_endpoint() + '/v3/kv/range', json={'key': 'AA=='}, timeout=5)
    return int(r.json()['header']['revision'])


USABLE_BY_CONTROLLER = 'cluster.steward.io/usable-by-controller'   # the documented label, spelled out
OPTED_IN = {USABLE_BY_CONTROLLER: 'true'}


def s3_secret(kube, name='s3-credentials', labels=None):
    data = {'accessKeyID': 'testing', 'secretAccessKey': 'testing', 'region': 'us-east-1'}
    kube.create('/api/v1/namespaces/%s/secrets' % NS, {
        'apiVersion': 'v1', 'kind': 'Secret',
        'metadata': {'name': name, 'namespace': NS, 'labels': OPTED_IN if labels is None else labels},
        'data': {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}})


def backup_body(name, cluster, endpoint, bucket, **spec):
    body = {'apiVersion': 'cluster.steward.io/v1alpha1', 'kind': 'EtcdBackup',
            'metadata': {'name': name, 'namespace': NS},
            'spec': {'etcd': {'endpoints': cluster.endpoints},
                     'store': {'provider': 'S3', 'container': bucket, 'prefix': 'etcd/' + name, 'endpoint': endpoint,
                               'secretRef': {'name': 's3-credentials'}},
                     'deltaSnapshotPeriod': '1s', 'garbageCollectionPeriod': '1h'}}
    body['spec'].update(spec)
    return body


def get_backup(kube, name):
    return kube.get('%s/%s' % (BACKUPS, name))


def condition(obj, type_):
    for cond in (obj.get('status') or {}).get('conditions') or []:
        if cond['type'] == type_:
            return cond
    return None


def store_for(endpoint, bucket, name):
    return S3Store('s3://%s/etcd/%s' % (bucket, name), endpoint_url=endpoint, access_key='testing',
                   secret_key='testing')


def assert_contiguous(store, work_dir):
    """Every revision after the newest full snapshot is in exactly one delta, in order."""
    chain = plan_chain(store.list())
    assert chain.base is not None and chain.gap == '', chain.gap
    previous = chain.base.name.end_revision
    seen = []
    deltas = sorted((s for s in store.list() if s.valid and not s.is_full and s.name.end_revision > previous),
                    key=lambda s: s.name.sort_key)
    for delta in deltas:
        assert delta.name.start_revision == previous + 1, 'delta %s does not continue %d' % (delta.name, previous)
        previous = delta.name.end_revision
        seen += [e.revision for e in fetch_delta(store, delta, work_dir)]
    first = max(chain.base.name.end_revision, 1) + 1
    assert seen == list(range(first, chain.tip + 1))
    return chain


@pytest.fixture
def backup_env(kube, tmp_path, s3_bucket):
    endpoint, bucket = s3_bucket
    s3_secret(kube)
    controllers = []

    def start(identity='replica-0'):
        c = ControllerProcess(kube.server, str(tmp_path / identity), identity=identity).start()
        controllers.append(c)
        return c

    yield kube, endpoint, bucket, start
    for c in controllers:
        c.kill()


def test_backup_lose_cluster_restore_every_key(backup_env, tmp_path, etcd_bin_dir):
    kube, endpoint, bucket, start = backup_env
    cluster = EtcdCluster(str(tmp_path / 'etcd'), 3, etcd_bin_dir).start()
    try:
        controller = start()
        cluster.put_many({'before/%d' % i: 'v%d' % i for i in range(50)})
        kube.create(BACKUPS, backup_body('main', cluster, endpoint, bucket))
        wait_for(lambda: (get_backup(kube, 'main').get('status') or {}).get('lastFullSnapshot'), 40, what='full')
        for i in range(5):
            cluster.put_many({'during/%d/%d' % (i, j): 'x' * 512 for j in range(20)})
            time.sleep(0.3)
        cluster.put_many({'the/last/key': 'before the disaster'})
        last = revision(cluster)
        wait_for(lambda: ((get_backup(kube, 'main').get('status') or {}).get('lastDeltaSnapshot') or {})
                 .get('revision', 0) >= last, 30, what='delta up to the last write')
        expected = cluster.get_all()
        obj = get_backup(kube, 'main')
        ready = condition(obj, 'BackupReady')
        assert ready['status'] == 'True' and ready['reason'] == 'IncrementalBackupSucceeded'
        assert obj['status']['observedGeneration'] == obj['metadata']['generation']
        assert controller.metric('etcdbr_snapshot_latest_revision', {'kind': 'Incr'}) >= last
        leases = '/apis/coordination.k8s.io/v1/namespaces/steward-system/leases/etcdbackup-%s-main-%s'
        assert int(kube.get(leases % (NS, 'delta-snap'))['spec']['holderIdentity']) >= last
        assert int(kube.get(leases % (NS, 'full-snap'))['spec']['holderIdentity']) == \
            get_backup(kube, 'main')['status']['lastFullSnapshot']['revision']
        events = kube.list('/api/v1/namespaces/%s/events' % NS)
        reasons = {e['reason'] for e in events if e['involvedObject']['name'] == 'main'}
        assert {'FullSnapshotTaken', 'DeltaSnapshotTaken'} <= reasons
    finally:
        cluster.stop()
    for member in cluster.members.values():  # the disaster: every member and its data gone
        cluster.kill(member.name, wipe=True)

    restored = EtcdCluster(str(tmp_path / 'restored'), 3, etcd_bin_dir, token='restored')
    tasks = [{'name': 'restore %s' % m.name, 'steward.cluster.etcd_restore': {
        'store': 's3://%s/etcd/main' % bucket, 's3_endpoint_url': endpoint, 'aws_access_key_id': 'testing',
        'aws_secret_access_key': 'testing', 'name': m.name, 'data_dir': m.data_dir,
        'initial_cluster': restored.initial_cluster(), 'initial_cluster_token': 'restored',
        'initial_advertise_peer_urls': [m.peer_url], 'tmp_dir': str(tmp_path)}} for m in restored.members.values()]
    result = run_playbook(local_play(tasks))
    assert result.rc == 0, result.stdout[-3000:]
    first = result.result('restore etcd1')
    assert first['changed'] and first['deltas'] and first['revision'] >= last
    try:
        for name in restored.members:
            restored.start_member(name, 'new')
        restored.wait_healthy()
        assert restored.get_all() == expected
    finally:
        restored.stop()


def test_killed_controller_resumes_without_gap_or_duplicate(backup_env, tmp_path, etcd1):
    kube, endpoint, bucket, start = backup_env
    store = store_for(endpoint, bucket, 'resume')
    controller = start()
    kube.create(BACKUPS, backup_body('resume', etcd1, endpoint, bucket))
    wait_for(lambda: (get_backup(kube, 'resume').get('status') or {}).get('lastFullSnapshot'), 40, what='full')
    stop_writes = threading.Event()

    def writer():
        i = 0
        while not stop_writes.is_set():
            etcd1.put_many({'stream/%06d' % i: 'v' * 64})
            i += 1
            time.sleep(0.01)

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    try:
        wait_for(lambda: [s for s in store.list() if not s.is_full], 20, what='a first delta')
        controller.kill()  # SIGKILL in the middle of buffering deltas
        time.sleep(1.5)
        start('replica-1')
        wait_for(lambda: len([s for s in store.list() if not s.is_full]) >= 4, 40, what='deltas after restart')
    finally:
        stop_writes.set()
        thread.join(10)
    last = revision(etcd1)
    wait_for(lambda: plan_chain(store.list()).tip >= last, 30, what='catch up')
    assert len([s for s in store.list() if s.valid and s.is_full]) == 1  # resumed, no new full needed
    assert_contiguous(store, str(tmp_path))


def test_leader_failover_keeps_backing_up(backup_env, tmp_path, etcd1):
    kube, endpoint, bucket, start = backup_env
    store = store_for(endpoint, bucket, 'ha')
    first, second = start('replica-a'), start('replica-b')
    leader = wait_for(lambda: next((c for c in (first, second) if c.is_leader()), None), 30, what='a leader')
    standby = second if leader is first else first
    kube.create(BACKUPS, backup_body('ha', etcd1, endpoint, bucket))
    wait_for(lambda: (get_backup(kube, 'ha').get('status') or {}).get('lastFullSnapshot'), 40, what='full')
    etcd1.put_many({'a/%d' % i: 'v' for i in range(20)})
    wait_for(lambda: plan_chain(store.list()).tip >= revision(etcd1), 20, what='deltas by the leader')
    assert standby.metric('steward_controller_leader') == 0
    leader.kill()
    wait_for(standby.is_leader, 30, what='the standby to take over')
    etcd1.put_many({'b/%d' % i: 'v' for i in range(20)})
    last = revision(etcd1)
    wait_for(lambda: plan_chain(store.list()).tip >= last, 40, what='deltas by the new leader')
    assert_contiguous(store, str(tmp_path))
    lease = kube.get('/apis/coordination.k8s.io/v1/namespaces/steward-system/leases/steward-controller-leader')
    assert lease['spec']['holderIdentity'] == standby.identity


def test_on_demand_full_snapshot_and_invalid_specs(backup_env, tmp_path, etcd1):
    kube, endpoint, bucket, start = backup_env
    start()
    kube.create(BACKUPS, backup_body('ondemand', etcd1, endpoint, bucket, deltaSnapshotPeriod='0s'))
    first = wait_for(lambda: (get_backup(kube, 'ondemand').get('status') or {}).get('lastFullSnapshot'), 40,
                     what='full')
    etcd1.put_many({'k': 'v'})
    kube.merge_patch('%s/ondemand' % BACKUPS, {'metadata': {'annotations': {'cluster.steward.io/full-snapshot': 'now-1'}}})
    status = wait_for(lambda: (get_backup(kube, 'ondemand').get('status') or {})
                      if (get_backup(kube, 'ondemand').get('status') or {}).get('lastOnDemandSnapshot') == 'now-1'
                      else None, 40, what='the on-demand snapshot')
    assert status['lastFullSnapshot']['name'] != first['name']
    assert status['lastFullSnapshot']['revision'] >= revision(etcd1)
    annotations = get_backup(kube, 'ondemand')['metadata'].get('annotations') or {}
    assert 'cluster.steward.io/full-snapshot' not in annotations

    # The API server rejects what the schema can say ...
    with pytest.raises(Invalid, match='provider'):
        kube.create(BACKUPS, backup_body('bad-provider', etcd1, endpoint, bucket,
                                         store={'provider': 'Floppy', 'prefix': 'x'}))
    # ... and the controller what it cannot: a schedule that does not parse, a missing bucket, a missing Secret,
    # a Secret its owner did not mark for the controller (issue 19 §5: creating an EtcdBackup must not be a way to
    # send any Secret of the namespace to an endpoint of one's choice).
    kube.create(BACKUPS, backup_body('bad-cron', etcd1, endpoint, bucket, fullSnapshotSchedule='61 * * * *'))
    kube.create(BACKUPS, backup_body('no-secret', etcd1, endpoint, bucket, store={
        'provider': 'S3', 'container': bucket, 'prefix': 'x', 'endpoint': endpoint, 'secretRef': {'name': 'missing'}}))
    s3_secret(kube, 'not-opted-in', labels={})
    kube.create(BACKUPS, backup_body('not-opted-in', etcd1, endpoint, bucket, store={
        'provider': 'S3', 'container': bucket, 'prefix': 'x', 'endpoint': endpoint,
        'secretRef': {'name': 'not-opted-in'}}))
    for name, message in (('bad-cron', 'spec.fullSnapshotSchedule'), ('no-secret', 'missing'),
                          ('not-opted-in', 'spec.store.secretRef: secret %s/not-opted-in does not carry the label '
                           '%s=true' % (NS, USABLE_BY_CONTROLLER))):
        cond = wait_for(lambda name=name: condition(get_backup(kube, name), 'SpecValid'), 30, what=name)
        assert cond['status'] == 'False' and message in cond['message']
        assert re.search(r'\(rule: [a-z-]+\)$', cond['message']), cond['message']   # field, value and rule
        assert condition(get_backup(kube, name), 'BackupReady')['status'] == 'False'
    assert not store_for(endpoint, bucket, 'x').list()  # nothing written for invalid specs


def test_tls_etcd_with_client_certificates_from_a_secret(backup_env, tmp_path, etcd_bin_dir):
    """TLS-only etcd that demands client certificates: the controller takes them from the tlsSecretRef."""
    from support.tls import make_pki
    kube, endpoint, bucket, start = backup_env
    pki = make_pki(str(tmp_path / 'pki'))
    cluster = EtcdCluster(str(tmp_path / 'etcd'), 1, etcd_bin_dir, pki=pki).start()
    try:
        assert cluster.endpoints[0].startswith('https://')
        with pytest.raises(requests.exceptions.RequestException):  # no client certificate: refused
            requests.post(cluster.endpoints[0] + '/v3/kv/range', json={'key': 'AA=='}, verify=pki['ca'], timeout=5)
        files = {'ca.crt': pki['ca'], 'tls.crt': pki['client_cert'], 'tls.key': pki['client_key']}
        data = {}
        for key, path in files.items():
            with open(path, 'rb') as f:
                data[key] = base64.b64encode(f.read()).decode()
        kube.create('/api/v1/namespaces/%s/secrets' % NS, {'apiVersion': 'v1', 'kind': 'Secret', 'type': 'kubernetes.io/tls',
                                                           'metadata': {'name': 'etcd-client', 'namespace': NS,
                                                                        'labels': OPTED_IN},
                                                           'data': data})
        start()
        body = backup_body('tls', cluster, endpoint, bucket)
        body['spec']['etcd']['tlsSecretRef'] = {'name': 'etcd-client'}
        kube.create(BACKUPS, body)
        wait_for(lambda: (get_backup(kube, 'tls').get('status') or {}).get('lastFullSnapshot'), 40, what='full over TLS')
        cluster.put_many({'secure/%d' % i: 'v' for i in range(10)})
        r = requests.post(cluster.endpoints[0] + '/v3/kv/range', json={'key': 'AA=='}, timeout=5, **cluster.http)
        last = int(r.json()['header']['revision'])
        wait_for(lambda: ((get_backup(kube, 'tls').get('status') or {}).get('lastDeltaSnapshot') or {})
                 .get('revision', 0) >= last, 30, what='a delta over TLS')
        assert condition(get_backup(kube, 'tls'), 'BackupReady')['status'] == 'True'
    finally:
        cluster.stop()


def test_restore_verification_on_demand_proves_then_catches_a_corrupt_backup(backup_env, tmp_path, etcd1):
    """spec.restoreVerification (daily by default) runs on demand too: the newest backup is restored into a
    throwaway etcd beside the controller; RestoreVerified, lastRestoreVerification, metrics and Events say how
    it went, and a corrupt newest snapshot turns them to False with the snapshot and the check named."""
    import boto3
    kube, endpoint, bucket, start = backup_env
    controller = start()
    etcd1.put_many({'verify/%d' % i: 'v%d' % i for i in range(30)})
    kube.create(BACKUPS, backup_body('proven', etcd1, endpoint, bucket, deltaSnapshotPeriod='0s'))
    full = wait_for(lambda: (get_backup(kube, 'proven').get('status') or {}).get('lastFullSnapshot'), 40, what='full')

    def verify(token):
        kube.merge_patch('%s/proven' % BACKUPS, {'metadata': {'annotations': {'cluster.steward.io/verify-restore': token}}})
        return wait_for(lambda: (get_backup(kube, 'proven').get('status') or {})
                        if (get_backup(kube, 'proven').get('status') or {}).get('lastOnDemandVerification') == token
                        else None, 60, what='the verification %s' % token)

    status = verify('first')
    proof = status['lastRestoreVerification']
    assert proof['succeeded'] and proof['snapshot'] == full['name'] and proof['revision'] == full['revision']
    assert proof['hashKVMatched'] is True and proof['durationSeconds'] > 0
    cond = condition(get_backup(kube, 'proven'), 'RestoreVerified')
    assert cond['status'] == 'True' and full['name'] in cond['message']
    assert controller.metric('etcdbr_restore_verification_last_revision', {'resource': NS + '/proven'}) == full['revision']
    assert controller.metric('etcdbr_restore_verification_age_seconds', {'resource': NS + '/proven'}) < 60
    assert 'cluster.steward.io/verify-restore' not in (get_backup(kube, 'proven')['metadata'].get('annotations') or {})

    s3 = boto3.client('s3', endpoint_url=endpoint)
    key = 'etcd/proven/v2/' + full['name']
    data = bytearray(s3.get_object(Bucket=bucket, Key=key)['Body'].read())
    data[len(data) // 2] ^= 0xFF
    s3.put_object(Bucket=bucket, Key=key, Body=bytes(data))
    status = verify('second')
    assert status['lastRestoreVerification']['succeeded'] is False
    cond = condition(get_backup(kube, 'proven'), 'RestoreVerified')
    assert cond['status'] == 'False' and cond['reason'] == 'RestoreVerificationFailed'
    assert full['name'] in cond['message'] and 'corrupt (sha256)' in cond['message']
    assert controller.metric('etcdbr_restore_verification_failures_total', {'resource': NS + '/proven'}) == 1.0
    events = kube.list('/api/v1/namespaces/%s/events' % NS)
    assert any(e['reason'] == 'RestoreVerificationFailed' and e['type'] == 'Warning' for e in events)
    assert any(e['reason'] == 'RestoreVerified' and e['type'] == 'Normal' for e in events)
