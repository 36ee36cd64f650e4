# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The objects druid manages for one `Etcd` (ETCD-12), built as plain dicts from an EtcdSpec: pure, no API calls.

Names are druid's: StatefulSet `<name>`, pods and member Leases `<name>-<ordinal>`, snapshot Leases
`<name>-full-snap` / `<name>-delta-snap`, Services `<name>-client` (ClusterIP) and headless `<name>-peer`, ConfigMap
`etcd-bootstrap-<hash of the uid>` mounted as volume `etcd-config-file`, PVCs `<volumeClaimTemplate>-<name>-<i>`
labelled `instance=<name>`. Every object carries the Etcd's owner reference and the labels `name: etcd`,
`instance: <name>`, `app.kubernetes.io/managed-by: etcd-druid`, `app.kubernetes.io/part-of: <name>`; `is_ours`
checks both before the loop changes or deletes anything (an object of the same name that is not ours is reported,
never touched).

Members reach each other at druid's DNS names `<sts>-<i>.<peer-svc>.<ns>.svc` (ETCD-12, L4835); `initial-cluster`
is `name=peerURL,...` (L7955). The bootstrap ConfigMap is the template each member's sidecar renders (ETCD-35).

Stricter than druid: the StatefulSet's updateStrategy is OnDelete, so no pod restarts because the template changed;
the planner (plan.py) restarts members one at a time, followers first and the leader last, each only while the
cluster is fully Ready with a fresh backup. Pods carry the template's hash (TEMPLATE_HASH) to tell old from new.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Dict, List, Mapping, Optional, Tuple


from ansible_collections.steward.cluster.plugins.module_utils.common.yaml_text import load_yaml
from ansible_collections.steward.cluster.plugins.module_utils.druid.spec import API_VERSION, KIND, EtcdSpec, member_names
from ansible_collections.steward.cluster.plugins.module_utils.kube.selectors import label_selector_string

MANAGED_BY = 'etcd-druid'
LABEL_NAME = 'name'
LABEL_INSTANCE = 'instance'
LABEL_MANAGED_BY = 'app.kubernetes.io/managed-by'
LABEL_PART_OF = 'app.kubernetes.io/part-of'
LABEL_COMPONENT = 'app.kubernetes.io/component'
SCALED_TO_MULTI_NODE = 'gardener.cloud/scaled-to-multi-node'
CREATE_AS_LEARNER = 'druid.gardener.cloud/create-as-learner'
# Ours: the member program says on its Lease whether its etcd is a learner ("true"/"false", every heartbeat), so a
# scale-up's joining members do not count toward the quorum the status reports.
MEMBER_LEARNER = 'cluster.steward.io/learner'
TLS_ENABLED = 'member.etcd.gardener.cloud/tls-enabled'
CONFIG_CHECKSUM = 'checksum/etcd-configmap'
# Ours, beyond druid: the pod template's hash on the template (and so on every pod it made), for OnDelete rolling.
TEMPLATE_HASH = 'cluster.steward.io/pod-template-hash'
# The etcd container's preStop hook asks its member program (the backup-restore container) here to move leadership
# off this member before the kubelet signals etcd (steward-etcd-member serves it; docs/etcd-druid.md).
HANDOFF_PATH = '/leader/handoff'
CONFIG_VOLUME = 'etcd-config-file'
CONFIG_KEY = 'etcd.conf.yaml'
PEER_TLS_VOLUMES = 'peer-url'   # the peer TLS Secrets' volumes: peer-url-ca, peer-url-server
CONFIG_DIR = '/var/etcd/config'
DATA_DIR = '/var/etcd/data'
FULL_SNAP = 'full-snap'
DELTA_SNAP = 'delta-snap'

# component -> (apiVersion, kind, plural) as the loop addresses them
KINDS: Dict[str, Tuple[str, str, str]] = {
    'statefulset': ('apps/v1', 'StatefulSet', 'statefulsets'),
    'configmap': ('v1', 'ConfigMap', 'configmaps'),
    'client-service': ('v1', 'Service', 'services'),
    'peer-service': ('v1', 'Service', 'services'),
    'member-lease': ('coordination.k8s.io/v1', 'Lease', 'leases'),
    'snapshot-lease': ('coordination.k8s.io/v1', 'Lease', 'leases'),
    'poddisruptionbudget': ('policy/v1', 'PodDisruptionBudget', 'poddisruptionbudgets'),
    'serviceaccount': ('v1', 'ServiceAccount', 'serviceaccounts'),
    'role': ('rbac.authorization.k8s.io/v1', 'Role', 'roles'),
    'rolebinding': ('rbac.authorization.k8s.io/v1', 'RoleBinding', 'rolebindings'),
}
# druid's component label values
COMPONENT_LABEL = {
    'statefulset': 'etcd-statefulset', 'configmap': 'etcd-config', 'client-service': 'etcd-client-service',
    'peer-service': 'etcd-peer-service', 'member-lease': 'etcd-member-lease', 'snapshot-lease': 'etcd-snapshot-lease',
    'poddisruptionbudget': 'etcd-pdb', 'serviceaccount': 'etcd-service-account', 'role': 'etcd-druid-role',
    'rolebinding': 'etcd-role-binding',
}


# ---- names ----

def statefulset_name(spec: EtcdSpec) -> str:
    return spec.name


def client_service_name(spec: EtcdSpec) -> str:
    return spec.name + '-client'


def peer_service_name(spec: EtcdSpec) -> str:
    return spec.name + '-peer'


def snapshot_lease_name(spec: EtcdSpec, kind: str) -> str:
    """`<name>-full-snap` / `<name>-delta-snap` (ETCD-12)."""
    return '%s-%s' % (spec.name, kind)


def configmap_name(spec: EtcdSpec) -> str:
    """`etcd-bootstrap-<6 hex of the uid>` (L7915): stable for the object's life, new for a re-created Etcd."""
    return 'etcd-bootstrap-' + hashlib.sha256((spec.uid or spec.namespace + '/' + spec.name).encode()).hexdigest()[:6]


def role_name(spec: EtcdSpec) -> str:
    return 'druid.gardener.cloud:etcd:' + spec.name


def pvc_names(spec: EtcdSpec, replicas: int) -> Tuple[str, ...]:
    return tuple('%s-%s' % (spec.volume_claim_template, pod) for pod in member_names(spec.name, replicas))


def peer_url(spec: EtcdSpec, member: str) -> str:
    scheme = 'https' if spec.peer_tls_enabled else 'http'
    return '%s://%s.%s.%s.svc:%d' % (scheme, member, peer_service_name(spec), spec.namespace, spec.etcd.server_port)


def client_url(spec: EtcdSpec, member: str) -> str:
    scheme = 'https' if spec.etcd.client_tls else 'http'
    return '%s://%s.%s.%s.svc:%d' % (scheme, member, peer_service_name(spec), spec.namespace, spec.etcd.client_port)


def initial_cluster(spec: EtcdSpec, replicas: int) -> str:
    """`name=peerURL,...` for ordinals 0..replicas-1 (ETCD-12, L7955)."""
    return ','.join('%s=%s' % (m, peer_url(spec, m)) for m in member_names(spec.name, replicas))


# ---- labels and ownership ----

def base_labels(spec: EtcdSpec) -> Dict[str, str]:
    return {LABEL_NAME: 'etcd', LABEL_INSTANCE: spec.name, LABEL_MANAGED_BY: MANAGED_BY, LABEL_PART_OF: spec.name}


def labels_for(spec: EtcdSpec, component: str) -> Dict[str, str]:
    return dict(base_labels(spec), **{LABEL_COMPONENT: COMPONENT_LABEL[component]})


def pod_selector(spec: EtcdSpec) -> Dict[str, str]:
    """spec.selector's matchLabels when given (druid users set it), else `name: etcd, instance: <name>`."""
    given = dict(spec.selector.get('matchLabels') or {}) if spec.selector else {}
    return given or {LABEL_NAME: 'etcd', LABEL_INSTANCE: spec.name}


def label_selector(spec: EtcdSpec) -> Dict[str, Any]:
    """status.labelSelector: a metav1.LabelSelector, as druid's API types it."""
    return {'matchLabels': dict(pod_selector(spec))}


def selector_string(spec: EtcdSpec) -> str:
    """status.selector: the same selector serialized (the scale subresource's labelSelectorPath names a string)."""
    return label_selector_string(label_selector(spec))


def owner_reference(spec: EtcdSpec) -> Dict[str, Any]:
    return {'apiVersion': API_VERSION, 'kind': KIND, 'name': spec.name, 'uid': spec.uid, 'controller': True,
            'blockOwnerDeletion': True}


def is_ours(spec: EtcdSpec, obj: Optional[Mapping[str, Any]]) -> bool:
    """Owned by this Etcd (owner reference uid) and labelled as druid's for it. Only such objects are ever patched or
    deleted; a same-named object of someone else's is a conflict to report."""
    if not obj:
        return False
    meta = obj.get('metadata') or {}
    labels = meta.get('labels') or {}
    owned = any(ref.get('uid') == spec.uid and ref.get('kind') == KIND for ref in meta.get('ownerReferences') or [])
    return owned and labels.get(LABEL_MANAGED_BY) == MANAGED_BY and labels.get(LABEL_PART_OF) == spec.name


def _meta(spec: EtcdSpec, component: str, name: str, labels: Optional[Mapping[str, str]] = None,
          annotations: Optional[Mapping[str, str]] = None) -> Dict[str, Any]:
    meta: Dict[str, Any] = {'name': name, 'namespace': spec.namespace,
                            'labels': dict(labels or {}, **labels_for(spec, component)),
                            'ownerReferences': [owner_reference(spec)]}
    if annotations:
        meta['annotations'] = dict(annotations)
    return meta


def _object(spec: EtcdSpec, component: str, name: str, body: Mapping[str, Any], **meta: Any) -> Dict[str, Any]:
    api_version, kind, _plural = KINDS[component]
    return dict({'apiVersion': api_version, 'kind': kind, 'metadata': _meta(spec, component, name, **meta)}, **body)


# ---- the objects ----

def bootstrap_config(spec: EtcdSpec, replicas: int) -> Dict[str, Any]:
    """etcd.conf.yaml: the template each member's sidecar renders (ETCD-35). Per-member URLs are maps keyed by pod
    name, as druid writes them; `initial-cluster-state` is `new` and the sidecar turns it to `existing` for a member
    that joins a running cluster (ETCD-32/33)."""
    members = member_names(spec.name, replicas)
    peer_scheme = 'https' if spec.peer_tls_enabled else 'http'
    client_scheme = 'https' if spec.etcd.client_tls else 'http'
    config: Dict[str, Any] = {
        'name': 'etcd-' + configmap_name(spec)[-6:],
        'data-dir': DATA_DIR + '/new.etcd',
        'metrics': spec.etcd.metrics,
        'snapshot-count': 75000,
        'enable-v2': False,
        # etcd 3.4 read from a config file leaves its JSON gateway off (3.5 turns it on): the member-side program
        # and the controller speak to etcd through it (DESIGN: the v3 JSON gateway), so a 3.4 image needs it named
        'enable-grpc-gateway': True,
        'quota-backend-bytes': spec.etcd.quota,
        'listen-client-urls': '%s://0.0.0.0:%d' % (client_scheme, spec.etcd.client_port),
        'advertise-client-urls': {m: [client_url(spec, m)] for m in members},
        'listen-peer-urls': '%s://0.0.0.0:%d' % (peer_scheme, spec.etcd.server_port),
        'initial-advertise-peer-urls': {m: [peer_url(spec, m)] for m in members},
        'initial-cluster-token': 'etcd-cluster',
        'initial-cluster-state': 'new',
        'initial-cluster': initial_cluster(spec, replicas),
        'auto-compaction-mode': spec.auto_compaction_mode,
        'auto-compaction-retention': spec.auto_compaction_retention,
    }
    if spec.etcd.client_tls:
        config['client-transport-security'] = {
            'cert-file': '/var/etcd/ssl/server/tls.crt', 'key-file': '/var/etcd/ssl/server/tls.key',
            'client-cert-auth': True, 'trusted-ca-file': '/var/etcd/ssl/ca/' + (spec.etcd.client_tls.ca.data_key or 'ca.crt'),
            'auto-tls': False}
    if spec.etcd.peer_tls:
        config['peer-transport-security'] = {
            'cert-file': '/var/etcd/ssl/peer/server/tls.crt', 'key-file': '/var/etcd/ssl/peer/server/tls.key',
            'client-cert-auth': True,
            'trusted-ca-file': '/var/etcd/ssl/peer/ca/' + (spec.etcd.peer_tls.ca.data_key or 'ca.crt'), 'auto-tls': False}
    return config


def configmap(spec: EtcdSpec, replicas: int) -> Dict[str, Any]:
    import yaml  # PyYAML (an ansible-core dependency), imported where it is used
    text = yaml.safe_dump(bootstrap_config(spec, replicas), sort_keys=False, default_flow_style=False)
    return _object(spec, 'configmap', configmap_name(spec), {'data': {CONFIG_KEY: text}})


# Read by a member only when it first starts: a scale-up changes them without restarting the running members.
MEMBERSHIP_KEYS = ('initial-cluster', 'initial-advertise-peer-urls', 'advertise-client-urls')


def config_checksum(cm: Mapping[str, Any]) -> str:
    """The pod template's checksum of the bootstrap config, without the membership keys: a scale-up rewrites the
    member list, and that must not roll the members that are running (only a real config change does)."""
    config = load_yaml((cm.get('data') or {}).get(CONFIG_KEY) or '{}', 'data.' + CONFIG_KEY) or {}
    kept = {k: v for k, v in config.items() if k not in MEMBERSHIP_KEYS}
    return hashlib.sha256(json.dumps(kept, sort_keys=True).encode()).hexdigest()


def client_service(spec: EtcdSpec) -> Dict[str, Any]:
    ports = [{'name': 'client', 'protocol': 'TCP', 'port': spec.etcd.client_port, 'targetPort': spec.etcd.client_port},
             {'name': 'server', 'protocol': 'TCP', 'port': spec.etcd.server_port, 'targetPort': spec.etcd.server_port},
             {'name': 'backuprestore', 'protocol': 'TCP', 'port': spec.backup.port, 'targetPort': spec.backup.port}]
    return _object(spec, 'client-service', client_service_name(spec),
                   {'spec': {'type': 'ClusterIP', 'sessionAffinity': 'None', 'selector': pod_selector(spec), 'ports': ports}},
                   labels=spec.etcd.client_service_labels, annotations=spec.etcd.client_service_annotations)


def peer_service(spec: EtcdSpec) -> Dict[str, Any]:
    """Headless, and publishing not-ready addresses: members must find each other before they are Ready."""
    return _object(spec, 'peer-service', peer_service_name(spec), {'spec': {
        'type': 'ClusterIP', 'clusterIP': 'None', 'sessionAffinity': 'None', 'publishNotReadyAddresses': True,
        'selector': pod_selector(spec),
        'ports': [{'name': 'peer', 'protocol': 'TCP', 'port': spec.etcd.server_port, 'targetPort': spec.etcd.server_port}]}})


def member_lease(spec: EtcdSpec, member: str, learner: bool = False) -> Dict[str, Any]:
    """An empty member Lease (holderIdentity is set and renewed by the member's sidecar, ETCD-16). A Lease of an
    ordinal added by a scale-up carries `druid.gardener.cloud/create-as-learner` (ETCD-43): its member joins as a
    learner and removes the annotation once promoted."""
    annotations = {CREATE_AS_LEARNER: 'true'} if learner else None
    return _object(spec, 'member-lease', member, {'spec': {}}, annotations=annotations)


def snapshot_lease(spec: EtcdSpec, kind: str) -> Dict[str, Any]:
    """`<name>-full-snap` / `<name>-delta-snap`: holderIdentity is the newest snapshot's revision (ETCD-30)."""
    return _object(spec, 'snapshot-lease', snapshot_lease_name(spec, kind), {'spec': {}})


def pdb_min_available(cluster_size: int, all_members_ready: bool, ready_members: int) -> int:
    """ETCD-20: floor(n/2)+1 while AllMembersReady; otherwise the number of Ready members (no eviction while one is
    down). Of the two rules druid gives, the highest applicable value; a single member: 0 (nothing to protect)."""
    if cluster_size <= 1:
        return 0
    quorum = cluster_size // 2 + 1
    if all_members_ready:
        return quorum
    return max(quorum, ready_members)


def poddisruptionbudget(spec: EtcdSpec, min_available: int) -> Dict[str, Any]:
    return _object(spec, 'poddisruptionbudget', spec.name, {'spec': {
        'minAvailable': min_available, 'selector': {'matchLabels': pod_selector(spec)}}})


def serviceaccount(spec: EtcdSpec) -> Dict[str, Any]:
    return _object(spec, 'serviceaccount', spec.name, {'automountServiceAccountToken': False})


def role(spec: EtcdSpec) -> Dict[str, Any]:
    """What a member's sidecar needs: renew its own Lease and the snapshot Leases, read pods and the StatefulSet."""
    return _object(spec, 'role', role_name(spec), {'rules': [
        {'apiGroups': ['coordination.k8s.io'], 'resources': ['leases'], 'verbs': ['get', 'list', 'patch', 'update', 'watch']},
        {'apiGroups': ['apps'], 'resources': ['statefulsets'], 'verbs': ['get', 'list', 'patch', 'update', 'watch']},
        {'apiGroups': [''], 'resources': ['pods'], 'verbs': ['get', 'list', 'watch']}]})


def rolebinding(spec: EtcdSpec) -> Dict[str, Any]:
    return _object(spec, 'rolebinding', role_name(spec), {
        'roleRef': {'apiGroup': 'rbac.authorization.k8s.io', 'kind': 'Role', 'name': role_name(spec)},
        'subjects': [{'kind': 'ServiceAccount', 'name': spec.name, 'namespace': spec.namespace}]})


# Where a pod's containers find the client certificate of `spec.etcd.clientUrlTls` (clientTLSSecretRef,
# kubernetes.io/tls keys tls.crt and tls.key); its CA is etcd's, under /var/etcd/ssl/ca.
CLIENT_TLS_DIR = '/var/etcd/ssl/client'


def _client_cert_args(spec: EtcdSpec, cert_flag: str, key_flag: str) -> List[str]:
    """The client certificate flags of a container that connects to etcd ([] without a clientTLSSecretRef)."""
    tls = spec.etcd.client_tls
    if tls is None or tls.client is None:
        return []
    return [cert_flag + CLIENT_TLS_DIR + '/tls.crt', key_flag + CLIENT_TLS_DIR + '/tls.key']


def _backup_args(spec: EtcdSpec) -> List[str]:
    b = spec.backup
    args = ['server', '--data-dir=%s/new.etcd' % DATA_DIR, '--server-port=%d' % b.port,
            '--etcd-connection-timeout=%ds' % int(b.etcd_connection_timeout),
            '--snapstore-temp-directory=%s/temp' % DATA_DIR,
            '--garbage-collection-policy=%s' % b.garbage_collection_policy,
            '--garbage-collection-period=%ds' % int(b.garbage_collection_period),
            '--delta-snapshot-period=%ds' % int(b.delta_snapshot_period),
            '--delta-snapshot-memory-limit=%d' % b.delta_snapshot_memory_limit,
            '--schedule=%s' % b.full_snapshot_schedule,
            '--defragmentation-schedule=%s' % spec.etcd.defragmentation_schedule,
            '--etcd-snapshot-timeout=%ds' % int(b.snapshot_timeout),
            '--etcd-defrag-timeout=%ds' % int(spec.etcd.defrag_timeout),
            '--embedded-etcd-quota-bytes=%d' % spec.etcd.quota,
            '--auto-compaction-mode=%s' % spec.auto_compaction_mode,
            '--auto-compaction-retention=%s' % spec.auto_compaction_retention,
            '--enable-member-lease-renewal=true', '--enable-snapshot-lease-renewal=true',
            '--k8s-heartbeat-duration=%ds' % int(spec.etcd.heartbeat),
            '--full-snapshot-lease-name=%s' % snapshot_lease_name(spec, FULL_SNAP),
            '--delta-snapshot-lease-name=%s' % snapshot_lease_name(spec, DELTA_SNAP),
            '--service-endpoints=%s://%s:%d' % ('https' if spec.etcd.client_tls else 'http', client_service_name(spec),
                                                spec.etcd.client_port)]
    if spec.etcd.client_tls is not None:
        args += ['--insecure-transport=false', '--insecure-skip-tls-verify=false',
                 '--cacert=/var/etcd/ssl/ca/' + (spec.etcd.client_tls.ca.data_key or 'ca.crt')]
        args += _client_cert_args(spec, '--cert=', '--key=')
    if b.store:
        args += ['--storage-provider=%s' % b.store.provider, '--store-prefix=%s' % b.store.prefix]
        if b.store.container:
            args.append('--store-container=%s' % b.store.container)
    if b.max_backups:
        args.append('--max-backups=%d' % b.max_backups)
    if b.compression_enabled:
        args += ['--compress-snapshots=true', '--compression-policy=%s' % b.compression_policy]
    return args


def statefulset(spec: EtcdSpec, replicas: int, config_checksum_value: str, scaled_to_multi_node: bool = False,
                template_annotations: Optional[Mapping[str, str]] = None) -> Dict[str, Any]:
    """One StatefulSet of `replicas` pods with the etcd and backup-restore containers (pods show 2/2)."""
    selector = pod_selector(spec)
    pod_labels = dict(spec.labels, **selector)
    pod_labels.update(base_labels(spec))
    pod_annotations = dict(spec.annotations, **{CONFIG_CHECKSUM: config_checksum_value})
    pod_annotations.update(template_annotations or {})
    backup_env = []
    if spec.backup.store:
        backup_env.append({'name': 'STORAGE_CONTAINER', 'value': spec.backup.store.container})
        if spec.backup.store.secret:
            backup_env.append({'name': 'AWS_APPLICATION_CREDENTIALS', 'value': '/var/etcd-backup'})
    mounts = [{'name': spec.volume_claim_template, 'mountPath': DATA_DIR},
              {'name': CONFIG_VOLUME, 'mountPath': CONFIG_DIR}]
    volumes: List[Dict[str, Any]] = [{'name': CONFIG_VOLUME, 'configMap': {
        'name': configmap_name(spec), 'defaultMode': 0o640, 'items': [{'key': CONFIG_KEY, 'path': CONFIG_KEY}]}}]
    backup_mounts = list(mounts)
    if spec.backup.store and spec.backup.store.secret:
        volumes.append({'name': 'etcd-backup', 'secret': {'secretName': spec.backup.store.secret.name, 'defaultMode': 0o640}})
        backup_mounts.append({'name': 'etcd-backup', 'mountPath': '/var/etcd-backup'})
    for key, tls, base in (('client-url', spec.etcd.client_tls, '/var/etcd/ssl'),
                           (PEER_TLS_VOLUMES, spec.etcd.peer_tls, '/var/etcd/ssl/peer')):
        if tls is None:
            continue
        for part, ref in (('ca', tls.ca), ('server', tls.server)):
            name = '%s-%s' % (key, part)
            volumes.append({'name': name, 'secret': {'secretName': ref.name, 'defaultMode': 0o640}})
            for target in (mounts, backup_mounts):
                # the sidecar too: it serves etcd's config naming these files, and restores with them
                target.append({'name': name, 'mountPath': '%s/%s' % (base, part)})
    client_tls = spec.etcd.client_tls
    if client_tls is not None and client_tls.client is not None:
        # the client certificate etcd's client-cert-auth asks for: the sidecar's and the wrapper's connections
        volumes.append({'name': 'client-url-client', 'secret': {'secretName': client_tls.client.name, 'defaultMode': 0o640}})
        for target in (mounts, backup_mounts):
            target.append({'name': 'client-url-client', 'mountPath': CLIENT_TLS_DIR})
    etcd_container = {
        'name': 'etcd', 'image': spec.etcd.image, 'imagePullPolicy': 'IfNotPresent',
        'args': ['start-etcd', '--backup-restore-host-port=%s-local:%d' % (spec.name, spec.backup.port),
                 '--etcd-server-name=%s-local' % spec.name, '--etcd-client-port=%d' % spec.etcd.client_port]
        + _client_cert_args(spec, '--etcd-client-cert-path=', '--etcd-client-key-path='),
        'ports': [{'name': 'server', 'containerPort': spec.etcd.server_port, 'protocol': 'TCP'},
                  {'name': 'client', 'containerPort': spec.etcd.client_port, 'protocol': 'TCP'}],
        'readinessProbe': {'httpGet': {'path': '/readyz', 'port': 9095}, 'initialDelaySeconds': 15, 'periodSeconds': 5,
                           'failureThreshold': 5},
        # beyond druid: Kubernetes signals a pod's containers at the same time; this hook runs first, and the member
        # program moves leadership off this member (bounded by its --leader-handoff-timeout, 10 s, well inside the
        # pod's termination grace of 30 s) before etcd gets SIGTERM
        'lifecycle': {'preStop': {'httpGet': {'path': HANDOFF_PATH, 'port': spec.backup.port}}},
        'resources': dict(spec.etcd.resources),
        'volumeMounts': mounts,
    }
    backup_container = {
        'name': 'backup-restore', 'image': spec.backup.image, 'imagePullPolicy': 'IfNotPresent',
        'args': _backup_args(spec),
        'ports': [{'name': 'server', 'containerPort': spec.backup.port, 'protocol': 'TCP'}],
        # beyond druid: the pod is Ready only once its etcd has caught up with the leader (revision and HashKV),
        # so a rolling restart waits for it before the next member (docs/etcd-druid.md, rolling updates)
        'readinessProbe': {'httpGet': {'path': '/healthz', 'port': spec.backup.port}, 'initialDelaySeconds': 5,
                           'periodSeconds': 5, 'timeoutSeconds': 5, 'failureThreshold': 3},
        'env': [{'name': 'POD_NAME', 'valueFrom': {'fieldRef': {'fieldPath': 'metadata.name'}}},
                {'name': 'POD_NAMESPACE', 'valueFrom': {'fieldRef': {'fieldPath': 'metadata.namespace'}}}] + backup_env,
        'resources': dict(spec.backup.resources),
        'volumeMounts': backup_mounts,
    }
    pod_spec: Dict[str, Any] = {
        'serviceAccountName': spec.name, 'shareProcessNamespace': True,
        'hostAliases': [{'ip': '127.0.0.1', 'hostnames': ['%s-local' % spec.name]}],
        'containers': [etcd_container, backup_container], 'volumes': volumes}
    if spec.priority_class_name:
        pod_spec['priorityClassName'] = spec.priority_class_name
    for key in ('affinity', 'topologySpreadConstraints'):
        if spec.scheduling.get(key):
            pod_spec[key] = spec.scheduling[key]
    claim: Dict[str, Any] = {
        'metadata': {'name': spec.volume_claim_template, 'labels': {LABEL_INSTANCE: spec.name, LABEL_NAME: 'etcd'}},
        'spec': {'accessModes': ['ReadWriteOnce'], 'resources': {'requests': {'storage': spec.storage_capacity}}}}
    if spec.storage_class:
        claim['spec']['storageClassName'] = spec.storage_class
    template: Dict[str, Any] = {'metadata': {'labels': pod_labels, 'annotations': pod_annotations}, 'spec': pod_spec}
    template['metadata']['annotations'][TEMPLATE_HASH] = pod_template_hash(template)
    annotations = dict(spec.annotations)
    if scaled_to_multi_node:
        annotations[SCALED_TO_MULTI_NODE] = ''
    return _object(spec, 'statefulset', statefulset_name(spec), {'spec': {
        'replicas': replicas,
        'selector': {'matchLabels': selector},
        'serviceName': peer_service_name(spec),
        'podManagementPolicy': 'Parallel',
        'updateStrategy': {'type': 'OnDelete'},
        'template': template,
        'volumeClaimTemplates': [claim]}}, labels=spec.labels, annotations=annotations)


def template_has_peer_tls(sts: Optional[Mapping[str, Any]]) -> bool:
    """The StatefulSet's pod template mounts the peer TLS Secrets (what `statefulset` adds for spec.etcd.peerUrlTls)."""
    volumes = ((((sts or {}).get('spec') or {}).get('template') or {}).get('spec') or {}).get('volumes') or []
    return any(v.get('name') == PEER_TLS_VOLUMES + '-ca' for v in volumes)


def statefulset_patch(sts: Mapping[str, Any]) -> Dict[str, Any]:
    """What may be changed on an existing StatefulSet (the API server refuses changes to its selector,
    serviceName, podManagementPolicy and volumeClaimTemplates): labels, annotations, owner, replicas, the pod
    template and the update strategy. A new `spec.storageCapacity` or `storageClass` therefore reaches new PVCs only
    through a re-created StatefulSet."""
    meta = sts.get('metadata') or {}
    spec = sts.get('spec') or {}
    return {'metadata': {k: meta[k] for k in ('labels', 'annotations', 'ownerReferences') if k in meta},
            'spec': {k: spec[k] for k in ('replicas', 'template', 'updateStrategy') if k in spec}}


def desired(spec: EtcdSpec, replicas: int, min_available: int, scaled_to_multi_node: bool = False,
            learners: Tuple[str, ...] = ()) -> Dict[Tuple[str, str], Dict[str, Any]]:
    """Every component for `replicas` members, keyed by (component, name), in the order they are applied: what the
    pods need (account, config, Services, Leases) before the StatefulSet that starts them. `learners`: member names
    whose Leases are created with the create-as-learner annotation (a scale-up's new ordinals)."""
    cm = configmap(spec, max(replicas, 1))      # hibernated (0): the member list it will wake up with
    out: Dict[Tuple[str, str], Dict[str, Any]] = {}
    for component, obj in (('serviceaccount', serviceaccount(spec)), ('role', role(spec)),
                           ('rolebinding', rolebinding(spec)), ('configmap', cm),
                           ('peer-service', peer_service(spec)), ('client-service', client_service(spec))):
        out[(component, obj['metadata']['name'])] = obj
    for member in member_names(spec.name, replicas):
        out[('member-lease', member)] = member_lease(spec, member, learner=member in learners)
    if spec.backups_enabled:
        for kind in (FULL_SNAP, DELTA_SNAP):
            out[('snapshot-lease', snapshot_lease_name(spec, kind))] = snapshot_lease(spec, kind)
    out[('poddisruptionbudget', spec.name)] = poddisruptionbudget(spec, min_available)
    out[('statefulset', spec.name)] = statefulset(spec, replicas, config_checksum(cm), scaled_to_multi_node)
    return out


def pod_template_hash(template: Mapping[str, Any]) -> str:
    """What a rolling update changes: the pod template (images, args, resources, the config checksum), without
    the hash itself. The StatefulSet's pods carry it (annotation TEMPLATE_HASH, copied from the template), so the
    planner knows which pods still run an older template."""
    meta = dict(template.get('metadata') or {})
    meta['annotations'] = {k: v for k, v in (meta.get('annotations') or {}).items() if k != TEMPLATE_HASH}
    return hashlib.sha256(json.dumps(dict(template, metadata=meta), sort_keys=True).encode()).hexdigest()[:16]


def template_hash_of(obj: Optional[Mapping[str, Any]]) -> str:
    """The TEMPLATE_HASH a StatefulSet's template or a pod carries ('' when none)."""
    if not obj:
        return ''
    meta = ((obj.get('spec') or {}).get('template') or {}).get('metadata') if obj.get('kind') == 'StatefulSet' \
        else obj.get('metadata')
    return ((meta or {}).get('annotations') or {}).get(TEMPLATE_HASH, '')


def is_our_pod(spec: EtcdSpec, pod: Optional[Mapping[str, Any]]) -> bool:
    """A member pod of this Etcd: owned by its StatefulSet `<name>`, carrying the pod selector, named
    `<name>-<ordinal>`. Only such pods are ever deleted."""
    if not pod:
        return False
    meta = pod.get('metadata') or {}
    labels = meta.get('labels') or {}
    owned = any(ref.get('kind') == 'StatefulSet' and ref.get('name') == statefulset_name(spec)
                for ref in meta.get('ownerReferences') or [])
    prefix, _dash, ordinal = str(meta.get('name') or '').rpartition('-')
    return (owned and prefix == spec.name and ordinal.isdigit()
            and all(labels.get(k) == v for k, v in pod_selector(spec).items()))


def ordinal_of(name: str) -> int:
    """The ordinal of `<name>-<i>`; -1 when the name has none."""
    tail = name.rpartition('-')[2]
    return int(tail) if tail.isdigit() else -1
