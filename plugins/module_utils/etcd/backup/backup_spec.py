# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""An EtcdBackup spec, checked and turned into what the backup loop needs.

The API server validates the CRD's schema, but a spec can still be wrong in ways a schema cannot
say (a cron that never fires, an S3 store without a bucket, a schema the API server did not
enforce), so the controller checks again and every message names the field: `spec.store.container:
required for provider S3`.
"""

from __future__ import annotations

import dataclasses
import os
import re
from typing import Any, Dict, List, Mapping, Optional

from ansible_collections.steward.cluster.plugins.module_utils.common import validate
from ansible_collections.steward.cluster.plugins.module_utils.common.durations import parse_duration
from ansible_collections.steward.cluster.plugins.module_utils.common.errors import input_errors_as
from ansible_collections.steward.cluster.plugins.module_utils.etcd.backup.backup_loop import BackupPolicy
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.compression import POLICY_SUFFIX
from ansible_collections.steward.cluster.plugins.module_utils.etcd.backup.cron import parse_cron
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import CronError, SpecError
from ansible_collections.steward.cluster.plugins.module_utils.etcd.backup.gc import POLICIES
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.s3_encryption import (
    MODE_SSE_C,
    MODE_SSE_S3,
    MODES,
    S3Encryption,
    s3_encryption,
)

DEFAULTS: Dict[str, Any] = {
    'fullSnapshotSchedule': '0 */24 * * *',
    'deltaSnapshotPeriod': '20s',
    'deltaSnapshotMemoryLimit': '100Mi',
    'garbageCollectionPolicy': 'LimitBased',
    'garbageCollectionPeriod': '60s',
    'maxBackups': 7,
    'deltaSnapshotRetentionPeriod': '0s',
    'snapshotTimeout': '15m',
    'suspend': False,
}
# Restore verification: daily, half an hour after the default full snapshot (backup_verify.py).
VERIFY_SCHEDULE = '30 0 * * *'
PROVIDERS = ('Local', 'S3')
# spec.store.encryption.mode -> the engine's mode ("None" as etcd-druid users write it)
ENCRYPTION_MODES = {'AES256': 'AES256', 'aws:kms': 'aws:kms', 'SSE-C': 'SSE-C', 'None': 'none'}
_QUANTITY = re.compile(r'^(\d+(?:\.\d+)?)([KMGTPE]i?|k|m)?$')
_QUANTITY_FACTORS = {None: 1, 'k': 10 ** 3, 'K': 10 ** 3, 'M': 10 ** 6, 'G': 10 ** 9, 'T': 10 ** 12, 'P': 10 ** 15,
                     'E': 10 ** 18, 'Ki': 2 ** 10, 'Mi': 2 ** 20, 'Gi': 2 ** 30, 'Ti': 2 ** 40, 'Pi': 2 ** 50,
                     'Ei': 2 ** 60}


def parse_quantity(value: Any, field: str) -> int:
    """A Kubernetes quantity (`100Mi`, `1G`, `1048576`) in bytes."""
    if isinstance(value, bool):
        raise SpecError(field, 'quantity', 'expected a size like 100Mi, got %r' % (value,), value)
    if isinstance(value, int):
        if value < 0:
            raise SpecError(field, 'non-negative', 'must not be negative, got %d' % (value,), value)
        return value
    match = _QUANTITY.match(str(value).strip())
    if not match or match.group(2) == 'm':
        raise SpecError(field, 'quantity', '%r is not a size (expected e.g. 100Mi, 1Gi, 500M or bytes)' % (value,), value)
    return int(float(match.group(1)) * _QUANTITY_FACTORS[match.group(2)])


@dataclasses.dataclass(frozen=True)
class SecretRef:
    name: str


@dataclasses.dataclass(frozen=True)
class BackupSpec:
    endpoints: List[str]
    connection_timeout: float
    tls_secret: Optional[SecretRef]
    auth_secret: Optional[SecretRef]
    provider: str
    store_url: str
    s3_endpoint: Optional[str]
    region: Optional[str]
    store_secret: Optional[SecretRef]
    encryption_mode: str      # s3_encryption MODES; the SSE-C key comes from the store Secret
    kms_key_id: Optional[str]
    policy: BackupPolicy
    suspend: bool


def _secret(value: Any, field: str) -> Optional[SecretRef]:
    if value is None:
        return None
    if not isinstance(value, Mapping) or not isinstance(value.get('name'), str) or not value['name']:
        raise SpecError(field, 'secret-ref', 'expected {name: <secret name>}, got %r' % (value,), value)
    return SecretRef(value['name'])


def _store_url(store: Mapping[str, Any]) -> str:
    provider = store.get('provider')
    if provider not in PROVIDERS:
        raise SpecError('spec.store.provider', 'one-of', 'expected one of %s, got %r' % (', '.join(PROVIDERS), provider), provider)
    if store.get('prefix') is not None:
        validate.text(store.get('prefix'), 'spec.store.prefix')
    prefix = str(store.get('prefix') or '').strip('/')
    if not prefix:
        raise SpecError('spec.store.prefix', 'required', 'required (snapshots go under <prefix>/v2/)')
    if '..' in prefix.split('/'):
        raise SpecError('spec.store.prefix', 'path-component', 'must not contain ".." (%r)' % (prefix,), prefix)
    if provider == 'S3':
        bucket = store.get('container')
        if not bucket or not isinstance(bucket, str) or '/' in bucket:
            raise SpecError('spec.store.container', 'required', 'the bucket name is required for provider S3, got %r' % (bucket,), bucket)
        return 's3://%s/%s' % (bucket, prefix)
    return os.path.join(validate.absolute_path(store.get('path'), 'spec.store.path'), prefix)


@input_errors_as(SpecError)
def parse_backup_spec(spec: Any) -> BackupSpec:
    """The checked spec with defaults applied; SpecError names the first wrong field (the shared checks'
    InvalidInput, durations included, comes as SpecError too)."""
    spec = validate.mapping(spec, 'spec', required=True)
    values = dict(DEFAULTS)
    values.update({k: v for k, v in spec.items() if v is not None})
    etcd = validate.mapping(spec.get('etcd'), 'spec.etcd', required=True)
    endpoints = etcd.get('endpoints')
    if not isinstance(endpoints, list) or not endpoints:
        raise SpecError('spec.etcd.endpoints', 'required', 'expected a non-empty list of client URLs, got %r' % (endpoints,), endpoints)
    for index, endpoint in enumerate(endpoints):
        validate.endpoint_url(endpoint.strip() if isinstance(endpoint, str) else endpoint,
                              'spec.etcd.endpoints[%d]' % index, default_scheme='http')
    store = validate.mapping(spec.get('store'), 'spec.store', required=True)
    try:
        schedule = parse_cron(str(values['fullSnapshotSchedule']))
        schedule.next_after(0)
    except CronError as exc:
        raise exc.recast(SpecError, 'spec.fullSnapshotSchedule') from None
    gc_policy = values['garbageCollectionPolicy']
    if gc_policy not in POLICIES:
        raise SpecError('spec.garbageCollectionPolicy', 'one-of', 'expected one of %s, got %r' % (', '.join(POLICIES), gc_policy), gc_policy)
    max_backups = validate.integer(values['maxBackups'], 'spec.maxBackups', minimum=1)
    compression = validate.mapping(spec.get('compression'), 'spec.compression')
    policy_name = compression.get('policy', 'gzip')
    if policy_name not in POLICY_SUFFIX:
        raise SpecError('spec.compression.policy', 'one-of', 'expected one of %s, got %r' % (', '.join(POLICY_SUFFIX), policy_name),
                        policy_name)
    verification = validate.mapping(spec.get('restoreVerification'), 'spec.restoreVerification')
    verify_schedule = None
    if validate.optional_boolean(verification, 'enabled', True, 'spec.restoreVerification'):
        try:
            verify_schedule = parse_cron(str(verification.get('schedule') or VERIFY_SCHEDULE))
            verify_schedule.next_after(0)
        except CronError as exc:
            raise SpecError('spec.restoreVerification.schedule', 'cron', str(exc), verification.get('schedule')) from None
    compaction = validate.mapping(spec.get('compaction'), 'spec.compaction')
    threshold = validate.integer(compaction.get('eventsThreshold', 1000000), 'spec.compaction.eventsThreshold', minimum=1)
    period = parse_duration(values['deltaSnapshotPeriod'], 'spec.deltaSnapshotPeriod')
    if 0 < period < 1:
        raise SpecError('spec.deltaSnapshotPeriod', 'minimum', 'must be 0 (no deltas) or at least 1s, got %r' % (values['deltaSnapshotPeriod'],),
                        values['deltaSnapshotPeriod'])
    gc_period = parse_duration(values['garbageCollectionPeriod'], 'spec.garbageCollectionPeriod')
    if gc_period < 1:
        raise SpecError('spec.garbageCollectionPeriod', 'minimum', 'must be at least 1s, got %r' % (values['garbageCollectionPeriod'],),
                        values['garbageCollectionPeriod'])
    memory = parse_quantity(values['deltaSnapshotMemoryLimit'], 'spec.deltaSnapshotMemoryLimit')
    if memory < 1024:
        raise SpecError('spec.deltaSnapshotMemoryLimit', 'minimum', 'must be at least 1Ki, got %r' % (values['deltaSnapshotMemoryLimit'],),
                        values['deltaSnapshotMemoryLimit'])
    policy = BackupPolicy(
        full_schedule=schedule, delta_period=period, delta_memory_limit=memory, gc_policy=gc_policy,
        gc_period=gc_period, max_backups=max_backups,
        delta_retention=parse_duration(values['deltaSnapshotRetentionPeriod'], 'spec.deltaSnapshotRetentionPeriod'),
        compression=policy_name if validate.optional_boolean(compression, 'enabled', False, 'spec.compression') else None,
        compaction_enabled=validate.optional_boolean(compaction, 'enabled', False, 'spec.compaction'), compaction_threshold=threshold,
        snapshot_timeout=parse_duration(values['snapshotTimeout'], 'spec.snapshotTimeout') or 900.0,
        verify_schedule=verify_schedule)
    endpoint = store.get('endpoint')
    if endpoint is not None:
        validate.endpoint_url(endpoint, 'spec.store.endpoint')
    region = store.get('region')
    if region is not None:
        validate.text(region, 'spec.store.region', max_length=64)
    encryption = validate.mapping(store.get('encryption'), 'spec.store.encryption')
    mode = ENCRYPTION_MODES.get(str(encryption.get('mode', MODE_SSE_S3)))
    if mode not in MODES:
        raise SpecError('spec.store.encryption.mode', 'one-of', 'expected one of %s, got %r' % (
            ', '.join(ENCRYPTION_MODES), encryption.get('mode')), encryption.get('mode'))
    kms_key_id = encryption.get('kmsKeyId') or None
    if kms_key_id and mode != 'aws:kms':
        raise SpecError('spec.store.encryption.kmsKeyId', 'mode', 'only used with mode aws:kms, not %s' % encryption.get('mode'),
                        kms_key_id)
    if mode == 'SSE-C' and not store.get('secretRef'):
        raise SpecError('spec.store.secretRef', 'required', 'required for encryption mode SSE-C (the key is its sseCustomerKey)')
    return BackupSpec(
        endpoints=[e.strip() for e in endpoints],
        connection_timeout=parse_duration(etcd.get('connectionTimeout', '5s'), 'spec.etcd.connectionTimeout') or 5.0,
        tls_secret=_secret(etcd.get('tlsSecretRef'), 'spec.etcd.tlsSecretRef'),
        auth_secret=_secret(etcd.get('authSecretRef'), 'spec.etcd.authSecretRef'),
        provider=str(store.get('provider')), store_url=_store_url(store), s3_endpoint=endpoint,
        region=region, store_secret=_secret(store.get('secretRef'), 'spec.store.secretRef'),
        encryption_mode=mode, kms_key_id=kms_key_id, policy=policy,
        suspend=validate.boolean(values['suspend'], 'spec.suspend'))


def secret_value(data: Mapping[str, str], keys: List[str], secret: str, what: str) -> str:
    """The first of `keys` in a Secret's decoded data; SpecError says which keys were looked for."""
    for key in keys:
        if data.get(key):
            return data[key]
    raise SpecError('secret %s' % secret, 'key', 'has no %s (looked for key %s)' % (what, ' or '.join(keys)))


@dataclasses.dataclass(frozen=True)
class BackupConnection:
    """What the Secrets of an EtcdBackup give the loop: the etcd client's TLS material (PEM text, to be written to
    private files by the caller) and credentials, and the S3 store's credentials and encryption. Holds secrets:
    never logged, never put in status."""
    ca_cert: Optional[str] = None
    client_cert: Optional[str] = None
    client_key: Optional[str] = None
    user: Optional[str] = None
    password: Optional[str] = dataclasses.field(default=None, repr=False)
    access_key: Optional[str] = None
    secret_key: Optional[str] = dataclasses.field(default=None, repr=False)
    session_token: Optional[str] = dataclasses.field(default=None, repr=False)
    region: Optional[str] = None
    encryption: Optional[S3Encryption] = None


def secret_names(spec: BackupSpec) -> Dict[str, str]:
    """The Secrets a spec names, by the field naming each (`spec.etcd.tlsSecretRef` -> name): what to read."""
    refs = (('spec.etcd.tlsSecretRef', spec.tls_secret), ('spec.etcd.authSecretRef', spec.auth_secret),
            ('spec.store.secretRef', spec.store_secret))
    return {field: ref.name for field, ref in refs if ref is not None}


def connection_from_secrets(spec: BackupSpec, secrets: Mapping[str, Mapping[str, str]]) -> BackupConnection:
    """The connection from the Secrets' decoded data (`secrets`: Secret name -> data), in etcd-backup-restore's
    key vocabulary: TLS `ca.crt` (+ `tls.crt`/`tls.key` for a client certificate); auth `username` (or `user`) and
    `password`; store `accessKeyID`/`secretAccessKey`/`sessionToken`/`region`/`sseCustomerKey`, or the AWS
    environment names `AWS_ACCESS_KEY_ID`/`AWS_SECRET_ACCESS_KEY`/`AWS_SESSION_TOKEN`/`AWS_REGION`. The spec's
    region wins over the Secret's. SpecError (or InvalidInput for the encryption) names the Secret and the keys."""
    out: Dict[str, Any] = {}
    if spec.tls_secret:
        name = spec.tls_secret.name
        data = secrets[name]
        out['ca_cert'] = secret_value(data, ['ca.crt'], name, 'CA certificate')
        if data.get('tls.crt') or data.get('tls.key'):
            out['client_cert'] = secret_value(data, ['tls.crt'], name, 'certificate')
            out['client_key'] = secret_value(data, ['tls.key'], name, 'key')
    if spec.auth_secret:
        name = spec.auth_secret.name
        data = secrets[name]
        out['user'] = secret_value(data, ['username', 'user'], name, 'user name')
        out['password'] = secret_value(data, ['password'], name, 'password')
    customer_key = None
    region = spec.region
    if spec.store_secret:
        name = spec.store_secret.name
        data = secrets[name]
        out['access_key'] = secret_value(data, ['accessKeyID', 'AWS_ACCESS_KEY_ID'], name, 'access key')
        out['secret_key'] = secret_value(data, ['secretAccessKey', 'AWS_SECRET_ACCESS_KEY'], name, 'secret key')
        out['session_token'] = data.get('sessionToken') or data.get('AWS_SESSION_TOKEN')
        region = region or data.get('region') or data.get('AWS_REGION')
        customer_key = data.get('sseCustomerKey') or None
    key_field = 'secret %s key sseCustomerKey' % (spec.store_secret.name if spec.store_secret else '')
    out['encryption'] = s3_encryption(
        mode=spec.encryption_mode, kms_key_id=spec.kms_key_id,
        customer_key=customer_key if spec.encryption_mode == MODE_SSE_C else None,
        fields={'mode': 'spec.store.encryption.mode', 'encrypt': 'spec.store.encryption.mode',
                'kms_key_id': 'spec.store.encryption.kmsKeyId', 'customer_key': key_field})
    return BackupConnection(region=region, **out)
