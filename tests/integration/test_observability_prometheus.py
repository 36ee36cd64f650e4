# -*- coding: utf-8 -*-
"""The shipped etcd rules and the etcd dashboard in a real Prometheus (Debian's binary) scraping a real 3-member
etcd: healthy, nothing is pending or firing and every etcd panel query returns data; two members killed, the quorum,
members-down and no-leader alerts turn pending at once (they fire after their `for`, which the promtool unit tests
cover with a simulated clock)."""

from __future__ import annotations

import json
import os
import shutil
import time

import pytest

from support.observability import ROOT, metric_names
from support.prometheus import PrometheusProcess

PROMETHEUS = shutil.which('prometheus')
RULES = os.path.join(ROOT, 'observability', 'prometheus', 'rules', 'etcd.rules.yml')
DASHBOARD = os.path.join(ROOT, 'observability', 'grafana', 'dashboards', 'etcd.json')

pytestmark = pytest.mark.skipif(PROMETHEUS is None, reason='prometheus is not installed (Debian package prometheus; '
                                'bindep.txt)')


class Prometheus(PrometheusProcess):
    def __init__(self, work, targets):
        super().__init__(work, {'global': {'scrape_interval': '1s', 'evaluation_interval': '1s'},
                                'rule_files': [RULES],
                                'scrape_configs': [{'job_name': 'etcd', 'static_configs': [{'targets': targets}]}]})

    def wait(self, what, check, timeout=60.0):
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            try:
                last = check()
                if last:
                    return last
            except OSError as exc:
                last = exc
            time.sleep(0.5)
        raise AssertionError('%s: not within %ss (last: %r)' % (what, timeout, last))

    def alerts(self):
        return {(a['labels']['alertname'], a['state']) for a in self.api('alerts')['alerts']}


@pytest.fixture
def prometheus(tmp_path, etcd3):
    targets = ['127.0.0.1:%d' % m.client_port for m in etcd3.members.values()]
    prom = Prometheus(str(tmp_path), targets)
    yield prom
    prom.stop()


def etcd_only_queries():
    with open(DASHBOARD) as f:
        dashboard = json.load(f)
    for panel in dashboard['panels']:
        for target in panel['targets']:
            names = metric_names(target['expr'])
            if names and all(n.startswith('etcd_') or n == 'up' for n in names):
                yield panel['title'], target['expr']


def test_etcd_rules_quiet_when_healthy_and_pending_when_quorum_is_lost(prometheus, etcd3):
    prometheus.wait('3 etcd targets up', lambda: len([t for t in prometheus.api('targets')['activeTargets']
                                                      if t['health'] == 'up']) == 3)
    # rate() and the fsync quantile need a few scrapes; then every etcd panel has data
    time.sleep(6)
    etcd3.put_many({'/observe/%d' % i: 'x' * 100 for i in range(50)})
    queries = list(etcd_only_queries())
    assert len(queries) >= 6
    for title, expr in queries:
        result = prometheus.wait('panel %r has data' % title, lambda: prometheus.api('query', query=expr)['result'],
                                 timeout=30)
        assert result
    healthy_for = time.monotonic() + 10
    while time.monotonic() < healthy_for:
        assert prometheus.alerts() == set(), 'an alert on a healthy cluster'
        time.sleep(1)
    groups = prometheus.api('rules')['groups']
    assert [g['name'] for g in groups] == ['steward-etcd'] and all(r['health'] == 'ok' for r in groups[0]['rules'])
    print('rule group evaluation time: %.6f s' % groups[0]['evaluationTime'])

    etcd3.kill('etcd2')
    etcd3.kill('etcd3')
    expected = {('EtcdInsufficientMembers', 'pending'), ('EtcdMembersDown', 'pending'), ('EtcdNoLeader', 'pending')}
    got = prometheus.wait('quorum alerts pending', lambda: expected <= prometheus.alerts() and prometheus.alerts(),
                          timeout=40)
    assert not {a for a in got if a[1] == 'firing'}, 'fired before its `for`: %s' % got
