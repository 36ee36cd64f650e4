# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Drain's pure parts as tables: which pods are evicted, skipped or refused, and label selectors."""

from __future__ import annotations

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.kube.drain import classify_pods, controller_of, eviction_body, pod_ref
from ansible_collections.steward.cluster.plugins.module_utils.kube.selectors import selector_matches

PROTECTED = ('kube-system', 'monitoring')


def pod(name, namespace='default', node='n1', owner='ReplicaSet', phase='Running', annotations=None, controller=True):
    md = {'name': name, 'namespace': namespace}
    if owner:
        md['ownerReferences'] = [{'apiVersion': 'apps/v1', 'kind': owner, 'name': 'o', 'uid': 'u', 'controller': controller}]
    if annotations:
        md['annotations'] = annotations
    return {'metadata': md, 'spec': {'nodeName': node}, 'status': {'phase': phase}}


MIRROR = {'kubernetes.io/config.mirror': '0123'}


@pytest.mark.parametrize('p, force, outcome', [
    (pod('web'), False, ('evict', None)),
    (pod('sts', owner='StatefulSet'), False, ('evict', None)),
    (pod('job', owner='Job', phase='Pending'), False, ('evict', None)),
    (pod('ds', owner='DaemonSet'), False, ('skip', 'DaemonSet pod')),
    (pod('ds', owner='DaemonSet'), True, ('skip', 'DaemonSet pod')),          # force never evicts DaemonSet pods
    (pod('etcd', 'kube-system', owner=None, annotations=MIRROR), False, ('skip', 'mirror pod')),
    (pod('etcd', 'kube-system', owner=None, annotations=MIRROR), True, ('skip', 'mirror pod')),
    (pod('mirror-in-default', owner='Node', annotations=MIRROR), False, ('skip', 'mirror pod')),
    (pod('done', owner='Job', phase='Succeeded'), False, ('skip', 'terminated (Succeeded)')),
    (pod('crashed', owner=None, phase='Failed'), False, ('skip', 'terminated (Failed)')),  # finished: never refused
    (pod('dns', 'kube-system'), False, ('skip', 'protected namespace kube-system')),
    (pod('bare-prom', 'monitoring', owner=None), False, ('skip', 'protected namespace monitoring')),
    (pod('bare', owner=None), False, ('refuse', 'no controller')),
    (pod('bare', owner=None), True, ('force', 'no controller, evicted because of force')),
    (pod('weak', controller=False), False, ('refuse', 'no controller')),       # an owner that is not a controller
    (pod('weak', controller=False), True, ('force', 'no controller, evicted because of force')),
])
def test_classify_one_pod(p, force, outcome):
    result = classify_pods([p], 'n1', PROTECTED, force)
    kind, reason = outcome
    ref = pod_ref(p)
    if kind in ('evict', 'force'):
        assert result.evict == [p]
    else:
        assert result.evict == []
    assert result.skipped == ([(ref, reason)] if kind == 'skip' else [])
    assert result.refused == ([(ref, reason)] if kind == 'refuse' else [])
    assert result.forced == ([(ref, reason)] if kind == 'force' else [])


def test_classify_a_node_keeps_order_and_drops_pods_of_other_nodes():
    pods = [pod('a'), pod('elsewhere', node='n2'), pod('ds', owner='DaemonSet'), pod('b', 'team'),
            pod('bare', owner=None), pod('unscheduled', node=None)]
    result = classify_pods(pods, 'n1', PROTECTED, force=False)
    assert [pod_ref(p) for p in result.evict] == ['default/a', 'team/b']
    assert result.skipped == [('default/ds', 'DaemonSet pod')]
    assert result.refused == [('default/bare', 'no controller')]
    assert result.forced == []
    # Without a node name every pod given is considered (the caller filtered already).
    assert len(classify_pods(pods, None, PROTECTED, force=True).evict) == 5


def test_classify_defaults_and_missing_fields():
    bare = {'metadata': {'name': 'x'}}   # no namespace, spec or status
    assert classify_pods([bare]).refused == [('default/x', 'no controller')]
    assert classify_pods([bare], force=True).forced == [('default/x', 'no controller, evicted because of force')]
    assert classify_pods([]).evict == []


def test_controller_of_and_eviction_body():
    p = pod('web')
    p['metadata']['ownerReferences'].insert(0, {'kind': 'ConfigMap', 'name': 'cm', 'uid': 'c'})
    assert controller_of(p)['kind'] == 'ReplicaSet'
    assert controller_of(pod('bare', owner=None)) is None
    assert eviction_body(pod('web', 'team')) == {
        'apiVersion': 'policy/v1', 'kind': 'Eviction', 'metadata': {'name': 'web', 'namespace': 'team'}}


LABELS = {'app': 'web', 'tier': 'front'}


@pytest.mark.parametrize('selector, expected', [
    (None, False),                                                     # a null selector selects nothing
    ({}, True),                                                        # an empty one selects everything
    ({'matchLabels': {'app': 'web'}}, True),
    ({'matchLabels': {'app': 'web', 'tier': 'front'}}, True),
    ({'matchLabels': {'app': 'db'}}, False),
    ({'matchLabels': {'zone': 'a'}}, False),
    ({'matchExpressions': [{'key': 'app', 'operator': 'In', 'values': ['web', 'api']}]}, True),
    ({'matchExpressions': [{'key': 'app', 'operator': 'In', 'values': ['db']}]}, False),
    ({'matchExpressions': [{'key': 'app', 'operator': 'NotIn', 'values': ['db']}]}, True),
    ({'matchExpressions': [{'key': 'app', 'operator': 'NotIn', 'values': ['web']}]}, False),
    ({'matchExpressions': [{'key': 'zone', 'operator': 'NotIn', 'values': ['a']}]}, True),   # absent key is not in
    ({'matchExpressions': [{'key': 'tier', 'operator': 'Exists'}]}, True),
    ({'matchExpressions': [{'key': 'zone', 'operator': 'Exists'}]}, False),
    ({'matchExpressions': [{'key': 'zone', 'operator': 'DoesNotExist'}]}, True),
    ({'matchExpressions': [{'key': 'app', 'operator': 'DoesNotExist'}]}, False),
    ({'matchExpressions': [{'key': 'app', 'operator': 'Gt', 'values': ['1']}]}, False),     # unknown operator
    ({'matchLabels': {'app': 'web'}, 'matchExpressions': [{'key': 'tier', 'operator': 'In', 'values': ['back']}]}, False),
])
def test_selector_matches(selector, expected):
    assert selector_matches(selector, LABELS) is expected
