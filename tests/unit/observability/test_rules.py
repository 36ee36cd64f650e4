# -*- coding: utf-8 -*-
"""The shipped alert rules: `promtool check rules` on every file, `promtool test rules` on every test file (series
in, alerts out, including the cases that must not fire), every expression names only metrics that our code or
etcd really exports, every alert has a severity and a runbook section in its area's doc, and the PrometheusRule
objects under controller/deploy/monitoring are made from the plain files."""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess

import pytest
import yaml

from support.observability import ROOT, check_generated, metric_names, series_names

RULES_DIR = os.path.join(ROOT, 'observability', 'prometheus', 'rules')
RULE_FILES = sorted(glob.glob(os.path.join(RULES_DIR, '*.rules.yml')))
TESTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'promtool')
TEST_FILES = sorted(glob.glob(os.path.join(TESTS_DIR, '*.test.yml')))
PROMTOOL = shutil.which('promtool')

# The alert names the issue fixes (runbooks and outside checks find them by name).
REQUIRED = {'EtcdNoLeader', 'EtcdInsufficientMembers', 'EtcdMembersDown', 'EtcdDatabaseQuotaNearlyFull',
            'EtcdBackupStale', 'EtcdDeltaSnapshotsStalled', 'EtcdRestoreVerificationFailing', 'MachineFleetFrozen',
            'MachineReplacementsAtLimit', 'DependencyWatchdogScaledDown', 'NodeMaintenanceStuck',
            'SabakanIntegrationFailing', 'RepairQueueAtLimit', 'KubernetesCertificateExpiringSoon',
            'KubernetesCertificateExpiring', 'StewardControllerNoLeader'}

needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason='promtool is not installed (Debian package prometheus; '
                                    'bindep.txt)')


def load(path):
    with open(path) as f:
        return yaml.safe_load(f)


def alerts():
    for path in RULE_FILES:
        for group in load(path)['groups']:
            for rule in group['rules']:
                yield os.path.basename(path), rule


def test_every_required_alert_is_shipped_once():
    names = [rule['alert'] for _file, rule in alerts()]
    assert REQUIRED <= set(names), 'missing: %s' % ', '.join(sorted(REQUIRED - set(names)))
    assert len(names) == len(set(names))


@needs_promtool
def test_promtool_check_rules_accepts_every_file():
    done = subprocess.run([PROMTOOL, 'check', 'rules'] + RULE_FILES, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stdout + done.stderr


@needs_promtool
@pytest.mark.parametrize('test_file', TEST_FILES, ids=os.path.basename)
def test_promtool_unit_tests(test_file, tmp_path):
    """promtool compares annotations too; the cases state labels, so they run on copies without annotations
    (the annotations' templates are checked by `promtool check rules`)."""
    (tmp_path / 'rules').mkdir()
    for path in RULE_FILES:
        data = load(path)
        for group in data['groups']:
            for rule in group['rules']:
                rule.pop('annotations', None)
        with open(str(tmp_path / 'rules' / os.path.basename(path)), 'w') as f:
            yaml.safe_dump(data, f)
    shutil.copy(test_file, str(tmp_path))
    done = subprocess.run([PROMTOOL, 'test', 'rules', os.path.basename(test_file)], cwd=str(tmp_path),
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_alert_is_tested_firing_and_not_firing():
    fired, quiet = set(), set()
    for path in TEST_FILES:
        for case in load(path)['tests']:
            for check in case.get('alert_rule_test') or []:
                (fired if check.get('exp_alerts') else quiet).add(check['alertname'])
    names = {rule['alert'] for _file, rule in alerts()}
    assert names - fired == set(), 'never shown to fire'
    assert names - quiet == set(), 'never shown to stay quiet'


@pytest.mark.parametrize('name, rule', list(alerts()), ids=lambda x: x if isinstance(x, str) else x['alert'])
def test_expressions_name_only_exported_metrics(name, rule):
    unknown = metric_names(rule['expr']) - series_names()
    assert not unknown, '%s: %s selects %s, which nothing exports' % (name, rule['alert'], ', '.join(sorted(unknown)))


@pytest.mark.parametrize('name, rule', list(alerts()), ids=lambda x: x if isinstance(x, str) else x['alert'])
def test_every_alert_has_severity_and_a_runbook_section(name, rule):
    assert rule['labels']['severity'] in ('warning', 'critical')
    url = rule['annotations']['runbook_url']
    doc, anchor = re.fullmatch(r'https://github.com/steward-cluster/steward.cluster/blob/main/docs/([a-z]+\.md)#([a-z]+)',
                               url).groups()
    assert anchor == rule['alert'].lower()
    with open(os.path.join(ROOT, 'docs', doc)) as f:
        text = f.read()
    assert re.search(r'^#+ `?%s`?\s*$' % rule['alert'], text, re.M), '%s has no section in docs/%s' % (rule['alert'], doc)
    assert rule['annotations']['summary'] and rule['annotations']['description']


def prometheus_rules():
    """The PrometheusRule objects made from the plain files: one per file, same groups."""
    out = []
    for path in RULE_FILES:
        area = os.path.basename(path)[:-len('.rules.yml')]
        out.append({'apiVersion': 'monitoring.coreos.com/v1', 'kind': 'PrometheusRule',
                    'metadata': {'name': 'steward-' + area, 'namespace': 'steward-system',
                                 'labels': {'app.kubernetes.io/part-of': 'steward', 'role': 'alert-rules'}},
                    'spec': load(path)})
    return out


def test_the_prometheusrule_objects_are_made_from_the_plain_files():
    """Regenerate with STEWARD_REGENERATE=1 after changing a rule file."""
    check_generated('prometheusrules.yaml', 'observability/prometheus/rules/*.rules.yml',
                    'tests/unit/observability/test_rules.py', prometheus_rules())


def test_the_name_check_sees_every_selected_series():
    assert metric_names('max by (job) (rate(foo_total{a="b"}[5m])) / on (job) bar > 2 * 3600') == {'foo_total', 'bar'}
    assert 'etcd_server_has_leaderr' not in series_names()
