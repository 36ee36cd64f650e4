# -*- coding: utf-8 -*-
"""The shipped Grafana dashboards: one per area, every panel's query parses (promtool checks it as a recording rule)
and selects only metrics our code or etcd exports, and the ConfigMaps under controller/deploy/monitoring (Grafana
sidecar label grafana_dashboard: "1") carry exactly the JSON files."""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess

import pytest
import yaml

from support.observability import ROOT, check_generated, metric_names, series_names

DASHBOARDS = sorted(glob.glob(os.path.join(ROOT, 'observability', 'grafana', 'dashboards', '*.json')))
PROMTOOL = shutil.which('promtool')
AREAS = {'etcd', 'machines', 'watchdog', 'maintenance', 'provisioning'}


def load(path):
    with open(path) as f:
        return json.load(f)


def queries():
    for path in DASHBOARDS:
        for panel in load(path)['panels']:
            for target in panel['targets']:
                yield os.path.basename(path), panel['title'], target['expr']


def test_one_dashboard_per_area_with_unique_uids():
    assert {os.path.basename(p)[:-len('.json')] for p in DASHBOARDS} == AREAS
    uids = [load(p)['uid'] for p in DASHBOARDS]
    assert len(set(uids)) == len(uids)
    for path in DASHBOARDS:
        panels = load(path)['panels']
        assert panels and len({p['id'] for p in panels}) == len(panels)


@pytest.mark.skipif(PROMTOOL is None, reason='promtool is not installed (Debian package prometheus; bindep.txt)')
def test_every_panel_query_parses(tmp_path):
    rules = [{'record': 'steward:panel:%d' % i, 'expr': expr} for i, (_dashboard, _title, expr) in enumerate(queries())]
    path = tmp_path / 'panels.rules.yml'
    path.write_text(yaml.safe_dump({'groups': [{'name': 'panels', 'rules': rules}]}))
    done = subprocess.run([PROMTOOL, 'check', 'rules', str(path)], capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert 'SUCCESS: %d rules found' % len(rules) in done.stdout


@pytest.mark.parametrize('dashboard, title, expr', list(queries()), ids=lambda x: x if len(x) < 40 else x[:40])
def test_every_panel_selects_exported_metrics(dashboard, title, expr):
    names = metric_names(expr)
    assert names, '%s / %s selects no metric' % (dashboard, title)
    unknown = names - series_names()
    assert not unknown, '%s / %s selects %s, which nothing exports' % (dashboard, title, ', '.join(sorted(unknown)))


def config_maps():
    out = []
    for path in DASHBOARDS:
        name = os.path.basename(path)
        with open(path) as f:
            text = f.read()
        out.append({'apiVersion': 'v1', 'kind': 'ConfigMap',
                    'metadata': {'name': 'steward-dashboard-' + name[:-len('.json')], 'namespace': 'steward-system',
                                 'labels': {'grafana_dashboard': '1', 'app.kubernetes.io/part-of': 'steward'}},
                    'data': {'steward-' + name: text}})
    return out


def test_the_dashboard_configmaps_are_made_from_the_json_files():
    """Regenerate with STEWARD_REGENERATE=1 after changing a dashboard."""
    check_generated('dashboards.yaml', 'observability/grafana/dashboards/*.json',
                    'tests/unit/observability/test_dashboards.py', config_maps())
