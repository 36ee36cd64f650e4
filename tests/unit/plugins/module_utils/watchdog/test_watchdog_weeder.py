"""The weeder's decisions: not-ready -> ready of a service over Endpoints and EndpointSlices, which pods are in
CrashLoopBackOff, and the per-pod deletion limit."""

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.watchdog import weeder as w


def endpoints(name, ready=(), not_ready=()):
    subsets = []
    if ready or not_ready:
        subset = {}
        if ready:
            subset['addresses'] = [{'ip': ip} for ip in ready]
        if not_ready:
            subset['notReadyAddresses'] = [{'ip': ip} for ip in not_ready]
        subsets.append(subset)
    return {'metadata': {'name': name}, 'subsets': subsets}


def endpoint_slice(name, service, readiness):
    return {'metadata': {'name': name, 'labels': {'kubernetes.io/service-name': service}},
            'endpoints': [{'addresses': ['10.0.0.%d' % i], 'conditions': {} if r is None else {'ready': r}}
                          for i, r in enumerate(readiness)]}


def test_endpoints_readiness():
    assert not w.endpoints_ready(w.ENDPOINTS, endpoints('etcd'))
    assert not w.endpoints_ready(w.ENDPOINTS, endpoints('etcd', not_ready=['1.1.1.1']))
    assert w.endpoints_ready(w.ENDPOINTS, endpoints('etcd', ready=['1.1.1.1'], not_ready=['1.1.1.2']))
    assert not w.endpoints_ready(w.ENDPOINT_SLICE, endpoint_slice('s', 'etcd', []))
    assert not w.endpoints_ready(w.ENDPOINT_SLICE, endpoint_slice('s', 'etcd', [False]))
    assert w.endpoints_ready(w.ENDPOINT_SLICE, endpoint_slice('s', 'etcd', [False, True]))
    assert w.endpoints_ready(w.ENDPOINT_SLICE, endpoint_slice('s', 'etcd', [None]))   # unknown: ready, as the API says


def test_transition_not_ready_to_ready_only():
    r = w.Readiness({'etcd'})
    assert r.observe(w.ENDPOINTS, 'ADDED', endpoints('etcd'), initial=True) is None
    assert r.observe(w.ENDPOINTS, 'MODIFIED', endpoints('etcd', not_ready=['a'])) is None
    assert r.observe(w.ENDPOINTS, 'MODIFIED', endpoints('etcd', ready=['a'])) == 'etcd'            # the trigger
    assert r.observe(w.ENDPOINTS, 'MODIFIED', endpoints('etcd', ready=['a', 'b'])) is None          # ready -> ready
    assert r.observe(w.ENDPOINTS, 'MODIFIED', endpoints('etcd')) is None                            # ready -> not ready
    assert r.observe(w.ENDPOINTS, 'DELETED', endpoints('etcd', ready=['a'])) is None
    assert r.observe(w.ENDPOINTS, 'MODIFIED', endpoints('other', ready=['a'])) is None              # not configured


def test_ready_at_start_triggers_nothing_but_a_later_create_does():
    r = w.Readiness({'etcd', 'kube-apiserver'})
    assert r.observe(w.ENDPOINTS, 'ADDED', endpoints('etcd', ready=['a']), initial=True) is None
    assert r.ready('etcd')
    assert r.observe(w.ENDPOINTS, 'ADDED', endpoints('kube-apiserver', ready=['a'])) == 'kube-apiserver'


def test_endpoints_and_slices_of_one_service_trigger_once():
    r = w.Readiness({'etcd'})
    r.observe(w.ENDPOINTS, 'ADDED', endpoints('etcd'), initial=True)
    r.observe(w.ENDPOINT_SLICE, 'ADDED', endpoint_slice('etcd-x1', 'etcd', [False]), initial=True)
    assert r.observe(w.ENDPOINT_SLICE, 'MODIFIED', endpoint_slice('etcd-x1', 'etcd', [True])) == 'etcd'
    assert r.observe(w.ENDPOINTS, 'MODIFIED', endpoints('etcd', ready=['a'])) is None
    # A replayed ADDED of an object we know (a watch reconnect) is not a transition either.
    assert r.observe(w.ENDPOINT_SLICE, 'ADDED', endpoint_slice('etcd-x1', 'etcd', [True])) is None


def pod(name, reason=None, init_reason=None, deleting=False, owner=None):
    meta = {'name': name}
    if deleting:
        meta['deletionTimestamp'] = '2026-01-01T00:00:00Z'
    if owner:
        meta['ownerReferences'] = [{'kind': owner[0], 'name': owner[1], 'controller': True}]
    status = {'containerStatuses': [{'name': 'c', 'state': {'waiting': {'reason': reason}} if reason else {'running': {}}}]}
    if init_reason:
        status['initContainerStatuses'] = [{'name': 'i', 'state': {'waiting': {'reason': init_reason}}}]
    return {'metadata': meta, 'status': status}


@pytest.mark.parametrize('item, expected', [
    (pod('a', 'CrashLoopBackOff'), True),
    (pod('a', init_reason='CrashLoopBackOff'), True),
    (pod('a', 'ContainerCreating'), False),
    (pod('a'), False),
    (pod('a', 'CrashLoopBackOff', deleting=True), False),
    ({'metadata': {'name': 'pending'}, 'status': {'phase': 'Pending'}}, False),
])
def test_crash_looping(item, expected):
    assert w.crash_looping(item) is expected


def test_pod_key_counts_a_controllers_pods_together():
    assert w.pod_key(pod('kcm-7d4-abcde', owner=('ReplicaSet', 'kcm-7d4'))) == 'ReplicaSet/kcm-7d4'
    assert w.pod_key(pod('etcd-0', owner=('StatefulSet', 'etcd'))) == 'StatefulSet/etcd'
    assert w.pod_key(pod('bare')) == 'Pod/bare'


def test_deletion_budget_per_window():
    budget = w.DeletionBudget(max_per_pod=2, window=100.0)
    assert [budget.take('Pod/a', t).allowed for t in (0, 1, 2)] == [True, True, False]
    refused = budget.take('Pod/a', 3)
    assert (refused.used, refused.limit) == (2, 2)
    assert budget.take('Pod/a', 100.5).allowed          # the first deletion left the window
    assert budget.take('ReplicaSet/x', 0, pods=3).limit == 6
    unlimited = w.DeletionBudget(max_per_pod=0, window=100.0)
    assert all(unlimited.take('Pod/a', t).allowed for t in range(50))
    decision = budget.take('Pod/b', 5)
    budget.give_back('Pod/b', 5)
    assert budget.take('Pod/b', 6).used == 1
