# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""maxMaintenance and stagger under concurrent reconciliation of 100 nodes (the seed warns they race).

Each node is reconciled by its own thread against one in-memory API (dict + lock). The node list the
first evaluation sees is a stale snapshot in which every node is operational (the worst informer
cache), so every node is a candidate; the gate (a lock), the fresh list read inside it and the
commit inside it must bring the count down to the limit. The control runs the same without a gate,
with all threads reading the "fresh" list at the same moment, and shows the limit is then exceeded.
"""

from __future__ import annotations

import contextlib
import threading
from concurrent.futures import ThreadPoolExecutor

from ansible_collections.steward.cluster.plugins.module_utils.maintenance.config import load_config
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.environment import Environment
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.leases import MemoryLeaseStore
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.state import reconcile

from support.maintenance import T0, MemoryApi, make_node

NODES = 100
STATE = 'cloud.sap/maintenance-state'

MAX_TWO = '''
intervals: {requeue: 1m}
instances:
  check:
  - {type: hasLabel, name: wants, config: {key: wants-maintenance}}
  - {type: hasLabel, name: done, config: {key: done}}
  - {type: maxMaintenance, name: two, config: {max: 2}}
profiles:
- name: p
  operational: {transitions: [{check: wants && two, next: in-maintenance}]}
  in-maintenance: {transitions: [{check: done, next: operational}]}
'''

STAGGER = '''
intervals: {requeue: 1m}
instances:
  check:
  - {type: hasLabel, name: wants, config: {key: wants-maintenance}}
  - {type: stagger, name: one_per_hour, config: {duration: 1h, leaseName: maintenance, leaseNamespace: kube-system}}
profiles:
- name: p
  operational: {transitions: [{check: wants && one_per_hour, next: maintenance-required}]}
'''


class CountingApi(MemoryApi):
    """Remembers the highest in-maintenance count any commit produced."""

    def __init__(self, nodes):
        super().__init__(nodes)
        self.highest = 0

    def patch(self, name, patch):
        super().patch(name, patch)
        self.highest = max(self.highest, self.count('in-maintenance'))


def cluster(extra_labels=None):
    labels = {'cloud.sap/maintenance-profile': 'p', STATE: 'operational', 'wants-maintenance': 'yes'}
    labels.update(extra_labels or {})
    return CountingApi([make_node('node-%03d' % i, labels) for i in range(NODES)])


def lock_gate():
    lock = threading.Lock()

    @contextlib.contextmanager
    def gate():
        with lock:
            yield
    return gate


def reconcile_all(api, config, now, env):
    snapshot = api.list()
    env.nodes = lambda: snapshot
    with ThreadPoolExecutor(max_workers=NODES) as pool:
        results = list(pool.map(lambda name: reconcile(api.get(name), config, now, env), sorted(api.nodes)))
    return results


def test_max_maintenance_holds_for_100_concurrent_nodes_with_the_gate():
    api, config = cluster(), load_config(MAX_TWO)
    env = Environment(fresh_nodes=api.list, gate=lock_gate(), commit=api.patch)
    results = reconcile_all(api, config, T0, env)
    assert api.count('in-maintenance') == 2 and api.highest == 2
    assert sum(1 for r in results if r.transitions) == 2
    assert all(r.gated for r in results)                 # every node was a candidate on the stale list
    blocked = [r for r in results if not r.transitions]
    assert blocked[0].profiles[0].evaluations[0].checks['two']['info']['maintained'] == 2
    # Rounds over simulated time: the two finish, the next two start, never more than two at once.
    now = T0
    for _round in range(5):
        for node in api.list():
            if node['metadata']['labels'][STATE] == 'in-maintenance':
                api.patch(node['metadata']['name'], {'metadata': {'labels': {'done': 'y', 'wants-maintenance': None}}})
        now += 60
        reconcile_all(api, config, now, env)             # the two leave
        now += 60
        reconcile_all(api, config, now, env)             # two others enter
        assert api.count('in-maintenance') == 2
    assert api.highest == 2
    assert sum(1 for n in api.list() if 'done' in n['metadata']['labels']) == 10


def read_then_wait(read):
    """Every thread reads, then all go on together: the widest race window, deterministically."""
    together = threading.Barrier(NODES)

    def synchronised(*args):
        value = read(*args)
        together.wait(timeout=30)
        return value
    return synchronised


def test_control_without_the_gate_the_limit_is_exceeded():
    api, config = cluster(), load_config(MAX_TWO)
    fresh_nodes_all_at_once = read_then_wait(api.list)

    env = Environment(fresh_nodes=fresh_nodes_all_at_once, commit=api.patch)   # gate: nullcontext
    reconcile_all(api, config, T0, env)
    assert api.count('in-maintenance') == NODES          # everyone saw 0 of 2 taken
    assert api.highest > 2


def test_stagger_lets_one_node_per_period_through_100_concurrent_nodes():
    api, config = cluster(), load_config(STAGGER)
    leases = MemoryLeaseStore()
    env = Environment(fresh_nodes=api.list, gate=lock_gate(), commit=api.patch, leases=leases)
    reconcile_all(api, config, T0, env)
    assert api.count('maintenance-required') == 1
    holder = leases.get('kube-system', 'maintenance-0')['spec']['holderIdentity']
    assert api.get(holder)['metadata']['labels'][STATE] == 'maintenance-required'
    reconcile_all(api, config, T0 + 3599, env)           # within the hour: nobody
    assert api.count('maintenance-required') == 1
    reconcile_all(api, config, T0 + 3601, env)           # the next hour: exactly one more
    assert api.count('maintenance-required') == 2


class RacingLeaseStore(MemoryLeaseStore):
    """The second read of each thread (the re-evaluation after the gate) waits for all others to read too."""

    def __init__(self):
        super().__init__()
        self.reads = threading.local()
        self.synchronised_get = read_then_wait(super().get)

    def get(self, namespace, name):
        self.reads.count = getattr(self.reads, 'count', 0) + 1
        if self.reads.count == 2:
            return self.synchronised_get(namespace, name)
        return super().get(namespace, name)


def test_stagger_holds_even_without_the_gate_thanks_to_compare_and_swap():
    api, config = cluster(), load_config(STAGGER)
    leases = RacingLeaseStore()
    env = Environment(fresh_nodes=api.list, commit=api.patch, leases=leases)   # gate: nullcontext
    results = reconcile_all(api, config, T0, env)
    assert api.count('maintenance-required') == 1
    refused = [r for r in results if r.errors]
    assert len(refused) == NODES - 1
    assert all('one_per_hour' in r.errors[0].message and 'aborted' in r.errors[0].message for r in refused)
