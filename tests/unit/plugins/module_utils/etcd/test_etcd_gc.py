"""plan_gc / apply_gc: etcd-backup-restore's GC policies plus our safety rules, with a fixed `now`."""

from __future__ import annotations

import calendar
import datetime

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.etcd.backup import gc
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import EtcdError, StoreError
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.naming import delta_name, full_name
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.store import (
    STATUS_CORRUPT,
    STATUS_INCOMPLETE,
    STATUS_ORPHAN,
    STATUS_PARTIAL,
    STATUS_VALID,
    Snapshot,
)

NOW = calendar.timegm((2024, 3, 15, 10, 17, 0))  # a Friday, 10:17 UTC


def ts(text: str) -> int:
    return calendar.timegm(datetime.datetime.strptime(text, '%Y-%m-%d %H:%M').timetuple())


class Builder:
    """Builds a listing in revision order; each snapshot's revision grows with its creation."""

    def __init__(self):
        self.snaps = []
        self.rev = 0

    def full(self, created, status=STATUS_VALID, modified=None):
        self.rev += 10
        return self._add(full_name(self.rev, int(created)), status, modified)

    def delta(self, created, status=STATUS_VALID, modified=None):
        start = self.rev + 1
        self.rev += 10
        return self._add(delta_name(start, self.rev, int(created)), status, modified)

    def partial(self, key, modified):
        snap = Snapshot(None, 'v2/' + key, 10, modified, STATUS_PARTIAL, problem='temp object')
        self.snaps.append(snap)
        return snap

    def _add(self, name, status, modified):
        snap = Snapshot(name, 'v2/' + str(name), 100, float(name.created if modified is None else modified), status,
                        metadata={'sha256': 'x'} if status == STATUS_VALID else None,
                        problem='' if status == STATUS_VALID else 'test: ' + status)
        self.snaps.append(snap)
        return snap


def names(snaps):
    return [str(s.name) for s in snaps]


# --- upstream scenario: "should garbage collect exponentially" ---------------------------------------
def upstream_store(now):
    """prepareStoreForGarbageCollection: from 00:00 36 days back until now, every 10 min: Full, Incr, Incr."""
    b = Builder()
    t = calendar.timegm((datetime.datetime.utcfromtimestamp(now).date() - datetime.timedelta(days=36)).timetuple())
    count = 0
    while now - t >= 0:
        (b.full if count == 0 else b.delta)(t)
        count = (count + 1) % 3
        t += 600
    return b.snaps


def upstream_expected(now):
    """prepareExpectedSnapshotsList: (created, is_full) of what must survive."""
    day0 = calendar.timegm(datetime.datetime.utcfromtimestamp(now).date().timetuple())
    out = []
    t = day0 - 35 * gc.DAY - 1800
    for _week in range(4):
        t += gc.WEEK
        out.append((t, True))
    for _day in range(7):
        t += gc.DAY
        out.append((t, True))
    t += gc.HOUR
    hour_start = now - now % gc.HOUR
    while hour_start - t > 0:
        out.append((t, True))
        t += gc.HOUR
    t = hour_start
    out.append((t, True))
    t += 1800
    while now - t >= 0:
        out.append((t, True))
        t += 1800
    t = t - 1800 + 600
    while now - t >= 0:
        out.append((t, False))
        t += 600
    return out


@pytest.mark.parametrize('now', [
    NOW,
    ts('2024-03-15 00:05'),
    ts('2024-03-15 00:00'),
    ts('2024-03-15 23:59'),
    ts('2024-03-15 10:30'),
    ts('2024-03-16 13:40'),
    ts('2024-02-29 06:55'),
], ids=['10:17', '00:05', 'midnight', '23:59', 'on-a-full', 'saturday', 'leap-day'])
def test_exponential_matches_upstream_scenario(now):
    snaps = upstream_store(now)
    plan = gc.plan_gc(snaps, 'Exponential', now=now)
    kept = [(s.name.created, s.is_full) for s in plan.keep]
    assert kept == upstream_expected(now)
    assert len(plan.keep) + len(plan.delete) == len(snaps)
    assert all(plan.reasons[s.key] for s in plan.delete)


def test_limit_based_matches_upstream_scenario():
    """"should garbage collect limitBased": at most max_backups fulls first, then only deltas."""
    snaps = upstream_store(NOW)
    plan = gc.plan_gc(snaps, 'LimitBased', now=NOW, max_backups=2)
    # the grid ends 09:30 full, 09:40 + 09:50 deltas, 10:00 full, 10:10 delta: keep 09:30, 10:00 and 10:10
    assert [(s.is_full, s.name.created) for s in plan.keep] == [
        (True, ts('2024-03-15 09:30')), (True, ts('2024-03-15 10:00')), (False, ts('2024-03-15 10:10'))]
    assert len(plan.delete) == len(snaps) - 3


# --- upstream scenario: GarbageCollectDeltaSnapshots (6 deltas 60..10 min old) -----------------------
@pytest.mark.parametrize('retention,deleted', [(0, 6), (35 * 60, 3), (600 * 60, 0), (60 * 60, 0), (60 * 60 - 1, 1)],
                         ids=['none', '35min', '600min', 'boundary-equal-kept', 'boundary-older-deleted'])
def test_delta_retention(retention, deleted):
    b = Builder()
    b.full(NOW - 2 * gc.HOUR)
    deltas = [b.delta(NOW - 60 * 60 + i * 600) for i in range(6)]
    b.full(NOW - 5)
    plan = gc.plan_gc(b.snaps, 'LimitBased', now=NOW, delta_retention_seconds=retention)
    assert [s for s in plan.delete if not s.is_full] == deltas[:deleted]


# --- LimitBased -------------------------------------------------------------------------------------
@pytest.mark.parametrize('fulls,max_backups,kept_fulls', [(10, 7, 7), (3, 7, 3), (5, 1, 1), (8, 3, 3)])
def test_limit_based_keeps_newest_fulls_and_latest_deltas(fulls, max_backups, kept_fulls):
    b = Builder()
    for i in range(fulls):
        b.full(NOW - (fulls - i) * gc.HOUR)
        b.delta(NOW - (fulls - i) * gc.HOUR + 60)
        b.delta(NOW - (fulls - i) * gc.HOUR + 120)
    plan = gc.plan_gc(b.snaps, 'LimitBased', now=NOW, max_backups=max_backups)
    kept_full = [s for s in plan.keep if s.is_full]
    assert kept_full == [s for s in b.snaps if s.is_full][-kept_fulls:]
    assert [s for s in plan.keep if not s.is_full] == b.snaps[-2:]
    assert len(plan.delete) == len(b.snaps) - kept_fulls - 2
    for s in plan.delete:
        assert plan.reasons[s.key].startswith('LimitBased' if s.is_full else 'delta older')


def test_limit_based_deltas_of_deleted_full_within_retention_are_kept():
    """Upstream deletes deltas by retention only, even when their full goes."""
    b = Builder()
    old = b.full(NOW - 3 * gc.HOUR)
    d1 = b.delta(NOW - 3 * gc.HOUR + 60)
    b.full(NOW - 2 * gc.HOUR)
    b.full(NOW - gc.HOUR)
    plan = gc.plan_gc(b.snaps, 'LimitBased', now=NOW, max_backups=2, delta_retention_seconds=4 * gc.HOUR)
    assert plan.delete == [old]
    assert d1 in plan.keep and 'retention' in plan.reasons[d1.key]


def test_limit_based_rejects_zero():
    with pytest.raises(EtcdError, match='max_backups'):
        gc.plan_gc([], 'LimitBased', now=NOW, max_backups=0)


def test_unknown_policy():
    with pytest.raises(EtcdError, match="unknown garbage collection policy 'Linear'"):
        gc.plan_gc([], 'Linear', now=NOW)


# --- Exponential boundaries (hour / day / week edges) ----------------------------------------------
@pytest.mark.parametrize('older,newer,now,kept', [
    # same hour today, not the current hour: the older goes
    ('2024-03-15 08:10', '2024-03-15 08:50', '2024-03-15 10:17', False),
    # different hours today: both stay
    ('2024-03-15 07:50', '2024-03-15 08:10', '2024-03-15 10:17', True),
    # current hour: every full stays
    ('2024-03-15 10:01', '2024-03-15 10:02', '2024-03-15 10:17', True),
    # hour edge: windows end at HH:59:59 as upstream counts from 23:59:59
    ('2024-03-15 08:59', '2024-03-15 09:00', '2024-03-15 10:17', True),
    # yesterday, same day: the older goes
    ('2024-03-14 01:00', '2024-03-14 23:00', '2024-03-15 10:17', False),
    # day edge: yesterday 23:59 vs today 00:00 -> different day, both stay
    ('2024-03-14 23:59', '2024-03-15 00:00', '2024-03-15 10:17', True),
    # 7 days back (same day): the older goes
    ('2024-03-08 02:00', '2024-03-08 20:00', '2024-03-15 10:17', False),
    # week window (8..35 days): same week -> goes, different week -> stays
    ('2024-02-20 12:00', '2024-02-21 12:00', '2024-03-15 10:17', False),
    ('2024-02-20 12:00', '2024-02-28 12:00', '2024-03-15 10:17', True),
    # older than 5 weeks: always goes
    ('2024-02-01 12:00', '2024-02-08 12:00', '2024-03-15 10:17', False),
    # 5-week edge, counted (as upstream) from the previous day's end once weeks are tracked: 02-14 23:59:59 - 35d
    ('2024-02-08 23:59', '2024-02-16 12:00', '2024-03-15 10:17', False),
    ('2024-02-09 00:00', '2024-02-16 12:00', '2024-03-15 10:17', True),
], ids=['same-hour', 'diff-hour', 'current-hour', 'hour-edge', 'same-day', 'day-edge', 'same-day-7d',
        'same-week', 'diff-week', 'older-5w', '5w-edge-out', '5w-edge-in'])
def test_exponential_boundaries(older, newer, now, kept):
    b = Builder()
    o = b.full(ts(older))
    b.full(ts(newer))
    b.full(ts(now) - 1)  # the newest full, always kept
    plan = gc.plan_gc(b.snaps, 'Exponential', now=ts(now))
    assert (o in plan.keep) is kept, plan.reasons[o.key]
    assert plan.reasons[o.key].startswith('Exponential')


# --- safety rules -----------------------------------------------------------------------------------
@pytest.mark.parametrize('policy', ['LimitBased', 'Exponential'])
def test_newest_valid_full_survives_when_newer_ones_are_invalid(policy):
    b = Builder()
    good = b.full(NOW - 40 * gc.DAY)
    d = b.delta(NOW - 40 * gc.DAY + 60)
    bad = [b.full(NOW - 5 * gc.HOUR, status=STATUS_CORRUPT), b.full(NOW - 4 * gc.HOUR, status=STATUS_INCOMPLETE),
           b.full(NOW - 3 * gc.HOUR, status=STATUS_ORPHAN)]
    plan = gc.plan_gc(b.snaps, policy, now=NOW, max_backups=1)
    assert good in plan.keep and d in plan.keep
    assert plan.reasons[good.key] == 'newest valid full snapshot'
    assert plan.delete == bad
    for s in bad:
        assert 'grace period' in plan.reasons[s.key] and s.status in plan.reasons[s.key]


@pytest.mark.parametrize('age,deleted', [(10, False), (3600, False), (3601, True), (86400, True)])
def test_incomplete_grace(age, deleted):
    b = Builder()
    b.full(NOW - gc.DAY)
    inc = b.full(NOW - 2 * gc.DAY, status=STATUS_INCOMPLETE, modified=NOW - age)  # old name, fresh upload
    part = b.partial('.Full-00000099-123.part', NOW - age)
    plan = gc.plan_gc(b.snaps, 'LimitBased', now=NOW)
    assert (inc in plan.delete) is deleted
    assert (part in plan.delete) is deleted
    if not deleted:
        assert 'upload in progress' in plan.reasons[inc.key]


def test_invalid_do_not_count_towards_max_backups():
    b = Builder()
    fulls = [b.full(NOW - 10 * gc.HOUR), b.full(NOW - 9 * gc.HOUR)]
    for i in range(5):
        b.full(NOW - 8 * gc.HOUR + i, status=STATUS_INCOMPLETE, modified=NOW - 60)
    plan = gc.plan_gc(b.snaps, 'LimitBased', now=NOW, max_backups=2)
    assert plan.delete == []
    assert all(f in plan.keep for f in fulls)


def test_deltas_after_invalid_newest_full_stay_with_newest_valid():
    b = Builder()
    b.full(NOW - 3 * gc.HOUR)
    newest = b.full(NOW - 2 * gc.HOUR)
    b.full(NOW - gc.HOUR - 60, status=STATUS_CORRUPT, modified=NOW - 30)
    later = [b.delta(NOW - gc.HOUR), b.delta(NOW - 30 * 60)]
    plan = gc.plan_gc(b.snaps, 'LimitBased', now=NOW, max_backups=1)
    assert newest in plan.keep and all(d in plan.keep for d in later)
    assert len(plan.delete) == 1 and plan.delete[0].is_full


def test_only_deltas_no_full_are_kept():
    b = Builder()
    ds = [b.delta(NOW - 10 * gc.DAY), b.delta(NOW - 9 * gc.DAY)]
    plan = gc.plan_gc(b.snaps, 'Exponential', now=NOW)
    assert plan.keep == ds and plan.delete == []


def test_leading_deltas_before_first_full_follow_retention():
    b = Builder()
    lead = b.delta(NOW - 10 * gc.DAY)
    b.full(NOW - gc.HOUR)
    plan = gc.plan_gc(b.snaps, 'Exponential', now=NOW)
    assert plan.delete == [lead]


def test_empty_store():
    plan = gc.plan_gc([], 'Exponential', now=NOW)
    assert plan.delete == [] and plan.keep == []


# --- apply_gc -------------------------------------------------------------------------------------
class FakeStore:
    url = 'memory://'

    def __init__(self, snaps, fail=()):
        self.snaps = list(snaps)
        self.fail = set(fail)
        self.deleted = []

    def list(self):
        return list(self.snaps)

    def delete(self, snap):
        if snap.key in self.fail:
            raise StoreError('cannot delete %s' % snap.key)
        self.deleted.append(snap.key)
        self.snaps.remove(snap)


def _store_with_garbage():
    b = Builder()
    for i in range(4):
        b.full(NOW - (5 - i) * gc.HOUR)
    return b.snaps


@pytest.mark.parametrize('check_mode', [True, False])
def test_apply(check_mode):
    snaps = _store_with_garbage()
    store = FakeStore(snaps)
    plan = gc.plan_gc(store.list(), 'LimitBased', now=NOW, max_backups=2)
    result = gc.apply_gc(store, plan, check_mode=check_mode)
    assert result['changed'] is True
    assert [d['name'] for d in result['deleted']] == names(snaps[:2])
    assert all(d['reason'] for d in result['deleted'])
    assert result['kept'] == names(snaps[2:])
    assert store.deleted == ([] if check_mode else [s.key for s in snaps[:2]])
    if not check_mode:
        again = gc.apply_gc(store, gc.plan_gc(store.list(), 'LimitBased', now=NOW, max_backups=2), check_mode=False)
        assert again['changed'] is False and again['deleted'] == []


def test_apply_reports_failures_and_goes_on():
    snaps = _store_with_garbage()
    store = FakeStore(snaps, fail={snaps[0].key})
    result = gc.apply_gc(store, gc.plan_gc(store.list(), 'LimitBased', now=NOW, max_backups=2), check_mode=False)
    assert [f['name'] for f in result['failed']] == [str(snaps[0].name)]
    assert 'cannot delete' in result['failed'][0]['error']
    assert store.deleted == [snaps[1].key]
    assert str(snaps[0].name) in result['kept']
