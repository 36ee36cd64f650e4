# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""etcd-druid's API as the collection serves it (controller/deploy/crds/druid.gardener.cloud_*.yaml): a druid
user's manifests apply unchanged to the lab's API emulator (over HTTP, with every CRD installed as `make lab` does),
bad ones are refused with a 422 that names the field, and the scale subresource of an Etcd works. The emulator
judges the objects by the CRDs' openAPIV3Schema and CEL rules only (it imports nothing of the engine)."""

from __future__ import annotations

import copy

import pytest
import yaml

from ansible_collections.steward.cluster.plugins.module_utils.kube.client import api_path
from ansible_collections.steward.cluster.plugins.module_utils.kube.errors import Invalid

API = 'druid.gardener.cloud/v1alpha1'
NS = 'demo'

# Seed 004's sample Etcd (L3751-3831) with the API reference's keys (ETCD-07: the sample's legacy keys
# storageProvider/storePrefix/... are not in the API reference), as a druid user writes it today.
SAMPLE = '''
apiVersion: druid.gardener.cloud/v1alpha1
kind: Etcd
metadata:
  name: test
  namespace: demo
spec:
  annotations:
    app: etcd-statefulset
    gardener.cloud/role: controlplane
    networking.gardener.cloud/to-dns: allowed
    role: test
  labels:
    app: etcd-statefulset
    gardener.cloud/role: controlplane
    networking.gardener.cloud/to-dns: allowed
    role: test
  backup:
    deltaSnapshotMemoryLimit: 1Gi
    deltaSnapshotPeriod: 300s
    fullSnapshotSchedule: 0 */24 * * *
    garbageCollectionPeriod: 43200s
    garbageCollectionPolicy: Exponential
    image: europe-docker.pkg.dev/gardener-project/public/gardener/etcdbrctl:v0.25.0
    port: 8080
    resources:
      limits: {cpu: 500m, memory: 2Gi}
      requests: {cpu: 23m, memory: 128Mi}
    compression: {enabled: true, policy: gzip}
    leaderElection: {reelectionPeriod: 5s, etcdConnectionTimeout: 5s}
    store:
      container: test
      provider: S3
      prefix: etcd-test
      secretRef: {name: etcd-backup}
  etcd:
    quota: 8Gi
    clientPort: 2379
    serverPort: 2380
    defragmentationSchedule: 0 */24 * * *
    image: europe-docker.pkg.dev/gardener-project/public/gardener/etcd-wrapper:v0.1.0
    metrics: basic
    heartbeatDuration: 10s
    etcdDefragTimeout: 15m
    resources:
      limits: {cpu: 2500m, memory: 4Gi}
      requests: {cpu: 500m, memory: 1000Mi}
    clientService:
      annotations: {a: b}
      labels: {c: d}
  sharedConfig:
    autoCompactionMode: periodic
    autoCompactionRetention: 30m
  schedulingConstraints:
    affinity:
      podAntiAffinity:
        requiredDuringSchedulingIgnoredDuringExecution:
        - labelSelector: {matchLabels: {app: etcd-statefulset}}
          topologyKey: kubernetes.io/hostname
  priorityClassName: gardener-system-500
  replicas: 1
  storageCapacity: 80Gi
  storageClass: gardener.cloud-fast
'''

# The seed's sample exactly as printed: its legacy keys are unknown to the schema (a real API server prunes
# them), so it applies; only the API reference's keys mean anything.
SEED_SAMPLE_VERBATIM = '''
apiVersion: druid.gardener.cloud/v1alpha1
kind: Etcd
metadata:
  finalizers:
  - druid.gardener.cloud/etcd
  name: test-verbatim
  namespace: demo
spec:
  annotations: {app: etcd-statefulset, role: test}
  backup:
    deltaSnapshotMemoryLimit: 1Gi
    deltaSnapshotPeriod: 300s
    fullSnapshotSchedule: 0 */24 * * *
    garbageCollectionPeriod: 43200s
    garbageCollectionPolicy: Exponential
    imageRepository: europe-docker.pkg.dev/gardener-project/public/gardener/etcdbrctl
    imageVersion: v0.25.0
    port: 8080
    snapstoreTempDir: /var/etcd/data/temp
  etcd:
    Quota: 8Gi
    clientPort: 2379
    defragmentationSchedule: 0 */24 * * *
    enableTLS: false
    initialClusterState: new
    initialClusterToken: new
    metrics: basic
    pullPolicy: IfNotPresent
    serverPort: 2380
  sharedConfig: {autoCompactionMode: periodic, autoCompactionRetention: 30m}
  labels: {app: etcd-statefulset, role: test}
  pvcRetentionPolicy: DeleteAll
  replicas: 1
  storageCapacity: 80Gi
  storageClass: gardener.cloud-fast
  store: {storageContainer: test, storageProvider: S3, storePrefix: etcd-test, storeSecret: etcd-backup}
  tlsClientSecret: etcd-client-tls
  tlsServerSecret: etcd-server-tls
'''

# A druid user's backup to an S3-compatible store: the Secret has etcd-backup-restore's keys.
AWS_SECRET = '''
apiVersion: v1
kind: Secret
metadata:
  name: etcd-backup-aws
  namespace: demo
type: Opaque
stringData:
  accessKeyID: AKIAIOSFODNN7EXAMPLE
  secretAccessKey: wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY
  region: eu-central-1
  endpoint: http://127.0.0.1:9000
  s3ForcePathStyle: "true"
'''

AWS_ETCD = '''
apiVersion: druid.gardener.cloud/v1alpha1
kind: Etcd
metadata:
  name: etcd-main
  namespace: demo
  annotations:
    gardener.cloud/operation: reconcile
spec:
  labels: {app: etcd-main, role: main}
  replicas: 1
  etcd:
    quota: 2Gi
    image: quay.io/coreos/etcd:v3.5.17
  backup:
    fullSnapshotSchedule: "*/30 1,13 * * 1-5"
    deltaSnapshotPeriod: 60s
    garbageCollectionPolicy: LimitBased
    maxBackupsLimitBasedGC: 7
    store:
      provider: aws
      container: etcd-backups
      prefix: demo--etcd-main
      secretRef: {name: etcd-backup-aws}
'''

COPY_TASK = '''
apiVersion: druid.gardener.cloud/v1alpha1
kind: EtcdCopyBackupsTask
metadata:
  name: copy-main
  namespace: demo
spec:
  sourceStore: {provider: aws, container: etcd-backups, prefix: demo--etcd-main, secretRef: {name: etcd-backup-aws}}
  targetStore: {provider: local, container: copies, prefix: demo--etcd-main}
  maxBackupAge: 7
  maxBackups: 3
  waitForFinalSnapshot: {enabled: true, timeout: 10m}
'''

OPERATOR_TASK = '''
apiVersion: druid.gardener.cloud/v1alpha1
kind: EtcdOperatorTask
metadata:
  name: snapshot-now
  namespace: demo
spec:
  type: OnDemandSnaphotTask
  config: "type: full"
  ttlSecondsAfterFinished: 600
  ownerEtcdRefrence: {name: etcd-main, namespace: demo}
'''


def load(text):
    return yaml.safe_load(text)


def etcds(name=None):
    return api_path(API, 'etcds', NS, name)


def refusal(kube, obj, plural='etcds'):
    """The 422 message of creating `obj` (which must be refused)."""
    with pytest.raises(Invalid) as caught:
        kube.create(api_path(API, plural, NS), obj)
    assert caught.value.status == 422
    assert kube.get_or_none(api_path(API, plural, NS, obj['metadata']['name'])) is None
    return str(caught.value)


def with_spec(base, path, value):
    """`base` with spec.<path> set (None: removed)."""
    obj = copy.deepcopy(load(base))
    node = obj['spec']
    keys = path.split('.')
    for key in keys[:-1]:
        node = node.setdefault(key, {})
    if value is None:
        node.pop(keys[-1], None)
    else:
        node[keys[-1]] = value
    return obj


def test_a_druid_users_manifests_apply_unchanged(kube):
    sample = kube.create(etcds(), load(SAMPLE))
    assert sample['spec'] == load(SAMPLE)['spec']
    verbatim = kube.create(etcds(), load(SEED_SAMPLE_VERBATIM))
    assert verbatim['metadata']['finalizers'] == ['druid.gardener.cloud/etcd']
    secret = kube.create(api_path('v1', 'secrets', NS), load(AWS_SECRET))
    assert set(secret.get('stringData') or secret.get('data')) == {
        'accessKeyID', 'secretAccessKey', 'region', 'endpoint', 's3ForcePathStyle'}
    main = kube.create(etcds(), load(AWS_ETCD))
    assert main['spec']['backup']['store'] == load(AWS_ETCD)['spec']['backup']['store']
    assert main['metadata']['annotations'] == {'gardener.cloud/operation': 'reconcile'}
    assert kube.create(api_path(API, 'etcdcopybackupstasks', NS), load(COPY_TASK))['spec']['maxBackups'] == 3
    task = kube.create(api_path(API, 'etcdoperatortasks', NS), load(OPERATOR_TASK))
    assert task['spec']['ownerEtcdRefrence'] == {'name': 'etcd-main', 'namespace': NS}
    assert sorted(e['metadata']['name'] for e in kube.list(etcds())) == ['etcd-main', 'test', 'test-verbatim']


@pytest.mark.parametrize('path, value, field, words', [
    ('replicas', 2, 'spec.replicas', 'replicas must be odd when greater than 1'),
    ('replicas', 4, 'spec.replicas', 'odd'),
    ('replicas', -1, 'spec.replicas', 'minimum'),
    ('replicas', '3', 'spec.replicas', "is not of type 'integer'"),
    ('replicas', None, 'spec', "'replicas' is a required property"),
    ('labels', None, 'spec', "'labels' is a required property"),
    ('backup.store.prefix', None, 'spec.backup.store', "'prefix' is a required property"),
    ('backup.store.prefix', '', 'spec.backup.store.prefix', 'non-empty'),
    ('backup.store.provider', 'dropbox', 'spec.backup.store.provider', 'is not one of'),
    ('backup.store.endpointOverride', 'minio at 9000', 'spec.backup.store.endpointOverride', 'valid URL'),
    ('etcd.quota', 'lots', 'spec.etcd.quota', 'does not match'),
    ('etcd.quota', True, 'spec.etcd.quota', 'is not valid'),
    ('storageCapacity', '80 GB', 'spec.storageCapacity', 'does not match'),
    ('backup.deltaSnapshotMemoryLimit', '1GiB', 'spec.backup.deltaSnapshotMemoryLimit', 'does not match'),
    ('backup.deltaSnapshotPeriod', '5 minutes', 'spec.backup.deltaSnapshotPeriod', 'does not match'),
    ('backup.garbageCollectionPeriod', '60s', 'spec.backup', 'garbageCollectionPeriod must be greater than'),
    ('backup.garbageCollectionPolicy', 'Never', 'spec.backup.garbageCollectionPolicy', 'is not one of'),
    ('backup.fullSnapshotSchedule', 'every day', 'spec.backup.fullSnapshotSchedule', 'does not match'),
    ('backup.fullSnapshotSchedule', '75 */24 * * *', 'spec.backup.fullSnapshotSchedule', 'does not match'),
    ('etcd.defragmentationSchedule', '0 0 * * * *', 'spec.etcd.defragmentationSchedule', 'does not match'),
    ('backup.port', '8080', 'spec.backup.port', "is not of type 'integer'"),
    ('etcd.clientPort', 70000, 'spec.etcd.clientPort', 'maximum'),
    ('etcd.metrics', 'verbose', 'spec.etcd.metrics', 'is not one of'),
    ('etcd.peerUrlTls', {'serverTLSSecretRef': {'name': 'x'}}, 'spec.etcd.peerUrlTls', "'tlsCASecretRef' is a required"),
    ('backup.compression.enabled', 'yes', 'spec.backup.compression.enabled', "is not of type 'boolean'"),
    ('sharedConfig.autoCompactionMode', 'hourly', 'spec.sharedConfig.autoCompactionMode', 'is not one of'),
    ('labels', {'app': 3}, 'spec.labels.app', "is not of type 'string'"),
    ('memberNamePrefix', 'main', 'spec', 'memberNamePrefix is not supported'),
    ('etcd.bootstrapWithExistingCluster', {'members': []}, 'spec.etcd', 'bootstrapWithExistingCluster is not supported'),
])
def test_bad_etcds_are_refused_naming_the_field(kube, path, value, field, words):
    message = refusal(kube, with_spec(SAMPLE, path, value))
    assert 'Etcd "test" is invalid: ' + field + ':' in message, message
    assert words in message, message


def test_bad_tasks_are_refused_naming_the_field(kube):
    task = load(COPY_TASK)
    del task['spec']['targetStore']
    assert "spec: 'targetStore' is a required property" in refusal(kube, task, 'etcdcopybackupstasks')
    task = load(COPY_TASK)
    task['spec']['maxBackupAge'] = -1
    assert 'spec.maxBackupAge:' in refusal(kube, task, 'etcdcopybackupstasks')
    task = load(COPY_TASK)
    task['spec']['waitForFinalSnapshot']['timeout'] = 'soon'
    assert 'spec.waitForFinalSnapshot.timeout:' in refusal(kube, task, 'etcdcopybackupstasks')
    task = load(OPERATOR_TASK)
    del task['spec']['ownerEtcdRefrence']
    assert "spec: 'ownerEtcdRefrence' is a required property" in refusal(kube, task, 'etcdoperatortasks')
    task = load(OPERATOR_TASK)
    task['spec']['config'] = {'type': 'full'}
    assert "spec.config: {'type': 'full'} is not of type 'string'" in refusal(kube, task, 'etcdoperatortasks')


def test_updates_keep_druids_immutable_fields_and_task_specs(kube):
    kube.create(etcds(), load(SAMPLE))
    with pytest.raises(Invalid) as caught:
        kube.merge_patch(etcds('test'), {'spec': {'storageClass': 'slow'}})
    assert 'spec.storageClass: Invalid value: "string": etcd.spec.storageClass is an immutable field' in str(caught.value)
    with pytest.raises(Invalid) as caught:
        kube.merge_patch(etcds('test'), {'spec': {'storageClass': None}})
    assert 'etcd.spec.storageClass is an immutable field.' in str(caught.value)
    assert kube.get(etcds('test'))['spec']['storageClass'] == 'gardener.cloud-fast'
    # Other changes go through, with the reconcile annotation a druid user sets.
    patched = kube.merge_patch(etcds('test'), {'metadata': {'annotations': {'gardener.cloud/operation': 'reconcile'}},
                                               'spec': {'replicas': 3}})
    assert patched['spec']['replicas'] == 3 and patched['metadata']['generation'] == 2
    kube.create(api_path(API, 'etcdoperatortasks', NS), load(OPERATOR_TASK))
    with pytest.raises(Invalid) as caught:
        kube.merge_patch(api_path(API, 'etcdoperatortasks', NS, 'snapshot-now'), {'spec': {'config': 'type: delta'}})
    assert 'the spec of a task is immutable' in str(caught.value)
    status = kube.merge_patch(api_path(API, 'etcdoperatortasks', NS, 'snapshot-now') + '/status',
                              {'status': {'state': 'InProgress', 'initiatedAt': '2026-01-01T00:00:00Z'}})
    assert status['status']['state'] == 'InProgress'


def test_the_scale_subresource_of_an_etcd(kube):
    kube.create(etcds(), load(AWS_ETCD))
    kube.merge_patch(etcds('etcd-main') + '/status', {'status': {
        'replicas': 1, 'readyReplicas': 1, 'ready': True, 'clusterSize': 1,
        'labelSelector': {'matchLabels': {'app': 'etcd-main', 'role': 'main'}}, 'selector': 'app=etcd-main,role=main'}})
    scale = kube.get(etcds('etcd-main') + '/scale')
    assert scale['kind'] == 'Scale' and scale['spec'] == {'replicas': 1}
    assert scale['status'] == {'replicas': 1, 'selector': 'app=etcd-main,role=main'}
    scaled = kube.merge_patch(etcds('etcd-main') + '/scale', {'spec': {'replicas': 3}})
    assert scaled['spec'] == {'replicas': 3}
    assert kube.get(etcds('etcd-main'))['spec']['replicas'] == 3
    # The API server validates the Etcd a scale write makes: an even size is refused by the CRD's rule.
    with pytest.raises(Invalid) as caught:
        kube.merge_patch(etcds('etcd-main') + '/scale', {'spec': {'replicas': 2}})
    assert 'spec.replicas: Invalid value: "integer": replicas must be odd when greater than 1' in str(caught.value)
    assert kube.get(etcds('etcd-main'))['spec']['replicas'] == 3
    # Hibernation (0) is allowed (a Scale omits replicas 0, as autoscaling/v1's omitempty does).
    kube.merge_patch(etcds('etcd-main') + '/scale', {'spec': {'replicas': 0}})
    assert kube.get(etcds('etcd-main'))['spec']['replicas'] == 0


def test_a_crd_with_a_cel_rule_the_lab_cannot_evaluate_is_refused(kube):
    crd = {'apiVersion': 'apiextensions.k8s.io/v1', 'kind': 'CustomResourceDefinition',
           'metadata': {'name': 'widgets.example.com'},
           'spec': {'group': 'example.com', 'scope': 'Namespaced',
                    'names': {'plural': 'widgets', 'singular': 'widget', 'kind': 'Widget'},
                    'versions': [{'name': 'v1', 'served': True, 'storage': True, 'schema': {'openAPIV3Schema': {
                        'type': 'object', 'x-kubernetes-validations': [{'rule': 'self.spec.x ~ 1'}]}}}]}}
    crds = api_path('apiextensions.k8s.io/v1', 'customresourcedefinitions')
    with pytest.raises(Invalid) as caught:
        kube.create(crds, crd)
    assert 'spec.versions[0].schema.openAPIV3Schema: the lab emulator cannot evaluate this CEL rule' in str(caught.value)
    assert kube.get_or_none(crds + '/widgets.example.com') is None
