"""A lab of real etcd processes for the etcd_recover tests, on random loopback addresses (parallel runs never
meet), and what those tests read from the playbook's output."""

from __future__ import annotations

import base64
import os
import random

import pytest
import requests

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from lab.demo import etcd_act
from lab import manager


@pytest.fixture
def lab3(tmp_path):
    state = str(tmp_path / 'lab')
    manager.lab_up(state, 3, '127.%d.%d.11' % (random.randint(100, 250), random.randint(0, 250)), echo=False,
                   sabakan=False)
    hosts = manager.read_inventory(state)
    yield state, hosts
    manager.lab_down(state, purge=False)


def recover(state, *args):
    return manager.run_playbook(state, 'steward.cluster.etcd_recover', list(args), echo=False)


def plan_of(result):
    """The 'Decide what to do' result printed by the playbook's report task."""
    out = result['output']
    start = out.index('TASK [Report the diagnosis]')
    return out[start:out.index('TASK [', start + 10)]


def assert_all_keys(hosts, data, names=None):
    for name in names or hosts:
        got = etcd_act.read_all(manager.client_url(hosts[name]))
        assert got == data, '%s: %d of %d keys' % (name, len(set(got) & set(data)), len(data))


def put(host, key, value):
    requests.post(manager.client_url(host) + '/v3/kv/put', timeout=10, json={
        'key': base64.b64encode(key.encode()).decode(), 'value': base64.b64encode(value.encode()).decode()}
    ).raise_for_status()


def backup_keys(state, store):
    """Run the etcd_backup playbook; the name of the snapshot it took."""
    result = manager.run_playbook(state, 'steward.cluster.etcd_backup', ['-e', 'etcd_backup_store=' + store], echo=False)
    assert result['rc'] == 0, result['output'][-3000:]
    return max(n for n in os.listdir(os.path.join(store, 'v2')) if n.startswith('Full-') and '.meta' not in n)
