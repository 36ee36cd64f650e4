# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""An `Etcd` object (etcd-druid's `druid.gardener.cloud/v1alpha1`, a plain dict as the API returns it), checked and
turned into a frozen EtcdSpec with druid's defaults, and the gate that says whether a pass may reconcile its spec.

The CRD's schema catches types; this catches what a schema cannot say or an API server did not enforce (druid's
webhook rules): odd replicas above 1 (ETCD-19), a store without `prefix` (ETCD-04), a cron that never fires, a
quantity or duration Go would not parse. Every refusal names the field path, the value and the rule
(`spec.replicas: must be odd when above 1 ..., got 2 (rule: odd)`), and nothing is applied.

Unknown fields are ignored, not refused: druid's CRD prunes them, and a druid user's older manifests carry legacy
keys (ETCD-07) that must not block the object.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, Mapping, Optional, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.common import validate
from ansible_collections.steward.cluster.plugins.module_utils.common.durations import metav1_duration
from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput, input_errors_as, shown
from ansible_collections.steward.cluster.plugins.module_utils.common.names import dns_label, dns_subdomain
from ansible_collections.steward.cluster.plugins.module_utils.druid.errors import EtcdSpecError
from ansible_collections.steward.cluster.plugins.module_utils.etcd.backup.backup_spec import parse_quantity
from ansible_collections.steward.cluster.plugins.module_utils.etcd.backup.cron import parse_cron
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.druid_store import store_container, store_prefix
from ansible_collections.steward.cluster.plugins.module_utils.kube.selectors import validate_label_selector

GROUP = 'druid.gardener.cloud'
VERSION = 'v1alpha1'
API_VERSION = GROUP + '/' + VERSION
KIND = 'Etcd'
PLURAL = 'etcds'

FINALIZER = 'druid.gardener.cloud/etcd'
OPERATION_ANNOTATION = 'gardener.cloud/operation'
OPERATION_RECONCILE = 'reconcile'
SUSPEND_ANNOTATION = 'druid.gardener.cloud/suspend-etcd-spec-reconcile'

# druid's defaults (ETCD-02/03/06/07; where the seed states none, the sample's value or etcd-backup-restore's).
DEFAULTS: Dict[str, Any] = {
    'clientPort': 2379,
    'serverPort': 2380,
    'backupPort': 8080,
    'quota': '8Gi',
    'metrics': 'basic',
    'heartbeatDuration': '10s',
    'etcdDefragTimeout': '8m',
    'defragmentationSchedule': '0 */24 * * *',
    'fullSnapshotSchedule': '0 */24 * * *',
    'deltaSnapshotPeriod': '20s',
    'deltaSnapshotMemoryLimit': '100Mi',
    'garbageCollectionPolicy': 'Exponential',
    'garbageCollectionPeriod': '1m',
    'etcdSnapshotTimeout': '15m',
    'storageCapacity': '16Gi',
    'autoCompactionMode': 'periodic',
    'autoCompactionRetention': '30m',
    'reelectionPeriod': '5s',
    'etcdConnectionTimeout': '5s',
    'image': 'quay.io/coreos/etcd:v3.5.17',
    'backupImage': 'europe-docker.pkg.dev/gardener-project/public/gardener/etcdbrctl:v0.30.1',
}
METRICS_LEVELS = ('basic', 'extensive')
GC_POLICIES = ('Exponential', 'LimitBased')
COMPACTION_MODES = ('periodic', 'revision')
COMPRESSION_POLICIES = ('gzip', 'lzw', 'zlib')
# ETCD-04: the providers druid's setup names, and the sample's `S3`.
PROVIDERS = ('aws', 'azure', 'gcp', 'openstack', 'alicloud', 'dell', 'openshift', 'local', 'S3', 'ABS', 'GCS', 'Swift',
             'OSS', 'ECS', 'OCS', 'Local')


@dataclasses.dataclass(frozen=True)
class SecretRef:
    name: str
    namespace: str
    data_key: str = ''


@dataclasses.dataclass(frozen=True)
class TLS:
    """TLSConfig (ETCD-05): CA, server and (optional) client certificate Secrets."""
    ca: SecretRef
    server: SecretRef
    client: Optional[SecretRef]


@dataclasses.dataclass(frozen=True)
class Store:
    """StoreSpec (ETCD-04): snapshots live under `<prefix>/v2/` in `container`."""
    prefix: str
    provider: str
    container: str
    secret: Optional[SecretRef]


@dataclasses.dataclass(frozen=True)
class EtcdConfig:
    image: str
    client_port: int
    server_port: int
    quota: int
    metrics: str
    heartbeat: float
    defrag_timeout: float
    defragmentation_schedule: str
    client_tls: Optional[TLS]
    peer_tls: Optional[TLS]
    auth_secret: Optional[SecretRef]
    resources: Mapping[str, Any]
    client_service_annotations: Mapping[str, str]
    client_service_labels: Mapping[str, str]


@dataclasses.dataclass(frozen=True)
class BackupConfig:
    image: str
    port: int
    store: Optional[Store]             # None: no backups (BackupReady is not maintained)
    tls: Optional[TLS]
    full_snapshot_schedule: str
    delta_snapshot_period: float
    delta_snapshot_memory_limit: int
    garbage_collection_policy: str
    garbage_collection_period: float
    snapshot_timeout: float
    compression_enabled: bool
    compression_policy: str
    enable_profiling: bool
    reelection_period: float
    etcd_connection_timeout: float
    max_backups: Optional[int]
    resources: Mapping[str, Any]


@dataclasses.dataclass(frozen=True)
class EtcdSpec:
    """One checked `Etcd`. `generation` is metadata.generation; `uid` the owner references' uid."""
    name: str
    namespace: str
    uid: str
    generation: int
    replicas: int
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    selector: Mapping[str, Any]
    etcd: EtcdConfig
    backup: BackupConfig
    auto_compaction_mode: str
    auto_compaction_retention: str
    storage_class: str
    storage_capacity: str
    volume_claim_template: str
    priority_class_name: str
    scheduling: Mapping[str, Any]

    @property
    def backups_enabled(self) -> bool:
        return self.backup.store is not None

    @property
    def peer_tls_enabled(self) -> bool:
        return self.etcd.peer_tls is not None


def _map(value: Any, field: str) -> Mapping[str, Any]:
    return validate.mapping(value, field) if value is not None else {}


def _strings(value: Any, field: str) -> Dict[str, str]:
    out = {}
    for key, item in _map(value, field).items():
        if not isinstance(item, str):
            raise EtcdSpecError('%s.%s' % (field, key), 'string', 'expected a string, got %s' % shown(item), item)
        out[str(key)] = item
    return out


def _text(section: Mapping[str, Any], key: str, field: str, default: str = '') -> str:
    value = section.get(key)
    if value is None or value == '':
        return default
    return validate.text(value, field)


def _port(section: Mapping[str, Any], key: str, field: str, default: int) -> int:
    value = section.get(key)
    return default if value is None else validate.port(value, field)


def _duration(section: Mapping[str, Any], key: str, field: str, default: str, positive: bool = True) -> float:
    value = section.get(key)
    seconds = metav1_duration(default if value is None else value, field)
    if positive and seconds <= 0:
        raise EtcdSpecError(field, 'positive', 'must be longer than 0s, got %s' % shown(value), value)
    return seconds


def _quantity(section: Mapping[str, Any], key: str, field: str, default: str) -> int:
    value = section.get(key)
    try:
        return parse_quantity(default if value is None else value, field)
    except InvalidInput as exc:
        raise exc.recast(EtcdSpecError) from None


def _cron(section: Mapping[str, Any], key: str, field: str, default: str) -> str:
    value = section.get(key)
    text = default if value is None else validate.text(value, field)
    try:
        parse_cron(text)
    except InvalidInput as exc:
        raise EtcdSpecError(field, 'cron', exc.detail, value) from None
    return text


def _secret_ref(value: Any, field: str, namespace: str) -> Optional[SecretRef]:
    if value is None:
        return None
    ref = validate.mapping(value, field)
    name = dns_subdomain(ref.get('name'), field + '.name')
    ns = ref.get('namespace') or namespace
    data_key = ref.get('dataKey') or ''
    if data_key:
        validate.text(data_key, field + '.dataKey')
    return SecretRef(name=name, namespace=dns_label(ns, field + '.namespace'), data_key=data_key)


def _tls(value: Any, field: str, namespace: str) -> Optional[TLS]:
    if value is None:
        return None
    tls = validate.mapping(value, field)
    ca = _secret_ref(tls.get('tlsCASecretRef'), field + '.tlsCASecretRef', namespace)
    server = _secret_ref(tls.get('serverTLSSecretRef'), field + '.serverTLSSecretRef', namespace)
    if ca is None:
        raise EtcdSpecError(field + '.tlsCASecretRef', 'required', 'required when %s is set' % field)
    if server is None:
        raise EtcdSpecError(field + '.serverTLSSecretRef', 'required', 'required when %s is set' % field)
    return TLS(ca=ca, server=server, client=_secret_ref(tls.get('clientTLSSecretRef'), field + '.clientTLSSecretRef',
                                                        namespace))


def _replicas(value: Any) -> int:
    replicas = validate.integer(0 if value is None else value, 'spec.replicas', minimum=0)
    if replicas > 1 and replicas % 2 == 0:
        raise EtcdSpecError('spec.replicas', 'odd', 'must be odd when above 1 (an even member count adds no fault '
                            'tolerance), got %d' % replicas, replicas)
    return replicas


def _etcd_config(section: Mapping[str, Any], namespace: str) -> EtcdConfig:
    f = 'spec.etcd'
    metrics = section.get('metrics') or DEFAULTS['metrics']
    validate.one_of(metrics, f + '.metrics', METRICS_LEVELS)
    client_port = _port(section, 'clientPort', f + '.clientPort', DEFAULTS['clientPort'])
    server_port = _port(section, 'serverPort', f + '.serverPort', DEFAULTS['serverPort'])
    if client_port == server_port:
        raise EtcdSpecError(f + '.serverPort', 'distinct-ports', 'must differ from %s.clientPort (%d)' % (f, client_port),
                            server_port)
    service = _map(section.get('clientService'), f + '.clientService')
    quota = _quantity(section, 'quota', f + '.quota', DEFAULTS['quota'])
    if quota <= 0:
        raise EtcdSpecError(f + '.quota', 'positive', 'must be larger than 0', section.get('quota'))
    return EtcdConfig(
        image=_text(section, 'image', f + '.image', DEFAULTS['image']),
        client_port=client_port, server_port=server_port, quota=quota, metrics=metrics,
        heartbeat=_duration(section, 'heartbeatDuration', f + '.heartbeatDuration', DEFAULTS['heartbeatDuration']),
        defrag_timeout=_duration(section, 'etcdDefragTimeout', f + '.etcdDefragTimeout', DEFAULTS['etcdDefragTimeout']),
        defragmentation_schedule=_cron(section, 'defragmentationSchedule', f + '.defragmentationSchedule',
                                       DEFAULTS['defragmentationSchedule']),
        client_tls=_tls(section.get('clientUrlTls'), f + '.clientUrlTls', namespace),
        peer_tls=_tls(section.get('peerUrlTls'), f + '.peerUrlTls', namespace),
        auth_secret=_secret_ref(section.get('authSecretRef'), f + '.authSecretRef', namespace),
        resources=dict(_map(section.get('resources'), f + '.resources')),
        client_service_annotations=_strings(service.get('annotations'), f + '.clientService.annotations'),
        client_service_labels=_strings(service.get('labels'), f + '.clientService.labels'),
    )


def _store(value: Any, namespace: str) -> Optional[Store]:
    if value is None:
        return None
    f = 'spec.backup.store'
    store = validate.mapping(value, f)
    prefix = store.get('prefix')
    provider = store.get('provider') or 'Local'
    # The prefix and container rules have one home, the store the member program and the tasks open (druid_store);
    # its SpecError leaves here as this area's EtcdSpecError, with the same field and rule.
    try:
        store_prefix(prefix, f)
        validate.one_of(provider, f + '.provider', PROVIDERS)
        container = store_container(provider, _text(store, 'container', f + '.container'), f)
    except InvalidInput as exc:
        raise exc.recast(EtcdSpecError) from None
    return Store(prefix=prefix, provider=provider, container=container,
                 secret=_secret_ref(store.get('secretRef'), f + '.secretRef', namespace))


def _backup_config(section: Mapping[str, Any], namespace: str) -> BackupConfig:
    f = 'spec.backup'
    policy = section.get('garbageCollectionPolicy') or DEFAULTS['garbageCollectionPolicy']
    validate.one_of(policy, f + '.garbageCollectionPolicy', GC_POLICIES)
    compression = _map(section.get('compression'), f + '.compression')
    compression_policy = compression.get('policy') or 'gzip'
    validate.one_of(compression_policy, f + '.compression.policy', COMPRESSION_POLICIES)
    election = _map(section.get('leaderElection'), f + '.leaderElection')
    max_backups = section.get('maxBackupsLimitBasedGC')
    if max_backups is not None:
        max_backups = validate.integer(max_backups, f + '.maxBackupsLimitBasedGC', minimum=1)
    return BackupConfig(
        image=_text(section, 'image', f + '.image', DEFAULTS['backupImage']),
        port=_port(section, 'port', f + '.port', DEFAULTS['backupPort']),
        store=_store(section.get('store'), namespace),
        tls=_tls(section.get('tls'), f + '.tls', namespace),
        full_snapshot_schedule=_cron(section, 'fullSnapshotSchedule', f + '.fullSnapshotSchedule',
                                     DEFAULTS['fullSnapshotSchedule']),
        delta_snapshot_period=_duration(section, 'deltaSnapshotPeriod', f + '.deltaSnapshotPeriod',
                                        DEFAULTS['deltaSnapshotPeriod'], positive=False),
        delta_snapshot_memory_limit=_quantity(section, 'deltaSnapshotMemoryLimit', f + '.deltaSnapshotMemoryLimit',
                                              DEFAULTS['deltaSnapshotMemoryLimit']),
        garbage_collection_policy=policy,
        garbage_collection_period=_duration(section, 'garbageCollectionPeriod', f + '.garbageCollectionPeriod',
                                            DEFAULTS['garbageCollectionPeriod']),
        snapshot_timeout=_duration(section, 'etcdSnapshotTimeout', f + '.etcdSnapshotTimeout',
                                   DEFAULTS['etcdSnapshotTimeout']),
        compression_enabled=validate.boolean(compression.get('enabled', False), f + '.compression.enabled'),
        compression_policy=compression_policy,
        enable_profiling=validate.boolean(section.get('enableProfiling', False), f + '.enableProfiling'),
        reelection_period=_duration(election, 'reelectionPeriod', f + '.leaderElection.reelectionPeriod',
                                    DEFAULTS['reelectionPeriod']),
        etcd_connection_timeout=_duration(election, 'etcdConnectionTimeout', f + '.leaderElection.etcdConnectionTimeout',
                                          DEFAULTS['etcdConnectionTimeout']),
        max_backups=max_backups,
        resources=dict(_map(section.get('resources'), f + '.resources')),
    )


@input_errors_as(EtcdSpecError)
def parse_etcd(obj: Mapping[str, Any]) -> EtcdSpec:
    """The checked spec of one `Etcd` object; EtcdSpecError naming the field on the first broken rule."""
    obj = validate.mapping(obj, 'Etcd', required=True)
    meta = validate.mapping(obj.get('metadata'), 'metadata', required=True)
    # the pods are <name>-<ordinal> and the Services <name>-client/-peer: the name must stay a DNS label with room
    name = dns_label(meta.get('name'), 'metadata.name')
    if len(name) > 63 - len('-client'):
        raise EtcdSpecError('metadata.name', 'max-length', 'at most %d characters (the Services append -client and '
                            '-peer), got %d' % (63 - len('-client'), len(name)), name)
    namespace = dns_label(meta.get('namespace') or 'default', 'metadata.namespace')
    spec = validate.mapping(obj.get('spec'), 'spec', required=True)
    selector = spec.get('selector')
    selector = validate_label_selector(selector, 'spec.selector') if selector is not None else {}
    labels = _strings(spec.get('labels'), 'spec.labels')
    if selector:
        wanted = selector.get('matchLabels') or {}
        missing = {k: v for k, v in wanted.items() if labels.get(k) != v}
        if missing:
            raise EtcdSpecError('spec.labels', 'selector', 'must contain spec.selector.matchLabels %s (the pods carry '
                                'spec.labels and the StatefulSet selects them)' % missing, labels)
    shared = _map(spec.get('sharedConfig'), 'spec.sharedConfig')
    mode = shared.get('autoCompactionMode') or DEFAULTS['autoCompactionMode']
    validate.one_of(mode, 'spec.sharedConfig.autoCompactionMode', COMPACTION_MODES)
    retention = str(shared.get('autoCompactionRetention') or DEFAULTS['autoCompactionRetention'])
    if mode == 'periodic' and not retention.isdigit():
        metav1_duration(retention, 'spec.sharedConfig.autoCompactionRetention')
    elif mode == 'revision' and not retention.isdigit():
        raise EtcdSpecError('spec.sharedConfig.autoCompactionRetention', 'revisions', 'must be a number of revisions '
                            'for autoCompactionMode revision, got %s' % shown(retention), retention)
    capacity = spec.get('storageCapacity') if spec.get('storageCapacity') is not None else DEFAULTS['storageCapacity']
    parse_quantity(capacity, 'spec.storageCapacity')
    scheduling = _map(spec.get('schedulingConstraints'), 'spec.schedulingConstraints')
    return EtcdSpec(
        name=name, namespace=namespace, uid=str(meta.get('uid') or ''),
        generation=int(meta.get('generation') or 0),
        replicas=_replicas(spec.get('replicas')),
        labels=labels,
        annotations=_strings(spec.get('annotations'), 'spec.annotations'),
        selector=selector,
        etcd=_etcd_config(_map(spec.get('etcd'), 'spec.etcd'), namespace),
        backup=_backup_config(_map(spec.get('backup'), 'spec.backup'), namespace),
        auto_compaction_mode=mode, auto_compaction_retention=retention,
        storage_class=_text(spec, 'storageClass', 'spec.storageClass'),
        storage_capacity=str(capacity),
        volume_claim_template=_text(spec, 'volumeClaimTemplate', 'spec.volumeClaimTemplate', name),
        priority_class_name=_text(spec, 'priorityClassName', 'spec.priorityClassName'),
        scheduling=dict(scheduling),
    )


# ---- the spec-reconcile gate (ETCD-13/14) ----

RECONCILE = 'reconcile'           # apply the spec now
DELETE = 'delete'                 # the object is being deleted: remove the components, then the finalizer
SKIP_SUSPENDED = 'suspended'      # druid.gardener.cloud/suspend-etcd-spec-reconcile is set
SKIP_AWAITING = 'awaiting-annotation'   # a spec change waits for gardener.cloud/operation: reconcile
UP_TO_DATE = 'up-to-date'         # this generation was reconciled already


@dataclasses.dataclass(frozen=True)
class Gate:
    """What a pass may do with the spec, and why (the why is an Event's message when it is a skip)."""
    decision: str
    why: str
    remove_annotation: bool = False   # a reconcile triggered by the operation annotation removes it afterwards


def annotations_of(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return (obj.get('metadata') or {}).get('annotations') or {}


def reconcile_gate(obj: Mapping[str, Any], auto_reconcile: bool) -> Gate:
    """druid's gate: create and delete are never gated; a spec update is reconciled only with
    `gardener.cloud/operation: reconcile` unless `--enable-etcd-spec-auto-reconcile` (or the deprecated
    `--ignore-operation-annotation`) is set; `druid.gardener.cloud/suspend-etcd-spec-reconcile` suspends it all.
    "Created" means never reconciled: no finalizer yet, or no status.observedGeneration."""
    meta = obj.get('metadata') or {}
    annotations = annotations_of(obj)
    if meta.get('deletionTimestamp'):
        return Gate(DELETE, 'the Etcd is being deleted')
    if SUSPEND_ANNOTATION in annotations:
        return Gate(SKIP_SUSPENDED, 'spec reconciliation is suspended by annotation %s' % SUSPEND_ANNOTATION)
    requested = annotations.get(OPERATION_ANNOTATION) == OPERATION_RECONCILE
    observed = (obj.get('status') or {}).get('observedGeneration')
    if FINALIZER not in (meta.get('finalizers') or []) or observed is None:
        return Gate(RECONCILE, 'the Etcd is new', remove_annotation=requested)
    if requested:
        return Gate(RECONCILE, 'annotation %s: %s' % (OPERATION_ANNOTATION, OPERATION_RECONCILE), remove_annotation=True)
    if observed == meta.get('generation'):
        return Gate(UP_TO_DATE, 'generation %s is reconciled' % observed)
    if auto_reconcile:
        return Gate(RECONCILE, 'generation %s changed (--enable-etcd-spec-auto-reconcile)' % meta.get('generation'))
    return Gate(SKIP_AWAITING, 'generation %s is not reconciled: add annotation %s: %s (or run with '
                '--enable-etcd-spec-auto-reconcile)' % (meta.get('generation'), OPERATION_ANNOTATION, OPERATION_RECONCILE))


def member_names(name: str, replicas: int) -> Tuple[str, ...]:
    """Pods and member Leases: `<name>-<ordinal>` (ETCD-12)."""
    return tuple('%s-%d' % (name, i) for i in range(replicas))
