"""The lab's prometheus.yml (lab/prometheus.py): the jobs the shipped rules select by name, every shipped rule file,
the drill interval; and Debian's `promtool check config` accepts it with the rule files it names."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
import yaml

from lab import prometheus


def test_jobs_rules_and_interval(tmp_path):
    data = prometheus.config(['http://127.0.0.11:2379', 'http://127.0.0.12:2379'], 'http://127.0.0.1:8080',
                             '127.0.0.1:9090', prometheus.rule_files())
    jobs = {c['job_name']: c['static_configs'][0]['targets'] for c in data['scrape_configs']}
    assert jobs == {'etcd': ['127.0.0.11:2379', '127.0.0.12:2379'], 'steward-controller': ['127.0.0.1:8080'],
                    'prometheus': ['127.0.0.1:9090']}
    assert data['global'] == {'scrape_interval': '2s', 'evaluation_interval': '2s', 'scrape_timeout': '2s'}
    shipped = sorted(n for n in os.listdir(prometheus.RULES_DIR) if n.endswith('.rules.yml'))
    assert [os.path.basename(p) for p in data['rule_files']] == shipped and len(shipped) == 8
    # no controller yet (`--only etcd,prometheus`): its job is left out, not given an empty target list
    bare = prometheus.config([], None, '127.0.0.1:9090', [])
    assert [c['job_name'] for c in bare['scrape_configs']] == ['prometheus']
    path = str(tmp_path / 'prometheus.yml')
    text = prometheus.write_config(path, data)
    assert yaml.safe_load(open(path).read()) == data and text == open(path).read()
    assert prometheus.argv('/usr/bin/prometheus', path, '/d', '127.0.0.1:9090') == [
        '/usr/bin/prometheus', '--config.file=' + path, '--storage.tsdb.path=/d', '--storage.tsdb.retention.time=2d',
        '--web.listen-address=127.0.0.1:9090']


@pytest.mark.skipif(shutil.which('promtool') is None, reason='promtool is not installed (Debian package prometheus)')
def test_promtool_accepts_the_configuration(tmp_path):
    path = str(tmp_path / 'prometheus.yml')
    prometheus.write_config(path, prometheus.config(['http://127.0.0.11:2379'], 'http://127.0.0.1:8080',
                                                    '127.0.0.1:9090', prometheus.rule_files()))
    result = subprocess.run(['promtool', 'check', 'config', path], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert 'SUCCESS: 8 rule files found' in result.stdout
