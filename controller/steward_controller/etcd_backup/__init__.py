# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The `etcd-backup` loop: one backup daemon per EtcdBackup (full + delta snapshots, GC, compaction).

handlers.py holds the kopf daemon and the status/Event/metrics reporting around the engine's backup loop.
"""

from __future__ import annotations

from typing import Any

from steward_controller.core.loops import Loop


def register(registry: Any, runtime: Any) -> None:
    from steward_controller.etcd_backup.handlers import register as register_handlers
    register_handlers(registry, runtime)


LOOPS = (Loop(name='etcd-backup', help='EtcdBackup: continuous full and delta snapshots of an etcd cluster',
              register=register),)
