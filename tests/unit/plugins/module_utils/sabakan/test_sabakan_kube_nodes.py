# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Cluster nodes onto Kubernetes Nodes: matching, merge patches that keep what is not ours, and
the deletion rule (left the cluster + RETIRED + labelled by this integration + same serial)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.sabakan.kube_nodes import (
    INTEGRATION_ANNOTATION, NodeIndex, merge_taints, node_patch, node_taints_by_address, plan_node_deletions,
    plan_node_patches,
)

INTEGRATION = 'infra/dc1'
RETIRING = {'key': 'cke.cybozu.com/state', 'value': 'retiring', 'effect': 'NoExecute'}
RETIRED = {'key': 'cke.cybozu.com/state', 'value': 'retired', 'effect': 'NoExecute'}
STORAGE = {'key': 'cke.cybozu.com/role', 'value': 'storage', 'effect': 'NoExecute'}
NOT_READY = {'key': 'node.kubernetes.io/not-ready', 'effect': 'NoExecute', 'timeAdded': '2026-01-01T00:00:00Z'}
USER = {'key': 'example.com/dedicated', 'value': 'db', 'effect': 'NoSchedule'}


def cluster_node(address: str, *, control_plane: bool = False, labels: Optional[Dict[str, str]] = None,
                 taints: Optional[List[Dict[str, str]]] = None, serial: str = 's1', hostname: str = '') -> Dict[str, Any]:
    node = {'address': address, 'user': 'cybozu', 'control_plane': control_plane,
            'labels': labels if labels is not None else {'cke.cybozu.com/rack': '1', 'cke.cybozu.com/role': 'cs'},
            'annotations': {'cke.cybozu.com/serial': serial}, 'taints': taints or []}
    if hostname:
        node['hostname'] = hostname
    return node


def kube_node(name: str, *, labels: Optional[Dict[str, str]] = None, annotations: Optional[Dict[str, str]] = None,
              taints: Optional[List[Dict[str, Any]]] = None, ips: Optional[List[str]] = None, rv: str = '7') -> Dict[str, Any]:
    return {'apiVersion': 'v1', 'kind': 'Node',
            'metadata': {'name': name, 'resourceVersion': rv, 'labels': dict(labels or {}),
                         'annotations': dict(annotations or {})},
            'spec': {'taints': list(taints or [])},
            'status': {'addresses': [{'type': 'InternalIP', 'address': ip} for ip in ips or []]
                       + [{'type': 'Hostname', 'address': name}]}}


def applied(node: Dict[str, Any], cnode: Dict[str, Any]) -> Dict[str, Any]:
    """The Node after the merge patch (what the API server would store)."""
    patch = node_patch(node, cnode, INTEGRATION)
    if patch is None:
        return node
    result = {'metadata': dict(node['metadata']), 'spec': dict(node['spec'])}
    for kind in ('labels', 'annotations'):
        values = dict(node['metadata'].get(kind) or {})
        for key, value in ((patch.patch.get('metadata') or {}).get(kind) or {}).items():
            if value is None:
                values.pop(key, None)
            else:
                values[key] = value
        result['metadata'][kind] = values
    if 'spec' in patch.patch:
        result['spec']['taints'] = patch.patch['spec']['taints']
    return result


# --- matching ---------------------------------------------------------------------------------
@pytest.mark.parametrize('nodes, cnode, expected', [
    ([kube_node('10.0.0.1')], cluster_node('10.0.0.1'), '10.0.0.1'),                        # name = address
    ([kube_node('worker-1', ips=['10.0.0.1'])], cluster_node('10.0.0.1'), 'worker-1'),      # InternalIP = address
    ([kube_node('w1')], cluster_node('10.0.0.1', hostname='w1'), 'w1'),                    # name = hostname
    ([kube_node('w1', ips=['10.0.0.1']), kube_node('10.0.0.1')], cluster_node('10.0.0.1'), '10.0.0.1'),  # name wins
    ([kube_node('10.0.0.2', ips=['10.0.0.3'])], cluster_node('10.0.0.1'), None),           # no match
    ([kube_node('w1', ips=['10.0.0.9'])], cluster_node('10.0.0.1'), None),                 # hostname not set
])
def test_match(nodes, cnode, expected):
    found = NodeIndex(nodes).match(cnode)
    assert (found['metadata']['name'] if found else None) == expected


def test_node_taints_by_address_covers_names_ips_and_hostnames():
    nodes = [kube_node('10.0.0.1', taints=[USER]), kube_node('w2', ips=['10.0.0.2'], taints=[NOT_READY]),
             kube_node('w3', taints=[RETIRING])]
    cluster = {'nodes': [cluster_node('10.0.0.3', hostname='w3')]}
    taints = node_taints_by_address(nodes, cluster)
    assert taints['10.0.0.1'] == [USER]
    assert taints['10.0.0.2'] == [NOT_READY]
    assert taints['w2'] == [NOT_READY]
    assert taints['10.0.0.3'] == [RETIRING]


# --- taints -----------------------------------------------------------------------------------
@pytest.mark.parametrize('current, wanted, expected', [
    ([], [RETIRING], [RETIRING]),                                              # add the state taint
    ([USER, NOT_READY], [RETIRING], [USER, NOT_READY, RETIRING]),              # others kept, in order
    ([USER, RETIRING], [RETIRED], [USER, RETIRED]),                            # retiring -> retired in place
    ([RETIRED, USER], [], [USER]),                                             # healthy again: removed
    ([NOT_READY, RETIRED], [STORAGE], [NOT_READY, STORAGE]),                   # template taint added, state gone
    ([dict(STORAGE, value='old')], [STORAGE], [STORAGE]),                      # our value wins (same key+effect)
    ([{'key': 'cke.cybozu.com/role', 'value': 'x', 'effect': 'NoSchedule'}], [STORAGE],  # other effect: kept
     [{'key': 'cke.cybozu.com/role', 'value': 'x', 'effect': 'NoSchedule'}, STORAGE]),
    ([NOT_READY], [], [NOT_READY]),                                            # nothing of ours
])
def test_merge_taints(current, wanted, expected):
    assert merge_taints(current, wanted) == expected


# --- patches ----------------------------------------------------------------------------------
def test_first_patch_sets_labels_annotations_and_keeps_foreign_ones():
    node = kube_node('10.0.0.1', labels={'kubernetes.io/hostname': 'n1', 'team': 'a'},
                     annotations={'node.alpha.kubernetes.io/ttl': '0'}, taints=[USER])
    cnode = cluster_node('10.0.0.1', taints=[RETIRING])
    patch = node_patch(node, cnode, INTEGRATION)
    assert patch is not None
    assert patch.name == '10.0.0.1' and patch.resource_version == '7'
    assert patch.patch == {
        'metadata': {'labels': {'cke.cybozu.com/rack': '1', 'cke.cybozu.com/role': 'cs'},
                     'annotations': {'cke.cybozu.com/serial': 's1', INTEGRATION_ANNOTATION: INTEGRATION}},
        'spec': {'taints': [USER, RETIRING]},
    }
    assert patch.changes == ['labels 2 set', 'annotations 2 set',
                             'taint cke.cybozu.com/state=retiring:NoExecute added']
    after = applied(node, cnode)
    assert after['metadata']['labels'] == {'kubernetes.io/hostname': 'n1', 'team': 'a', 'cke.cybozu.com/rack': '1',
                                           'cke.cybozu.com/role': 'cs'}
    assert after['metadata']['annotations']['node.alpha.kubernetes.io/ttl'] == '0'


def test_second_patch_is_none():
    node = kube_node('10.0.0.1', labels={'team': 'a'}, taints=[NOT_READY])
    cnode = cluster_node('10.0.0.1', taints=[RETIRED])
    once = applied(node, cnode)
    assert node_patch(once, cnode, INTEGRATION) is None


def test_stale_labels_of_ours_are_removed_foreign_and_cke_master_kept():
    node = kube_node('10.0.0.1', labels={
        'cke.cybozu.com/rack': '1', 'cke.cybozu.com/role': 'cs', 'sabakan.cke.cybozu.com/product': 'R640',
        'cke.cybozu.com/master': 'true', 'node-role.kubernetes.io/master': 'true', 'team': 'a'},
        annotations={'cke.cybozu.com/serial': 's1', INTEGRATION_ANNOTATION: INTEGRATION, 'cke.cybozu.com/old': 'x'})
    demoted = cluster_node('10.0.0.1', control_plane=False)
    patch = node_patch(node, demoted, INTEGRATION)
    assert patch.patch['metadata']['labels'] == {'sabakan.cke.cybozu.com/product': None,
                                                 'node-role.kubernetes.io/master': None}
    assert patch.patch['metadata']['annotations'] == {'cke.cybozu.com/old': None}
    assert 'spec' not in patch.patch
    # A control plane keeps its master role label.
    promoted = cluster_node('10.0.0.1', control_plane=True, labels={
        'cke.cybozu.com/rack': '1', 'cke.cybozu.com/role': 'cs', 'node-role.kubernetes.io/master': 'true'})
    assert node_patch(node, promoted, INTEGRATION).patch['metadata']['labels'] == {
        'sabakan.cke.cybozu.com/product': None}


def test_state_taint_removed_when_machine_is_healthy_again():
    node = kube_node('10.0.0.1', labels={'cke.cybozu.com/rack': '1', 'cke.cybozu.com/role': 'cs'},
                     annotations={'cke.cybozu.com/serial': 's1', INTEGRATION_ANNOTATION: INTEGRATION},
                     taints=[NOT_READY, RETIRING, USER])
    patch = node_patch(node, cluster_node('10.0.0.1'), INTEGRATION)
    assert patch.patch == {'spec': {'taints': [NOT_READY, USER]}}
    assert patch.changes == ['taint cke.cybozu.com/state=retiring:NoExecute removed']


def test_plan_node_patches_touches_only_cluster_nodes():
    cluster = {'nodes': [cluster_node('10.0.0.1'), cluster_node('10.0.0.2'), cluster_node('10.0.0.9')]}
    nodes = [kube_node('10.0.0.1'), kube_node('w2', ips=['10.0.0.2']), kube_node('10.0.0.3'), kube_node('outsider')]
    patches = plan_node_patches(cluster, nodes, INTEGRATION)
    assert [(p.name, p.address) for p in patches] == [('10.0.0.1', '10.0.0.1'), ('w2', '10.0.0.2')]
    assert plan_node_patches(None, nodes, INTEGRATION) == []


# --- deletions --------------------------------------------------------------------------------
def machine(address: str, serial: str, state: str) -> Dict[str, Any]:
    return {'spec': {'serial': serial, 'ipv4': [address]}, 'status': {'state': state}}


OURS = {'cke.cybozu.com/serial': 's9', INTEGRATION_ANNOTATION: INTEGRATION}


@pytest.mark.parametrize('node, in_cluster, machines, deleted', [
    (kube_node('10.0.0.9', annotations=OURS), False, [machine('10.0.0.9', 's9', 'RETIRED')], True),
    (kube_node('w9', ips=['10.0.0.9'], annotations=OURS), False, [machine('10.0.0.9', 's9', 'RETIRED')], True),
    # still in the cluster (waiting out waitRetiredSeconds): kept
    (kube_node('10.0.0.9', annotations=OURS), True, [machine('10.0.0.9', 's9', 'RETIRED')], False),
    # healthy / retiring machine: never deleted
    (kube_node('10.0.0.9', annotations=OURS), False, [machine('10.0.0.9', 's9', 'HEALTHY')], False),
    (kube_node('10.0.0.9', annotations=OURS), False, [machine('10.0.0.9', 's9', 'RETIRING')], False),
    # machine unknown to sabakan: kept
    (kube_node('10.0.0.9', annotations=OURS), False, [], False),
    # not labelled by this integration, or by another one: kept
    (kube_node('10.0.0.9', annotations={'cke.cybozu.com/serial': 's9'}), False,
     [machine('10.0.0.9', 's9', 'RETIRED')], False),
    (kube_node('10.0.0.9', annotations=dict(OURS, **{INTEGRATION_ANNOTATION: 'infra/other'})), False,
     [machine('10.0.0.9', 's9', 'RETIRED')], False),
    # the address now belongs to another machine (serial differs): kept
    (kube_node('10.0.0.9', annotations=OURS), False, [machine('10.0.0.9', 's10', 'RETIRED')], False),
])
def test_plan_node_deletions(node, in_cluster, machines, deleted):
    cluster = {'nodes': [cluster_node('10.0.0.1')] + ([cluster_node('10.0.0.9', serial='s9')] if in_cluster else [])}
    deletions = plan_node_deletions(cluster, [kube_node('10.0.0.1'), node], machines, INTEGRATION)
    assert [(d.name, d.address, d.serial) for d in deletions] == (
        [(node['metadata']['name'], '10.0.0.9', 's9')] if deleted else [])
