# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The `etcd-tasks` loop: etcd-druid's out-of-band tasks on the engine.

copy_task.py      EtcdCopyBackupsTask (druid.gardener.cloud/v1alpha1): backups copied between stores by
                  etcd/backup/copy.py, in the controller (druid runs an `etcdbrctl copy` Job), status as druid's
operator_task.py  EtcdOperatorTask (DEP-05): on-demand snapshots, maintenance, snapshot compaction, copies and
                  quorum-loss recovery, FIFO per Etcd, decided by druid/tasks.py
compaction.py     druid's snapshot-compaction controller (ETCD-38): compaction when the delta events since the last
                  full snapshot pass --etcd-events-threshold (off unless --enable-backup-compaction)
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from steward_controller.core import flags
from steward_controller.core.flags import Flag
from steward_controller.core.loops import Loop

# etcd-druid's flags (seed 004, ETCD-38), with druid's defaults
FLAGS = (
    Flag('enable-backup-compaction', 'bool', False, 'compact the snapshots of an Etcd when its delta events pass '
         '--etcd-events-threshold'),
    Flag('compaction-workers', 'int', 3, 'compactions at once (must be above 0 when compaction is enabled)'),
    Flag('etcd-events-threshold', 'int', 1000000, 'delta events since the last full snapshot allowed before a compaction'),
    Flag('active-deadline-duration', 'duration', 3 * 3600.0, 'deadline of one compaction'),
    Flag('metrics-scrape-wait-duration', 'duration', 0.0, 'wait after a compaction before its metrics change'),
    Flag('local-store-root', 'text', '', "directory under which druid's `local` store containers live (unset: "
         "tasks naming a local store are refused)"),
)


@dataclasses.dataclass(frozen=True)
class TaskOptions:
    enable_backup_compaction: bool
    compaction_workers: int
    etcd_events_threshold: int
    active_deadline_duration: float
    metrics_scrape_wait_duration: float
    local_store_root: str


def add_arguments(group: Any) -> None:
    flags.add(group, FLAGS)


def options(args: argparse.Namespace) -> TaskOptions:
    value = flags.values(args, FLAGS)
    if value['compaction_workers'] < 0 or (value['enable_backup_compaction'] and value['compaction_workers'] < 1):
        raise ValueError('--compaction-workers must be at least 1 when --enable-backup-compaction is on (0 is allowed '
                         'when it is off), got %d' % value['compaction_workers'])
    if value['etcd_events_threshold'] < 1:
        raise ValueError('--etcd-events-threshold must be at least 1, got %d' % value['etcd_events_threshold'])
    return TaskOptions(**value)


def register(registry: Any, runtime: Any) -> None:
    from steward_controller.etcd_tasks.copy_task import register as register_copy
    from steward_controller.etcd_tasks.operator_task import register as register_operator
    from steward_controller.etcd_tasks.compaction import register as register_compaction
    register_copy(registry, runtime)
    register_operator(registry, runtime)
    register_compaction(registry, runtime)


LOOPS = (Loop(name='etcd-tasks', help="etcd-druid's EtcdCopyBackupsTask, EtcdOperatorTask (DEP-05) and snapshot "
              "compaction", register=register, add_arguments=add_arguments, options=options),)
