# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The lab's Prometheus (Debian's /usr/bin/prometheus): what it scrapes, which rules it evaluates, how fast.

It scrapes every etcd member's /metrics (job `etcd`, the name the shipped etcd rules select by `job=~".*etcd.*"`),
the controller's /metrics (job `steward-controller`) and itself (job `prometheus`: the rule evaluation times), and
loads every shipped rule file of observability/prometheus/rules/. Scrape and evaluation every DRILL_INTERVAL
seconds: an alert goes pending within one interval of its condition and fires `for` later, so drills wait for
`for` + one interval (the shipped `for` durations are unchanged here: a 10 m alert takes 10 m in the lab too).

The part itself (pid record, restart when the configuration changes, `prometheus.url`) is lab/parts.py's; this
module only renders the configuration and the command line, so tests can start a private Prometheus alike.
"""

from __future__ import annotations

import os
import shutil
from typing import Any, Dict, List, Optional, Sequence

import yaml

from lab.paths import REPO

RULES_DIR = os.path.join(REPO, 'observability', 'prometheus', 'rules')
DRILL_INTERVAL = '2s'
RETENTION = '2d'   # the lab's series are for drills and the demo: two days bound the disk used under .lab/


def binary() -> Optional[str]:
    """Debian's prometheus (bindep.txt, profile test), or None when it is not installed."""
    return shutil.which('prometheus')


def rule_files(rules_dir: str = RULES_DIR) -> List[str]:
    return sorted(os.path.join(rules_dir, n) for n in os.listdir(rules_dir) if n.endswith('.rules.yml'))


def host_port(url: str) -> str:
    """'http://127.0.0.1:8080' -> '127.0.0.1:8080' (a static target)."""
    return url.split('://', 1)[-1].rstrip('/')


def config(etcd_urls: Sequence[str], controller_url: Optional[str], self_address: str,
           rules: Sequence[str], interval: str = DRILL_INTERVAL) -> Dict[str, Any]:
    """prometheus.yml as data: one static job per kind of target (a job with no target is left out)."""
    jobs = [('etcd', [host_port(u) for u in etcd_urls]),
            ('steward-controller', [host_port(controller_url)] if controller_url else []),
            ('prometheus', [self_address])]
    return {'global': {'scrape_interval': interval, 'evaluation_interval': interval, 'scrape_timeout': interval},
            'rule_files': list(rules),
            'scrape_configs': [{'job_name': name, 'static_configs': [{'targets': targets}]}
                               for name, targets in jobs if targets]}


def write_config(path: str, data: Dict[str, Any]) -> str:
    """Write prometheus.yml atomically; its text (the part restarts when it changes)."""
    header = '# steward.cluster lab: Prometheus scraping the lab (lab/prometheus.py)\n'
    text = header + yaml.safe_dump(data, sort_keys=True)
    tmp = '%s.%d.tmp' % (path, os.getpid())
    with open(tmp, 'w') as f:
        f.write(text)
    os.replace(tmp, path)
    return text


def argv(program: str, config_path: str, data_dir: str, address: str) -> List[str]:
    """The command line; --web.enable-lifecycle is not given (nobody reloads or stops it over HTTP)."""
    return [program, '--config.file=' + config_path, '--storage.tsdb.path=' + data_dir,
            '--storage.tsdb.retention.time=' + RETENTION, '--web.listen-address=' + address]
