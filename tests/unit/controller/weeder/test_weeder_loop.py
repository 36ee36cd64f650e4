"""The weeder loop's deletion path without a cluster: the per-pod limit turns a deletion into one Warning per pod,
a pod is deleted once, and a pod that is already gone gives its budget back."""

from __future__ import annotations

import types

import kubernetes

from ansible_collections.steward.cluster.plugins.module_utils.kube.errors import NotFound
from ansible_collections.steward.cluster.plugins.module_utils.watchdog.weeder_config import parse_weeder_config

from steward_controller.core.metrics import Health, Metrics
from steward_controller.weeder.loop import WeederLoop

CONFIG = parse_weeder_config({'maxDeletionsPerPod': 1, 'deletionWindow': '10m', 'servicesAndDependantSelectors': {
    'etcd': {'podSelectors': [{'matchLabels': {'app': 'kcm'}}]}}})


class Runtime:
    def __init__(self):
        configuration = kubernetes.client.Configuration()
        configuration.host = 'http://127.0.0.1:1'
        self.client = types.SimpleNamespace(configuration=configuration, timeout=5.0)
        self.metrics, self.health = Metrics(), Health()
        self.settings = types.SimpleNamespace(namespace='ns')
        self.events = []

    def report(self, body, reason, message, warning=False, kind='', outcome=''):
        self.events.append((reason, body['metadata']['name'], warning))


class Pods:
    """Stands in for the API's DELETE of pods."""

    def __init__(self, gone=()):
        self.deleted = []
        self.gone = set(gone)

    def delete(self, path, missing_ok=True):
        name = path.rsplit('/', 1)[1]
        if name in self.gone:
            raise NotFound('gone', 404, 'NotFound')
        self.deleted.append(name)


def pod(name, uid):
    return {'metadata': {'name': name, 'uid': uid, 'namespace': 'ns',
                         'ownerReferences': [{'kind': 'ReplicaSet', 'name': 'kcm-1', 'controller': True}]}}


def test_limit_once_per_pod_and_budget_given_back_for_a_pod_already_gone():
    runtime = Runtime()
    loop = WeederLoop(runtime, CONFIG, 5.0, 10, clock=lambda: 1000.0)
    loop.client = Pods(gone={'kcm-gone'})
    assert loop.weed('etcd', pod('kcm-gone', 'u0'), 'ReplicaSet/kcm-1', 1) is True    # already gone: nothing used
    assert loop.weed('etcd', pod('kcm-a', 'u1'), 'ReplicaSet/kcm-1', 1) is True
    assert loop.weed('etcd', pod('kcm-a', 'u1'), 'ReplicaSet/kcm-1', 1) is True       # the same pod again: once
    assert loop.client.deleted == ['kcm-a']
    assert loop.weed('etcd', pod('kcm-b', 'u2'), 'ReplicaSet/kcm-1', 1) is False      # the replacement: limited
    assert loop.weed('etcd', pod('kcm-b', 'u2'), 'ReplicaSet/kcm-1', 1) is False
    assert runtime.events == [('PodDeleted', 'kcm-a', False), ('PodDeletionLimited', 'kcm-b', True)]
