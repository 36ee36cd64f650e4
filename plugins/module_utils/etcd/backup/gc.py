# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Garbage collection of snapshot stores, with etcd-backup-restore's policies.

`plan_gc` is pure: it decides from a store listing and `now` which objects go and why, so check
mode, diff and the controller all show the same plan. `apply_gc` only executes a plan.

Policies (as in etcd-backup-restore `pkg/snapshot/snapshotter/garbagecollector.go`):
* the snapshots are split into *streams*: a full snapshot followed by the deltas taken after it
  (the first stream may start with deltas that have no full before them);
* the newest stream (the newest full and every delta after it) is always kept;
* deltas of the older streams are kept only while younger than the delta retention period
  (`created < now - retention` goes), whether or not their full is kept, as upstream does;
* **Exponential** keeps every full of the current hour, then the newest full per hour for the
  rest of the current (UTC) day, per day for the 7 days before, per week for the 4 weeks before,
  and deletes fulls older than that. Windows are counted back from the end of the current UTC day
  exactly as upstream does (including its one-day shift when it starts counting weeks);
* **LimitBased** keeps the newest `max_backups` full snapshots.

Our own rules on top: the policies only see *valid* snapshots, so the newest valid full (and the
deltas after it) is never deleted; invalid objects (incomplete, corrupt, orphan metadata, partial
uploads) never count towards `max_backups` and are garbage only when older than the grace period,
because a younger one may be an upload in progress.
"""

from __future__ import annotations

import calendar
import dataclasses
import time
from typing import Any, Dict, List

from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import EtcdError
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.store import Snapshot, SnapshotStore

POLICY_LIMIT_BASED = 'LimitBased'
POLICY_EXPONENTIAL = 'Exponential'
POLICIES = (POLICY_LIMIT_BASED, POLICY_EXPONENTIAL)

HOUR = 3600
DAY = 24 * HOUR
WEEK = 7 * DAY


@dataclasses.dataclass
class GcPlan:
    """What garbage collection would do: every listed object is in `delete` or `keep`, with a reason."""

    policy: str
    delete: List[Snapshot]
    keep: List[Snapshot]
    reasons: Dict[str, str]

    def deleted_dicts(self) -> List[Dict[str, Any]]:
        return [dict(s.to_dict(), reason=self.reasons[s.key]) for s in self.delete]

    def kept_names(self) -> List[str]:
        return [snapshot_label(s) for s in self.keep]


def snapshot_label(snapshot: Snapshot) -> str:
    """The name a user sees: the snapshot name, or the object's base name when it has none."""
    return str(snapshot.name) if snapshot.name else snapshot.key.rsplit('/', 1)[-1]


def _quo(a: int, b: int) -> int:
    """Integer division truncating toward zero, as Go's `/` and `int(float)` do."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _utc_hour(unix: float) -> int:
    return time.gmtime(unix).tm_hour


def _end_of_utc_day(now: float) -> int:
    """Upstream's `now.Truncate(24h) + 23h59m59s`."""
    day_start = calendar.timegm(time.gmtime(now)[:3] + (0, 0, 0))
    return day_start + DAY - 1


def _streams(valid: List[Snapshot]) -> List[List[Snapshot]]:
    """Split a restore-ordered list into [full, deltas...] streams (upstream getSnapStreamIndexList)."""
    streams: List[List[Snapshot]] = []
    for snap in valid:
        if snap.is_full or not streams:
            streams.append([snap])
        else:
            streams[-1].append(snap)
    return streams


def _invalid_age_reference(snapshot: Snapshot) -> float:
    """The most recent sign of life of an invalid object: its modification or its name's creation time."""
    created = snapshot.name.created if snapshot.name is not None else 0
    return max(float(snapshot.modified or 0), float(created or 0))


def _exponential_fulls(heads: List[Snapshot], now: float, delete: Dict[str, str], keep: Dict[str, str]) -> None:
    """Port of upstream's Exponential loop over the stream heads (newest first, newest head untouched)."""
    eod = _end_of_utc_day(now)
    tracking_week = False
    now_hour = _utc_hour(now)
    for index in range(len(heads) - 1, 0, -1):
        snap, older = heads[index], heads[index - 1]
        if not older.is_full:
            continue  # leading deltas without a full: only the delta retention applies to them
        older_created = older.name.created
        age = eod - older_created
        if age < DAY:
            if _utc_hour(older_created) == now_hour:
                keep[older.key] = 'Exponential: full snapshot of the current hour'
                continue
            threshold, window = 1, 'hour (today)'
        elif age < 8 * DAY:
            threshold, window = 24, 'day (last 7 days)'
        elif age < 5 * WEEK:
            if not tracking_week:
                eod -= DAY  # upstream: weeks end the previous day
                tracking_week = True
            threshold, window = 24 * 7, 'week (last 4 weeks)'
        else:
            delete[older.key] = 'Exponential: full snapshot older than 5 weeks'
            continue
        snap_created = snap.name.created
        hour_change = _quo(eod - older_created, HOUR) - _quo(eod - snap_created, HOUR)
        day_change = _quo(eod - older_created, DAY) - _quo(eod - snap_created, DAY)
        week_change = _quo(eod - older_created, WEEK) - _quo(eod - snap_created, WEEK)
        if _quo(hour_change, threshold) or _quo(day_change * 24, threshold) or _quo(week_change * 24 * 7, threshold):
            keep[older.key] = 'Exponential: newest full snapshot of its %s' % window
        else:
            delete[older.key] = 'Exponential: a newer full snapshot %s exists in the same %s' % (snapshot_label(snap), window)


def _limit_based_fulls(heads: List[Snapshot], max_backups: int, delete: Dict[str, str], keep: Dict[str, str]) -> None:
    """Keep the newest `max_backups` fulls; heads that are not fulls (leading deltas) do not count."""
    fulls = [h for h in heads if h.is_full]
    for position, full in enumerate(reversed(fulls)):
        if position < max_backups:
            keep.setdefault(full.key, 'LimitBased: one of the newest %d valid full snapshots' % max_backups)
        else:
            delete[full.key] = 'LimitBased: %d newer valid full snapshots exist' % max_backups


def plan_gc(snapshots: List[Snapshot], policy: str, *, now: float, max_backups: int = 7,
            delta_retention_seconds: int = 0, incomplete_grace_seconds: int = 3600) -> GcPlan:
    """Decide which objects garbage collection deletes; pure, every decision has a reason."""
    if policy not in POLICIES:
        raise EtcdError('unknown garbage collection policy %r (expected one of %s)' % (policy, ', '.join(POLICIES)))
    if policy == POLICY_LIMIT_BASED and max_backups < 1:
        raise EtcdError('max_backups must be at least 1 for the LimitBased policy, got %d' % max_backups)
    if delta_retention_seconds < 0 or incomplete_grace_seconds < 0:
        raise EtcdError('delta_retention_seconds and incomplete_grace_seconds must not be negative')

    delete: Dict[str, str] = {}
    keep: Dict[str, str] = {}
    valid = sorted((s for s in snapshots if s.valid and s.name is not None), key=lambda s: s.name.sort_key)
    valid_keys = set(s.key for s in valid)

    for snap in snapshots:
        if snap.key in valid_keys:
            continue
        why = snap.status + (': ' + snap.problem if snap.problem else '')
        age = now - _invalid_age_reference(snap)
        if age > incomplete_grace_seconds:
            delete[snap.key] = 'invalid (%s) and older than the %ds grace period' % (why, incomplete_grace_seconds)
        else:
            keep[snap.key] = 'invalid (%s) but younger than the %ds grace period: may be an upload in progress' % (
                why, incomplete_grace_seconds)

    streams = _streams(valid)
    if streams:
        newest = streams[-1]
        for snap in newest:
            if snap.is_full:
                keep[snap.key] = 'newest valid full snapshot'
            elif newest[0].is_full:
                keep[snap.key] = 'delta after the newest valid full snapshot'
            else:
                keep[snap.key] = 'delta kept: there is no valid full snapshot'
        cutoff = now - delta_retention_seconds
        for stream in streams[:-1]:
            for snap in stream:
                if snap.is_full:
                    continue
                if snap.name.created < cutoff:
                    delete[snap.key] = 'delta older than the %ds delta retention period, before the newest full' % (
                        delta_retention_seconds)
                else:
                    keep[snap.key] = 'delta within the %ds delta retention period' % delta_retention_seconds
        heads = [stream[0] for stream in streams]
        if policy == POLICY_EXPONENTIAL:
            _exponential_fulls(heads, now, delete, keep)
        else:
            _limit_based_fulls(heads, max_backups, delete, keep)
        # Safety net, whatever a policy says: the newest valid full and the deltas after it stay.
        for snap in newest:
            if delete.pop(snap.key, None) is not None:
                keep[snap.key] = 'newest valid full snapshot or a delta after it (never deleted)'

    ordered = [s for s in snapshots if s.key not in valid_keys] + valid
    return GcPlan(
        policy=policy,
        delete=[s for s in ordered if s.key in delete],
        keep=[s for s in ordered if s.key not in delete],
        reasons=dict(keep, **delete),
    )


def apply_gc(store: SnapshotStore, plan: GcPlan, *, check_mode: bool) -> Dict[str, Any]:
    """Delete what the plan says (nothing in check mode); a failed delete is reported, the rest goes on."""
    deleted: List[Dict[str, Any]] = []
    failed: List[Dict[str, Any]] = []
    for snap in plan.delete:
        entry = dict(snap.to_dict(), reason=plan.reasons[snap.key])
        if not check_mode:
            try:
                store.delete(snap)
            except EtcdError as exc:
                failed.append(dict(entry, error=str(exc)))
                continue
        deleted.append(entry)
    kept = plan.kept_names() + [f['name'] for f in failed]
    return {'changed': bool(deleted), 'deleted': deleted, 'kept': kept, 'failed': failed, 'policy': plan.policy}
