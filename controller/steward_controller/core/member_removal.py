# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One step of a scale-down's membership change, carried out: the leading member's program does it every heartbeat
(leader.Heartbeat.remove_superfluous), and the `etcd` loop does it when that program has not within the removal
timeout (etcd_druid/loop.py). The decision is druid/scale_down.plan_removal's; the etcd calls are the engine's."""

from __future__ import annotations

import dataclasses
from typing import Callable, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.druid import scale_down as sd
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.client import EtcdConnection
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.members import ensure_member_absent, move_leader
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import EtcdError


def carry_out(cluster: EtcdConnection, step: sd.Removal, mark: Callable[[str, str], bool],
              say: Callable[[str], None]) -> Tuple[sd.Removal, str]:
    """Remove the member or move leadership as `step` says (an etcd refusal is reported, not raised: the next step
    decides again), then `mark(name, member ID)` each Lease of a member etcd no longer lists, the removed one
    included. (step with the removed member's mark added, what was done: 'removed', 'leadership moved',
    'failed: ...' or '')."""
    done = ''
    try:
        if step.action == sd.REMOVE:
            ensure_member_absent(cluster, member_id=step.member_id, retry_timeout=30)
            step = dataclasses.replace(step, mark_removed=dict(step.mark_removed, **{step.name: step.member_id}))
            done = 'removed'
        elif step.action == sd.TRANSFER:
            move_leader(cluster, step.target_id)
            done = 'leadership moved'
    except EtcdError as exc:
        done = 'failed: %s' % exc
    if step.action != sd.NOTHING or step.mark_removed:
        say('superfluous members: %s%s' % (step.reason, ' - %s' % done if done else ''))
    for name, member_id in sorted(step.mark_removed.items()):
        if mark(name, member_id):
            say('superfluous members: Lease %s marked removed (%s)' % (name, member_id or 'not listed'))
    return step, done
