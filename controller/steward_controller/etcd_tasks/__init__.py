# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The `etcd-tasks` loop: etcd-druid's out-of-band tasks on the engine.

copy_task.py      EtcdCopyBackupsTask (druid.gardener.cloud/v1alpha1): backups copied between stores by
                  etcd/backup/copy.py, in the controller (druid runs an `etcdbrctl copy` Job), status as druid's
operator_task.py  EtcdOperatorTask (DEP-05): on-demand snapshots, maintenance, snapshot compaction, copies and
                  quorum-loss recovery, FIFO per Etcd, decided by druid/tasks.py
"""

from __future__ import annotations

from typing import Any

from steward_controller.core.loops import Loop


def register(registry: Any, runtime: Any) -> None:
    from steward_controller.etcd_tasks.copy_task import register as register_copy
    from steward_controller.etcd_tasks.operator_task import register as register_operator
    register_copy(registry, runtime)
    register_operator(registry, runtime)


LOOPS = (Loop(name='etcd-tasks', help="etcd-druid's EtcdCopyBackupsTask and EtcdOperatorTask (DEP-05)",
              register=register),)
