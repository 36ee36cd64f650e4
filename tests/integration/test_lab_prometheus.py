# -*- coding: utf-8 -*-
"""The lab's Prometheus part (issue 27 §4, docs/lab.md#prometheus) on a temporary state dir, a free loopback range
and free ports, so it never meets a user's lab: `lab.py up` starts Debian's prometheus scraping the three etcd members,
the controller and itself with every shipped rule file; its URL is in prometheus.url; nothing is pending or firing on
the healthy lab; every panel query of every dashboard parses there (and the etcd panels return data); `up` again keeps
it; `down` stops it (its pid record checked like every part's)."""

from __future__ import annotations

import glob
import json
import os
import time
import urllib.parse
import urllib.request

import pytest

from lab import prometheus as lab_prometheus
from lab.env.controller import wait_for
from lab.kube.api import repo_path
from lab.provisioning.hosts import free_ip_base
from support.lab_cli import alive, lab

PARTS = 'etcd,kube,controller,prometheus'

ETCD = repo_path('.build', 'etcd-3.5', 'etcd')
pytestmark = pytest.mark.skipif(lab_prometheus.binary() is None or not os.path.exists(ETCD),
                                reason='needs Debian prometheus (bindep.txt) and the build tree etcd (make all)')


def api(url, path, **params):
    with urllib.request.urlopen('%s/api/v1/%s?%s' % (url, path, urllib.parse.urlencode(params)), timeout=10) as answer:
        body = json.load(answer)
    assert body['status'] == 'success', body
    return body['data']


@pytest.fixture
def state(tmp_path):
    state = tmp_path / 'lab'
    yield state
    lab(state, 'down', check=False)


def test_the_lab_runs_prometheus_with_the_shipped_rules(state):
    ip_base = free_ip_base(3)
    args = ('up', '--only', PARTS, '--no-sabakan', '--ip-base', ip_base)
    started = lab(state, *args)
    assert [line for line in started.stdout.splitlines() if line.split()[:1] == ['prometheus']]
    url = (state / 'prometheus.url').read_text().strip()
    with open(state / 'prometheus.pid') as f:
        record = json.load(f)
    assert alive(record)

    members = ['%s:2379' % ip for ip in (ip_base, ip_base[:-1] + '2', ip_base[:-1] + '3')]
    controller = (state / 'controller.url').read_text().strip().split('://', 1)[1]
    expected = {('etcd', m) for m in members} | {('steward-controller', controller), ('prometheus', url.split('://')[1])}
    wait_for(lambda: {(t['labels']['job'], t['labels']['instance']) for t in api(url, 'targets')['activeTargets']
                      if t['health'] == 'up'} == expected, 60, 0.5, 'every target scraped up')
    groups = api(url, 'rules')['groups']
    shipped = sorted(os.path.basename(p) for p in glob.glob(repo_path('observability', 'prometheus', 'rules', '*.yml')))
    assert sorted({os.path.basename(g['file']) for g in groups}) == shipped
    assert all(r['health'] == 'ok' for g in groups for r in g['rules'])
    for _round in range(6):   # three evaluation intervals: nothing pending, nothing firing on a healthy lab
        assert api(url, 'alerts')['alerts'] == []
        time.sleep(1)

    for path in sorted(glob.glob(repo_path('observability', 'grafana', 'dashboards', '*.json'))):
        with open(path) as f:
            dashboard = json.load(f)
        for panel in dashboard['panels']:
            for target in panel.get('targets', []):
                api(url, 'query', query=target['expr'])   # parses: status success
                if os.path.basename(path) == 'etcd.json' and 'etcdbr_' not in target['expr'] \
                        and 'etcddruid_' not in target['expr'] and 'steward_' not in target['expr']:
                    assert wait_for(lambda: api(url, 'query', query=target['expr'])['result'], 30, 0.5,
                                    'data for %r' % panel['title'])

    again = lab(state, *args)
    assert 'running' in [line for line in again.stdout.splitlines() if line.split()[:1] == ['prometheus']][0]
    with open(state / 'prometheus.pid') as f:
        assert json.load(f) == record
    status = lab(state, 'status')
    assert 'prometheus' in status.stdout and 'UNHEALTHY' not in status.stdout

    stopped = lab(state, 'down')
    assert 'prometheus' in stopped.stdout
    wait_for(lambda: not alive(record), 20, 0.1, 'prometheus stopped')
    assert not (state / 'prometheus.url').exists()
