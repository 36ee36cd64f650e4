"""A node's whole file set: kubeadm's layout, idempotent re-plans, renewals that touch only what is due, and the
authority guard."""

from __future__ import annotations

import datetime

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.provisioning import kubelet, layout, pki
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.certs import parse_authority, read_authority
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.errors import Refused
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.manifests import (
    INPUTS_ANNOTATION, etcd_bootstrap_flags,
)
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.node_files import plan_node_files
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.render import from_yaml

from provisioning_fixtures import NOW, MemoryRoot, authority, cluster, node

BOOT = ('cp1=https://10.0.0.1:2380', 'new')
KUBEADM_CP_FILES = {
    '/etc/kubernetes/admin.conf', '/etc/kubernetes/controller-manager.conf', '/etc/kubernetes/scheduler.conf',
    '/etc/kubernetes/kubelet.conf', '/etc/kubernetes/manifests/etcd.yaml', '/etc/kubernetes/manifests/kube-apiserver.yaml',
    '/etc/kubernetes/manifests/kube-controller-manager.yaml', '/etc/kubernetes/manifests/kube-scheduler.yaml',
    '/etc/kubernetes/manifests/haproxy.yaml', '/etc/kubernetes/haproxy/haproxy.cfg',
    '/etc/kubernetes/pki/ca.crt', '/etc/kubernetes/pki/ca.key', '/etc/kubernetes/pki/sa.key', '/etc/kubernetes/pki/sa.pub',
    '/etc/kubernetes/pki/front-proxy-ca.crt', '/etc/kubernetes/pki/front-proxy-ca.key',
    '/etc/kubernetes/pki/front-proxy-client.crt', '/etc/kubernetes/pki/front-proxy-client.key',
    '/etc/kubernetes/pki/apiserver.crt', '/etc/kubernetes/pki/apiserver.key',
    '/etc/kubernetes/pki/apiserver-etcd-client.crt', '/etc/kubernetes/pki/apiserver-etcd-client.key',
    '/etc/kubernetes/pki/apiserver-kubelet-client.crt', '/etc/kubernetes/pki/apiserver-kubelet-client.key',
    '/etc/kubernetes/pki/etcd/ca.crt', '/etc/kubernetes/pki/etcd/ca.key', '/etc/kubernetes/pki/etcd/server.crt',
    '/etc/kubernetes/pki/etcd/server.key', '/etc/kubernetes/pki/etcd/peer.crt', '/etc/kubernetes/pki/etcd/peer.key',
    '/etc/kubernetes/pki/etcd/healthcheck-client.crt', '/etc/kubernetes/pki/etcd/healthcheck-client.key',
    '/var/lib/kubelet/config.yaml', '/var/lib/kubelet/kubeadm-flags.env', '/var/lib/kubelet/pki/kubelet-client-current.pem',
    '/etc/systemd/system/kubelet.service',
}


@pytest.fixture(scope='module')
def spec():
    return cluster()


@pytest.fixture(scope='module')
def first(spec):
    return plan_node_files(spec, node(spec, 'cp1'), authority(), MemoryRoot().read, NOW, BOOT)


def test_control_plane_node_gets_kubeadms_layout(first):
    assert set(first.files) == KUBEADM_CP_FILES
    assert {c['action'] for c in first.certificates} == {'issue'}
    assert first.files['/etc/kubernetes/pki/ca.key'].mode == 0o600 and first.files['/etc/kubernetes/pki/ca.crt'].mode == 0o644
    assert first.files['/etc/kubernetes/admin.conf'].secret and not first.files['/etc/kubernetes/haproxy/haproxy.cfg'].secret


def test_worker_gets_kubelet_lb_and_only_the_ca_certificate(spec):
    worker = plan_node_files(spec, node(spec, 'w1', 'worker'), authority(), MemoryRoot().read, NOW)
    assert '/etc/kubernetes/pki/ca.key' not in worker.files
    assert sorted(p for p in worker.files if p.startswith('/etc/kubernetes/pki')) == ['/etc/kubernetes/pki/ca.crt']
    assert '/etc/kubernetes/manifests/haproxy.yaml' in worker.files
    assert [c['name'] for c in worker.certificates] == ['kubelet-client']
    kubeconfig = from_yaml(worker.files['/etc/kubernetes/kubelet.conf'].content)
    assert kubeconfig['clusters'][0]['cluster']['server'] == 'https://127.0.0.1:6553'
    assert kubeconfig['users'][0]['user']['client-certificate'] == '/var/lib/kubelet/pki/kubelet-client-current.pem'


def test_second_plan_keeps_every_byte(spec, first):
    again = plan_node_files(spec, node(spec, 'cp1'), authority(), MemoryRoot().load(first).read, NOW, BOOT)
    assert {c['action'] for c in again.certificates} == {'keep'}
    assert {p: f.content for p, f in again.files.items()} == {p: f.content for p, f in first.files.items()}


def test_renewal_touches_only_what_is_due_and_restarts_only_its_pods(spec, first):
    disk = MemoryRoot().load(first)
    # the front-proxy client was issued long ago: due now; everything else fresh
    old = pki.issue(pki.Subject('front-proxy-client'), authority().ca('front-proxy-ca'), 'ecdsa-p256',
                    NOW - datetime.timedelta(days=350), 365)
    disk.files[layout.pki('front-proxy-client.crt')] = old.cert_pem
    disk.files[layout.pki('front-proxy-client.key')] = old.key_pem
    renewed = plan_node_files(spec, node(spec, 'cp1'), authority(), disk.read, NOW, BOOT)
    actions = {c['name']: c['action'] for c in renewed.certificates}
    assert actions.pop('front-proxy-client') == 'renew'
    assert set(actions.values()) == {'keep'}
    changed = sorted(p for p, f in renewed.files.items() if disk.files.get(p) != f.content)
    assert changed == ['/etc/kubernetes/manifests/kube-apiserver.yaml', '/etc/kubernetes/pki/front-proxy-client.crt',
                       '/etc/kubernetes/pki/front-proxy-client.key']
    before = from_yaml(disk.files['/etc/kubernetes/manifests/kube-apiserver.yaml'])['metadata']['annotations']
    after = from_yaml(renewed.files['/etc/kubernetes/manifests/kube-apiserver.yaml'].content)['metadata']['annotations']
    assert before[INPUTS_ANNOTATION] != after[INPUTS_ANNOTATION]


def test_a_node_of_another_authority_is_refused(spec, first):
    disk = MemoryRoot().load(first)
    with pytest.raises(Refused) as err:
        plan_node_files(spec, node(spec, 'cp1'), authority('other'), disk.read, NOW, BOOT)
    assert err.value.rule == 'authority-mismatch'


def test_authority_round_trips_through_a_nodes_pki_dir(first):
    read_back = read_authority(MemoryRoot().load(first).read)
    assert read_back.complete
    assert read_back.files() == authority().files()


@pytest.mark.parametrize('value, field, rule', [
    ({'ca.crt': 'SECRET'}, 'authority.ca.key', 'required'),
    ({'ca.crt': 'SECRET', 'ca.key': 'SECRET'}, 'authority.ca.crt', 'pem'),
    ({'tls.crt': '-----BEGIN SECRET'}, 'authority.tls.crt', 'unknown-key'),
    ({'sa.key': '-----BEGIN SECRET'}, 'authority.sa.pub', 'required'),
])
def test_bad_authority_is_named_without_echoing_it(value, field, rule):
    with pytest.raises(InvalidInput) as err:
        parse_authority(value)
    assert (err.value.field, err.value.rule) == (field, rule)
    assert 'SECRET' not in str(err.value.value) and 'SECRET' not in str(err.value)


def test_authority_key_must_match_its_certificate():
    files = dict((k, v.decode()) for k, v in authority().files().items())
    files['ca.key'] = authority('other').files()['ca.key'].decode()
    with pytest.raises(InvalidInput) as err:
        parse_authority(files)
    assert (err.value.field, err.value.rule) == ('authority.ca.key', 'key-match')


def test_etcd_manifest_keeps_its_bootstrap_flags_and_lists_tls_everywhere(first):
    manifest = first.files['/etc/kubernetes/manifests/etcd.yaml'].content
    assert etcd_bootstrap_flags(manifest) == BOOT
    command = from_yaml(manifest)['spec']['containers'][0]['command']
    assert '--client-cert-auth=true' in command and '--peer-client-cert-auth=true' in command
    assert '--listen-client-urls=https://10.0.0.1:2379,https://127.0.0.1:2379' in command
    assert etcd_bootstrap_flags(b'garbage: [') is None and etcd_bootstrap_flags(None) is None


def test_apiserver_certificate_sans(first):
    info = pki.describe(first.files['/etc/kubernetes/pki/apiserver.crt'].content, NOW)
    assert info['dns_names'] == ['cp1', 'kubernetes', 'kubernetes.default', 'kubernetes.default.svc',
                                 'kubernetes.default.svc.cluster.local', 'localhost']
    assert info['ip_addresses'] == ['10.0.0.1', '10.96.0.1', '127.0.0.1']


def test_lab_local_address_names_the_tls_server_in_kubeconfigs(spec):
    files = plan_node_files(spec, node(spec, 'w1', 'worker', local_address='127.0.0.24'), authority(),
                            MemoryRoot().read, NOW)
    cluster_entry = from_yaml(files.files['/etc/kubernetes/kubelet.conf'].content)['clusters'][0]['cluster']
    assert cluster_entry['server'] == 'https://127.0.0.24:6553'
    assert cluster_entry['tls-server-name'] == 'kubernetes'
    assert b'bind 127.0.0.24:6553' in files.files['/etc/kubernetes/haproxy/haproxy.cfg'].content


def test_kubelet_flags_carry_registration_labels_and_refuse_restricted_ones(spec):
    worker = node(spec, 'w1', 'worker', labels={'zone': 'a', 'node.kubernetes.io/pool': 'x'})
    assert kubelet.flags(worker) == (b'KUBELET_KUBEADM_ARGS="--container-runtime-endpoint=unix:///var/run/containerd/'
                                     b'containerd.sock --hostname-override=w1 --node-ip=10.0.1.1 '
                                     b'--node-labels=node.kubernetes.io/pool=x,zone=a"\n')
    kubelet.check_registration_labels(worker.labels)
    with pytest.raises(InvalidInput) as err:
        kubelet.check_registration_labels((('node-role.kubernetes.io/control-plane', ''),))
    assert err.value.rule == 'kubelet-label'


def test_libyaml_and_pure_python_emitters_write_the_same_bytes(first):
    """A node joined by a host without LibYAML and a script rendered where it exists must hold the same files."""
    from ansible_collections.steward.cluster.plugins.module_utils.provisioning.render import to_yaml
    documents = [from_yaml(f.content) for p, f in first.files.items() if p.endswith(('.yaml', '.conf'))]
    assert len(documents) == 10
    for doc in documents:
        assert to_yaml(doc) == to_yaml(doc, pure=True)
