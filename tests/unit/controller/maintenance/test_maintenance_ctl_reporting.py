# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""How the controller files the engine's errors (metric kind; deferrals get no Warning Event), what it
keeps of a Node in its cache, and the lease reads it serves from memory."""

from __future__ import annotations

from typing import Any, Dict, List

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.kube.lease import MutexTimeout, format_micro
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.config import load_config
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.environment import Environment
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.errors import PluginError
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.leases import LeaseConflict, MemoryLeaseStore
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.senders import HttpPoster
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.state import reconcile

from steward_controller.core.informer import slim
from steward_controller.maintenance.controller import DEFERRALS, StaleNode, error_kind
from steward_controller.maintenance.leases import CachedLeaseStore, LeaseCache

NOW = 1767225600.0   # 2026-01-01T00:00:00Z
CONFIG = load_config('''
intervals: {requeue: 1m}
instances:
  notify:
  - {type: slack, name: hook, config: {hook: "http://hook", channel: "#c", message: "m"}, schedule: {type: periodic, config: {interval: 1h}}}
  check:
  - {type: hasLabel, name: go, config: {key: go}}
  - {type: maxMaintenance, name: one, config: {max: 1}}
  - {type: stagger, name: slow, config: {duration: 1h, leaseName: s, leaseNamespace: ns}}
  trigger:
  - {type: cordon, name: cordon}
profiles:
- name: notified
  maintenance-required: {notify: hook}
- name: gated
  operational: {transitions: [{check: go && one, next: in-maintenance}]}
- name: triggered
  operational: {transitions: [{check: go, trigger: cordon, next: maintenance-required}]}
- name: leased
  operational: {transitions: [{check: slow, next: maintenance-required}]}
''', environ={})


def node(profile: str, annotations: Any = None) -> Dict[str, Any]:
    labels = {'cloud.sap/maintenance-profile': profile, 'go': 'yes'}
    if profile == 'notified' and annotations is None:   # just entered maintenance-required: the notification is due
        annotations = {'cloud.sap/maintenance-data': '{"Profiles":{"notified":{"Transition":"2025-12-31T23:00:00Z",'
                                                     '"Current":"maintenance-required","Previous":"operational"}},"Notifications":{}}'}
    return {'metadata': {'name': 'n1', 'resourceVersion': '7', 'labels': labels, 'annotations': dict(annotations or {})}}


class FailingPoster(HttpPoster):
    def post(self, url, body, headers):
        raise PluginError('POST http://hook/...: connection refused')


def raising(exc: Exception):
    class Gate:
        def __enter__(self):
            raise exc

        def __exit__(self, *args):
            return False

    return Gate


def fail_commit(name: str, patch: Dict[str, Any]) -> None:
    raise StaleNode('node n1 changed since it was read (resourceVersion 7); not written')


def errors_of(profile: str, **env: Any) -> List[str]:
    annotations = env.pop('annotations', None)
    return reconcile(node(profile, annotations), CONFIG, NOW, Environment(**env)).errors


@pytest.mark.parametrize('profile, env, kind', [
    ('notified', {'http': FailingPoster()}, 'notification'),
    ('gated', {'gate': raising(MutexTimeout('lease ns/steward-maintenance-gate is held by a'))}, 'busy'),
    ('gated', {'gate': raising(StaleNode('node n1 changed since it was read'))}, 'stale'),
    ('gated', {'gate': raising(RuntimeError('the API server did not answer'))}, 'gate'),
    ('triggered', {}, 'trigger'),
    ('leased', {}, 'check'),
    ('notified', {'annotations': {'cloud.sap/maintenance-data': '{not json'}}, 'data'),
])
def test_engine_errors_are_filed_by_kind(profile, env, kind):
    errors = errors_of(profile, **env)
    assert errors and [error_kind(e) for e in errors] == [kind], errors


def test_commit_errors_are_filed_as_commit_or_stale():
    def broken(name, patch):
        raise RuntimeError('PATCH /api/v1/nodes/n1: HTTP 403 Forbidden')
    assert [error_kind(e) for e in errors_of('default', commit=broken)] == ['commit']
    assert [error_kind(e) for e in errors_of('default', commit=fail_commit)] == ['stale']
    assert set(DEFERRALS) == {'stale', 'busy'}


def test_the_cache_keeps_nodes_without_managed_fields_and_images():
    full = {'metadata': {'name': 'n', 'managedFields': [{'manager': 'kubelet'}], 'labels': {'a': 'b'}},
            'spec': {'unschedulable': True},
            'status': {'images': [{'names': ['x'], 'sizeBytes': 1}], 'conditions': [{'type': 'Ready', 'status': 'True'}]}}
    kept = slim(full)
    assert kept == {'metadata': {'name': 'n', 'labels': {'a': 'b'}}, 'spec': {'unschedulable': True},
                    'status': {'conditions': [{'type': 'Ready', 'status': 'True'}]}}
    assert 'managedFields' in full['metadata'] and 'images' in full['status']   # the original is not touched
    assert slim({'metadata': {'name': 'm'}}) == {'metadata': {'name': 'm'}}


def held(holder: str, renewed: float, seconds: int) -> Dict[str, Any]:
    return {'holderIdentity': holder, 'renewTime': format_micro(renewed), 'leaseDurationSeconds': seconds}


def test_lease_reads_are_served_from_memory_and_fresh_inside_the_gate():
    clock = {'now': NOW}
    api = MemoryLeaseStore()
    cache = LeaseCache(clock=lambda: clock['now'], margin=2.0, free_ttl=10.0)
    inside_gate = {'value': False}
    store = CachedLeaseStore(api, cache, fresh=lambda: inside_gate['value'])

    assert store.get('ns', 's-0') is None and cache.api_reads == 1
    assert store.get('ns', 's-0') is None and cache.api_reads == 1          # missing: remembered for free_ttl
    clock['now'] = NOW + 10.0
    assert store.get('ns', 's-0') is None and cache.api_reads == 2
    created = store.create('ns', 's-0', held('node-a', NOW + 10, 60))     # our own write replaces the entry
    assert store.get('ns', 's-0') == created and cache.api_reads == 2
    clock['now'] = NOW + 67.0                                               # held: from memory until 2 s before expiry
    assert store.get('ns', 's-0')['spec']['holderIdentity'] == 'node-a' and cache.api_reads == 2
    clock['now'] = NOW + 68.5
    assert store.get('ns', 's-0')['spec']['holderIdentity'] == 'node-a' and cache.api_reads == 3
    assert store.get('ns', 's-0') is not None and cache.api_reads == 4      # about to expire: not kept
    inside_gate['value'] = True                                             # inside the gate every read is fresh
    store.get('ns', 's-0')
    store.get('ns', 's-0')
    assert cache.api_reads == 6


def test_free_leases_expire_from_memory_and_writes_keep_the_compare_and_swap():
    clock = {'now': NOW}
    api = MemoryLeaseStore()
    cache = LeaseCache(clock=lambda: clock['now'], free_ttl=10.0)
    store = CachedLeaseStore(api, cache)
    lease = api.create('ns', 's-0', held('node-a', NOW - 120, 60))          # expired: free
    assert store.get('ns', 's-0') == lease and store.get('ns', 's-0') == lease and cache.api_reads == 1
    api.update('ns', 's-0', held('node-b', NOW, 60), lease['metadata']['resourceVersion'])   # another replica took it
    assert store.get('ns', 's-0') == lease                                  # stale for at most free_ttl ...
    with pytest.raises(LeaseConflict):                                      # ... and a write on it is refused
        store.update('ns', 's-0', held('node-c', NOW, 60), lease['metadata']['resourceVersion'])
    clock['now'] = NOW + 10.5
    assert store.get('ns', 's-0')['spec']['holderIdentity'] == 'node-b' and cache.api_reads == 2
