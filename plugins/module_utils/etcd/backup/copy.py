# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Copying backups from one store to another: etcd-druid's `EtcdCopyBackupsTask` (seed 004, ETCD-46), the work
of `etcdbrctl copy`.

A *backup* is a full snapshot and the delta snapshots after it, up to the next full one: what a restore needs.
`plan_copy` (pure) picks the backups to copy, newest first: created within `max_backup_age` days (default: all),
at most `max_backups` of them (default: all); of those, every snapshot the target does not already hold valid.
`copy_backups` copies them oldest first, so the target is in restore order at every moment: a full snapshot
lands before the deltas that build on it. Every object is verified against its recorded sha256 after it is
read and before it is published; the target's metadata is the source's, so the copy verifies the same way.
Invalid source snapshots are never copied; they are reported, with their backup (a chain with an invalid link
is copied up to the link). `wait_for_final` is druid's `waitForFinalSnapshot`: wait until the source's newest
full snapshot is a final one (taken at hibernation, `.final`), or until the timeout, then copy anyway.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
import time
from typing import Any, Callable, Dict, List, Optional

from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import EtcdError, SnapshotInvalid
from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot.fetch import label
from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot.verify import hash_file
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.store import Snapshot, SnapshotStore

DAY = 86400.0


class CopyError(EtcdError):
    """A copy cannot be planned or done (bad limits, a store that fails); names the field or the snapshot."""


@dataclasses.dataclass(frozen=True)
class CopyPlan:
    """`copy`: the snapshots to copy, oldest first; `present`: selected but already valid in the target;
    `invalid`: selected source snapshots that are not valid (never copied), with why; `backups`: how many
    backups (full snapshots) were selected."""
    copy: List[Snapshot]
    present: List[str]
    invalid: List[Dict[str, str]]
    backups: int


def _check_limit(value: Optional[int], field: str) -> Optional[int]:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0 or value > 0xFFFFFFFF:
        raise CopyError('%s: %r is not a uint32' % (field, value))
    return value


def backups_of(snapshots: List[Snapshot]) -> List[List[Snapshot]]:
    """The store's listing (restore order) cut into backups: each full snapshot with the deltas after it."""
    backups: List[List[Snapshot]] = []
    for snapshot in snapshots:
        if snapshot.name is None:
            continue
        if snapshot.is_full:
            backups.append([snapshot])
        elif backups:
            backups[-1].append(snapshot)
    return backups


def plan_copy(source: List[Snapshot], target: List[Snapshot], *, now: float, max_backup_age: Optional[int] = None,
              max_backups: Optional[int] = None) -> CopyPlan:
    """What to copy; `max_backup_age` in days, `max_backups` a count, both as druid's uint32 fields (0 backups
    is a valid request for none; None means no limit)."""
    max_backup_age = _check_limit(max_backup_age, 'maxBackupAge')
    max_backups = _check_limit(max_backups, 'maxBackups')
    chosen: List[List[Snapshot]] = []
    for backup in reversed(backups_of(source)):
        if max_backups is not None and len(chosen) >= max_backups:
            break
        if max_backup_age is not None and now - backup[0].name.created > max_backup_age * DAY:
            break  # older ones are older still
        chosen.append(backup)
    have = {str(s.name) for s in target if s.name is not None and s.valid}
    copy: List[Snapshot] = []
    present: List[str] = []
    invalid: List[Dict[str, str]] = []
    for backup in reversed(chosen):
        for snapshot in backup:
            if not snapshot.valid:
                invalid.append({'name': label(snapshot), 'status': snapshot.status,
                                'reason': snapshot.problem or snapshot.status})
                break  # the deltas after a broken link cannot be restored from: copying them would mislead
            if str(snapshot.name) in have:
                present.append(str(snapshot.name))
            else:
                copy.append(snapshot)
    return CopyPlan(copy, present, invalid, len(chosen))


def copy_backups(source: SnapshotStore, target: SnapshotStore, plan: CopyPlan, *, work_dir: Optional[str] = None,
                 check_mode: bool = False) -> Dict[str, Any]:
    """Copy the planned snapshots, oldest first; each verified against its recorded sha256 and size before it is
    published in the target, data then metadata (the store's two phases). Stops at the first failure, naming it;
    what was copied before stays copied (each object is complete and valid on its own)."""
    result: Dict[str, Any] = {'changed': bool(plan.copy), 'copied': [], 'present': list(plan.present),
                              'invalid': list(plan.invalid), 'backups': plan.backups}
    if check_mode:
        result['copied'] = [label(s) for s in plan.copy]
        return result
    for snapshot in plan.copy:
        work = tempfile.mkdtemp(prefix='steward-copy-', dir=work_dir)
        try:
            path = os.path.join(work, 'data')
            source.fetch(snapshot, path)
            meta = dict(snapshot.metadata or {})
            if meta.get('sha256'):
                digests = hash_file(path)
                if digests.sha256 != str(meta['sha256']).lower() or (
                        meta.get('size') is not None and digests.size != int(meta['size'])):
                    raise SnapshotInvalid('snapshot %s read from %s does not match its metadata (sha256 %s, %d bytes)'
                                          % (label(snapshot), source.url, digests.sha256, digests.size), 'sha256')
            published = target.publish_data(snapshot.name, path)
            target.publish_metadata(published, dict(meta, copied_from=source.url))
            result['copied'].append(label(snapshot))
        except (EtcdError, OSError) as exc:
            raise CopyError('copying %s from %s to %s failed after %d copied: %s' % (
                label(snapshot), source.url, target.url, len(result['copied']), exc)) from exc
        finally:
            for name in os.listdir(work):
                os.remove(os.path.join(work, name))
            os.rmdir(work)
    return result


def wait_for_final(source: SnapshotStore, timeout: Optional[float], *, clock: Callable[[], float] = time.monotonic,
                   sleep: Callable[[float], None] = time.sleep, poll: float = 5.0) -> Dict[str, Any]:
    """druid's waitForFinalSnapshot: wait until the newest full snapshot of `source` is a final one; on `timeout`
    seconds go on anyway (None or 0: wait forever, as druid). {final: name or None, waited: seconds, timed_out}."""
    start = clock()
    while True:
        newest = source.latest_valid(full_only=True)
        if newest is not None and newest.name.final:
            return {'final': label(newest), 'waited': clock() - start, 'timed_out': False}
        if timeout and clock() - start >= timeout:
            return {'final': None, 'waited': clock() - start, 'timed_out': True}
        sleep(poll if not timeout else max(0.0, min(poll, timeout - (clock() - start))))
