"""EtcdBackup specs: defaults, durations, quantities, store URLs, and errors that name the field."""

import calendar

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.etcd.backup.backup_loop import full_snapshot_reason
from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.etcd.backup.backup_spec import (
    connection_from_secrets, parse_backup_spec, parse_quantity, secret_names)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import EtcdError, SpecError
from ansible_collections.steward.cluster.plugins.module_utils.etcd.backup.cron import parse_cron
from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot.delta import Chain
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.naming import full_name
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.store import STATUS_VALID, Snapshot

BASE = {'etcd': {'endpoints': ['https://10.0.0.1:2379']},
        'store': {'provider': 'S3', 'container': 'bucket', 'prefix': 'etcd/main'}}


# Durations are read by the one parser (common/durations.py); these rows pin what EtcdBackup specs take.
@pytest.mark.parametrize('text, seconds', [('20s', 20), ('1m30s', 90), ('300ms', 0.3), ('24h', 86400), ('0', 0),
                                           ('0s', 0), (15, 15), ('1.5h', 5400)])
def test_durations(text, seconds):
    spec = parse_backup_spec(dict(BASE, deltaSnapshotRetentionPeriod=text))
    assert spec.policy.delta_retention == pytest.approx(seconds)


@pytest.mark.parametrize('text, rule', [('20', 'duration'), ('1x', 'duration'), ('s', 'duration'), ('-5s', 'non-negative'),
                                        ('5 s', 'duration'), (True, 'duration'), (-1, 'non-negative')])
def test_bad_durations(text, rule):
    with pytest.raises(SpecError, match='^spec.deltaSnapshotRetentionPeriod: ') as info:
        parse_backup_spec(dict(BASE, deltaSnapshotRetentionPeriod=text))
    assert isinstance(info.value, EtcdError) and isinstance(info.value, InvalidInput)
    assert (info.value.field, info.value.rule, info.value.value) == ('spec.deltaSnapshotRetentionPeriod', rule, text)


@pytest.mark.parametrize('text, size', [('100Mi', 100 * 2 ** 20), ('1Gi', 2 ** 30), ('500M', 500 * 10 ** 6),
                                        ('2k', 2000), (4096, 4096), ('1.5Ki', 1536)])
def test_quantities(text, size):
    assert parse_quantity(text, 'q') == size


@pytest.mark.parametrize('text', ['100MB', 'lots', '5m', True, -3])
def test_bad_quantities(text):
    with pytest.raises(SpecError, match='^q: '):
        parse_quantity(text, 'q')


def test_defaults_are_etcd_backup_restore_and_the_issue():
    spec = parse_backup_spec(BASE)
    p = spec.policy
    assert spec.store_url == 's3://bucket/etcd/main' and spec.provider == 'S3'
    assert p.delta_period == 20 and p.delta_memory_limit == 100 * 2 ** 20 and p.gc_policy == 'LimitBased'
    assert p.gc_period == 60 and p.max_backups == 7 and p.compression is None and not p.compaction_enabled
    assert p.compaction_threshold == 1000000 and p.full_schedule.expr == '0 */24 * * *' and not spec.suspend


def test_local_store_and_options():
    spec = parse_backup_spec(dict(BASE, store={'provider': 'Local', 'path': '/var/backups/', 'prefix': '/main/'},
                                  compression={'enabled': True, 'policy': 'zlib'}, deltaSnapshotPeriod='0s',
                                  compaction={'enabled': True, 'eventsThreshold': 5000},
                                  garbageCollectionPolicy='Exponential'))
    assert spec.store_url == '/var/backups/main'
    assert spec.policy.compression == 'zlib' and spec.policy.delta_period == 0
    assert spec.policy.compaction_enabled and spec.policy.compaction_threshold == 5000


@pytest.mark.parametrize('change, message', [
    ({'etcd': None}, '^spec.etcd: required'),
    ({'etcd': {'endpoints': []}}, '^spec.etcd.endpoints'),
    ({'store': {'provider': 'S3', 'prefix': 'x'}}, '^spec.store.container'),
    ({'store': {'provider': 'Local', 'prefix': 'x', 'path': 'relative'}}, '^spec.store.path'),
    ({'store': {'provider': 'Tape', 'prefix': 'x'}}, '^spec.store.provider'),
    ({'store': {'provider': 'S3', 'container': 'b', 'prefix': ''}}, '^spec.store.prefix'),
    ({'store': {'provider': 'S3', 'container': 'b', 'prefix': 'a/../b'}}, '^spec.store.prefix'),
    ({'store': {'provider': 'S3', 'container': 'b', 'prefix': 'p', 'endpoint': 'minio:9000'}}, '^spec.store.endpoint'),
    ({'fullSnapshotSchedule': 'daily'}, '^spec.fullSnapshotSchedule'),
    ({'fullSnapshotSchedule': '0 0 31 2 *'}, 'never fires'),
    ({'deltaSnapshotPeriod': '500ms'}, '^spec.deltaSnapshotPeriod'),
    ({'deltaSnapshotMemoryLimit': '10'}, '^spec.deltaSnapshotMemoryLimit'),
    ({'garbageCollectionPolicy': 'KeepAll'}, '^spec.garbageCollectionPolicy'),
    ({'maxBackups': 0}, '^spec.maxBackups'),
    ({'compression': {'enabled': True, 'policy': 'lzw'}}, '^spec.compression.policy'),
    ({'compaction': {'eventsThreshold': 0}}, '^spec.compaction.eventsThreshold'),
    ({'etcd': {'endpoints': ['x'], 'tlsSecretRef': {}}}, '^spec.etcd.tlsSecretRef'),
    # through the shared checks (common/validate.py), as the modules check the same kinds of values
    ({'etcd': {'endpoints': ['http://10.0.0.1:2379', 'not a url']}}, r'^spec.etcd.endpoints\[1\]: host'),
    ({'etcd': {'endpoints': ['http://10.0.0.1:0']}}, r'^spec.etcd.endpoints\[0\]: port 0'),
    ({'maxBackups': '3'}, "^spec.maxBackups: expected a whole number, got '3'"),
    ({'maxBackups': True}, '^spec.maxBackups: expected a whole number'),
    ({'suspend': 'false'}, "^spec.suspend: expected true or false, got 'false'"),
    ({'compression': {'enabled': 'yes'}}, '^spec.compression.enabled: expected true or false'),
    ({'compaction': {'enabled': 1}}, '^spec.compaction.enabled: expected true or false'),
    ({'restoreVerification': {'enabled': 'no'}}, '^spec.restoreVerification.enabled: expected true or false'),
    ({'store': {'provider': 'S3', 'container': 'b', 'prefix': 'p', 'endpoint': 'http://mi nio:9000'}},
     '^spec.store.endpoint: host'),
    ({'store': {'provider': 'S3', 'container': 'b', 'prefix': 'p', 'region': 'eu\nwest'}}, '^spec.store.region'),
    ({'store': {'provider': 'Local', 'prefix': 'x', 'path': '/var/../etc'}}, r'^spec.store.path: must not contain ".."'),
])
def test_errors_name_the_field(change, message):
    with pytest.raises(SpecError, match=message) as info:
        parse_backup_spec(dict(BASE, **change))
    assert info.value.field.startswith('spec.') and info.value.rule
    assert info.value.explained() == '%s (rule: %s)' % (info.value, info.value.rule)   # the condition's message


def full(created, revision=10):
    return Snapshot(full_name(revision, created), 'v2/x', 1, float(created), STATUS_VALID,
                    {'sha256': 'x', 'cluster_id': 'abc'})


def test_full_snapshot_reasons():
    daily = parse_cron('0 0 * * *')
    now = float(calendar.timegm((2026, 11, 22, 12, 0, 0)))
    assert 'no valid full' in full_snapshot_reason(Chain(None, [], 0), now, daily)
    assert '24 h' in full_snapshot_reason(Chain(full(now - 25 * 3600), [], 10), now, parse_cron('0 0 1 1 *'))
    assert 'missed' in full_snapshot_reason(Chain(full(now - 13 * 3600), [], 10), now, daily)
    assert 'gap' in full_snapshot_reason(Chain(full(now - 3600), [], 10, gap='revisions 11..12'), now, daily)
    assert full_snapshot_reason(Chain(full(now - 3600), [], 10), now, daily) == ''
    ours = {'cluster_id': 'abc', 'revision': 10}
    assert full_snapshot_reason(Chain(full(now - 3600), [], 10), now, daily, cluster=ours) == ''
    assert 'cluster abc, the endpoints serve cluster def' in full_snapshot_reason(
        Chain(full(now - 3600), [], 10), now, daily, cluster={'cluster_id': 'def', 'revision': 50})
    assert 'beyond the cluster' in full_snapshot_reason(Chain(full(now - 3600), [], 10), now, daily,
                                                        cluster={'cluster_id': 'abc', 'revision': 9})


@pytest.mark.parametrize('encryption, mode, key_id', [
    (None, 'AES256', None),
    ({'mode': 'aws:kms', 'kmsKeyId': 'alias/etcd'}, 'aws:kms', 'alias/etcd'),
    ({'mode': 'None'}, 'none', None),
], ids=['default-aes256', 'kms', 'off'])
def test_store_encryption(encryption, mode, key_id):
    store = dict(BASE['store'], **({'encryption': encryption} if encryption else {}))
    spec = parse_backup_spec(dict(BASE, store=store))
    assert (spec.encryption_mode, spec.kms_key_id) == (mode, key_id)


@pytest.mark.parametrize('store, message', [
    ({'encryption': {'mode': 'rot13'}}, r'^spec.store.encryption.mode: expected one of AES256, aws:kms, SSE-C, None'),
    ({'encryption': {'mode': 'AES256', 'kmsKeyId': 'k'}}, r'^spec.store.encryption.kmsKeyId: only used with mode aws:kms'),
    ({'encryption': {'mode': 'SSE-C'}}, r'^spec.store.secretRef: required for encryption mode SSE-C'),
], ids=['unknown-mode', 'key-id-without-kms', 'sse-c-without-secret'])
def test_store_encryption_errors_name_the_field(store, message):
    with pytest.raises(SpecError, match=message):
        parse_backup_spec(dict(BASE, store=dict(BASE['store'], **store)))


def test_restore_verification_is_daily_by_default_and_can_be_turned_off_or_rescheduled():
    assert parse_backup_spec(BASE).policy.verify_schedule.expr == '30 0 * * *'
    assert parse_backup_spec(dict(BASE, restoreVerification={'enabled': False})).policy.verify_schedule is None
    hourly = parse_backup_spec(dict(BASE, restoreVerification={'schedule': '15 * * * *'}))
    assert hourly.policy.verify_schedule.expr == '15 * * * *'
    with pytest.raises(SpecError, match='^spec.restoreVerification.schedule: '):
        parse_backup_spec(dict(BASE, restoreVerification={'schedule': '61 * * * *'}))


SECRETS_SPEC = dict(BASE, etcd=dict(BASE.get('etcd') or {}, endpoints=['https://etcd-0:2379'],
                                    tlsSecretRef={'name': 'etcd-tls'}, authSecretRef={'name': 'etcd-auth'}),
                    store=dict(BASE['store'], secretRef={'name': 'backup-s3'}))


def test_connection_from_secrets_in_etcd_backup_restore_keys():
    spec = parse_backup_spec(SECRETS_SPEC)
    assert secret_names(spec) == {'spec.etcd.tlsSecretRef': 'etcd-tls', 'spec.etcd.authSecretRef': 'etcd-auth',
                                  'spec.store.secretRef': 'backup-s3'}
    found = connection_from_secrets(spec, {
        'etcd-tls': {'ca.crt': 'CA', 'tls.crt': 'CERT', 'tls.key': 'KEY'},
        'etcd-auth': {'user': 'root', 'password': 'pw'},
        'backup-s3': {'accessKeyID': 'AK', 'secretAccessKey': 'SK', 'sessionToken': 'ST', 'region': 'eu-1'}})
    assert (found.ca_cert, found.client_cert, found.client_key, found.user, found.password) == (
        'CA', 'CERT', 'KEY', 'root', 'pw')
    assert (found.access_key, found.secret_key, found.session_token, found.region) == ('AK', 'SK', 'ST', 'eu-1')
    assert found.encryption.mode == 'AES256'
    assert 'pw' not in repr(found) and 'SK' not in repr(found) and 'ST' not in repr(found)


def test_connection_from_secrets_takes_the_aws_names_and_the_spec_region_wins():
    spec = parse_backup_spec(dict(SECRETS_SPEC, etcd=dict(SECRETS_SPEC['etcd'], authSecretRef=None),
                                  store=dict(SECRETS_SPEC['store'], region='us-2')))
    found = connection_from_secrets(spec, {
        'etcd-tls': {'ca.crt': 'CA'},
        'backup-s3': {'AWS_ACCESS_KEY_ID': 'AK', 'AWS_SECRET_ACCESS_KEY': 'SK', 'AWS_REGION': 'eu-1'}})
    assert (found.ca_cert, found.client_cert, found.user) == ('CA', None, None)
    assert (found.access_key, found.secret_key, found.session_token, found.region) == ('AK', 'SK', None, 'us-2')


@pytest.mark.parametrize('secrets, message', [
    ({'etcd-tls': {}, 'etcd-auth': {'user': 'u', 'password': 'p'}, 'backup-s3': {'accessKeyID': 'a', 'secretAccessKey': 's'}},
     r'^secret etcd-tls: has no CA certificate \(looked for key ca.crt\)'),
    ({'etcd-tls': {'ca.crt': 'CA', 'tls.crt': 'C'}, 'etcd-auth': {'user': 'u', 'password': 'p'},
      'backup-s3': {'accessKeyID': 'a', 'secretAccessKey': 's'}}, r'^secret etcd-tls: has no key \(looked for key tls.key\)'),
    ({'etcd-tls': {'ca.crt': 'CA'}, 'etcd-auth': {'password': 'p'}, 'backup-s3': {'accessKeyID': 'a', 'secretAccessKey': 's'}},
     r'^secret etcd-auth: has no user name \(looked for key username or user\)'),
    ({'etcd-tls': {'ca.crt': 'CA'}, 'etcd-auth': {'user': 'u', 'password': 'p'}, 'backup-s3': {'secretAccessKey': 's'}},
     r'^secret backup-s3: has no access key \(looked for key accessKeyID or AWS_ACCESS_KEY_ID\)'),
])
def test_connection_from_secrets_names_the_secret_and_the_keys(secrets, message):
    with pytest.raises(SpecError, match=message):
        connection_from_secrets(parse_backup_spec(SECRETS_SPEC), secrets)


def test_connection_from_secrets_sse_c_key_from_the_store_secret():
    spec = parse_backup_spec(dict(SECRETS_SPEC, store=dict(SECRETS_SPEC['store'], encryption={'mode': 'SSE-C'})))
    key = 'k' * 32
    found = connection_from_secrets(spec, {'etcd-tls': {'ca.crt': 'CA'}, 'etcd-auth': {'user': 'u', 'password': 'p'},
                                           'backup-s3': {'accessKeyID': 'a', 'secretAccessKey': 's',
                                                         'sseCustomerKey': key}})
    assert found.encryption.mode == 'SSE-C' and found.encryption.customer_key
    with pytest.raises(InvalidInput, match='secret backup-s3 key sseCustomerKey'):
        connection_from_secrets(spec, {'etcd-tls': {'ca.crt': 'CA'}, 'etcd-auth': {'user': 'u', 'password': 'p'},
                                       'backup-s3': {'accessKeyID': 'a', 'secretAccessKey': 's'}})
