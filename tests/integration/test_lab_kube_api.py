"""The lab's Kubernetes API emulator over HTTP (lab/kube/api.py): selectors, the API server's refusals, the scale
subresource and the workload status mover, exercised with the official `kubernetes` client and the engine's
KubeClient as a user's code would."""

from __future__ import annotations

import json
import random
import re
import threading
import time
import uuid

import kmock
import kubernetes
import pytest
import requests
from kubernetes.client.exceptions import ApiException

from ansible_collections.steward.cluster.plugins.module_utils.kube.client import KubeClient, api_path
from ansible_collections.steward.cluster.plugins.module_utils.kube.errors import Conflict, Invalid, KubeError
from lab.env.controller import wait_for
from lab.kube.api import KubeServer

DELAY = 0.2


@pytest.fixture(scope='module')
def server():
    server = KubeServer(status_delay=DELAY).start()
    yield server
    server.stop()


@pytest.fixture
def api(server):
    configuration = kubernetes.client.Configuration()
    configuration.host = server.url
    with kubernetes.client.ApiClient(configuration) as client:
        yield client


@pytest.fixture
def kube(server):
    configuration = kubernetes.client.Configuration()
    configuration.host = server.url
    client = KubeClient(configuration)
    yield client
    client.close()


@pytest.fixture
def ns():
    return 'ns-' + uuid.uuid4().hex[:8]


def configmap(name, labels=None, annotations=None):
    return {'apiVersion': 'v1', 'kind': 'ConfigMap',
            'metadata': {'name': name, 'labels': labels or {}, 'annotations': annotations or {}}}


def deployment(name, replicas=None, annotations=None):
    spec = {'selector': {'matchLabels': {'app': name}},
            'template': {'metadata': {'labels': {'app': name}}, 'spec': {'containers': [{'name': 'c', 'image': 'x'}]}}}
    if replicas is not None:
        spec['replicas'] = replicas
    return {'apiVersion': 'apps/v1', 'kind': 'Deployment',
            'metadata': {'name': name, 'annotations': annotations or {}}, 'spec': spec}


# --- selectors ----------------------------------------------------------------------------------------------------

def test_set_based_label_selectors_on_lists(api, kube, ns):
    core = kubernetes.client.CoreV1Api(api)
    for name, labels in [('a', {'tier': 'web', 'zone': 'z1'}), ('b', {'tier': 'db', 'zone': 'z2'}),
                         ('c', {'tier': 'web', 'legacy': 'true'}), ('d', {'rank': '7'})]:
        core.create_namespaced_config_map(ns, configmap(name, labels))

    def names(selector):
        return sorted(i.metadata.name for i in core.list_namespaced_config_map(ns, label_selector=selector).items)

    assert names('tier in (web,db),!legacy') == ['a', 'b']
    assert names('tier notin (web)') == ['b', 'd']
    assert names('tier==web,zone') == ['a']
    assert names('tier!=web') == ['b', 'd']
    assert names('rank>5') == ['d']
    assert names('zone in (z2),tier=db') == ['b']
    # the raw answer of the server, not the engine client's own filter
    raw = kube.request('GET', api_path('v1', 'configmaps', ns), query=[('labelSelector', 'zone notin (z1)')])
    assert sorted(i['metadata']['name'] for i in raw['items']) == ['b', 'c', 'd']


@pytest.mark.parametrize('selector', ['tier in (web', 'a b', 'x=a=b', 'bad key', 'x in (-a)', '!x=1'])
def test_an_invalid_label_selector_is_a_400_bad_request(server, api, ns, selector):
    core = kubernetes.client.CoreV1Api(api)
    with pytest.raises(ApiException) as err:
        core.list_namespaced_config_map(ns, label_selector=selector)
    assert err.value.status == 400
    answer = requests.get(server.url + api_path('v1', 'configmaps', ns), params={'labelSelector': selector,
                                                                                 'watch': 'true'}, timeout=5)
    assert answer.status_code == 400 and answer.json()['reason'] == 'BadRequest'


def test_an_unsupported_field_selector_is_a_400(kube, ns):
    with pytest.raises(KubeError) as err:
        kube.list(api_path('v1', 'configmaps', ns), field_selector='spec.nodeName=x')
    assert err.value.status == 400 and 'field label not supported: spec.nodeName' in str(err.value)
    assert kube.list(api_path('v1', 'pods', ns), field_selector='spec.nodeName=x') == []


def test_a_watch_with_a_selector_sees_objects_enter_and_leave(api, kube, ns):
    """The official client's watch: objects enter (ADDED) and leave (DELETED) the selector's view."""
    events = []
    watch = kubernetes.watch.Watch()
    core = kubernetes.client.CoreV1Api(api)

    def read():
        try:
            for event in watch.stream(core.list_namespaced_config_map, ns, label_selector='app=web',
                                      _request_timeout=30):
                events.append((event['type'], event['object'].metadata.name))
        except Exception:  # noqa: BLE001 - the stream ends when the module's server stops
            pass

    path = api_path('v1', 'configmaps', ns)
    kube.create(path, configmap('first', {'app': 'web'}))
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    wait_for(lambda: events, 10, 0.05, 'the watch to start')  # the first object is replayed as ADDED
    kube.create(path, configmap('other', {'app': 'db'}))
    kube.create(path, configmap('w', {'app': 'web'}))
    kube.merge_patch(path + '/w', {'metadata': {'labels': {'app': 'db'}}})    # leaves the view
    kube.merge_patch(path + '/other', {'metadata': {'labels': {'app': 'web'}}})  # enters it
    kube.merge_patch(path + '/other', {'data': {'k': 'v'}})
    kube.delete(path + '/other')
    kube.delete(path + '/w')                                                 # not in view: not seen
    wanted = [('ADDED', 'first'), ('ADDED', 'w'), ('DELETED', 'w'), ('ADDED', 'other'), ('MODIFIED', 'other'), ('DELETED', 'other')]
    wait_for(lambda: len(events) >= len(wanted), 10, 0.05, 'watch events (%s)' % events)
    watch.stop()
    assert events == wanted


def watch_events(server, path, params, count, into=None, timeout=10.0):
    """The first `count` events of a raw watch on `path` as (type, name), appended to `into` as they come."""
    events = [] if into is None else into
    with requests.get(server.url + path, params=dict(params, watch='true'), stream=True, timeout=timeout) as answer:
        answer.raise_for_status()
        for line in answer.iter_lines():
            if line:
                event = json.loads(line)
                events.append((event['type'], event['object']['metadata']['name']))
                if len(events) >= count:
                    break
    return events


def test_a_watch_from_a_lists_resource_version_sends_only_what_changed_after_it(server, kube, ns):
    """As the API server: a watch without a resourceVersion (or "0") starts with the objects there (ADDED); one
    from a list's resourceVersion (client-go, kopf, `kubectl get -w`) only with what changed after it, and a listed
    object that changes while it runs is MODIFIED, not ADDED."""
    path = api_path('v1', 'configmaps', ns)
    kube.create(path, configmap('listed', {'app': 'web'}))
    kube.create(path, configmap('other', {'app': 'db'}))
    listed = requests.get(server.url + path, params={'labelSelector': 'app=web'}, timeout=5).json()
    since = listed['metadata']['resourceVersion']
    assert [item['metadata']['name'] for item in listed['items']] == ['listed']
    kube.create(path, configmap('new', {'app': 'web'}))
    kube.merge_patch(path + '/other', {'data': {'k': 'v'}})   # not in the view
    assert watch_events(server, path, {'labelSelector': 'app=web', 'resourceVersion': since}, 1) == [('ADDED', 'new')]
    events = []
    reader = threading.Thread(target=watch_events, args=(
        server, path, {'labelSelector': 'app=web', 'resourceVersion': since}, 2, events), daemon=True)
    reader.start()
    wait_for(lambda: events, 10, 0.05, 'the watch to start')
    kube.merge_patch(path + '/listed', {'data': {'k': 'v'}})
    reader.join(10)
    assert events == [('ADDED', 'new'), ('MODIFIED', 'listed')]
    for params in ({'labelSelector': 'app=web'}, {'labelSelector': 'app=web', 'resourceVersion': '0'}):
        assert sorted(watch_events(server, path, params, 2)) == [('ADDED', 'listed'), ('ADDED', 'new')]


# --- refusals -----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize('path,body,field', [
    (api_path('v1', 'nodes'), {'metadata': {'name': 'Bad_Name'}}, 'metadata.name'),
    (api_path('v1', 'nodes'), {'metadata': {'name': 'a' * 254}}, 'metadata.name'),
    (api_path('v1', 'namespaces'), {'metadata': {'name': 'dotted.name'}}, 'metadata.name'),
    (api_path('v1', 'services', 'default'), {'metadata': {'name': '1abc'}}, 'metadata.name'),
    (api_path('v1', 'configmaps', 'default'), {'metadata': {}}, 'metadata.name'),
    (api_path('v1', 'configmaps', 'default'), {'metadata': {'name': 'x', 'labels': {'bad key': 'v'}}}, 'metadata.labels'),
    (api_path('v1', 'configmaps', 'default'), {'metadata': {'name': 'x', 'labels': {'k': 'v' * 64}}}, 'metadata.labels'),
    (api_path('v1', 'configmaps', 'default'), {'metadata': {'name': 'x', 'labels': {'k': 'a b'}}}, 'metadata.labels'),
    (api_path('v1', 'configmaps', 'default'), {'metadata': {'name': 'x', 'annotations': {'a/b/c': 'v'}}},
     'metadata.annotations'),
    (api_path('v1', 'configmaps', 'default'), {'metadata': {'name': 'x', 'annotations': {'big': 'x' * (256 * 1024)}}},
     'metadata.annotations'),
    (api_path('policy/v1', 'poddisruptionbudgets', 'default'),
     {'metadata': {'name': 'p'}, 'spec': {'selector': {'matchExpressions': [{'key': 'a', 'operator': 'Foo'}]}}},
     'spec.selector.matchExpressions[0].operator'),
    (api_path('apps/v1', 'deployments', 'default'), {'metadata': {'name': 'd'}, 'spec': {'replicas': -1}},
     'spec.replicas'),
])
def test_writes_the_api_server_refuses_are_422_with_the_field(kube, path, body, field):
    with pytest.raises(Invalid) as err:
        kube.create(path, body)
    assert err.value.status == 422
    assert kube.get_or_none(path + '/' + (body['metadata'].get('name') or 'x')) is None


def test_the_422_names_kind_object_and_field_as_the_api_server(server):
    answer = requests.post(server.url + api_path('v1', 'nodes'), json={'metadata': {'name': 'Bad_Name'}}, timeout=5)
    status = answer.json()
    assert answer.status_code == 422 and status['reason'] == 'Invalid'
    assert status['message'].startswith('Node "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name": '
                                        'a lowercase RFC 1123 subdomain')
    assert status['details']['kind'] == 'Node' and status['details']['causes'][0]['field'] == 'metadata.name'


def test_annotations_limit_counts_keys_and_values_and_applies_to_patches(kube, ns):
    path = api_path('v1', 'configmaps', ns)
    limit = 256 * 1024
    kube.create(path, configmap('at-limit', annotations={'k': 'x' * (limit - 1)}))  # exactly 256 KiB: accepted
    kube.create(path, configmap('grows', annotations={'a': 'x' * (limit // 2)}))
    with pytest.raises(Invalid, match='Too long: must have at most 262144 bytes'):
        kube.merge_patch(path + '/grows', {'metadata': {'annotations': {'b': 'x' * (limit // 2)}}})
    assert set(kube.get(path + '/grows')['metadata']['annotations']) == {'a'}


def test_non_string_label_values_are_a_400_and_valid_special_names_pass(kube, ns):
    with pytest.raises(KubeError) as err:
        kube.create(api_path('v1', 'configmaps', ns), configmap('x', {'replicas': 3}))
    assert err.value.status == 400
    kube.create(api_path('rbac.authorization.k8s.io/v1', 'clusterroles'),
                {'metadata': {'name': 'system:controller:' + ns}, 'rules': []})
    kube.create(api_path('v1', 'nodes'), {'metadata': {'name': '10.69.0.4'}})  # CKE names nodes by address
    kube.create(api_path('v1', 'configmaps', ns), configmap('y', {'example.com/Key_1': 'Value.2'}))


# --- scale subresource ----------------------------------------------------------------------------------------

def test_deployment_scale_get_patch_put(api, kube, ns):
    apps = kubernetes.client.AppsV1Api(api)
    created = kube.create(api_path('apps/v1', 'deployments', ns), deployment('web'))
    assert created['spec']['replicas'] == 1  # defaulted as the API server does
    scale = apps.read_namespaced_deployment_scale('web', ns)
    assert scale.kind == 'Scale' and scale.api_version == 'autoscaling/v1'
    assert scale.spec.replicas == 1 and scale.status.selector == 'app=web'
    assert scale.metadata.uid == created['metadata']['uid']

    patched = apps.patch_namespaced_deployment_scale('web', ns, {'spec': {'replicas': 4}})
    assert patched.spec.replicas == 4
    stored = kube.get(api_path('apps/v1', 'deployments', ns, 'web'))
    assert stored['spec']['replicas'] == 4 and stored['metadata']['generation'] == 2
    assert stored['spec']['template'] == created['spec']['template']  # the Scale's fields did not leak in

    body = apps.read_namespaced_deployment_scale('web', ns)
    body.spec.replicas = 2
    replaced = apps.replace_namespaced_deployment_scale('web', ns, body)
    assert replaced.spec.replicas == 2
    body.spec.replicas = 6  # body still carries the old resourceVersion
    with pytest.raises(ApiException) as err:
        apps.replace_namespaced_deployment_scale('web', ns, body)
    assert err.value.status == 409
    with pytest.raises(ApiException) as err:
        apps.patch_namespaced_deployment_scale('web', ns, {'spec': {'replicas': -3}})
    assert err.value.status == 422
    path = api_path('apps/v1', 'deployments', ns, 'web') + '/scale'
    assert kube.json_patch(path, [{'op': 'replace', 'path': '/spec/replicas', 'value': 0}])['status']['replicas'] >= 0
    assert kube.get(api_path('apps/v1', 'deployments', ns, 'web'))['spec']['replicas'] == 0
    with pytest.raises(KubeError) as err:
        kube.get(api_path('v1', 'configmaps', ns, 'web') + '/scale')
    assert err.value.status == 404


def test_statefulset_and_replicaset_scale(api, kube, ns):
    apps = kubernetes.client.AppsV1Api(api)
    for plural, kind in (('statefulsets', 'StatefulSet'), ('replicasets', 'ReplicaSet')):
        body = dict(deployment('db', 3), kind=kind)
        kube.create(api_path('apps/v1', plural, ns), body)
        kube.merge_patch(api_path('apps/v1', plural, ns, 'db') + '/scale', {'spec': {'replicas': 5}})
        assert kube.get(api_path('apps/v1', plural, ns, 'db'))['spec']['replicas'] == 5
    assert apps.read_namespaced_stateful_set_scale('db', ns).spec.replicas == 5


SCALED_CRD = {
    'apiVersion': 'apiextensions.k8s.io/v1', 'kind': 'CustomResourceDefinition',
    'metadata': {'name': 'pools.lab.steward.io'},
    'spec': {'group': 'lab.steward.io', 'scope': 'Namespaced',
             'names': {'plural': 'pools', 'singular': 'pool', 'kind': 'Pool'},
             'versions': [{'name': 'v1', 'served': True, 'storage': True,
                           'subresources': {'status': {}, 'scale': {
                               'specReplicasPath': '.spec.size', 'statusReplicasPath': '.status.ready',
                               'labelSelectorPath': '.status.selector'}},
                           'schema': {'openAPIV3Schema': {'type': 'object', 'properties': {
                               'spec': {'type': 'object', 'properties': {'size': {'type': 'integer'}}},
                               'status': {'type': 'object', 'x-kubernetes-preserve-unknown-fields': True}}}}}]}}


def test_custom_resource_scale_follows_the_crd_paths(api, kube, ns):
    if kube.get_or_none(api_path('apiextensions.k8s.io/v1', 'customresourcedefinitions', None,
                                 'pools.lab.steward.io')) is None:
        kube.create(api_path('apiextensions.k8s.io/v1', 'customresourcedefinitions'), SCALED_CRD)
    path = api_path('lab.steward.io/v1', 'pools', ns)
    kube.create(path, {'apiVersion': 'lab.steward.io/v1', 'kind': 'Pool', 'metadata': {'name': 'p'}})
    assert kube.get(path + '/p/scale')['spec'] == {} and kube.get(path + '/p/scale')['status'] == {'replicas': 0}
    kube.merge_patch(path + '/p/status', {'status': {'ready': 2, 'selector': 'pool=p'}})
    custom = kubernetes.client.CustomObjectsApi(api)
    custom.patch_namespaced_custom_object_scale('lab.steward.io', 'v1', ns, 'pools', 'p', {'spec': {'replicas': 3}})
    scale = kube.get(path + '/p/scale')
    assert scale['spec'] == {'replicas': 3} and scale['status'] == {'replicas': 2, 'selector': 'pool=p'}
    assert kube.get(path + '/p')['spec'] == {'size': 3}


# --- status mover -------------------------------------------------------------------------------------------

def ready(kube, ns, name, plural='deployments'):
    obj = kube.get(api_path('apps/v1', plural, ns, name))
    status = obj.get('status') or {}
    replicas = obj['spec']['replicas']
    return (status.get('observedGeneration') == obj['metadata']['generation']
            and status.get('readyReplicas', 0) == replicas and status.get('availableReplicas', 0) == replicas
            and status.get('replicas', 0) == replicas
            and (plural == 'replicasets' or status.get('updatedReplicas', 0) == replicas)) and obj


def test_status_follows_spec_replicas_after_the_delay(kube, ns):
    start = time.monotonic()
    kube.create(api_path('apps/v1', 'deployments', ns), deployment('web', 3))
    assert not ready(kube, ns, 'web')  # not at once: the delay is a delay
    obj = wait_for(lambda: ready(kube, ns, 'web'), 10, 0.05, 'deployment status')
    assert time.monotonic() - start >= DELAY
    conditions = {c['type']: c['status'] for c in obj['status']['conditions']}
    assert conditions == {'Available': 'True', 'Progressing': 'True'}
    kube.merge_patch(api_path('apps/v1', 'deployments', ns, 'web') + '/scale', {'spec': {'replicas': 5}})
    wait_for(lambda: ready(kube, ns, 'web'), 10, 0.05, 'status after scale up')
    kube.merge_patch(api_path('apps/v1', 'deployments', ns, 'web'), {'spec': {'replicas': 0}})
    obj = wait_for(lambda: ready(kube, ns, 'web'), 10, 0.05, 'status after scale to 0')
    assert 'readyReplicas' not in obj['status'] and 'replicas' not in obj['status']  # omitempty, as the API server
    for plural, kind in (('statefulsets', 'StatefulSet'), ('replicasets', 'ReplicaSet')):
        kube.create(api_path('apps/v1', plural, ns), dict(deployment('db', 2), kind=kind))
        wait_for(lambda: ready(kube, ns, 'db', plural), 10, 0.05, kind + ' status')


def test_hold_status_annotation_freezes_the_status(kube, ns):
    hold = {'lab.steward.io/hold-status': 'true'}
    kube.create(api_path('apps/v1', 'deployments', ns), deployment('stuck', 2, annotations=hold))
    kube.create(api_path('apps/v1', 'deployments', ns), deployment('control', 2))
    wait_for(lambda: ready(kube, ns, 'control'), 10, 0.05, 'control deployment')
    kube.merge_patch(api_path('apps/v1', 'deployments', ns, 'control'), {'spec': {'replicas': 3}})
    wait_for(lambda: ready(kube, ns, 'control'), 10, 0.05, 'control deployment after a write')
    # both were written at the same time with the same delay: the control moved, the held one did not
    assert kube.get(api_path('apps/v1', 'deployments', ns, 'stuck')).get('status') in (None, {})
    kube.merge_patch(api_path('apps/v1', 'deployments', ns, 'stuck'),
                     {'metadata': {'annotations': {'lab.steward.io/hold-status': None}}})
    wait_for(lambda: ready(kube, ns, 'stuck'), 10, 0.05, 'released deployment')


def test_status_mover_can_be_switched_off(kube, server, ns):
    server.set_status_delay(None)
    try:
        kube.create(api_path('apps/v1', 'deployments', ns), deployment('manual', 1))
        kube.create(api_path('apps/v1', 'deployments', ns), deployment('manual-2', 1))
    finally:
        server.set_status_delay(DELAY)
    kube.create(api_path('apps/v1', 'deployments', ns), deployment('moved', 1))
    wait_for(lambda: ready(kube, ns, 'moved'), 10, 0.05, 'deployment written after the mover came back')
    assert not kube.get(api_path('apps/v1', 'deployments', ns, 'manual')).get('status')


def test_optimistic_concurrency_survives_the_mover(kube, ns):
    """A client's resourceVersion goes stale when the mover writes status, exactly as against a real cluster."""
    created = kube.create(api_path('apps/v1', 'deployments', ns), deployment('cas', 1))
    wait_for(lambda: ready(kube, ns, 'cas'), 10, 0.05, 'status')
    with pytest.raises(Conflict):
        kube.merge_patch(api_path('apps/v1', 'deployments', ns, 'cas'), {'spec': {'replicas': 2}},
                         resource_version=created['metadata']['resourceVersion'])


def test_request_log_and_object_history_stay_bounded(server, kube, ns):
    """kmock scans its whole request log for every request and keeps every version of every object: a lab
    that renews leases for hours would slow down and grow without the bounds."""
    path = api_path('coordination.k8s.io/v1', 'leases', ns)
    kube.create(path, {'metadata': {'name': 'renewed'}, 'spec': {'holderIdentity': 'a'}})
    for i in range(200):
        kube.merge_patch(path + '/renewed', {'spec': {'leaseTransitions': i}})
    emulator = server.emulator
    assert len(server.call(lambda: list(emulator._requests))) <= 2     # the last one served, and one in flight
    key = (kmock.resource('coordination.k8s.io', 'v1', 'leases'), ns, 'renewed')
    assert len(server.call(lambda: emulator.objects[key].history)) <= 16
    assert kube.get(path + '/renewed')['spec']['leaseTransitions'] == 199


def test_lists_by_resource_answer_exactly_what_kmocks_scan_of_every_object_answers(server, kube, ns):
    """lab/kube/index.py lists one resource's keys instead of kmock's check of every stored object: the same items
    in the same order for namespaced and cluster-wide lists, selectors, deleted, re-created and finalizing
    objects, and the same 404 for a resource nobody serves."""
    other = ns + '-b'
    for namespace in (ns, other):
        for i in range(4):
            kube.create(api_path('v1', 'configmaps', namespace), configmap('cm-%d' % i, {'n': str(i % 2)}))
        kube.create(api_path('v1', 'pods', namespace), {'apiVersion': 'v1', 'kind': 'Pod', 'metadata': {'name': 'p'},
                                                        'spec': {'nodeName': 'node-1', 'containers': [{'name': 'c', 'image': 'i'}]}})
    for i in range(3):
        kube.create(api_path('v1', 'nodes'), {'apiVersion': 'v1', 'kind': 'Node', 'metadata': {'name': 'node-%d' % i}})
    kube.delete(api_path('v1', 'configmaps', ns, 'cm-1'))
    kube.delete(api_path('v1', 'nodes', name='node-0'))
    kube.create(api_path('v1', 'nodes'), {'apiVersion': 'v1', 'kind': 'Node', 'metadata': {'name': 'node-0', 'labels': {'again': 'yes'}}})
    kube.create(api_path('v1', 'configmaps', other), dict(configmap('held'), metadata={'name': 'held', 'finalizers': ['x/y']}))
    kube.delete(api_path('v1', 'configmaps', other, 'held'))
    paths = [api_path('v1', 'configmaps', ns), api_path('v1', 'configmaps', other), api_path('v1', 'configmaps'),
             api_path('v1', 'configmaps', ns) + '?labelSelector=n%3D1', api_path('v1', 'nodes'),
             api_path('v1', 'pods') + '?fieldSelector=spec.nodeName%3Dnode-1', api_path('v1', 'pods', other),
             api_path('storage.k8s.io/v1', 'volumeattachments'), api_path('v1', 'configmaps', ns + '-none'),
             api_path('example.com/v1', 'nothings')]

    def answers():
        out = []
        for path in paths:
            reply = requests.get(server.url + path, timeout=10)
            body = reply.json()
            if isinstance(body.get('metadata'), dict):
                body['metadata'].pop('resourceVersion', None)    # a list's version moves on every list
            out.append((reply.status_code, body))
        return out
    emulator = server.emulator
    indexed = answers()
    server.call(lambda: setattr(emulator, 'list_index', False))
    try:
        scanned = answers()
    finally:
        server.call(lambda: setattr(emulator, 'list_index', True))
    for path, mine, kmocks in zip(paths, indexed, scanned):
        assert mine == kmocks, path
    mine = [[(i['metadata'].get('namespace'), i['metadata']['name']) for i in body.get('items', [])
             if i['metadata'].get('namespace') in (None, ns, other)] for _status, body in indexed]   # the module's others
    assert [n for _ns, n in mine[0]] == ['cm-0', 'cm-2', 'cm-3'] and [n for _ns, n in mine[1]] == ['cm-0', 'cm-1', 'cm-2', 'cm-3', 'held']
    assert mine[3] == [(ns, 'cm-3')] and [n for _ns, n in mine[4] if n.startswith('node-')] == ['node-0', 'node-1', 'node-2']
    assert mine[5] == [(ns, 'p'), (other, 'p')] and indexed[7][0] == 200 and indexed[9][0] == 404


def test_generated_names_are_the_api_servers_and_a_taken_one_is_retried(server, kube, ns):
    """generateName: 5 of the API server's 27 characters; a name already taken is followed by the next candidate
    (RetryGenerateName, Kubernetes 1.32), not a 409."""
    emulator = server.emulator
    server.call(lambda: setattr(emulator, 'name_rng', random.Random(7)))
    first = kube.create(api_path('v1', 'configmaps', ns), {'metadata': {'generateName': 'gen-'}})['metadata']['name']
    assert re.fullmatch(r'gen-[bcdfghjklmnpqrstvwxz2456789]{5}', first), first
    server.call(lambda: setattr(emulator, 'name_rng', random.Random(7)))     # the same first candidate again
    second = kube.create(api_path('v1', 'configmaps', ns), {'metadata': {'generateName': 'gen-'}})['metadata']['name']
    assert second != first and re.fullmatch(r'gen-[bcdfghjklmnpqrstvwxz2456789]{5}', second)
    assert {c['metadata']['name'] for c in kube.list(api_path('v1', 'configmaps', ns))} == {first, second}
