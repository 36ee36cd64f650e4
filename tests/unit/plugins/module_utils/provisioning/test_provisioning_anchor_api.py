"""The anchor's planning (sources to files, drift, removal of what it no longer wants, cleanup) and the provisioning
API's request validation and authorisation, as pure functions."""

from __future__ import annotations

import base64

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.provisioning import anchor, api, files

from provisioning_fixtures import cluster

ETCD_TEMPLATE = b'--initial-cluster=$(ETCD_INITIAL_CLUSTER) --state=$(ETCD_INITIAL_CLUSTER_STATE) --ip=$(NODE_IP)'


def _configmap(name, path, data, **annotations):
    meta = {'name': name, 'namespace': 'kube-system', 'labels': {anchor.SOURCE_LABEL: 'true'},
            'annotations': dict({anchor.PATH_ANNOTATION: path}, **annotations)}
    return {'kind': 'ConfigMap', 'metadata': meta, 'data': data}


def _secret(name, path, data, **annotations):
    obj = _configmap(name, path, {}, **annotations)
    obj.update(kind='Secret', type='Opaque', data={k: base64.b64encode(v).decode() for k, v in data.items()})
    return obj


def test_sources_become_files_with_node_values():
    sources = [anchor.parse_source(_configmap('scheduler', '/etc/kubernetes/manifests',
                                              {'kube-scheduler.yaml': 'node: $(NODE_NAME) at $(NODE_IP)'}), 'cp1'),
               anchor.parse_source(_secret('cp1-certs', '/etc/kubernetes/pki/etcd', {'peer.key': b'KEY'},
                                           **{anchor.NODE_ANNOTATION: 'cp1'}), 'cp1')]
    files_ = anchor.desired_files(sources, 'cp1', '10.0.0.1')
    assert files_['/etc/kubernetes/manifests/kube-scheduler.yaml'].content == b'node: cp1 at 10.0.0.1'
    assert files_['/etc/kubernetes/manifests/kube-scheduler.yaml'].mode == 0o644
    key = files_['/etc/kubernetes/pki/etcd/peer.key']
    assert (key.content, key.mode, key.secret) == (b'KEY', 0o600, True)
    assert anchor.parse_source(_secret('cp2-certs', '/etc/kubernetes/pki', {}, **{anchor.NODE_ANNOTATION: 'cp2'}),
                               'cp1') is None


def test_etcd_source_waits_for_its_flags():
    source = anchor.parse_source(_configmap('etcd', '/etc/kubernetes/manifests', {'etcd.yaml': ETCD_TEMPLATE.decode()},
                                            **{anchor.ETCD_ANNOTATION: 'member'}), 'cp2')
    assert anchor.desired_files([source], 'cp2', '10.0.0.2') == {}
    written = anchor.desired_files([source], 'cp2', '10.0.0.2', ('cp1=https://a,cp2=https://b', 'existing'))
    assert written['/etc/kubernetes/manifests/etcd.yaml'].content == \
        b'--initial-cluster=cp1=https://a,cp2=https://b --state=existing --ip=10.0.0.2'


@pytest.mark.parametrize('obj, field, rule', [
    (_configmap('x', '/etc/passwd.d', {'a': 'b'}), 'ConfigMap kube-system/x: cluster.steward.io/anchor-path',
     'anchor-dir'),
    (_configmap('x', 'etc/kubernetes', {'a': 'b'}), 'ConfigMap kube-system/x: cluster.steward.io/anchor-path',
     'absolute-path'),
    (_configmap('x', '/etc/kubernetes/../../etc', {'a': 'b'}), 'ConfigMap kube-system/x: cluster.steward.io/anchor-path',
     'absolute-path'),
    (_configmap('x', '/etc/kubernetes', {'..': 'b'}), 'ConfigMap kube-system/x: data...', 'path-component'),
    (_configmap('x', '/etc/kubernetes', {'a': 'b'}, **{anchor.MODE_ANNOTATION: '644'}), None, None),
    (_configmap('x', '/etc/kubernetes', {'a': 'b'}, **{anchor.MODE_ANNOTATION: 'rw'}),
     'ConfigMap kube-system/x: cluster.steward.io/anchor-mode', 'file-mode'),
])
def test_bad_sources_are_refused_with_the_object_named(obj, field, rule):
    if field is None:
        assert anchor.parse_source(obj, 'cp1').mode == 0o644
        return
    with pytest.raises(InvalidInput) as err:
        anchor.parse_source(obj, 'cp1')
    assert (err.value.field, err.value.rule) == (field, rule)


def test_a_secret_that_is_not_base64_is_refused_without_showing_it():
    obj = _secret('cp1-certs', '/etc/kubernetes/pki', {})
    obj['data'] = {'peer.key': '-----BEGIN PRIVATE KEY----- not base64 !'}
    with pytest.raises(InvalidInput) as err:
        anchor.parse_source(obj, 'cp1')
    assert (err.value.field, err.value.rule) == ('Secret kube-system/cp1-certs: data.peer.key', 'base64')
    assert 'PRIVATE' not in str(err.value) and err.value.value is None


def test_two_sources_for_one_path_are_refused():
    one = anchor.parse_source(_configmap('a', '/etc/kubernetes', {'x.conf': '1'}), 'cp1')
    two = anchor.parse_source(_configmap('b', '/etc/kubernetes', {'x.conf': '2'}), 'cp1')
    with pytest.raises(InvalidInput) as err:
        anchor.desired_files([one, two], 'cp1', '10.0.0.1')
    assert err.value.rule == 'unique-path' and 'ConfigMap kube-system/a' in str(err.value)


def test_sync_rewrites_drift_removes_what_is_no_longer_wanted_and_cleans_up(tmp_path):
    root = files.Root(str(tmp_path))
    root.write('/etc/kubernetes/manifests/operator.yaml', b'not ours', 0o600)
    wanted = anchor.desired_files([anchor.parse_source(_configmap('s', '/etc/kubernetes/manifests',
                                                                  {'a.yaml': 'A', 'b.yaml': 'B'}), 'cp1')], 'cp1', 'ip')
    files.apply(root, anchor.plan_sync(root, wanted))
    assert anchor.read_record(root) == ['/etc/kubernetes/manifests/a.yaml', '/etc/kubernetes/manifests/b.yaml']
    assert anchor.plan_sync(root, wanted) == []
    root.write('/etc/kubernetes/manifests/a.yaml', b'edited by hand', 0o644)
    [drift] = anchor.plan_sync(root, wanted)
    assert (drift.path, drift.action) == ('/etc/kubernetes/manifests/a.yaml', files.UPDATE)
    files.apply(root, [drift])
    smaller = {p: f for p, f in wanted.items() if p.endswith('a.yaml')}
    changes = anchor.plan_sync(root, smaller)
    assert [(c.action, c.path) for c in changes] == [
        ('update', anchor.ANCHOR_RECORD), ('remove', '/etc/kubernetes/manifests/b.yaml')]
    files.apply(root, changes)
    cleanup = anchor.plan_cleanup(root)
    assert [c.path for c in cleanup] == ['/etc/kubernetes/manifests/a.yaml', anchor.ANCHOR_RECORD]
    files.apply(root, cleanup)
    assert root.read('/etc/kubernetes/manifests/operator.yaml') == b'not ours'
    assert not root.exists('/etc/kubernetes/manifests/a.yaml')


def test_run_cycle_reports_the_changes_in_order_and_cleanup_removes_them(tmp_path):
    root = files.Root(str(tmp_path))
    node = anchor.AnchorNode(name='cp1', ip='fd00::1')
    assert node.peer_url == 'https://[fd00::1]:2380'
    sources = [anchor.parse_source(_configmap('s', '/etc/kubernetes/manifests', {'a.yaml': '$(NODE_IP)'}), 'cp1')]
    report = anchor.run_cycle(root, sources, node)
    assert report.error is None and report.refused is None and report.waiting == ''
    assert [(c.action, c.path) for c in report.steps] == [        # manifests last, as in provisioning
        ('create', anchor.ANCHOR_RECORD), ('create', '/etc/kubernetes/manifests/a.yaml')]
    assert root.read('/etc/kubernetes/manifests/a.yaml') == b'fd00::1'
    assert anchor.run_cycle(root, sources, node).steps == []          # the second cycle changes nothing
    gone = anchor.cleanup(root, node)                                # no etcd member recorded: files only
    assert [c.path for c in gone.changes] == ['/etc/kubernetes/manifests/a.yaml', anchor.ANCHOR_RECORD]
    assert not root.exists('/etc/kubernetes/manifests/a.yaml')


def test_run_cycle_stops_at_an_etcd_source_without_endpoints_keeping_what_it_wrote(tmp_path):
    root = files.Root(str(tmp_path))
    sources = [anchor.parse_source(_configmap('s', '/etc/kubernetes/manifests', {'a.yaml': 'A'}), 'cp1'),
               anchor.parse_source(_configmap('etcd', '/etc/kubernetes/manifests', {'etcd.yaml': ETCD_TEMPLATE.decode()},
                                              **{anchor.ETCD_ANNOTATION: 'member'}), 'cp1')]
    report = anchor.run_cycle(root, sources, anchor.AnchorNode(name='cp1', ip='10.0.0.1'))
    assert 'anchor-etcd-endpoints is empty' in str(report.error)
    assert '/etc/kubernetes/manifests/a.yaml' in [c.path for c in report.changes]
    assert root.exists('/etc/kubernetes/manifests/a.yaml') and not root.exists('/etc/kubernetes/manifests/etcd.yaml')


def test_join_request_parameters_as_promenade_names_them():
    spec = cluster()
    node = api.join_request({'hostname': ['w7'], 'ip': ['10.0.1.7'], 'design_ref': ['deckhand+http://x'],
                             'labels.static': ['zone=a'], 'labels.dynamic': ['rack=r1']}, spec)
    assert (node.name, node.address, dict(node.labels)) == ('w7', '10.0.1.7', {'rack': 'r1', 'zone': 'a'})
    for query, field, rule in (({'ip': ['10.0.1.7']}, 'hostname', 'required'),
                               ({'hostname': ['w7'], 'ip': ['x']}, 'address', 'ip-address'),
                               ({'hostname': ['w7'], 'ip': ['10.0.1.7'], 'labels.static': ['zone']}, 'labels.static',
                                'key=value'),
                               ({'hostname': ['w7', 'w8'], 'ip': ['10.0.1.7']}, 'hostname', 'single'),
                               ({'hostname': ['cp1'], 'ip': ['10.0.0.1']}, 'role', 'control-plane-member')):
        with pytest.raises(InvalidInput) as err:
            api.join_request(query, spec)
        assert (err.value.field, err.value.rule) == (field, rule)


def test_cluster_from_configmap_or_from_control_plane_nodes():
    nodes = [{'metadata': {'name': 'cp2', 'labels': {api.CONTROL_PLANE_LABEL: ''}},
              'status': {'addresses': [{'type': 'InternalIP', 'address': '10.0.0.2'}]}},
             {'metadata': {'name': 'w1', 'labels': {}}, 'status': {'addresses': [{'type': 'InternalIP', 'address': 'x'}]}}]
    spec = api.cluster_from_config({'cluster.yaml': 'kubernetes_version: v1.30.2\n'}, nodes, 'configmap a/b')
    assert [m.name for m in spec.control_plane] == ['cp2'] and spec.kubernetes_version == 'v1.30.2'
    with pytest.raises(InvalidInput) as err:
        api.cluster_from_config({'cluster.yaml': 'lb_port: 99999\n'}, nodes, 'configmap a/b')
    assert err.value.field == 'configmap a/b: cluster.yaml.lb_port'


def test_who_may_call():
    user = {'username': 'system:serviceaccount:steward-system:drydock', 'groups': ['system:serviceaccounts']}
    assert api.allowed(user, (), ('system:serviceaccounts',))[0]
    assert api.allowed(user, ('system:serviceaccount:steward-system:drydock',), ())[0]
    assert not api.allowed(user, (), ('system:masters',))[0]
