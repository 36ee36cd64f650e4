# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Continuous backups of one etcd cluster: full snapshots on a schedule, delta snapshots from a
watch, garbage collection and compaction (etcd-backup-restore's snapshotter, as a library).

Invariants, each relied on by restore:
* the store is the only state: on (re)start the loop reads the chain's tip (the last revision a
  valid snapshot holds) and watches from tip + 1, so nothing is written twice or skipped;
* buffered events leave memory only once the delta holding them is valid in the store; a failed
  write keeps them; past 4x the memory limit they are dropped and a full snapshot re-anchors the chain;
* when etcd compacted the history needed to continue, or the chain has a gap, a full snapshot is
  taken before any further delta;
* pending deltas are written before a full snapshot, so deltas and fulls stay in revision order.
The caller (the controller) supplies a listener for status, events and metrics.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.common.deadline import doubled
from ansible_collections.steward.cluster.plugins.module_utils.common.times import format_rfc3339
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.client import (
    EtcdConnection,
    Gateway,
    member_id_hex,
)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.backup.cron import CronSchedule
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.cluster import members_from_raw
from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot.delta import Chain, plan_chain
from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot.delta_encoding import DeltaBuffer
from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot.delta_writer import write_delta
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import EtcdError
from ansible_collections.steward.cluster.plugins.module_utils.etcd.backup.compaction import compact_chain
from ansible_collections.steward.cluster.plugins.module_utils.etcd.backup.gc import apply_gc, plan_gc
from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot.snapshot import snapshot_to_store
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.store import Snapshot, SnapshotStore
from ansible_collections.steward.cluster.plugins.module_utils.etcd.backup.verification_loop import RestoreVerifier
from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot.catch_up import CatchUpWatch
from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot.watcher import HistoryCompacted, WatchBatch

log = logging.getLogger('steward.etcd.backup')

KIND_FULL = 'Full'
KIND_DELTA = 'Incr'
KIND_COMPACTION = 'Compaction'
FULL_MAX_AGE = 24 * 3600.0
OVERFLOW_FACTOR = 4
MAX_BACKOFF = 300.0
# How often the loop reads the member list (one cheap, serializable call) for the membership metrics; a failed read
# keeps the last list: it reports what the cluster says, never a guess.
MEMBERS_PERIOD = 30.0


@dataclasses.dataclass(frozen=True)
class BackupPolicy:
    full_schedule: CronSchedule
    delta_period: float = 20.0            # seconds; 0 disables deltas
    delta_memory_limit: int = 100 * 1024 * 1024
    gc_policy: str = 'LimitBased'
    gc_period: float = 60.0
    max_backups: int = 7
    delta_retention: float = 0.0
    compression: Optional[str] = None
    compaction_enabled: bool = False
    compaction_threshold: int = 1000000
    snapshot_timeout: float = 900.0
    full_max_age: float = FULL_MAX_AGE
    verify_schedule: Optional[CronSchedule] = None  # restore verification (verification_loop.py); None: off


DELTA_REQUEST_WAIT = 3.0   # seconds an on-demand delta waits for events still on their way from the watch


class DeltaRequest:
    """An on-demand delta (BackupRunner.request_delta): `done` is set when served; `snapshot` is the delta written
    (None: nothing was buffered)."""

    def __init__(self, at: float):
        self.at = at
        self.done = threading.Event()
        self.snapshot: Optional[Snapshot] = None


class BackupListener:
    """Hooks for status, Events and metrics; the defaults only log."""

    def snapshot_taken(self, kind: str, snapshot: Snapshot, duration: float, reason: str) -> None:
        log.info('%s snapshot %s taken (%s)', kind, snapshot.name, reason)

    def snapshot_failed(self, kind: str, error: str, duration: float) -> None:
        log.warning('%s snapshot failed: %s', kind, error)

    def delta_idle(self, tip: int) -> None:
        """A delta period passed with the watch healthy and no event to write: the chain is current at `tip`
        (a quiet cluster is backed up, not failing to be; druid's BackupReady reads the delta Lease's age)."""

    def garbage_collected(self, result: Dict[str, Any]) -> None:
        log.info('garbage collection deleted %d snapshot(s)', len(result['deleted']))

    def requests_served(self, tokens: Tuple[str, ...]) -> None:
        """The full snapshot just taken (or compacted) served these `request_full` tokens."""

    def buffered(self, events: int, size: int) -> None:
        pass

    def state(self, chain_tip: int, base: Optional[Snapshot]) -> None:
        """The chain as the store holds it: at the start (before any snapshot of this run) and after every new
        full snapshot or compaction."""

    def members(self, members: List[Dict[str, Any]]) -> None:
        """The cluster's member list (cluster.members_from_raw: id, name, is_learner, ...), every MEMBERS_PERIOD
        seconds while a member answers."""

    def restore_verified(self, result: Dict[str, Any]) -> None:
        """A restore verification finished (result of backup_verify.verify_backup, with `msg`)."""
        (log.info if result['ok'] else log.warning)('restore verification: %s', result['msg'])


def full_snapshot_reason(chain: Chain, now: float, schedule: CronSchedule, max_age: float = FULL_MAX_AGE,
                         cluster: Optional[Dict[str, Any]] = None) -> str:
    """Why a full snapshot is needed right now ('' when none is): the same rules at start-up and later.

    `cluster` ({cluster_id, revision} as etcd reports them now) catches a store whose chain is not this
    cluster's history: another cluster, or this one restored from an older backup (new cluster ID, or a
    revision behind the chain's tip). Watching it from the tip would record someone else's events."""
    if chain.base is None:
        return 'there is no valid full snapshot'
    created = float(chain.base.name.created)
    if now - created > max_age:
        return 'the newest full snapshot is %.1f h old (more than %.0f h)' % ((now - created) / 3600, max_age / 3600)
    missed = schedule.previous_at_or_before(now)
    if missed is not None and created < missed:
        return 'the scheduled full snapshot of %s was missed' % format_rfc3339(int(missed))
    if chain.gap:
        return 'the delta chain has a gap: %s' % chain.gap
    if cluster:
        recorded = (chain.base.metadata or {}).get('cluster_id')
        if recorded and cluster.get('cluster_id') and recorded != cluster['cluster_id']:
            return 'the newest full snapshot is of etcd cluster %s, the endpoints serve cluster %s' % (
                recorded, cluster['cluster_id'])
        if cluster.get('revision') is not None and chain.tip > int(cluster['revision']):
            return 'the store holds revisions up to %d, beyond the cluster\'s current revision %d' % (
                chain.tip, int(cluster['revision']))
    return ''


class BackupRunner:
    """One cluster's backup loop; `run(stop)` until `stop` is set. Not thread-safe except `request_full`."""

    def __init__(self, conn: EtcdConnection, store: SnapshotStore, policy: BackupPolicy, *, work_dir: str,
                 listener: Optional[BackupListener] = None, tool: Optional[str] = None,
                 etcd_binary: Optional[str] = None, clock: Callable[[], float] = time.time,
                 source: Optional[Dict[str, Any]] = None, last_verified: Optional[float] = None):
        self.conn = conn
        self.store = store
        self.policy = policy
        self.work_dir = work_dir
        self.listener = listener or BackupListener()
        self.tool = tool
        self.etcd_binary = etcd_binary
        self.clock = clock
        self.source = source or {}
        self.buffer: Optional[DeltaBuffer] = None
        self.chain: Optional[Chain] = None
        self.watcher: Optional[CatchUpWatch] = None
        self._endpoint_index = 0
        self._full_reason = ''
        self._requested: List[Tuple[str, Optional[str]]] = []
        self._serving: List[str] = []       # tokens of requests the next full snapshot serves
        self._lock = threading.Lock()
        self._delta_requests: List['DeltaRequest'] = []
        self.next_full = 0.0
        self.next_delta = 0.0
        self.next_gc = 0.0
        self.next_watch = 0.0
        self.next_members = 0.0
        self._full_backoff = 0.0
        self._watch_backoff = 0.0
        self._watch_failed_since: Optional[float] = None
        self.verifier: Optional[RestoreVerifier] = None
        if policy.verify_schedule is not None:
            self.verifier = RestoreVerifier(store, policy.verify_schedule, work_dir=work_dir,
                                            report=self.listener.restore_verified, clock=clock,
                                            last_run=last_verified, tool=tool, etcd_binary=etcd_binary)

    # --- control from other threads ------------------------------------------------------------
    def request_full(self, reason: str, token: Optional[str] = None) -> None:
        """Take a full snapshot now; once one is stored, `listener.requests_served` gets `token` back."""
        with self._lock:
            self._requested.append((reason, token))

    def request_delta(self) -> 'DeltaRequest':
        """Write the buffered events as a delta now, whatever the period (druid's on-demand delta snapshot). The
        events written until now may still be on their way from the watch: the request waits for them up to
        DELTA_REQUEST_WAIT seconds; `request.done` is set once it is served (`snapshot` None: nothing to write)."""
        request = DeltaRequest(self.clock())
        with self._lock:
            self._delta_requests.append(request)
        return request

    def request_verification(self) -> None:
        """Prove the newest backup restores now (on demand); ignored when verification is off."""
        if self.verifier is not None:
            self.verifier.request()

    def _take_request(self) -> str:
        with self._lock:
            if not self._requested:
                return ''
            requests, self._requested = self._requested, []
        self._serving.extend(token for _reason, token in requests if token)
        return '; '.join(reason for reason, _token in requests)

    # --- the loop ------------------------------------------------------------------------------
    def run(self, stop: threading.Event) -> None:
        try:
            while not stop.is_set() and not self._initialize():
                stop.wait(min(self._full_backoff, 30.0))
            while not stop.is_set():
                self.step(stop)
        finally:
            self._close_watch()
            if self.verifier is not None:
                self.verifier.stop()

    def _initialize(self) -> bool:
        now = self.clock()
        try:
            self.chain = plan_chain(self.store.list())
        except EtcdError as exc:
            self._full_backoff = doubled(self._full_backoff, 2.0, MAX_BACKOFF)
            self.listener.snapshot_failed(KIND_FULL, 'cannot list the store: %s' % exc, 0.0)
            return False
        self.buffer = DeltaBuffer(self.chain.tip)
        self._full_reason = full_snapshot_reason(self.chain, now, self.policy.full_schedule, self.policy.full_max_age,
                                                 self._cluster_now())
        self.next_full = now if self._full_reason else self.policy.full_schedule.next_after(now)
        self.next_delta = now + self.policy.delta_period
        self.next_gc = now + self.policy.gc_period
        self.listener.state(self.chain.tip, self.chain.base)
        log.info('backup loop starts at revision %d (%s)', self.chain.tip,
                 self._full_reason or 'chain %s' % ', '.join(self.chain.names()[-3:]))
        return True

    def _cluster_now(self) -> Optional[Dict[str, Any]]:
        """{cluster_id, revision} from the first endpoint that answers, or None (decided later)."""
        try:
            with Gateway(self.conn) as gateway:
                _endpoint, status = gateway.first('/v3/maintenance/status')
        except EtcdError:
            return None
        header = status.get('header') or {}
        return {'cluster_id': member_id_hex(header.get('cluster_id') or header.get('clusterId') or 0),
                'revision': int(header.get('revision') or 0)}

    def step(self, stop: threading.Event) -> None:
        """One turn: due full snapshot, watch events for up to a second, due delta, GC, compaction."""
        now = self.clock()
        requested = self._take_request()
        if requested:
            self._full_reason = requested
            self.next_full = now
        if now >= self.next_full:
            self.full_snapshot(self._full_reason or 'scheduled (%s)' % self.policy.full_schedule.expr)
        if self.policy.delta_period > 0:
            self._pump(stop)
            now = self.clock()
            overflow = self.buffer.size >= self._flush_size
            backlog = self._backlog_read()
            with self._lock:
                asked = list(self._delta_requests)
            idle = (now >= self.next_delta and not len(self.buffer) and not asked and self.watcher is not None
                    and self._watch_failed_since is None and self.chain is not None)
            if idle:
                self.listener.delta_idle(self.chain.tip)
            if (now >= self.next_delta or overflow or backlog or asked) and len(self.buffer):
                written = self.flush('memory limit reached' if overflow else 'the backlog is read' if backlog
                                     else 'requested' if asked else 'delta period elapsed')
                self._serve_delta_requests(asked, written, now)
            elif asked:
                self._serve_delta_requests([r for r in asked if now - r.at >= DELTA_REQUEST_WAIT], None, now)
            if now >= self.next_delta:
                self.next_delta = now + self.policy.delta_period
        else:
            with self._lock:
                asked = list(self._delta_requests)
            self._serve_delta_requests(asked, None, now)   # deltas are off: nothing to write, say so at once
            stop.wait(min(1.0, max(0.05, min(self.next_full, self.next_gc) - now)))
        now = self.clock()
        if now >= self.next_gc:
            self.collect_garbage()
            self.next_gc = now + self.policy.gc_period
        if self._compaction_due():
            self.compact()
        if self.verifier is not None:
            self.verifier.poll(now, self.chain is not None and self.chain.base is not None)
        if now >= self.next_members:
            self.next_members = now + MEMBERS_PERIOD
            self.read_members()

    def read_members(self) -> Optional[List[Dict[str, Any]]]:
        """The member list from the first endpoint that answers (not linearizable: a member without quorum still
        says who its cluster is), passed to the listener; None when no endpoint answers."""
        try:
            with Gateway(self.conn) as gateway:
                members = members_from_raw(gateway.member_list() or [])
        except EtcdError as exc:
            log.debug('member list: %s', exc)
            return None
        self.listener.members(members)
        return members

    # --- deltas --------------------------------------------------------------------------------
    def _serve_delta_requests(self, requests: List['DeltaRequest'], written: Optional[Snapshot], now: float) -> None:
        with self._lock:
            self._delta_requests = [r for r in self._delta_requests if r not in requests]
        for request in requests:
            request.snapshot = written
            request.done.set()

    def _pump(self, stop: threading.Event) -> None:
        """Move watch responses into the buffer for up to one second (or until the next deadline)."""
        deadline = min(self.clock() + 1.0, self.next_delta)
        if self.watcher is None:
            if self._full_reason or self.clock() < self.next_watch:
                stop.wait(max(0.0, min(deadline - self.clock(), 0.5)))
                return
            self._open_watch()
            if self.watcher is None:
                return
        while not stop.is_set():
            item = self.watcher.get(max(0.0, deadline - self.clock()))
            if item is None or not self._take(item):
                return
            if self.clock() >= deadline:
                # what has already arrived goes into the coming delta too: taking one response a turn
                # would write one delta per revision behind a slow store, and fall further behind
                for _unused in range(self.watcher.pending()):
                    item = self.watcher.get(0)
                    if item is None or not self._take(item):
                        return
                return

    def _take(self, item: Any) -> bool:
        """Buffer a watch batch; False when pumping must stop (a watch error, or the memory limit)."""
        if not isinstance(item, WatchBatch):
            self._watch_error(item)
            return False
        self._watch_failed_since = None
        self._watch_backoff = 0.0
        if self.buffer.add(item.events):
            self.listener.buffered(len(self.buffer), self.buffer.size)
        return self.buffer.size < self._flush_size and not self._backlog_read()

    @property
    def _flush_size(self) -> int:
        """Buffered bytes that make a delta due: half the memory limit, because while one delta is written
        the watch goes on receiving into its queue, which may hold the other half (so the two never exceed
        the limit, and receiving never waits for the store)."""
        return self.policy.delta_memory_limit // 2

    def _backlog_read(self) -> bool:
        """The buffer holds the history written while no watch ran (a restart, a reconnect: revisions up to
        the one the cluster had when the watch was created), read to its end. It is older than a delta period
        already, so it is written at once rather than a period later."""
        created = self.watcher.created_revision if self.watcher is not None else None
        return (created is not None and len(self.buffer) > 0
                and self.buffer.first_revision <= created <= self.buffer.last_revision)

    def _open_watch(self) -> None:
        endpoints = self.conn.endpoints
        endpoint = endpoints[self._endpoint_index % len(endpoints)]
        start = self.buffer.last_revision + 1
        try:
            self.watcher = CatchUpWatch(self.conn, endpoint, start, clock=self.clock,
                                        queue_bytes=self.policy.delta_memory_limit - self._flush_size).start()
            log.info('watching all keys on %s from revision %d (%d watch%s)', endpoint, start,
                     len(self.watcher.plan), '' if len(self.watcher.plan) == 1 else 'es: a backlog read in spans')
        except EtcdError as exc:
            self._watch_error(exc)

    def _watch_error(self, exc: Exception) -> None:
        self._close_watch()
        now = self.clock()
        if isinstance(exc, HistoryCompacted):
            # Keep what is buffered (it is valid), but only a full snapshot can bridge the compacted part.
            self._full_reason = str(exc)
            self.next_full = now
            return
        self._endpoint_index += 1
        self._watch_backoff = doubled(self._watch_backoff, 1.0, 30.0)
        self.next_watch = now + self._watch_backoff
        if self._watch_failed_since is None:
            self._watch_failed_since = now
        if now - self._watch_failed_since >= self.policy.delta_period:
            self.listener.snapshot_failed(KIND_DELTA, 'no watch for %.0fs: %s' % (now - self._watch_failed_since, exc), 0.0)

    def _close_watch(self) -> None:
        if self.watcher is not None:
            self.watcher.close()
            self.watcher = None

    def flush(self, reason: str) -> Optional[Snapshot]:
        """Write the buffered events as one delta; on failure keep them (or, past the overflow
        limit, drop them and ask for a full snapshot, which holds them anyway)."""
        start, events = self.buffer.take()
        began = self.clock()
        try:
            snap = write_delta(self.store, start, events, now=began, compression=self.policy.compression,
                               tmp_dir=self.work_dir, source=self.source)
        except EtcdError as exc:
            self.buffer.restore(start, events)
            self.listener.snapshot_failed(KIND_DELTA, str(exc), self.clock() - began)
            if self.buffer.size > OVERFLOW_FACTOR * self.policy.delta_memory_limit:
                dropped = len(self.buffer)
                self._close_watch()
                self.buffer = DeltaBuffer(self.chain.tip)
                self._full_reason = ('%d buffered events could not be written and exceeded %dx the memory limit: '
                                     'dropped from memory, a full snapshot will hold them' % (dropped, OVERFLOW_FACTOR))
                self.next_full = min(self.next_full, self.clock() + 10.0)
            return None
        self.chain = dataclasses.replace(self.chain, deltas=self.chain.deltas + [snap], tip=snap.name.end_revision)
        self.listener.snapshot_taken(KIND_DELTA, snap, self.clock() - began, reason)
        self.listener.buffered(len(self.buffer), self.buffer.size)
        self.listener.state(self.chain.tip, self.chain.base)
        return snap

    # --- full snapshots ------------------------------------------------------------------------
    def full_snapshot(self, reason: str) -> Optional[Snapshot]:
        if self.buffer is not None and len(self.buffer):
            self.flush('before a full snapshot')
        began = self.clock()
        try:
            snap, _member = snapshot_to_store(self.conn, self.store, now=began, tmp_dir=self.work_dir,
                                              snapshot_timeout=self.policy.snapshot_timeout, tool=self.tool,
                                              compression=self.policy.compression)
        except EtcdError as exc:
            self._full_backoff = doubled(self._full_backoff, 5.0, MAX_BACKOFF)
            self.next_full = self.clock() + self._full_backoff
            self.listener.snapshot_failed(KIND_FULL, str(exc), self.clock() - began)
            return None
        served = self._anchor(snap)
        self.listener.snapshot_taken(KIND_FULL, snap, self.clock() - began, reason)
        if served:
            self.listener.requests_served(served)
        return snap

    def _anchor(self, snap: Snapshot) -> Tuple[str, ...]:
        """A new full snapshot (taken or compacted) is the chain's base from now on; returns the tokens of the
        requests it served."""
        revision = snap.name.end_revision
        tip = max(self.chain.tip if self.chain else 0, revision)
        self.chain = Chain(snap, [], tip)
        if self.buffer is None:
            self.buffer = DeltaBuffer(tip)
        else:
            self.buffer.advance_to(revision)
        self._full_reason = ''
        self._full_backoff = 0.0
        now = self.clock()
        self.next_full = self.policy.full_schedule.next_after(now)
        self.listener.state(self.chain.tip, self.chain.base)
        served, self._serving = tuple(self._serving), []
        return served

    # --- garbage collection and compaction -----------------------------------------------------
    def collect_garbage(self) -> Optional[Dict[str, Any]]:
        try:
            plan = plan_gc(self.store.list(), self.policy.gc_policy, now=self.clock(),
                           max_backups=self.policy.max_backups,
                           delta_retention_seconds=int(self.policy.delta_retention))
            result = apply_gc(self.store, plan, check_mode=False)
        except EtcdError as exc:
            log.warning('garbage collection failed: %s', exc)
            return None
        self.listener.garbage_collected(result)
        return result

    def _compaction_due(self) -> bool:
        return (self.policy.compaction_enabled and self.chain is not None and self.chain.base is not None
                and bool(self.chain.deltas) and self.chain.events_since_full > self.policy.compaction_threshold)

    def compact(self) -> Optional[Snapshot]:
        """Full + deltas -> a new full snapshot at the chain's tip (restores then replay nothing)."""
        began = self.clock()
        try:
            snap = compact_chain(self.store, plan_chain(self.store.list()), work_dir=self.work_dir, now=began,
                                 compression=self.policy.compression, tool=self.tool, etcd_binary=self.etcd_binary,
                                 snapshot_timeout=self.policy.snapshot_timeout)
        except EtcdError as exc:
            self.listener.snapshot_failed(KIND_COMPACTION, str(exc), self.clock() - began)
            # do not retry at once: the next flush re-evaluates
            self.chain = dataclasses.replace(self.chain, deltas=[])
            return None
        served = self._anchor(snap)
        self.listener.snapshot_taken(KIND_COMPACTION, snap, self.clock() - began, 'more than %d revisions in deltas' %
                                     self.policy.compaction_threshold)
        if served:
            self.listener.requests_served(served)
        return snap
