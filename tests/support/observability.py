# -*- coding: utf-8 -*-
"""Every metric family the controller's code exports, read from the real registries (no list kept by hand),
plus etcd's own families as a real etcd 3.4 exported them. Rules and dashboards may name only these."""

from __future__ import annotations

import os
import re
from typing import Dict, List, Tuple

import yaml
from prometheus_client import CollectorRegistry

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # the collection root
HERE = os.path.join(ROOT, 'tests', 'unit', 'observability')
ETCD_FAMILIES = os.path.join(HERE, 'etcd-3.4.23-metric-families.txt')
SEED_TABLE = os.path.join(HERE, 'seed_metrics.md')


def controller_families() -> Dict[str, Tuple[str, List[str]]]:
    """{family: (type, labels)} of one process running every loop (each loop's metrics class on one registry)."""
    from steward_controller.anchor.loop import AnchorMetrics
    from steward_controller.core.metrics import Health, Metrics
    from steward_controller.etcd_backup.metrics import VerificationMetrics
    from steward_controller.etcd_tasks.operator_task import TaskMetrics
    from steward_controller.machines.metrics import MachineMetrics
    from steward_controller.prober.report import ProberMetrics
    from steward_controller.weeder.loop import WeederMetrics

    metrics = Metrics()
    health = Health()
    health.beat('operator-loop')
    metrics.watch(health)
    registry: CollectorRegistry = metrics.registry
    for cls in (AnchorMetrics, VerificationMetrics, MachineMetrics, ProberMetrics, WeederMetrics, TaskMetrics):
        cls(registry)
    # the provisioning API's one counter is made by its server object; its name is checked in its own tests
    families: Dict[str, Tuple[str, List[str]]] = {
        'steward_provisioning_api_requests_total': ('counter', ['endpoint', 'code'])}
    for collector in list(registry._collector_to_names):  # noqa: SLF001 (the declared label names)
        kind = getattr(collector, '_type', None)
        if kind is not None:
            name = collector._name + ('_total' if kind == 'counter' else '')
            families[name] = (kind, list(collector._labelnames))
            continue
        for metric in collector.collect():  # our custom collectors (ages computed at scrape time)
            labels = sorted({k for s in metric.samples for k in s.labels})
            families[metric.name] = (metric.type, labels)
    return families


def etcd_families() -> Dict[str, str]:
    with open(ETCD_FAMILIES) as f:
        return dict(line.split() for line in f if line.strip())


def seed_rows() -> List[Dict[str, str]]:
    """The table of seed_metrics.md as dicts (family, type, labels, exporter)."""
    rows = []
    with open(SEED_TABLE) as f:
        for line in f:
            cells = [c.strip() for c in line.strip().strip('|').split('|')]
            if len(cells) != 4 or cells[0] in ('family', '---') or not line.startswith('|'):
                continue
            rows.append({'family': cells[0], 'type': cells[1], 'exporter': cells[3],
                         'labels': [x.strip() for x in cells[2].split(',') if x.strip()]})
    return rows


def series_names() -> set:
    """Names a PromQL expression may use: controller families with their histogram/summary series, etcd's, `up`."""
    names = {'up'}
    for name, (kind, _labels) in controller_families().items():
        names.add(name)
        if kind == 'histogram':
            names.update({name + '_bucket', name + '_sum', name + '_count'})
    for name, kind in etcd_families().items():
        names.add(name)
        if kind == 'histogram':
            names.update({name + '_bucket', name + '_sum', name + '_count'})
    for row in seed_rows():
        if row['exporter'] == 'etcd-peers':
            names.add(row['family'])
            if row['type'] == 'histogram':
                names.update({row['family'] + '_bucket', row['family'] + '_sum', row['family'] + '_count'})
    return names


PROMQL_WORDS = {'sum', 'max', 'min', 'avg', 'count', 'by', 'without', 'on', 'ignoring', 'and', 'or', 'unless', 'bool',
                'rate', 'increase', 'time', 'histogram_quantile', 'last_over_time', 'absent', 'le', 'offset',
                'group_left', 'group_right', 'clamp_min', 'changes', 'topk', 'irate', 'delta', 'deriv', 'vector',
                'scalar', 'max_over_time', 'min_over_time', 'avg_over_time', 'label_replace', 'sort_desc', 'sort'}


def metric_names(expr):
    """The series names an expression selects (strings, label matchers and durations removed first)."""
    text = re.sub(r'"[^"]*"', '""', expr)
    text = re.sub(r'\{[^}]*\}', '{}', text)
    text = re.sub(r'\[[^\]]*\]', '[]', text)
    text = re.sub(r'\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)', r'\1', text)  # label lists
    names = set(re.findall(r'[a-zA-Z_:][a-zA-Z0-9_:]*', text))
    return {n for n in names if n not in PROMQL_WORDS and not re.fullmatch(r'\d.*', n)}


class YamlDumper(yaml.SafeDumper):
    """Multi-line strings (the expressions) as literal blocks, as in the plain files."""


YamlDumper.add_representer(str, lambda dumper, text: dumper.represent_scalar(
    'tag:yaml.org,2002:str', text, style='|' if '\n' in text else None))


DEPLOY = os.path.join(ROOT, 'controller', 'deploy', 'monitoring')


def check_generated(name: str, sources: str, maker: str, objects: List[Dict]) -> None:
    """controller/deploy/monitoring/<name> holds exactly `objects` (made from `sources` by the test `maker`);
    STEWARD_REGENERATE=1 rewrites it first. The kustomization lists it."""
    path = os.path.join(DEPLOY, name)
    header = ('# Made from %s by %s\n# (STEWARD_REGENERATE=1 writes it); do not edit by hand. One YAML document: a v1 List,\n'
              '# expanded by kubectl and kustomize.\n' % (sources, maker))
    text = header + yaml.dump({'apiVersion': 'v1', 'kind': 'List', 'items': objects}, Dumper=YamlDumper,
                              sort_keys=False, width=120)
    if os.environ.get('STEWARD_REGENERATE'):
        with open(path, 'w') as f:
            f.write(text)
    with open(path) as f:
        assert f.read() == text, 'controller/deploy/monitoring/%s is stale: run with STEWARD_REGENERATE=1' % name
    with open(os.path.join(DEPLOY, 'kustomization.yaml')) as f:
        assert name in yaml.safe_load(f)['resources']
