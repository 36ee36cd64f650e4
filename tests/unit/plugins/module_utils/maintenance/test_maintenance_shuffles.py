# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The seed's shuffle metrics: owners counted, labels spelled as upstream, shares per replica."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.maintenance.shuffles import ShuffleError, ShuffleRecord, shuffle_records

NS = 'team'


def pod(name: str, *owners: tuple, namespace: str = NS) -> Dict[str, Any]:
    return {'metadata': {'name': name, 'namespace': namespace,
                         'ownerReferences': [{'kind': kind, 'name': owner, 'controller': True} for kind, owner in owners]}}


def objects(*items: tuple) -> Dict[tuple, Dict[str, Any]]:
    """(kind, name, body) -> lookup table in NS."""
    return {(kind, NS, name): body for kind, name, body in items}


def lookup_in(table: Dict[tuple, Dict[str, Any]], calls: Optional[List[tuple]] = None):
    def lookup(kind: str, namespace: str, name: str) -> Optional[Dict[str, Any]]:
        if calls is not None:
            calls.append((kind, namespace, name))
        return table.get((kind, namespace, name))
    return lookup


TABLE = objects(
    ('DaemonSet', 'agent', {'status': {'numberReady': 4}}),
    ('DaemonSet', 'starting', {'status': {'numberReady': 0}}),
    ('ReplicaSet', 'web-1', {'metadata': {'ownerReferences': [{'kind': 'Deployment', 'name': 'web'}]}, 'spec': {'replicas': 9}}),
    ('Deployment', 'web', {'spec': {'replicas': 2}}),
    ('ReplicaSet', 'bare-rs', {'metadata': {}, 'spec': {'replicas': 5}}),
    ('ReplicaSet', 'defaulted', {'metadata': {}, 'spec': {}}),
    ('StatefulSet', 'db', {'spec': {'replicas': 3}}),
    ('ReplicaSet', 'foreign', {'metadata': {'ownerReferences': [{'kind': 'Rollout', 'name': 'r'}]}, 'spec': {'replicas': 1}}),
)


def test_each_owned_pod_counts_for_its_owner_with_upstreams_names_and_shares():
    pods = [pod('a', ('DaemonSet', 'agent')), pod('w1', ('ReplicaSet', 'web-1')), pod('w2', ('ReplicaSet', 'web-1')),
            pod('b', ('ReplicaSet', 'bare-rs')), pod('d', ('ReplicaSet', 'defaulted')), pod('db-0', ('StatefulSet', 'db')),
            pod('s', ('DaemonSet', 'starting')), pod('job', ('Job', 'once')), pod('naked')]
    records = shuffle_records(pods, lookup_in(TABLE))
    assert records == [ShuffleRecord('daemon_set_agent', 0.25), ShuffleRecord('deployment_web', 0.5),
                       ShuffleRecord('deployment_web', 0.5), ShuffleRecord('replica_set_bare-rs', 0.2),
                       ShuffleRecord('replica_set_defaulted', 1.0), ShuffleRecord('stateful_set_db', pytest.approx(1 / 3)),
                       ShuffleRecord('daemon_set_starting', 1.0)]


def test_owners_are_looked_up_in_the_pods_namespace():
    calls: List[tuple] = []
    with pytest.raises(ShuffleError) as info:
        shuffle_records([pod('a', ('DaemonSet', 'agent'), namespace='other')], lookup_in(TABLE, calls))
    assert calls == [('DaemonSet', 'other', 'agent')]
    assert str(info.value) == 'DaemonSet other/agent not found'


def test_nothing_is_counted_when_an_owner_cannot_be_resolved():
    with pytest.raises(ShuffleError) as info:
        shuffle_records([pod('ok', ('DaemonSet', 'agent')), pod('f', ('ReplicaSet', 'foreign'))], lookup_in(TABLE))
    assert str(info.value) == 'the owner of ReplicaSet team/foreign is not a Deployment'
    table = dict(TABLE)
    del table[('Deployment', NS, 'web')]
    with pytest.raises(ShuffleError):
        shuffle_records([pod('w', ('ReplicaSet', 'web-1'))], lookup_in(table))
    assert shuffle_records([], lookup_in(TABLE)) == []
