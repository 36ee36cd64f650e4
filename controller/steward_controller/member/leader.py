# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The member's heartbeat: renew its member Lease, and while its etcd is the leader, do the backup leader's
work (ETCD-36): the backup loop (etcd/backup/backup_loop.BackupRunner: full snapshots on the schedule, deltas,
GC), the snapshot Leases, and scheduled rolling defragmentation with the leader last (ETCD-40,
etcd/cluster/defrag.rolling_defrag). Leadership is read from etcd every heartbeat: when it moves, the
backup loop stops here and starts beside the new leader, so only one member ever writes to the store.

When the program is told to stop (SIGTERM: its pod is being deleted, e.g. a rolling restart) and its etcd leads,
`hand_off()` first moves leadership to the most caught-up follower (etcd/upgrade's move_leadership_away, the same
call steward.cluster.etcd_upgrade makes before it stops a member), so clients see one clean leader change instead of
etcd's own transfer racing its shutdown.

Peer TLS (druid's ETCD-42 step 2, druid/peer_tls.py): started with https peer URLs over data whose member list still
names its http ones (the Etcd gained `spec.etcd.peerUrlTls`, and this member was restarted onto it), the member asks
etcd to update its own member's peer URLs (MemberUpdate, as etcd-backup-restore does), and its Lease says
`member.etcd.gardener.cloud/tls-enabled` as etcd's member list has it: the `etcd` loop adds members only once every
running member's Lease says "true".

On a scale-down the leader also removes the superfluous members (ETCD-18 row 13, ETCD-36): those whose member Lease
the `etcd` loop marked leaving, one per heartbeat, while they still run, then marks each Lease removed so the loop
shrinks the StatefulSet (druid/scale_down.py decides and says why it happens in that order)."""

from __future__ import annotations

import os
import threading
import time
from typing import Any, Dict, Optional, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.etcd.backup.backup_loop import (
    BackupListener, BackupPolicy, BackupRunner)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.backup.cron import CronSchedule
from ansible_collections.steward.cluster.plugins.module_utils.druid import peer_tls as pt
from ansible_collections.steward.cluster.plugins.module_utils.druid import scale_down as sd
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.client import (
    EtcdConnection, Gateway, member_id_hex)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.cluster import cluster_info, members_from_raw
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.members import update_peer_urls
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.defrag import rolling_defrag
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import EtcdError
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.store import Snapshot, SnapshotStore
from ansible_collections.steward.cluster.plugins.module_utils.etcd.upgrade.member_ops import move_leadership_away

from steward_controller.member.leases import LeaseWriter
from steward_controller.core.member_removal import carry_out


class _SnapshotLeases(BackupListener):
    def __init__(self, leases: Optional[LeaseWriter]):
        self.leases = leases
        self.taken: Dict[str, int] = {}

    def snapshot_taken(self, kind: str, snapshot: Snapshot, duration: float, reason: str) -> None:
        super().snapshot_taken(kind, snapshot, duration, reason)
        kind = 'full' if snapshot.is_full else 'delta'
        self.taken[kind] = snapshot.name.end_revision
        if self.leases is not None:   # a full snapshot is verified before it is published (see leases.py)
            self.leases.snapshot(kind, snapshot.name.end_revision, verified=kind == 'full')

    def delta_idle(self, tip: int) -> None:
        # no event in the period: the delta Lease is renewed at the chain's tip, so BackupReady stays true on a
        # quiet cluster (it read "no delta snapshot since ..." three periods after the last write)
        if self.leases is not None:
            self.leases.snapshot('delta', tip)


class Heartbeat:
    """`beat()` once per heartbeat period (the caller's loop): reads the member's status, renews its Lease,
    starts or stops the leader's work."""

    def __init__(self, own: EtcdConnection, cluster: EtcdConnection, *, store: Optional[SnapshotStore],
                 policy: Optional[BackupPolicy], work_dir: str, leases: Optional[LeaseWriter],
                 defrag_schedule: Optional[CronSchedule], defrag_timeout: float, clock=time.time,
                 peer_urls: Tuple[str, ...] = ()):
        self.own, self.cluster, self.store, self.policy = own, cluster, store, policy
        self.work_dir, self.leases, self.clock = work_dir, leases, clock
        self.defrag_schedule, self.defrag_timeout = defrag_schedule, defrag_timeout
        self.listener = _SnapshotLeases(leases)
        self.runner: Optional[BackupRunner] = None
        self._stop: Optional[threading.Event] = None
        self._thread: Optional[threading.Thread] = None
        self.leader = False
        self.last_defrag: Optional[Dict[str, Any]] = None
        self.last_removal: Optional[Dict[str, Any]] = None
        self.removed_ids: Dict[str, str] = {}   # member name -> hex ID this program removed (for the REMOVED mark)
        self.member_id = ''
        self._next_defrag: Optional[float] = None
        self.peer_urls = tuple(peer_urls)    # the ones this member was started with (its bootstrap config)
        self.peer_urls_settled = not self.peer_urls   # etcd's member list names them: nothing left to check
        self.last_peer_update: Optional[Dict[str, Any]] = None

    def beat(self) -> None:
        try:
            with Gateway(self.own) as gateway:
                status = gateway.status(self.own.endpoints[0], timeout=3)
        except EtcdError:
            self._follow()  # etcd not serving: no lease renewal (the Lease expires, as druid reads it), no backups
            return
        member = self.member_id = member_id_hex(status['header']['member_id'])
        self.leader = str(status.get('leader')) == str(status['header']['member_id'])
        if not self.peer_urls_settled:
            self.settle_peer_urls()
        if self.leases is not None:
            self.leases.member(member, self.leader, int(status['header'].get('revision') or 0),
                               learner=bool(status.get('isLearner')))
        if self.leader:
            self._lead()
        else:
            self._follow()

    def _lead(self) -> None:
        if self.store is not None and self.policy is not None and self._thread is None:
            os.makedirs(self.work_dir, mode=0o700, exist_ok=True)
            self._stop = threading.Event()
            self.runner = BackupRunner(self.cluster, self.store, self.policy, work_dir=self.work_dir,
                                       listener=self.listener)
            self._thread = threading.Thread(target=self.runner.run, args=(self._stop,), daemon=True)
            self._thread.start()
        now = self.clock()
        if self.defrag_schedule is not None:
            if self._next_defrag is None:
                self._next_defrag = self.defrag_schedule.next_after(now)
            elif now >= self._next_defrag:
                self.last_defrag = rolling_defrag(self.cluster, defrag_timeout=self.defrag_timeout)
                self._next_defrag = self.defrag_schedule.next_after(now)
        self.remove_superfluous()

    def remove_superfluous(self) -> Optional[sd.Removal]:
        """One step of a scale-down's membership change (the leader's; druid/scale_down.plan_removal decides):
        remove one superfluous member, or move leadership off this member when it is the superfluous one, and mark
        the Leases of members etcd no longer lists. Nothing without a Lease marked leaving (no etcd call then)."""
        leases = self.leases.member_leases() if self.leases is not None else None
        if not leases or not any(sd.leaving_size(lease) is not None and not sd.is_removed(lease)
                                 for lease in leases.values()):
            return None
        try:
            info = cluster_info(self.cluster)
        except EtcdError as exc:
            print('superfluous members: the cluster cannot be read: %s' % exc, flush=True)
            return None
        step = sd.plan_removal(info['members'], self.member_id or str(info.get('leader') or ''), leases,
                               self.removed_ids)
        step, done = carry_out(self.cluster, step,
                               lambda name, member_id: self.leases is not None and self.leases.mark_removed(name, member_id),
                               lambda text: print(text, flush=True))
        if step.action == sd.REMOVE and done == 'removed':
            self.removed_ids[step.name] = step.member_id
        self.last_removal = {'action': step.action, 'reason': step.reason, 'result': done}
        return step

    def settle_peer_urls(self, retry_timeout: float = 5.0) -> Optional[pt.PeerURLChange]:
        """Once per heartbeat until settled: this member's peer URLs in etcd's member list (its own view, no quorum
        needed to read) against the ones it was started with; when they differ, etcd's MemberUpdate (through the
        cluster: it needs quorum; a failure is tried again next heartbeat). The Lease's tls-enabled follows what etcd
        lists (druid/peer_tls.py decides)."""
        try:
            with Gateway(self.own) as gateway:
                members = members_from_raw(gateway.call(self.own.endpoints[0], '/v3/cluster/member/list', {},
                                                        timeout=3).get('members') or [])
        except EtcdError as exc:
            print('peer URLs: the member list cannot be read: %s' % exc, flush=True)
            return None
        change = pt.peer_urls_change(members, self.member_id, self.peer_urls)
        if change is not None:
            try:
                members = update_peer_urls(self.cluster, change.member_id, list(change.wanted), retry_timeout)
                self.last_peer_update = {'change': pt.describe(change), 'result': 'updated'}
            except EtcdError as exc:
                self.last_peer_update = {'change': pt.describe(change), 'result': 'failed: %s' % exc}
            print('peer URLs: %(change)s: %(result)s' % self.last_peer_update, flush=True)
        reported = pt.peer_tls_reported(members, self.member_id)
        if reported is not None and self.leases is not None:
            self.leases.peer_tls = reported
        self.peer_urls_settled = reported is not None and \
            pt.peer_urls_change(members, self.member_id, self.peer_urls) is None
        return change

    def _follow(self) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join(30)
            self._thread, self.runner, self._stop = None, None, None
        self._next_defrag = None

    def hand_off(self, timeout: float) -> Optional[str]:
        """Leadership to a caught-up follower when this member's etcd leads (None otherwise, or when it could not
        be moved: etcd's own transfer on stop is the fallback). Returns the new leader's id."""
        try:
            with Gateway(self.own) as gateway:
                status = gateway.status(self.own.endpoints[0], timeout=2)
            member = member_id_hex(status['header']['member_id'])
            if str(status.get('leader')) != str(status['header']['member_id']):
                return None
            return move_leadership_away(self.cluster, member, timeout=timeout)
        except EtcdError as exc:
            print('leadership hand-off before stopping failed: %s' % exc, flush=True)
            return None

    def stop(self) -> None:
        self._follow()
