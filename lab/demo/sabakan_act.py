#!/usr/bin/env python
# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The sabakan act of `make demo`: a cluster generated from the lab's sabakan, then kept right.

Machine state changes go through sabakan's own GraphQL mutation (setMachineState, lifecycle
enforced); only the passing of time is faked, through the lab server's clock.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from typing import Any, Dict, List

import requests
import yaml

from lab.paths import LAB
from lab import manager
from lab.sabakan.datacenter import generate_datacenter
from lab.demo.context import changes

TITLE = 'a cluster generated from the lab\'s sabakan, kept right as machines fail, retire and get replaced'

CONSTRAINTS = {'control-plane-count': 3, 'minimum-workers': 6, 'maximum-repair-queue-entries': 3}
QUERY = 'query { searchMachines { spec { serial ipv4 rack role } status { state } } }'
MUTATION = 'mutation($serial: ID!, $state: MachineState!) { setMachineState(serial: $serial, state: $state) { state } }'


class Sabakan:
    def __init__(self, url: str) -> None:
        self.url = url
        self.base = url.rsplit('/graphql', 1)[0]

    def _gql(self, query: str, variables: Dict[str, Any]) -> Dict[str, Any]:
        answer = requests.post(self.url, json={'query': query, 'variables': variables}, timeout=10).json()
        if answer.get('errors'):
            raise SystemExit('sabakan: %s' % '; '.join(e['message'] for e in answer['errors']))
        return answer['data']

    def serial_of(self, address: str) -> str:
        for machine in self._gql(QUERY, {})['searchMachines']:
            if address in machine['spec']['ipv4']:
                return machine['spec']['serial']
        raise SystemExit('sabakan has no machine with address %s' % address)

    def set_state(self, address: str, *states: str) -> None:
        serial = self.serial_of(address)
        for state in states:
            self._gql(MUTATION, {'serial': serial, 'state': state})

    def reset(self) -> None:
        """A fresh data center (4 racks x 8, as `make lab` starts it): earlier runs leave states behind."""
        machines = generate_datacenter(4, 8, seed=1, now=time.time())
        requests.post(self.base + '/lab/machines', json=machines, timeout=10).raise_for_status()

    def advance(self, seconds: float) -> None:
        requests.post(self.base + '/lab/clock', json={'offset_seconds': seconds}, timeout=10).raise_for_status()


def summary(cluster_file: str) -> str:
    with open(cluster_file) as f:
        cluster = yaml.safe_load(f)
    nodes = cluster['nodes']
    cps = ['%s(rack %s)' % (n['address'], n['labels']['cke.cybozu.com/rack']) for n in nodes if n['control_plane']]
    roles = Counter(n['labels']['cke.cybozu.com/role'] for n in nodes if not n['control_plane'])
    tainted = [n['address'] for n in nodes for t in n.get('taints') or [] if t['key'] == 'cke.cybozu.com/state']
    return 'control planes %s; workers %s%s' % (
        ', '.join(cps), ', '.join('%s=%d' % kv for kv in sorted(roles.items())),
        ('; state-tainted ' + ', '.join(tainted)) if tainted else '')


def nodes_of(cluster_file: str, control_plane: bool) -> List[str]:
    with open(cluster_file) as f:
        return [n['address'] for n in yaml.safe_load(f)['nodes'] if bool(n['control_plane']) == control_plane]


def run(ctx: Any) -> List[str]:
    state = ctx.state
    url = manager.sabakan_url(state)
    if not url:
        raise SystemExit('the lab has no sabakan server (see %s)' % os.path.join(state, 'sabakan.log'))
    sabakan = Sabakan(url)
    sabakan.reset()
    work = os.path.join(state, 'sabakan')
    os.makedirs(work, exist_ok=True)
    cluster_file = os.path.join(work, 'cluster.yml')
    queue_file = os.path.join(work, 'repair-queue.yml')
    for path in (cluster_file, queue_file):
        if os.path.exists(path):
            os.unlink(path)
    extra = ['-e', json.dumps({'sabakan_url': url, 'sabakan_cluster_file': cluster_file,
                               'sabakan_template_file': os.path.join(LAB, 'sabakan-template.yml'),
                               'sabakan_repair_queue_file': queue_file, 'sabakan_constraints': CONSTRAINTS})]
    victims: Dict[str, str] = {}

    def sync() -> str:
        return '%s; %s' % (changes(ctx.playbook('sabakan_sync', *extra).changed), summary(cluster_file))

    def queued() -> str:
        with open(queue_file) as f:
            entries = (yaml.safe_load(f) or {}).get('entries') or []
        return '%d repair entr%s: %s' % (len(entries), 'y' if len(entries) == 1 else 'ies',
                                         ', '.join('%s %s' % (e['address'], e['operation']) for e in entries))

    def fail_cp() -> str:
        victims['cp'] = nodes_of(cluster_file, True)[0]
        sabakan.set_state(victims['cp'], 'UNREACHABLE')
        return '%s (control plane) is UNREACHABLE' % victims['cp']

    def retire_worker() -> str:
        victims['worker'] = [a for a in nodes_of(cluster_file, False) if a != victims['cp']][-1]
        sabakan.set_state(victims['worker'], 'RETIRING')
        return '%s (worker) is RETIRING' % victims['worker']

    def retired() -> str:
        sabakan.set_state(victims['worker'], 'RETIRED')
        sabakan.advance(400)
        return '%s is RETIRED, and 400 s pass' % victims['worker']

    return [
        ctx.step('generate cluster.yml (steward.cluster.sabakan_sync)', sync),
        ctx.step('a control plane machine fails', fail_cp),
        ctx.step('sync replaces it and queues a repair', lambda: sync() + '; ' + queued()),
        ctx.step('a worker starts retiring', retire_worker),
        ctx.step('sync taints it NoExecute', sync),
        ctx.step('the worker is retired for good', retired),
        ctx.step('sync removes it and adds a replacement', sync),
        ctx.step('sync again: nothing to do', sync),
    ]
