# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The `etcd` loop: etcd-druid's `Etcd` resource (druid.gardener.cloud/v1alpha1) over plugins/module_utils/druid.

druid's flags keep druid's names and defaults (`--etcd-status-sync-period=15s`, `--etcd-member-unknown-threshold=1m`,
`--etcd-member-notready-threshold=5m`, `--enable-etcd-spec-auto-reconcile`, the deprecated
`--ignore-operation-annotation`); the safety knobs beyond druid are flags of their own. Every flag has an environment
variable (STEWARD_ + the flag in upper snake case).

Files: loop.py (the kopf watch, the pass thread, one pass per Etcd), target.py (reading an Etcd's objects and applying
the planner's action: the only writes).
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput

from steward_controller.core import flags
from steward_controller.core.flags import Flag
from steward_controller.core.loops import Loop

FLAGS = (
    Flag('etcd-status-sync-period', 'duration', 15.0, 'how often every Etcd\'s status is computed and written (druid)'),
    Flag('etcd-member-unknown-threshold', 'duration', 60.0,
         'a member Lease not renewed this long makes the member Unknown (druid)'),
    Flag('etcd-member-notready-threshold', 'duration', 300.0,
         'an Unknown member becomes NotReady after this much longer (druid)'),
    Flag('enable-etcd-spec-auto-reconcile', 'bool', False,
         'reconcile every spec change, without the gardener.cloud/operation: reconcile annotation (druid)'),
    Flag('ignore-operation-annotation', 'bool', False, 'deprecated alias of --enable-etcd-spec-auto-reconcile (druid)'),
    Flag('etcd-backup-max-age', 'duration', 3600.0,
         'a destructive step (pod deletion, member restart, scale to 0) needs a verified full snapshot this young'),
    Flag('etcd-max-unready-deletions', 'int', 1, 'NotReady member pods deleted at the same time (at most)'),
    Flag('etcd-update-snapshot-timeout', 'duration', 600.0,
         'the deadline of the full snapshot a rolling change (new image, new configuration) takes before its first '
         'member restarts; past it the change is postponed and the snapshot asked for again'),
    Flag('etcd-member-removal-timeout', 'duration', 300.0,
         'how long a scale-down waits for the leading member\'s program to remove the going members from etcd; past '
         'it the loop reports it and removes them itself where safe and provably theirs'),
)


@dataclasses.dataclass(frozen=True)
class DruidOptions:
    status_sync_period: float = 15.0
    unknown_threshold: float = 60.0
    notready_threshold: float = 300.0
    auto_reconcile: bool = False
    backup_max_age: float = 3600.0
    max_unready_deletions: int = 1
    update_snapshot_timeout: float = 600.0
    member_removal_timeout: float = 300.0


def add_arguments(group: Any) -> None:
    flags.add(group, FLAGS)


def options(args: argparse.Namespace) -> DruidOptions:
    """The flags, checked; ValueError naming the flag on a bad value."""
    try:
        value = flags.values(args, FLAGS)
        for name in ('etcd-status-sync-period', 'etcd-member-unknown-threshold', 'etcd-member-notready-threshold',
                     'etcd-backup-max-age', 'etcd-update-snapshot-timeout',
                     'etcd-member-removal-timeout'):
            if value[name.replace('-', '_')] <= 0:
                raise InvalidInput('--' + name, 'positive', 'must be longer than 0s', value[name.replace('-', '_')])
        if value['etcd_max_unready_deletions'] < 0:
            raise InvalidInput('--etcd-max-unready-deletions', 'minimum', 'must be at least 0',
                               value['etcd_max_unready_deletions'])
    except InvalidInput as exc:
        raise ValueError(str(exc)) from None
    return DruidOptions(
        status_sync_period=value['etcd_status_sync_period'], unknown_threshold=value['etcd_member_unknown_threshold'],
        notready_threshold=value['etcd_member_notready_threshold'],
        auto_reconcile=value['enable_etcd_spec_auto_reconcile'] or value['ignore_operation_annotation'],
        backup_max_age=value['etcd_backup_max_age'], max_unready_deletions=value['etcd_max_unready_deletions'],
        update_snapshot_timeout=value['etcd_update_snapshot_timeout'],
        member_removal_timeout=value['etcd_member_removal_timeout'])


def register(registry: Any, runtime: Any) -> None:
    from steward_controller.etcd_druid.loop import register as register_handlers
    register_handlers(registry, runtime)


LOOPS = (Loop(name='etcd', help='Etcd (etcd-druid API): StatefulSet, Services, Leases, PDB and status of etcd clusters, '
                                'druid\'s decision table with safety gates', register=register,
              add_arguments=add_arguments, options=options),)
