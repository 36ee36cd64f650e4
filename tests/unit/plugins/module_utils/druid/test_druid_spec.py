"""druid/spec.py: an `Etcd` object -> EtcdSpec with druid's defaults, refusals naming field, value and rule, and the
spec-reconcile gate (ETCD-13/14)."""

import copy

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.druid import spec as s
from ansible_collections.steward.cluster.plugins.module_utils.druid.errors import DruidError, EtcdSpecError

from support.druid_samples import sample


def test_sample_parses_with_druids_defaults():
    spec = s.parse_etcd(sample())
    assert (spec.name, spec.namespace, spec.replicas, spec.generation) == ('etcd-main', 'shoot', 1, 1)
    assert (spec.etcd.client_port, spec.etcd.server_port, spec.backup.port) == (2379, 2380, 8080)
    assert spec.etcd.heartbeat == 10.0 and spec.etcd.quota == 8 * 2 ** 30
    assert spec.backup.delta_snapshot_period == 300.0 and spec.backup.delta_snapshot_memory_limit == 2 ** 30
    assert spec.backup.store.prefix == 'etcd-main' and spec.backup.store.secret.name == 'etcd-backup'
    assert spec.backup.store.secret.namespace == 'shoot' and spec.backups_enabled and not spec.peer_tls_enabled
    assert spec.volume_claim_template == 'main-etcd'


def test_minimal_object_takes_every_default():
    obj = {'metadata': {'name': 'e', 'namespace': 'n'}, 'spec': {'replicas': 3, 'labels': {'a': 'b'}}}
    spec = s.parse_etcd(obj)
    assert spec.replicas == 3 and not spec.backups_enabled
    assert spec.etcd.metrics == 'basic' and spec.etcd.heartbeat == 10.0 and spec.etcd.quota == 8 * 2 ** 30
    assert spec.backup.full_snapshot_schedule == '0 */24 * * *' and spec.backup.garbage_collection_policy == 'Exponential'
    assert spec.auto_compaction_mode == 'periodic' and spec.auto_compaction_retention == '30m'
    assert spec.volume_claim_template == 'e' and spec.storage_capacity == '16Gi'


@pytest.mark.parametrize('change, field, rule', [
    ({'replicas': 2}, 'spec.replicas', 'odd'),
    ({'replicas': 4}, 'spec.replicas', 'odd'),
    ({'replicas': -1}, 'spec.replicas', 'minimum'),
    ({'replicas': '3'}, 'spec.replicas', 'integer'),
    ({'backup': {'store': {'provider': 'aws', 'container': 'b'}}}, 'spec.backup.store.prefix', 'required'),
    ({'backup': {'store': {'prefix': 'p', 'provider': 'aws'}}}, 'spec.backup.store.container', 'required'),
    ({'backup': {'store': {'prefix': 'p', 'provider': 'ftp'}}}, 'spec.backup.store.provider', 'choice'),
    # The store rules of etcd/store/druid_store (one home), recast to EtcdSpecError with the spec's field.
    ({'backup': {'store': {'prefix': 'a/../b', 'provider': 'aws', 'container': 'b'}}}, 'spec.backup.store.prefix',
     'path-component'),
    ({'backup': {'store': {'prefix': 'p', 'provider': 'aws', 'container': 'b/c'}}}, 'spec.backup.store.container',
     'required'),
    ({'backup': {'store': {'prefix': 'p', 'provider': 'Local', 'container': 'a/b'}}}, 'spec.backup.store.container',
     'directory-name'),
    ({'backup': {'fullSnapshotSchedule': '0 */24 * *'}}, 'spec.backup.fullSnapshotSchedule', 'cron'),
    ({'etcd': {'defragmentationSchedule': '61 * * * *'}}, 'spec.etcd.defragmentationSchedule', 'cron'),
    ({'etcd': {'quota': '8 gigs'}}, 'spec.etcd.quota', 'quantity'),
    ({'storageCapacity': 'lots'}, 'spec.storageCapacity', 'quantity'),
    ({'backup': {'deltaSnapshotMemoryLimit': '1Gb'}}, 'spec.backup.deltaSnapshotMemoryLimit', 'quantity'),
    ({'backup': {'deltaSnapshotPeriod': '5 minutes'}}, 'spec.backup.deltaSnapshotPeriod', 'duration'),
    ({'etcd': {'heartbeatDuration': 10}}, 'spec.etcd.heartbeatDuration', 'duration'),
    ({'etcd': {'heartbeatDuration': '0s'}}, 'spec.etcd.heartbeatDuration', 'positive'),
    ({'etcd': {'metrics': 'verbose'}}, 'spec.etcd.metrics', 'choice'),
    ({'etcd': {'clientPort': 2380}}, 'spec.etcd.serverPort', 'distinct-ports'),
    ({'etcd': {'clientPort': 70000}}, 'spec.etcd.clientPort', 'maximum'),
    ({'etcd': {'peerUrlTls': {'serverTLSSecretRef': {'name': 's'}}}}, 'spec.etcd.peerUrlTls.tlsCASecretRef', 'required'),
    ({'backup': {'garbageCollectionPolicy': 'Forever'}}, 'spec.backup.garbageCollectionPolicy', 'choice'),
    ({'sharedConfig': {'autoCompactionMode': 'revision', 'autoCompactionRetention': '30m'}},
     'spec.sharedConfig.autoCompactionRetention', 'revisions'),
    ({'labels': {'app': 'other'}}, 'spec.labels', 'selector'),
])
def test_refusals_name_field_value_and_rule(change, field, rule):
    obj = sample()
    for key, value in change.items():
        if isinstance(value, dict) and isinstance(obj['spec'].get(key), dict) and key != 'labels':
            obj['spec'][key] = dict(obj['spec'][key], **value)
        else:
            obj['spec'][key] = value
    with pytest.raises(EtcdSpecError) as info:
        s.parse_etcd(obj)
    assert isinstance(info.value, DruidError)
    assert (info.value.field, info.value.rule) == (field, rule), str(info.value)
    assert str(info.value).startswith(field)


def test_odd_replicas_message_says_the_value_and_why():
    with pytest.raises(EtcdSpecError) as info:
        s.parse_etcd(sample(replicas=2))
    assert info.value.explained() == ('spec.replicas: must be odd when above 1 (an even member count adds no fault '
                                      'tolerance), got 2 (rule: odd)')


def test_long_names_are_refused_before_services_overflow():
    obj = sample()
    obj['metadata']['name'] = 'e' * 60
    with pytest.raises(EtcdSpecError) as info:
        s.parse_etcd(obj)
    assert info.value.field == 'metadata.name' and info.value.rule == 'max-length'


def test_legacy_sample_keys_are_ignored_not_refused():
    obj = sample()
    obj['spec']['store'] = {'storageContainer': 'x', 'storePrefix': 'y'}
    obj['spec']['pvcRetentionPolicy'] = 'DeleteAll'
    assert s.parse_etcd(obj).replicas == 1


def _obj(generation=2, observed=1, annotations=None, finalizers=(s.FINALIZER,), deleting=False):
    obj = copy.deepcopy(sample())
    obj['metadata'].update(generation=generation, annotations=dict(annotations or {}), finalizers=list(finalizers))
    if deleting:
        obj['metadata']['deletionTimestamp'] = '2026-11-27T00:00:00Z'
    if observed is not None:
        obj['status'] = {'observedGeneration': observed}
    return obj


@pytest.mark.parametrize('kw, auto, decision, remove', [
    (dict(finalizers=()), False, s.RECONCILE, False),                     # create is never gated
    (dict(observed=None), False, s.RECONCILE, False),
    (dict(), False, s.SKIP_AWAITING, False),                              # an update waits for the annotation
    (dict(annotations={s.OPERATION_ANNOTATION: 'reconcile'}), False, s.RECONCILE, True),
    (dict(), True, s.RECONCILE, False),                                   # --enable-etcd-spec-auto-reconcile
    (dict(generation=1), False, s.UP_TO_DATE, False),
    (dict(generation=1), True, s.UP_TO_DATE, False),
    (dict(annotations={s.SUSPEND_ANNOTATION: ''}), True, s.SKIP_SUSPENDED, False),
    (dict(annotations={s.SUSPEND_ANNOTATION: '', s.OPERATION_ANNOTATION: 'reconcile'}), False, s.SKIP_SUSPENDED, False),
    (dict(deleting=True, annotations={s.SUSPEND_ANNOTATION: ''}), False, s.DELETE, False),   # delete is never gated
    (dict(annotations={s.OPERATION_ANNOTATION: 'other'}), False, s.SKIP_AWAITING, False),
])
def test_reconcile_gate(kw, auto, decision, remove):
    gate = s.reconcile_gate(_obj(**kw), auto)
    assert (gate.decision, gate.remove_annotation) == (decision, remove), gate.why
    assert gate.why


def test_awaiting_gate_tells_how_to_proceed():
    gate = s.reconcile_gate(_obj(), False)
    assert 'gardener.cloud/operation: reconcile' in gate.why and '--enable-etcd-spec-auto-reconcile' in gate.why
