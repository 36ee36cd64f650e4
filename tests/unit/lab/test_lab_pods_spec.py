"""The pod runtime's pure decisions (lab/pods/spec.py, lab/pods/images.py) and the emulator's discovery documents
and strategic merge patches (lab/kube/discovery.py)."""

from __future__ import annotations

import importlib.util

import pytest

from lab.kube.discovery import OPENAPI_V2_PROTOBUF, fixed_resource_list, openapi_v2, strategic_merge
from lab.pods import images, spec
from lab.pods import runtime as runtime_module


def sts(replicas=3, policy=None, strategy=None, image='quay.io/coreos/etcd:v3.5.1'):
    body = {'metadata': {'name': 'e', 'namespace': 'ns', 'uid': 'u1', 'generation': 2},
            'spec': {'replicas': replicas, 'serviceName': 'e-peer', 'selector': {'matchLabels': {'app': 'e'}},
                     'template': {'metadata': {'labels': {'app': 'e'}}, 'spec': {'containers': [
                         {'name': 'etcd', 'image': image}]}},
                     'volumeClaimTemplates': [{'metadata': {'name': 'data'}, 'spec': {}}]}}
    if policy:
        body['spec']['podManagementPolicy'] = policy
    if strategy:
        body['spec']['updateStrategy'] = strategy
    return body


def pod(set_, ordinal, ready=True, revision=None):
    out = spec.pod_for(set_, ordinal)
    if revision is not None:
        out['metadata']['labels'][spec.REVISION_LABEL] = revision
    out['status'] = {'phase': 'Running', 'conditions': [{'type': 'Ready', 'status': 'True' if ready else 'False'}]}
    return out


@pytest.mark.parametrize('image, repository, tag, minor', [
    ('registry.k8s.io/etcd:3.5.16-0', 'etcd', '3.5.16-0', '3.5'),
    ('quay.io/coreos/etcd:v3.4.13', 'etcd', 'v3.4.13', '3.4'),
    ('host:5000/gardener/etcd-wrapper:v3.5.21@sha256:ab', 'etcd-wrapper', 'v3.5.21', '3.5'),
    ('gardener/etcd-wrapper:v0.4.0', 'etcd-wrapper', 'v0.4.0', None),
    ('etcd', 'etcd', '', None),
    ('etcd:3.6.0', 'etcd', '3.6.0', None),
])
def test_images_name_their_etcd_version(image, repository, tag, minor):
    assert images.split_image(image) == (repository, tag)
    assert images.etcd_minor(tag) == minor
    assert images.known(image)


def test_an_image_without_a_program_is_refused_with_a_reason():
    with pytest.raises(images.UnknownImage) as caught:
        images.program('docker.io/library/nginx:1.25')
    assert caught.value.reason == 'LabImageUnknown' and 'nginx' in caught.value.message and 'etcdbrctl' in caught.value.message
    with pytest.raises(images.UnknownImage) as caught:
        images.program('etcd:latest')
    assert "'latest'" in caught.value.message
    assert not images.known('nginx:1.25') and not spec.managed(sts(image='nginx:1.25')) and spec.managed(sts())


def test_pods_of_a_set_carry_names_labels_pvcs_and_their_dns_subdomain():
    made = spec.pod_for(sts(), 1)
    assert made['metadata']['name'] == 'e-1' and made['spec']['hostname'] == 'e-1' and made['spec']['subdomain'] == 'e-peer'
    assert made['metadata']['labels'][spec.POD_INDEX_LABEL] == '1' and made['metadata']['labels']['app'] == 'e'
    assert {'name': 'data', 'persistentVolumeClaim': {'claimName': 'data-e-1'}} in made['spec']['volumes']
    assert made['metadata']['ownerReferences'][0]['uid'] == 'u1'
    claim = spec.pvc_for(sts(), sts()['spec']['volumeClaimTemplates'][0], 2)
    assert claim['metadata']['name'] == 'data-e-2' and claim['metadata']['finalizers'] == [spec.PVC_PROTECTION]


def test_ordered_ready_creates_one_pod_at_a_time_and_waits_for_ready():
    s = sts()
    assert spec.sts_actions(s, {}) == [('create', 0)]
    assert spec.sts_actions(s, {0: pod(s, 0, ready=False)}) == []
    assert spec.sts_actions(s, {0: pod(s, 0)}) == [('create', 1)]
    assert spec.sts_actions(s, {0: pod(s, 0), 2: pod(s, 2)}) == [('create', 1)]   # a lost pod comes back first
    assert spec.sts_actions(sts(policy='Parallel'), {}) == [('create', 0), ('create', 1), ('create', 2)]


def test_scale_down_removes_the_highest_ordinal_first_one_at_a_time():
    s = sts(replicas=1)
    pods = {i: pod(s, i) for i in range(3)}
    assert spec.sts_actions(s, pods) == [('delete', 2)]
    pods[0] = pod(s, 0, ready=False)
    assert spec.sts_actions(s, pods) == []


def test_rolling_update_replaces_the_highest_old_pod_once_all_are_ready_above_the_partition():
    s = sts(strategy={'type': 'RollingUpdate', 'rollingUpdate': {'partition': 1}})
    pods = {i: pod(s, i, revision='old') for i in range(3)}
    assert spec.sts_actions(s, pods) == [('delete', 2)]
    pods[2] = pod(s, 2)
    assert spec.sts_actions(s, pods) == [('delete', 1)]
    pods[1] = pod(s, 1)
    assert spec.sts_actions(s, pods) == []    # ordinal 0 is below the partition
    pods[1] = pod(s, 1, ready=False)
    assert spec.sts_actions(sts(strategy={'type': 'RollingUpdate'}), pods) == []
    assert spec.sts_actions(sts(strategy={'type': 'OnDelete'}), {i: pod(s, i, revision='old') for i in range(3)}) == []
    status = spec.sts_status(s, [pod(s, 0, revision='old'), pod(s, 1), pod(s, 2, ready=False)])
    assert (status['replicas'], status['readyReplicas'], status['updatedReplicas'], status['observedGeneration']) == (3, 2, 2, 2)


def test_the_rewriter_maps_peer_names_mount_paths_and_wildcard_listens_to_this_machine():
    hosts = {}
    for name, ip in (('e-0', '127.0.100.1'), ('e-10', '127.0.100.2')):
        hosts.update({dns: ip for dns in spec.dns_names(name, 'e-peer', 'ns')})
    rewrite = spec.Rewriter(hosts, {'/var/etcd/data/': '/lab/pvc/ns/data-e-0'}, '127.0.100.1')
    assert rewrite('--initial-cluster=e-0=http://e-0.e-peer.ns.svc.cluster.local:2380,e-10=https://e-10.e-peer.ns.svc:2380') == \
        '--initial-cluster=e-0=http://127.0.100.1:2380,e-10=https://127.0.100.2:2380'
    assert rewrite('e-0.e-peer.other.svc e-0.e-peer xe-0.e-peer') == 'e-0.e-peer.other.svc 127.0.100.1 xe-0.e-peer'
    assert rewrite('data-dir: /var/etcd/data/new.etcd\nwal: /var/etcd/data2') == \
        'data-dir: /lab/pvc/ns/data-e-0/new.etcd\nwal: /var/etcd/data2'
    assert rewrite('--listen-client-urls=http://0.0.0.0:2379,http://localhost:2379') == \
        '--listen-client-urls=http://127.0.100.1:2379'
    assert spec.expand_vars('--name=$(POD_NAME) $$(KEEP) $(UNSET)', {'POD_NAME': 'e-0'}) == '--name=e-0 $(KEEP) $(UNSET)'


def test_endpoints_list_ready_pods_and_not_ready_ones_apart_unless_published():
    s = sts()
    pods = [dict(pod(s, 0), status=dict(pod(s, 0)['status'], podIP='127.0.100.1')),
            dict(pod(s, 1, ready=False), status=dict(pod(s, 1, ready=False)['status'], podIP='127.0.100.2'))]
    pods[0]['spec']['containers'][0]['ports'] = [{'name': 'client', 'containerPort': 2379}]
    service = {'metadata': {'name': 'e-client', 'namespace': 'ns'},
               'spec': {'selector': {'app': 'e'}, 'ports': [{'name': 'c', 'port': 80, 'targetPort': 'client'}]}}
    endpoints, endpoint_slice = spec.endpoints_for(service, pods)
    subset = endpoints['subsets'][0]
    assert [a['ip'] for a in subset['addresses']] == ['127.0.100.1']
    assert [a['ip'] for a in subset['notReadyAddresses']] == ['127.0.100.2']
    assert subset['ports'] == [{'name': 'c', 'port': 2379, 'protocol': 'TCP'}]
    assert endpoint_slice['metadata']['labels']['kubernetes.io/service-name'] == 'e-client'
    assert [e['conditions']['ready'] for e in endpoint_slice['endpoints']] == [True, False]
    service['spec']['publishNotReadyAddresses'] = True
    assert len(spec.endpoints_for(service, pods)[0]['subsets'][0]['addresses']) == 2
    assert spec.selects({'app': 'e'}, {'app': 'e', 'x': 'y'}) and not spec.selects({}, {'app': 'e'})


def test_discovery_lists_the_core_group_and_subresources_as_the_api_server_does():
    doc = fixed_resource_list({'groupVersion': '/v1', 'resources': [
        {'name': 'namespaces', 'kind': 'Namespace', 'shortNames': ['ns'], 'verbs': ['list', 'get']},
        {'name': 'namespaces/status', 'kind': 'Namespace', 'shortNames': ['ns'], 'verbs': ['list', 'get']},
        {'name': 'pods/eviction', 'kind': 'Pod', 'shortNames': ['po'], 'verbs': ['get']}]})
    assert doc['groupVersion'] == 'v1'
    assert doc['resources'][0] == {'name': 'namespaces', 'kind': 'Namespace', 'shortNames': ['ns'], 'verbs': ['get', 'list']}
    assert doc['resources'][1]['shortNames'] == [] and doc['resources'][1]['verbs'] == ['get', 'patch', 'update']
    assert (doc['resources'][2]['kind'], doc['resources'][2]['group'], doc['resources'][2]['verbs']) == ('Eviction', 'policy', ['create'])
    assert openapi_v2(OPENAPI_V2_PROTOBUF)[0] == b''
    assert openapi_v2('application/json')[0].startswith(b'{"swagger": "2.0"')


def test_strategic_merge_patches_merge_lists_by_key_and_drop_directives():
    base = {'spec': {'containers': [{'name': 'a', 'image': 'x', 'env': [{'name': 'A', 'value': '1'}]},
                                    {'name': 'b', 'image': 'y'}], 'args': ['--one']}}
    patch = {'spec': {'$setElementOrder/containers': [{'name': 'a'}, {'name': 'b'}],
                      'containers': [{'name': 'a', 'env': [{'name': 'B', 'value': '2'}]},
                                     {'name': 'b', '$patch': 'delete'}], 'args': ['--two']}}
    assert strategic_merge(base, patch) == {'spec': {'containers': [
        {'name': 'a', 'image': 'x', 'env': [{'name': 'A', 'value': '1'}, {'name': 'B', 'value': '2'}]}], 'args': ['--two']}}
    assert strategic_merge({'a': {'b': 1, 'c': 2}}, {'a': {'$patch': 'replace', 'd': 3}}) == {'a': {'d': 3}}
    assert strategic_merge({'l': ['x', 'y']}, {'$deleteFromPrimitiveList/l': ['x']}) == {'l': ['y']}
    assert strategic_merge({'m': {'k': 1}}, {'m': None}) == {}


@pytest.fixture
def runtime(tmp_path, monkeypatch):
    """A runtime that is never started (no API is reached): for its argv decisions. The venv has the two
    console scripts of the controller image."""
    venv_bin = tmp_path / 'venv' / 'bin'
    venv_bin.mkdir(parents=True)
    for name in images.CONSOLE_SCRIPTS + ('python',):
        (venv_bin / name).write_text('')
    monkeypatch.setattr(images, 'venv_python', lambda: str(venv_bin / 'python'))
    monkeypatch.setattr(runtime_module, 'venv_python', lambda: str(venv_bin / 'python'))
    made = runtime_module.Runtime('http://127.0.0.1:9', str(tmp_path / 'state'), '127.0.100.0/24')
    made.ips = {'ns/e-0': {'ip': '127.0.100.7', 'subdomain': 'e-peer'}}
    return made, str(venv_bin)


def lab_pod(container, aliases=None):
    return {'metadata': {'name': 'e-0', 'namespace': 'ns', 'uid': 'u0'},
            'spec': {'containers': [container], 'hostAliases': aliases or [], 'volumes': []}}


def test_druids_backup_restore_image_runs_the_member_program_on_the_pods_ip(runtime):
    made, venv_bin = runtime
    container = {'name': 'backup-restore', 'image': 'europe-docker.pkg.dev/gardener-project/releases/gardener/etcdbrctl:v0.30.1',
                 'args': ['server', '--endpoints=http://e-local:2379', '--server-port=8080']}
    argv, env = made._argv(lab_pod(container, [{'ip': '127.0.0.1', 'hostnames': ['e-local']}]), container, ({}, {}))
    assert argv == [venv_bin + '/python', venv_bin + '/steward-etcd-member', 'server',
                    '--endpoints=http://127.0.100.7:2379', '--server-port=8080', '--server-host=127.0.100.7',
                    '--config-file=/var/etcd/config/etcd.conf.yaml']   # no mount here: the path stays as it is
    assert env['KUBECONFIG'] == made.kubeconfig and env['HOSTNAME'] == 'e-0'
    controller = {'name': 'member', 'image': 'ghcr.io/steward-cluster/steward-controller:0.1.0',
                  'command': ['steward-etcd-member', 'server'], 'args': ['--server-host=127.0.100.7']}
    argv, _env = made._argv(lab_pod(controller), controller, ({}, {}))
    assert argv == [venv_bin + '/python', venv_bin + '/steward-etcd-member', 'server', '--server-host=127.0.100.7',
                    '--config-file=/var/etcd/config/etcd.conf.yaml']
    with pytest.raises(images.UnknownImage) as caught:
        made._argv(lab_pod(dict(controller, command=['sh'])), dict(controller, command=['sh']), ({}, {}))
    assert caught.value.reason == 'LabBinaryMissing'


def test_druids_etcd_wrapper_start_etcd_runs_the_labs_wrapper_when_the_checkout_has_it(runtime):
    if images.etcd_binary('3.5') is None:
        pytest.skip('no etcd 3.5 binary: run make all')
    made, venv_bin = runtime
    container = {'name': 'etcd', 'image': 'gardener/etcd-wrapper:v3.5.1',
                 'args': ['start-etcd', '--backup-restore-host-port=e-local:8080', '--etcd-server-name=e-local']}
    pod = lab_pod(container, [{'ip': '127.0.0.1', 'hostnames': ['e-local']}])
    if importlib.util.find_spec('lab.etcd_wrapper') is None:
        with pytest.raises(images.UnknownImage) as caught:
            made._argv(pod, container, ({}, {}))
        assert caught.value.reason == 'LabCommandUnknown' and 'lab/etcd_wrapper.py' in caught.value.message
        return
    argv, _env = made._argv(pod, container, ({}, {}))
    assert argv[:3] == [venv_bin + '/python', '-m', 'lab.etcd_wrapper']
    assert argv[3:6] == ['start-etcd', '--backup-restore-host-port=127.0.100.7:8080', '--etcd-server-name=127.0.100.7']
    assert argv[6:10] == ['--etcd-binary', images.etcd_binary('3.5'), '--pod-ip', '127.0.100.7']
