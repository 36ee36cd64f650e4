# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The generator's decisions on seeded random clusters, compared with decisions recorded before the
generator was made faster (issue 29): a speed-up must not change any decision.

Each scenario is a seeded data center (lab/sabakan/datacenter.py, random states, roles and sizes),
one of several templates, random constraints and Kubernetes taints; it runs `generate`, then a
history of random inventory changes with `update_with_reason` after each, then `regenerate` with a
second template. Recorded per call: the step that fired, its change records, and a digest of the
whole output cluster with its key ORDER (json.dumps without sort_keys), or the error class and
message. The record lives in fixtures/generator_decisions.json; it was written by the generator as
it was before the render and bookkeeping changes, with:

    python tests/unit/plugins/module_utils/sabakan/test_sabakan_recorded_decisions.py --record

Re-record only for a deliberate change of behaviour, and say so in the commit.
"""

from __future__ import annotations

import copy
import datetime
import hashlib
import json
import os
import random
import sys
from typing import Any, Dict, List, Optional

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.sabakan.errors import SabakanError
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.generator import (
    generate, regenerate, update_with_reason,
)
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.nodes import machine_to_node

from lab.sabakan.datacenter import generate_datacenter

NOW = datetime.datetime(2025, 1, 15, tzinfo=datetime.timezone.utc)
RECORD = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'fixtures', 'generator_decisions.json')
SCENARIOS = 48
STATES = ('UNINITIALIZED', 'HEALTHY', 'UNHEALTHY', 'UNREACHABLE', 'UPDATING', 'RETIRING', 'RETIRED')
TEMPLATES: List[Dict[str, Any]] = [
    {'name': 'any', 'service_subnet': '10.68.0.0/16', 'control_plane_tolerations': ['example.com/transient'],
     'nodes': [{'user': 'u', 'control_plane': True}, {'user': 'u'}]},
    {'name': 'lab', 'service_subnet': '10.68.0.0/16',
     'nodes': [{'user': 'cybozu', 'control_plane': True, 'labels': {'cke.cybozu.com/role': 'cs'}},
               {'user': 'cybozu', 'labels': {'cke.cybozu.com/role': 'cs', 'cke.cybozu.com/weight': '2.0'}},
               {'user': 'cybozu', 'labels': {'cke.cybozu.com/role': 'ss', 'cke.cybozu.com/weight': '1.0'},
                'taints': [{'key': 'cke.cybozu.com/role', 'value': 'storage', 'effect': 'NoExecute'}]}]},
    {'name': 'decorated', 'service_subnet': '10.68.0.0/16',
     'nodes': [{'user': 'a', 'control_plane': True, 'labels': {'example.com/tier': 'cp', 'cke.cybozu.com/role': 'cs'},
                'annotations': {'example.com/note': 'cp'},
                'taints': [{'key': 'example.com/cp', 'effect': 'NoSchedule'}]},
               {'user': 'b', 'labels': {'cke.cybozu.com/role': 'ss', 'sabakan.cke.cybozu.com/product': 'over'},
                'annotations': {'cke.cybozu.com/serial': 'template'},
                'taints': [{'key': 'example.com/w', 'value': 'x', 'effect': 'PreferNoSchedule'}]},
               {'user': 'c', 'labels': {'cke.cybozu.com/role': 'cs', 'cke.cybozu.com/weight': '3'}}]},
    {'name': 'missing-role', 'service_subnet': '10.68.0.0/16',
     'nodes': [{'user': 'u', 'control_plane': True, 'labels': {'cke.cybozu.com/role': 'cs'}},
               {'user': 'u', 'labels': {'cke.cybozu.com/role': 'cs'}},
               {'user': 'u', 'labels': {'cke.cybozu.com/role': 'gpu'}}]},
]
TAINTS = [[{'key': 'example.com/broken', 'effect': 'NoSchedule'}],
          [{'key': 'node.kubernetes.io/not-ready', 'effect': 'NoSchedule'}],
          [{'key': 'example.com/transient', 'effect': 'NoSchedule'}]]


def digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, default=str).encode()).hexdigest()[:24]


def attempt(call: Any) -> Dict[str, Any]:
    """What one generator call decided, or which error it raised."""
    try:
        outcome = call()
    except SabakanError as exc:
        return {'error': type(exc).__name__, 'message': str(exc)}
    if isinstance(outcome, dict) or outcome is None:
        return {'cluster': digest(outcome)}
    return {'step': outcome.operation.name if outcome.operation else None,
            'changes': list(outcome.operation.changes) if outcome.operation else [],
            'cluster': digest(outcome.cluster)}


def mutate(rng: random.Random, machines: List[Dict[str, Any]], taints: Dict[str, Any],
           cluster: Optional[Dict[str, Any]]) -> None:
    """A few sabakan lifecycle changes, vanished and new machines, time passing and Kubernetes taints."""
    in_cluster = [n['address'] for n in (cluster or {}).get('nodes', [])]
    for _change in range(rng.randint(1, 4)):
        kind = rng.choice(('state', 'state', 'state', 'vanish', 'appear', 'age', 'taint', 'untaint', 'labels'))
        if not machines:
            return
        if in_cluster and rng.random() < 0.7:
            address = rng.choice(in_cluster)
            matching = [m for m in machines if m['spec']['ipv4'][0] == address]
            machine = matching[0] if matching else rng.choice(machines)
        else:
            machine = rng.choice(machines)
        address = machine['spec']['ipv4'][0]
        if kind == 'state':
            machine['status'] = {'state': rng.choice(STATES), 'duration': float(rng.choice((0, 200, 900, 7200)))}
        elif kind == 'vanish':
            machines.remove(machine)
        elif kind == 'appear':
            new = copy.deepcopy(machine)
            new['spec']['ipv4'] = ['10.%d.2.%d' % (rng.randint(0, 9), rng.randint(1, 250))]
            new['spec']['serial'] = 'new%06d' % rng.randint(0, 999999)
            new['spec']['indexInRack'] = rng.randint(1, 300)
            new['status'] = {'state': 'HEALTHY', 'duration': 10.0}
            if all(m['spec']['ipv4'] != new['spec']['ipv4'] for m in machines):
                machines.append(new)
        elif kind == 'age':
            for each in machines:
                each['status'] = dict(each['status'], duration=float(each['status'].get('duration', 0)) + 400.0)
        elif kind == 'taint':
            taints[address] = rng.choice(TAINTS)
        elif kind == 'untaint':
            taints.pop(address, None)
        else:
            machine['spec']['labels'] = [{'name': 'product', 'value': rng.choice(('R640', 'R7525', 'X1'))},
                                         {'name': 'datacenter', 'value': 'dc%d' % rng.randint(1, 2)}]


def scenario(seed: int) -> List[Dict[str, Any]]:
    rng = random.Random(seed)
    racks, per_rack = rng.randint(1, 8), rng.randint(3, 30)
    states = {state: rng.choice((0, 0.02, 0.1)) for state in STATES if state != 'HEALTHY'}
    # the 'any' template renders workers of every role with its one worker node, boot servers included,
    # which the generator refuses (no worker template has role 'boot'): no boot servers for it
    machines = generate_datacenter(racks, per_rack, seed=seed, now=NOW, states=states,
                                   roles=rng.choice((('cs', 'ss'), ('cs',), ('cs', 'ss', 'gpu'))),
                                   boot_per_rack=0 if seed % len(TEMPLATES) == 0 else 1)
    for machine in machines:
        if rng.random() < 0.5:
            machine['status'] = {'state': machine['status']['state'], 'duration': float(rng.randint(0, 3600))}
    template = TEMPLATES[seed % len(TEMPLATES)]
    total = len(machines)
    constraints = {'control-plane-count': rng.choice((1, 3, 5)), 'minimum-workers': rng.randint(0, total // 3),
                   'maximum-workers': rng.choice((0, 0, total // 2 + 3))}
    taints: Dict[str, Any] = {}
    record = [attempt(lambda: generate(template, constraints, machines, now=NOW, node_taints=taints))]
    try:
        cluster: Optional[Dict[str, Any]] = generate(template, constraints, machines, now=NOW, node_taints=taints)
    except SabakanError:
        cluster = None
    for _round in range(8):
        if cluster is None:
            break
        mutate(rng, machines, taints, cluster)
        current = cluster
        record.append(attempt(lambda: update_with_reason(current, template, constraints, machines, now=NOW,
                                                         node_taints=taints)))
        try:
            outcome = update_with_reason(current, template, constraints, machines, now=NOW, node_taints=taints)
        except SabakanError:
            break
        if outcome.cluster is not None:
            cluster = outcome.cluster
    if cluster is not None:
        other = TEMPLATES[(seed + 1) % len(TEMPLATES)]
        record.append(attempt(lambda: regenerate(cluster, other, constraints, machines, now=NOW, node_taints=taints)))
    # machine_to_node on its own (the public one-machine renderer)
    node = TEMPLATES[2]['nodes'][seed % 3]
    record.append({'nodes': digest([machine_to_node(m, node, now=NOW) for m in machines[:20]])})
    return record


def record_all() -> Dict[str, Any]:
    return {str(seed): scenario(seed) for seed in range(SCENARIOS)}


@pytest.fixture(scope='module')
def recorded() -> Dict[str, Any]:
    with open(RECORD) as handle:
        return json.load(handle)


@pytest.mark.parametrize('seed', range(SCENARIOS))
def test_decisions_match_the_record(recorded: Dict[str, Any], seed: int) -> None:
    assert scenario(seed) == recorded[str(seed)]


def test_the_record_covers_every_step() -> None:
    """The scenarios reach every update step and some errors, so the comparison means something."""
    with open(RECORD) as handle:
        record = json.load(handle)
    steps = {entry.get('step') for entries in record.values() for entry in entries}
    errors = {entry.get('error') for entries in record.values() for entry in entries}
    assert {'replace control plane', 'increase worker', 'decrease worker', 'taint nodes',
            'remove non-existent node', None} <= steps
    assert errors - {None}


if __name__ == '__main__':
    if sys.argv[1:] != ['--record']:
        raise SystemExit('usage: %s --record   (rewrites %s)' % (sys.argv[0], RECORD))
    with open(RECORD, 'w') as out:
        json.dump(record_all(), out, indent=1, sort_keys=True)
        out.write('\n')
