# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Backups proven by restoring them.

A backup is only as good as the restore it allows, so this does one, off to the side: the newest full
snapshot of a store and the delta snapshots continuing it are read back and verified, the full snapshot
is restored into a scratch data dir, a throwaway etcd is started on it on a free loopback port, and what
it serves is compared with what the backup recorded:
* the revision: the restored member must be at exactly the revision the snapshot records, and after
  replaying the deltas at exactly the revision the last one ends at (every event landing on its own
  revision, replay.apply_events);
* HashKV: at the revision recorded beside the snapshot (snapshot.HashKVRecorder: the live cluster's
  hash when the snapshot was taken), the restored member must compute the same hash, key for key.
  Snapshots without it (older ones, or etcd-backup-restore's) say so instead of passing silently.
Each snapshot is reported intact, corrupt (which check failed) or unrestorable (why); the backup is ok
only when the whole newest chain is. When a delta fails, a recovery restores the chain up to it; when the
full snapshot itself fails, older ones are tried in turn, as a recovery would, and the first that
restores is named: `would_restore` says what a disaster would restore today.
Nothing in the store changes; the scratch data dir and process are removed whatever happens.
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
import time
from typing import Any, Callable, Dict, List, Optional

from ansible_collections.steward.cluster.plugins.module_utils.etcd.wire.calls import hash_kv
from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot.delta import plan_chain
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import (
    EtcdError,
    SnapshotInvalid,
    SnapshotNotFound,
)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot.fetch import fetch_delta, fetch_full, label
from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot.replay import (
    CHECK_REPLAY,
    CHECK_REVISION,
    TXN_TIMEOUT,
    ScratchEtcd,
    apply_events,
)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.store import Snapshot, SnapshotStore

INTACT = 'intact'
CORRUPT = 'corrupt'
UNRESTORABLE = 'unrestorable'
NOT_CHECKED = 'not-checked'   # after a failure earlier in the chain, nothing later can be proven
CHECK_HASH_KV = 'hash-kv'


@dataclasses.dataclass
class SnapshotVerdict:
    name: str
    kind: str
    result: str
    failed_check: Optional[str] = None
    reason: str = ''

    def to_dict(self) -> Dict[str, Any]:
        return dataclasses.asdict(self)


class ChainFailed(Exception):
    """Internal: a link of the chain failed; the verdicts so far say which and why."""


class VerificationCancelled(EtcdError):
    """The caller asked to stop (the controller is shutting the loop down)."""


def _never() -> bool:
    return False


def _verdict(snapshot: Snapshot, result: str, exc: Optional[BaseException] = None) -> SnapshotVerdict:
    kind = snapshot.name.kind if snapshot.name else 'object'
    if exc is None:
        return SnapshotVerdict(label(snapshot), kind, result)
    return SnapshotVerdict(label(snapshot), kind, result, getattr(exc, 'check', '') or None, str(exc))


def _failure(snapshot: Snapshot, exc: EtcdError) -> SnapshotVerdict:
    """Corrupt when a content check failed; unrestorable when the data is right but cannot be restored."""
    corrupt = isinstance(exc, SnapshotInvalid) and exc.check not in ('', CHECK_REPLAY)
    return _verdict(snapshot, CORRUPT if corrupt else UNRESTORABLE, exc)


def _hash_check(recorded: Optional[Dict[str, Any]], actual: Dict[str, int]) -> Dict[str, Any]:
    """Compare HashKV at the recorded revision; `match` None when the comparison cannot be made."""
    if not recorded or recorded.get('hash') is None:
        return {'match': None, 'note': 'the snapshot records no HashKV (taken before it was recorded, or by '
                                       'etcd-backup-restore): compared the revision only'}
    if int(recorded.get('compact_revision', 0)) != actual['compact_revision']:
        return {'match': None, 'expected': int(recorded['hash']), 'restored': actual['hash'],
                'note': 'compacted at revision %s when HashKV was recorded, %d in the snapshot: the hashes cover '
                        'different histories' % (recorded.get('compact_revision'), actual['compact_revision'])}
    return {'match': int(recorded['hash']) == actual['hash'], 'expected': int(recorded['hash']),
            'restored': actual['hash'], 'revision': int(recorded['revision'])}


def verify_chain(store: SnapshotStore, base: Snapshot, *, work_dir: str, apply_deltas: bool = True,
                 tool: Optional[str] = None, etcd_binary: Optional[str] = None,
                 clock: Callable[[], float] = time.monotonic,
                 should_stop: Callable[[], bool] = _never) -> Dict[str, Any]:
    """Restore `base` (+ its deltas) into a throwaway etcd and compare; {restorable, verdicts, ...}."""
    began = clock()
    snapshots = store.list()
    chain = plan_chain(snapshots, base=base) if apply_deltas else None
    deltas = chain.deltas if chain else []
    verdicts: List[SnapshotVerdict] = []
    outcome: Dict[str, Any] = {'snapshot': label(base), 'deltas': [label(d) for d in deltas],
                               'expected_revision': chain.tip if chain else base.name.end_revision,
                               'restored_revision': None, 'hash_kv': None, 'gap': chain.gap if chain else '',
                               'steps': {}}
    work = tempfile.mkdtemp(prefix='steward-verify-restore-', dir=work_dir)
    try:
        step = clock()
        try:
            path, verification = fetch_full(store, base, work, tool)
        except SnapshotInvalid as exc:
            verdicts.append(_failure(base, exc))
            raise ChainFailed() from exc
        outcome['steps']['read and check'] = round(clock() - step, 3)
        outcome['checks'] = verification['checks']
        step = clock()
        try:
            if should_stop():
                raise VerificationCancelled('restore verification of %s was stopped' % label(base))
            with ScratchEtcd(work, etcd_binary, tool).start(path) as scratch:
                outcome['steps']['restore and start'] = round(clock() - step, 3)
                _compare(base, scratch, outcome, verdicts, deltas, store, work, clock, should_stop)
        except (ChainFailed, VerificationCancelled):
            raise
        except EtcdError as exc:  # the restore tool or the scratch etcd refused the data
            verdicts.append(_failure(base, exc))
            raise ChainFailed() from exc
    except ChainFailed:
        pass
    finally:
        shutil.rmtree(work, ignore_errors=True)
    done = {v.name for v in verdicts}
    verdicts += [_verdict(s, NOT_CHECKED) for s in [base] + deltas if label(s) not in done]
    outcome['verdicts'] = [v.to_dict() for v in verdicts]
    outcome['restorable'] = bool(verdicts) and verdicts[0].result == INTACT
    outcome['complete'] = all(v.result == INTACT for v in verdicts) and not outcome['gap']
    outcome['duration'] = round(clock() - began, 3)
    return outcome


def _compare(base: Snapshot, scratch: ScratchEtcd, outcome: Dict[str, Any], verdicts: List[SnapshotVerdict],
             deltas: List[Snapshot], store: SnapshotStore, work: str, clock: Callable[[], float],
             should_stop: Callable[[], bool]) -> None:
    step = clock()
    client = scratch.transactions()
    try:
        revision = scratch.revision()
        expected = base.name.end_revision
        # an empty database reports revision 0 in its name, but etcd starts counting at 1
        if revision != expected and not (expected == 0 and revision == 1):
            exc = SnapshotInvalid('restored to revision %d, the snapshot records %d' % (revision, expected),
                                  CHECK_REVISION)
            verdicts.append(_failure(base, exc))
            raise ChainFailed()
        recorded = (base.metadata or {}).get('hash_kv')
        at = int(recorded['revision']) if recorded and recorded.get('revision') else revision
        # Nothing recorded (a compacted snapshot, one of etcd-backup-restore): no hash to compare, so no HashKV call -
        # at the restored revision it fails on a compacted snapshot (etcd: a revision <= the compact revision is
        # "compacted"), which made every compacted backup unverifiable.
        wanted = bool(recorded) and recorded.get('hash') is not None
        actual = hash_kv(scratch.connection, scratch.client_url, at, TXN_TIMEOUT) if wanted else {}
        outcome['hash_kv'] = _hash_check(recorded, actual)
        if outcome['hash_kv']['match'] is False:
            exc = SnapshotInvalid('HashKV at revision %d is %d restored, %d recorded from the cluster' % (
                at, outcome['hash_kv']['restored'], outcome['hash_kv']['expected']), CHECK_HASH_KV)
            verdicts.append(_failure(base, exc))
            raise ChainFailed()
        verdicts.append(_verdict(base, INTACT))
        outcome['restored_revision'] = revision
        outcome['steps']['compare'] = round(clock() - step, 3)
        step = clock()
        for delta in deltas:
            if should_stop():
                raise VerificationCancelled('restore verification of %s was stopped' % label(base))
            try:
                events = fetch_delta(store, delta, work)
                revision = apply_events(client, events, revision)['revision']
            except SnapshotInvalid as exc:
                verdicts.append(_failure(delta, exc))
                raise ChainFailed()
            verdicts.append(_verdict(delta, INTACT))
            outcome['restored_revision'] = revision
        if deltas:
            outcome['steps']['replay deltas'] = round(clock() - step, 3)
    finally:
        client.close()


def verify_backup(store: SnapshotStore, *, work_dir: Optional[str] = None, snapshot: Optional[str] = None,
                  apply_deltas: bool = True, check_older: bool = True, tool: Optional[str] = None,
                  etcd_binary: Optional[str] = None, clock: Callable[[], float] = time.monotonic,
                  should_stop: Callable[[], bool] = _never) -> Dict[str, Any]:
    """Prove the newest full snapshot (or the named one) and its deltas restore. Returns
    {ok, snapshot, ..., verdicts, fallback}: `ok` is False when the newest is not restorable;
    `fallback` names the newest older full snapshot that is (with check_older), or None."""
    snapshots = store.list()
    fulls = [s for s in snapshots if s.valid and s.is_full]
    if snapshot:
        wanted = snapshot.rsplit('/', 1)[-1]
        fulls = [s for s in fulls if label(s) == wanted or s.key == snapshot]
        if not fulls:
            raise SnapshotNotFound('snapshot %r is not a usable full snapshot in %s' % (snapshot, store.url))
    if not fulls:
        raise SnapshotNotFound('the store %s holds no usable full snapshot: there is nothing to restore' % store.url)
    newest = verify_chain(store, fulls[-1], work_dir=work_dir or tempfile.gettempdir(), apply_deltas=apply_deltas,
                          tool=tool, etcd_binary=etcd_binary, clock=clock, should_stop=should_stop)
    result = dict(newest, ok=newest['complete'], fallback=None, older=[], would_restore=_would_restore(newest))
    if newest['restorable'] or not check_older or snapshot:
        return result
    for candidate in reversed(fulls[:-1]):
        older = verify_chain(store, candidate, work_dir=work_dir or tempfile.gettempdir(), apply_deltas=apply_deltas,
                             tool=tool, etcd_binary=etcd_binary, clock=clock, should_stop=should_stop)
        result['older'].append({'snapshot': older['snapshot'], 'restorable': older['restorable'],
                                'restored_revision': older['restored_revision'], 'verdicts': older['verdicts']})
        if older['restorable']:
            result['fallback'] = older['snapshot']
            result['would_restore'] = _would_restore(older)
            break
    return result


def _would_restore(chain: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """What a recovery restores from this chain: the full snapshot and the deltas up to the first failure."""
    if not chain['restorable']:
        return None
    intact = [v['name'] for v in chain['verdicts'][1:] if v['result'] == INTACT]
    return {'snapshot': chain['snapshot'], 'deltas': len(intact), 'last_delta': intact[-1] if intact else None,
            'revision': chain['restored_revision']}


def summary(result: Dict[str, Any]) -> str:
    """One line for logs, Events and the module's msg."""
    bad = [v for v in result['verdicts'] if v['result'] in (CORRUPT, UNRESTORABLE)]
    deltas = len(result['deltas'])
    head = '%s%s' % (result['snapshot'], ' + %d delta%s' % (deltas, '' if deltas == 1 else 's') if deltas else '')
    problems = ['%s is %s%s: %s' % (v['name'], v['result'], ' (%s)' % v['failed_check'] if v['failed_check'] else '',
                                    v['reason']) for v in bad]
    if result.get('gap'):
        problems.append('the deltas after it have a gap: %s' % result['gap'])
    if not problems:
        hashed = result['hash_kv'] or {}
        return '%s restored to revision %s in %.1fs%s' % (
            head, result['restored_revision'], result['duration'],
            '; HashKV matches the cluster' if hashed.get('match') else '; %s' % hashed.get('note', ''))
    if result['restorable']:
        return 'the newest backup %s restores only up to revision %s: %s' % (
            head, result['restored_revision'], '; '.join(problems))
    fallback = ('; the newest restorable is %s' % result['fallback']) if result.get('fallback') else \
        ('; no older full snapshot restores either' if result.get('older') else '')
    return 'the newest backup %s is not restorable: %s%s' % (head, '; '.join(problems), fallback)
