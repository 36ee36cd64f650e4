# -*- coding: utf-8 -*-
"""The families seed 004 names (seed_metrics.md, quoted from the inventory) are exported, with the seed's type and
labels: by the controller's registries, or by etcd itself (a real etcd's scrape)."""

from __future__ import annotations

import pytest

from support.observability import controller_families, etcd_families, seed_rows

ROWS = seed_rows()


def test_the_table_quotes_every_family_the_inventory_lists():
    names = {r['family'] for r in ROWS}
    # the inventory's §3.11 lists, checked here so that a row lost from the table is noticed
    assert {'etcdbr_cluster_size', 'etcdbr_is_learner', 'etcdbr_is_learner_count_total',
            'etcdbr_restoration_duration_seconds', 'etcdbr_add_learner_duration_seconds',
            'etcdbr_member_remove_duration_seconds', 'etcdbr_member_promote_duration_seconds',
            'etcdbr_defragmentation_duration_seconds', 'etcddruid_compaction_jobs_total',
            'etcddruid_compaction_jobs_current', 'etcddruid_compaction_job_duration_seconds',
            'etcddruid_compaction_num_delta_events', 'etcddruid_operator_task_duration_seconds',
            'etcddruid_operator_tasks_total'} <= names
    assert len(ROWS) == len(names) >= 40


@pytest.mark.parametrize('row', [r for r in ROWS if r['exporter'] == 'controller'], ids=lambda r: r['family'])
def test_the_controller_exports_the_seed_family(row):
    families = controller_families()
    assert row['family'] in families, '%s is not exported by any loop' % row['family']
    kind, labels = families[row['family']]
    assert kind == row['type'], '%s is a %s, the seed says %s' % (row['family'], kind, row['type'])
    missing = set(row['labels']) - set(labels)
    assert not missing, '%s lacks the label(s) %s' % (row['family'], ', '.join(sorted(missing)))


@pytest.mark.parametrize('row', [r for r in ROWS if r['exporter'] == 'etcd'], ids=lambda r: r['family'])
def test_etcd_exports_the_seed_family(row):
    assert etcd_families().get(row['family']) == row['type']


def test_the_loops_heartbeat_ages_are_exported():
    kind, labels = controller_families()['steward_controller_heartbeat_age_seconds']
    assert (kind, labels) == ('gauge', ['loop'])
