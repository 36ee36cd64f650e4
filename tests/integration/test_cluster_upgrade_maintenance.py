# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Bare-metal workers upgraded through the node-maintenance state machine: `steward.cluster.cluster_upgrade` with
`cluster_upgrade_worker_maintenance: true` imports `steward.cluster.maintenance_window`, and the REAL controller
(`python -m steward_controller --maintenance-config ...`) moves each worker through a profile whose way in checks
the request, the approval and maxMaintenance 1 and drains (its drain trigger), and whose way out uncordons.

One control-plane lab host and two workers (tests/support/upgrade_lab.py), v1.31.4 to v1.32.0. A sampler reads the
API every 0.2 s: the skew policy, each Node's cordons and maintenance state. Checked: every worker was in-maintenance
while its kubelet moved, never two at once, each pod evicted once (by the profile's drain; the kubelet step's
drain finds nothing left), each node cordoned once and schedulable again at the end, every kubelet at the target.
"""

from __future__ import annotations

import threading
import time

import pytest
import requests

from support.ansible import run_playbook
from support.rbac import audited
from support.upgrade_lab import (
    MAINTENANCE_NS, MAINTENANCE_REQUEST, Sampler, UpgradeLab, evictions, start_maintenance_controller, versions,
)

from ansible_collections.steward.cluster.plugins.module_utils.kube.client import api_path

pytestmark = [pytest.mark.slow]

HOSTS = (('cp1', 'control_plane'), ('w1', 'workers'), ('w2', 'workers'))
NAMES = [h for h, _g in HOSTS]
WORKERS = ['w1', 'w2']
FROM, TO = 'v1.31.4', 'v1.32.0'
NS = MAINTENANCE_NS
STATE = 'cloud.sap/maintenance-state'
REQUEST = MAINTENANCE_REQUEST


class States(threading.Thread):
    """Every 0.2 s: each worker's maintenance state and kubelet version, as the API shows them."""

    def __init__(self, url):
        super().__init__(daemon=True)
        self.url = url
        self.stop = threading.Event()
        self.seen = []

    def run(self):
        while not self.stop.wait(0.2):
            try:
                nodes = requests.get(self.url + '/api/v1/nodes', timeout=5).json()['items']
            except (requests.RequestException, ValueError, KeyError):
                continue
            self.seen.append({n['metadata']['name']: (((n['metadata'].get('labels') or {}).get(STATE)),
                                                      ((n.get('status') or {}).get('nodeInfo') or {})
                                                      .get('kubeletVersion')) for n in nodes})


@pytest.fixture
def lab(tmp_path, request):
    """The hosts and the real maintenance controller with the profile (tests/support/upgrade_lab.py) at
    maxMaintenance `request.param` (default 1)."""
    hosts = UpgradeLab(str(tmp_path / 'lab'), HOSTS, FROM, pods_per_node=2)
    controller = None
    try:
        hosts.start(60)
        controller = start_maintenance_controller(hosts, str(tmp_path / 'controller'), getattr(request, 'param', 1))
        yield hosts, controller
    finally:
        if controller is not None:
            controller.stop()
        hosts.stop()


def _stop(*threads):
    for thread in threads:
        thread.stop.set()
    for thread in threads:
        thread.join(5)


def _labels(hosts, name):
    node = requests.get(hosts.server.url + api_path('v1', 'nodes', name=name), timeout=5).json()
    return node['metadata'].get('labels') or {}


def test_workers_go_through_the_maintenance_state_machine_one_at_a_time(lab, tmp_path):
    hosts, controller = lab
    audit = audited(hosts.server)
    sampler = Sampler(hosts.server.url, NAMES, ['cp1'])
    states = States(hosts.server.url)
    sampler.start()
    states.start()
    started = time.monotonic()
    try:
        run = run_playbook('steward.cluster.cluster_upgrade', inventory=hosts.inventory, timeout=900, extra_vars={
            'cluster_upgrade_version': TO, 'cluster_upgrade_worker_maintenance': True,
            'maintenance_window_request_annotation': {REQUEST: 'true'},
            'maintenance_window_config_source': 'configmap/%s/maintenance' % NS,
            'maintenance_window_poll_interval': 1, 'maintenance_window_timeout': 120})
        elapsed = time.monotonic() - started
        assert run.rc == 0, (run.stdout[-8000:], run.stderr[-2000:], controller.log()[-3000:])
    finally:
        _stop(sampler, states)

    assert versions(hosts.server.url) == {n: TO for n in NAMES}
    assert evictions(audit) == {n: 2 for n in NAMES}                 # every pod evicted once
    # the workers' pods by the profile's drain trigger (the controller), cp1's by the playbook's kubelet step
    agents = {path.split('/pods/', 1)[1].split('-')[1]: agent for agent, method, path, _q in list(audit)
              if method == 'POST' and path.endswith('/eviction')}
    assert agents['w1'] == agents['w2'] != agents['cp1'], agents
    assert sampler.cordons == {n: 1 for n in NAMES}                  # every node cordoned once
    assert sampler.violations == [] and sampler.samples > 10
    assert all(not _labels(hosts, n).get(REQUEST) for n in WORKERS)
    nodes = requests.get(hosts.server.url + '/api/v1/nodes', timeout=5).json()['items']
    assert not any((n.get('spec') or {}).get('unschedulable') for n in nodes)
    assert all(_labels(hosts, n)[STATE] == 'operational' for n in WORKERS)
    # each worker's kubelet moved while it was in-maintenance, and never were both in maintenance at once
    for name in WORKERS:
        moved = next(i for i, s in enumerate(states.seen) if s[name][1] == TO)
        assert states.seen[moved][name][0] == 'in-maintenance', (name, states.seen[moved])
        assert any(s[name][0] == 'in-maintenance' for s in states.seen)
    assert not any(all(s[n][0] == 'in-maintenance' for n in WORKERS) for s in states.seen)
    print('workers through maintenance: %.1fs, evictions %s' % (elapsed, evictions(audit)))


def _run(hosts, max_unavailable, check=False):
    return run_playbook('steward.cluster.cluster_upgrade', inventory=hosts.inventory, timeout=900, check=check,
                        extra_vars={
                            'cluster_upgrade_version': TO, 'cluster_upgrade_worker_maintenance': True,
                            'cluster_upgrade_max_unavailable': max_unavailable,
                            'maintenance_window_request_annotation': {REQUEST: 'true'},
                            'maintenance_window_profile': 'kubelet-upgrade',
                            'maintenance_window_config_source': 'configmap/%s/maintenance' % NS,
                            'maintenance_window_poll_interval': 1, 'maintenance_window_timeout': 120})


@pytest.mark.parametrize('lab', [1], indirect=True)
def test_max_unavailable_2_is_bounded_by_the_profiles_max_maintenance_1(lab):
    """The plan reads the profile's maxMaintenance (1) from the controller's config: batches of one, shown in check
    mode, and the walk keeps them (a batch of two would wait for a slot its own batch holds)."""
    hosts, controller = lab
    check = _run(hosts, 2, check=True)
    assert check.rc == 0, check.stdout[-6000:]
    assert "worker batches: [['w1'], ['w2']] (at most 1, by maxMaintenance" in check.stdout, check.stdout[-6000:]
    assert versions(hosts.server.url) == {n: FROM for n in NAMES}     # check mode changed nothing


@pytest.mark.parametrize('lab', [2], indirect=True)
def test_workers_go_through_maintenance_in_one_batch_of_two(lab):
    """max_unavailable 2 and a profile allowing 2: both workers requested, in-maintenance, upgraded and released
    together (one batch), each pod still evicted once, each node cordoned once; a second run changes nothing."""
    hosts, controller = lab
    audit = audited(hosts.server)
    sampler = Sampler(hosts.server.url, NAMES, ['cp1'])
    states = States(hosts.server.url)
    check = _run(hosts, 2, check=True)
    assert check.rc == 0 and "worker batches: [['w1', 'w2']] (at most 2, by max_unavailable" in check.stdout, \
        check.stdout[-6000:]
    sampler.start()
    states.start()
    started = time.monotonic()
    try:
        run = _run(hosts, 2)
        elapsed = time.monotonic() - started
        assert run.rc == 0, (run.stdout[-8000:], run.stderr[-2000:], controller.log()[-3000:])
    finally:
        _stop(sampler, states)
    assert versions(hosts.server.url) == {n: TO for n in NAMES}
    assert evictions(audit) == {n: 2 for n in NAMES}
    assert sampler.cordons == {n: 1 for n in NAMES}
    assert sampler.violations == [] and sampler.samples > 10
    assert any(all(s[n][0] == 'in-maintenance' for n in WORKERS) for s in states.seen)   # the batch, together
    for name in WORKERS:
        moved = next(i for i, s in enumerate(states.seen) if s[name][1] == TO)
        assert states.seen[moved][name][0] == 'in-maintenance', (name, states.seen[moved])
    assert all(_labels(hosts, n)[STATE] == 'operational' for n in WORKERS)
    again = _run(hosts, 2)
    assert again.rc == 0 and evictions(audit) == {n: 2 for n in NAMES}
    print('workers through maintenance in one batch of two: %.1fs' % elapsed)
