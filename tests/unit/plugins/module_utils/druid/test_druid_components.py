"""druid/components.py: the objects druid manages (ETCD-12, ETCD-20) with druid's names, labels, owner references
and member DNS names."""

import yaml

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.druid import components as c
from ansible_collections.steward.cluster.plugins.module_utils.druid.spec import parse_etcd

from support.druid_samples import sample


@pytest.fixture
def spec3():
    return parse_etcd(sample(replicas=3))


def test_names_are_druids(spec3):
    objs = c.desired(spec3, 3, 2)
    names = {(k[0], k[1]) for k in objs}
    assert names == {
        ('serviceaccount', 'etcd-main'), ('role', 'druid.gardener.cloud:etcd:etcd-main'),
        ('rolebinding', 'druid.gardener.cloud:etcd:etcd-main'), ('configmap', c.configmap_name(spec3)),
        ('peer-service', 'etcd-main-peer'), ('client-service', 'etcd-main-client'),
        ('member-lease', 'etcd-main-0'), ('member-lease', 'etcd-main-1'), ('member-lease', 'etcd-main-2'),
        ('snapshot-lease', 'etcd-main-full-snap'), ('snapshot-lease', 'etcd-main-delta-snap'),
        ('poddisruptionbudget', 'etcd-main'), ('statefulset', 'etcd-main')}
    assert c.configmap_name(spec3).startswith('etcd-bootstrap-') and len(c.configmap_name(spec3)) == len('etcd-bootstrap-') + 6
    assert list(objs)[-1] == ('statefulset', 'etcd-main')      # the StatefulSet last: what its pods need exists first


def test_every_object_is_owned_and_labelled(spec3):
    for (component, name), obj in c.desired(spec3, 3, 2).items():
        meta = obj['metadata']
        assert meta['namespace'] == 'shoot' and meta['name'] == name
        assert meta['ownerReferences'] == [{'apiVersion': 'druid.gardener.cloud/v1alpha1', 'kind': 'Etcd',
                                            'name': 'etcd-main', 'uid': spec3.uid, 'controller': True,
                                            'blockOwnerDeletion': True}]
        assert meta['labels']['app.kubernetes.io/managed-by'] == 'etcd-druid'
        assert meta['labels']['app.kubernetes.io/part-of'] == 'etcd-main' and meta['labels']['instance'] == 'etcd-main'
        assert c.is_ours(spec3, obj), component
    stranger = c.client_service(spec3)
    stranger['metadata']['ownerReferences'][0]['uid'] = 'someone-else'
    assert not c.is_ours(spec3, stranger)
    unlabelled = c.client_service(spec3)
    del unlabelled['metadata']['labels']['app.kubernetes.io/managed-by']
    assert not c.is_ours(spec3, unlabelled) and not c.is_ours(spec3, None)


def test_bootstrap_config_uses_druids_member_dns(spec3):
    cm = c.configmap(spec3, 3)
    conf = yaml.safe_load(cm['data']['etcd.conf.yaml'])
    assert conf['initial-cluster'] == ','.join(
        'etcd-main-%d=http://etcd-main-%d.etcd-main-peer.shoot.svc:2380' % (i, i) for i in range(3))
    assert conf['initial-advertise-peer-urls']['etcd-main-1'] == ['http://etcd-main-1.etcd-main-peer.shoot.svc:2380']
    assert conf['advertise-client-urls']['etcd-main-2'] == ['http://etcd-main-2.etcd-main-peer.shoot.svc:2379']
    assert conf['quota-backend-bytes'] == 8 * 2 ** 30 and conf['initial-cluster-state'] == 'new'
    assert conf['auto-compaction-mode'] == 'periodic' and conf['auto-compaction-retention'] == '30m'


def test_peer_tls_switches_scheme_and_mounts():
    obj = sample(replicas=3)
    obj['spec']['etcd']['peerUrlTls'] = {'tlsCASecretRef': {'name': 'ca', 'dataKey': 'bundle.crt'},
                                         'serverTLSSecretRef': {'name': 'peer'}}
    spec = parse_etcd(obj)
    assert c.peer_url(spec, 'etcd-main-0') == 'https://etcd-main-0.etcd-main-peer.shoot.svc:2380'
    sts = c.statefulset(spec, 3, 'x')
    volumes = {v['name']: v for v in sts['spec']['template']['spec']['volumes']}
    assert volumes['peer-url-ca']['secret']['secretName'] == 'ca' and volumes['peer-url-server']['secret']['secretName'] == 'peer'
    conf = c.bootstrap_config(spec, 3)
    assert conf['peer-transport-security']['trusted-ca-file'].endswith('/bundle.crt')


def test_client_tls_gives_both_containers_the_files_the_config_names_and_the_client_certificate():
    obj = sample(replicas=3)
    obj['spec']['etcd']['clientUrlTls'] = {'tlsCASecretRef': {'name': 'ca', 'dataKey': 'bundle.crt'},
                                           'serverTLSSecretRef': {'name': 'server'},
                                           'clientTLSSecretRef': {'name': 'client'}}
    spec = parse_etcd(obj)
    pod = c.statefulset(spec, 3, 'x')['spec']['template']['spec']
    volumes = {v['name']: v['secret']['secretName'] for v in pod['volumes'] if 'secret' in v}
    assert volumes['client-url-ca'] == 'ca' and volumes['client-url-server'] == 'server'
    assert volumes['client-url-client'] == 'client'
    etcd, sidecar = pod['containers']
    conf = c.bootstrap_config(spec, 3)
    for container in (etcd, sidecar):   # the sidecar serves the config: it must see the files it names
        paths = {m['mountPath'] for m in container['volumeMounts']}
        assert {'/var/etcd/ssl/ca', '/var/etcd/ssl/server', '/var/etcd/ssl/client'} <= paths, container['name']
    assert conf['client-transport-security']['trusted-ca-file'] == '/var/etcd/ssl/ca/bundle.crt'
    assert {'--insecure-transport=false', '--cacert=/var/etcd/ssl/ca/bundle.crt', '--cert=/var/etcd/ssl/client/tls.crt',
            '--key=/var/etcd/ssl/client/tls.key'} <= set(sidecar['args'])
    assert any(a.startswith('--service-endpoints=https://') for a in sidecar['args'])
    assert {'--etcd-client-cert-path=/var/etcd/ssl/client/tls.crt',
            '--etcd-client-key-path=/var/etcd/ssl/client/tls.key'} <= set(etcd['args'])


def test_without_client_tls_no_client_flags_are_passed(spec3):
    etcd, sidecar = c.statefulset(spec3, 3, 'x')['spec']['template']['spec']['containers']
    assert not [a for a in etcd['args'] + sidecar['args'] if 'cert' in a or 'key=' in a or 'insecure' in a]


def test_statefulset(spec3):
    sts = c.statefulset(spec3, 3, 'abc', scaled_to_multi_node=True)
    s = sts['spec']
    assert s['replicas'] == 3 and s['serviceName'] == 'etcd-main-peer'
    assert s['selector'] == {'matchLabels': {'app': 'etcd-statefulset', 'role': 'main'}}
    pod = s['template']
    assert all(pod['metadata']['labels'][k] == v for k, v in s['selector']['matchLabels'].items())
    assert pod['metadata']['annotations'][c.CONFIG_CHECKSUM] == 'abc'
    etcd, backup = pod['spec']['containers']
    assert (etcd['name'], etcd['image']) == ('etcd', 'quay.io/coreos/etcd:v3.4.26')
    assert (backup['name'], backup['image']) == ('backup-restore', 'ghcr.io/steward-cluster/steward-controller:0.1.0')
    assert '--full-snapshot-lease-name=etcd-main-full-snap' in backup['args']
    assert '--store-prefix=etcd-main' in backup['args'] and '--storage-provider=aws' in backup['args']
    volumes = {v['name']: v for v in pod['spec']['volumes']}
    assert volumes['etcd-config-file']['configMap']['name'] == c.configmap_name(spec3)
    claim = s['volumeClaimTemplates'][0]
    assert claim['metadata']['name'] == 'main-etcd' and claim['metadata']['labels']['instance'] == 'etcd-main'
    assert claim['spec']['resources']['requests']['storage'] == '10Gi'
    assert sts['metadata']['annotations'][c.SCALED_TO_MULTI_NODE] == ''
    assert c.pvc_names(spec3, 3) == ('main-etcd-etcd-main-0', 'main-etcd-etcd-main-1', 'main-etcd-etcd-main-2')


def test_services(spec3):
    client, peer = c.client_service(spec3), c.peer_service(spec3)
    assert client['spec']['type'] == 'ClusterIP' and 'clusterIP' not in client['spec']
    assert [p['port'] for p in client['spec']['ports']] == [2379, 2380, 8080]
    assert peer['spec']['clusterIP'] == 'None' and peer['spec']['publishNotReadyAddresses'] is True
    assert [p['port'] for p in peer['spec']['ports']] == [2380]


def test_learner_leases_carry_the_annotation(spec3):
    objs = c.desired(spec3, 3, 2, learners=('etcd-main-1', 'etcd-main-2'))
    assert 'annotations' not in objs[('member-lease', 'etcd-main-0')]['metadata']
    assert objs[('member-lease', 'etcd-main-2')]['metadata']['annotations'] == {c.CREATE_AS_LEARNER: 'true'}


def test_no_snapshot_leases_without_a_store():
    spec = parse_etcd(sample(backup={'port': 8080}))
    assert not [k for k in c.desired(spec, 1, 0) if k[0] == 'snapshot-lease']


@pytest.mark.parametrize('size, all_ready, ready, expected', [
    (1, True, 1, 0), (3, True, 3, 2), (5, True, 5, 3), (3, False, 2, 2), (3, False, 1, 2), (5, False, 4, 4),
])
def test_pdb_min_available(size, all_ready, ready, expected):
    assert c.pdb_min_available(size, all_ready, ready) == expected


def test_our_pods(spec3):
    pod = {'metadata': {'name': 'etcd-main-1', 'labels': {'app': 'etcd-statefulset', 'role': 'main'},
                        'ownerReferences': [{'kind': 'StatefulSet', 'name': 'etcd-main'}]}}
    assert c.is_our_pod(spec3, pod)
    other = {'metadata': dict(pod['metadata'], name='etcd-main-x')}
    assert not c.is_our_pod(spec3, other)
    foreign = {'metadata': dict(pod['metadata'], ownerReferences=[{'kind': 'StatefulSet', 'name': 'web'}])}
    assert not c.is_our_pod(spec3, foreign)
    assert c.ordinal_of('etcd-main-12') == 12 and c.ordinal_of('etcd-main') == -1
    assert c.selector_string(spec3) in ('app=etcd-statefulset,role=main', 'role=main,app=etcd-statefulset')
    assert c.label_selector(spec3) == {'matchLabels': {'app': 'etcd-statefulset', 'role': 'main'}}


def test_statefulset_patch_leaves_the_immutable_fields(spec3):
    patch = c.statefulset_patch(c.statefulset(spec3, 3, 'x'))
    assert set(patch['spec']) == {'replicas', 'template', 'updateStrategy'}
    assert set(patch['metadata']) == {'labels', 'annotations', 'ownerReferences'}
