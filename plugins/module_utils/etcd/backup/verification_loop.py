# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Scheduled restore verification beside the backup loop (EtcdBackup spec.restoreVerification).

A restore of the newest backup into a throwaway etcd (backup_verify.py) takes as long as a restore, so
it runs on its own thread while the backup loop keeps taking snapshots; at most one runs at a time.
It runs on its cron schedule (UTC), and soon after start-up when the last run is older than the last
scheduled time (a controller that was down missed it), once the store holds a full snapshot.
Stopping cancels a run between its steps; the throwaway etcd and its data are always removed.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable, Dict, Optional

from ansible_collections.steward.cluster.plugins.module_utils.etcd.backup.backup_verify import summary, verify_backup
from ansible_collections.steward.cluster.plugins.module_utils.etcd.backup.cron import CronSchedule
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import EtcdError
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.store import SnapshotStore

log = logging.getLogger('steward.etcd.verify')

START_DELAY = 60.0  # after start-up, a missed run waits this long (the first full snapshot comes first)


class RestoreVerifier:
    """`poll(now, has_full)` from the backup loop's thread; `stop()` when the loop ends."""

    def __init__(self, store: SnapshotStore, schedule: CronSchedule, *, work_dir: str,
                 report: Callable[[Dict[str, Any]], None], clock: Callable[[], float] = time.time,
                 last_run: Optional[float] = None, tool: Optional[str] = None, etcd_binary: Optional[str] = None,
                 start_delay: float = START_DELAY):
        self.store = store
        self.schedule = schedule
        self.work_dir = work_dir
        self.report = report
        self.clock = clock
        self.tool = tool
        self.etcd_binary = etcd_binary
        self._cancel = threading.Event()
        self._thread: Optional[threading.Thread] = None
        now = clock()
        missed = schedule.previous_at_or_before(now)
        if last_run is None or (missed is not None and last_run < missed):
            self.next_run = now + start_delay
        else:
            self.next_run = schedule.next_after(now)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def request(self) -> None:
        """Run as soon as possible (on demand), whatever the schedule says."""
        self.next_run = 0.0

    def poll(self, now: float, has_full: bool) -> bool:
        """Start a run when one is due, none is running and there is a full snapshot; True when started."""
        if now < self.next_run or self.running or not has_full or self._cancel.is_set():
            return False
        self.next_run = self.schedule.next_after(now)
        self._thread = threading.Thread(target=self._run, name='restore-verification', daemon=True)
        self._thread.start()
        return True

    def _run(self) -> None:
        began = self.clock()
        try:
            result = verify_backup(self.store, work_dir=self.work_dir, tool=self.tool, etcd_binary=self.etcd_binary,
                                   should_stop=self._cancel.is_set)
            result['msg'] = summary(result)
        except EtcdError as exc:
            if self._cancel.is_set():
                return
            result = {'ok': False, 'msg': 'restore verification could not run: %s' % exc, 'snapshot': None,
                      'restored_revision': None, 'deltas': [], 'verdicts': [], 'duration': self.clock() - began}
        except Exception as exc:  # pylint: disable=broad-except
            log.exception('restore verification crashed')
            result = {'ok': False, 'msg': 'restore verification crashed: %s: %s' % (exc.__class__.__name__, exc),
                      'snapshot': None, 'restored_revision': None, 'deltas': [], 'verdicts': [],
                      'duration': self.clock() - began}
        result['finished'] = self.clock()
        self.report(result)

    def stop(self, timeout: Optional[float] = None) -> None:
        self._cancel.set()
        if self._thread is not None:
            self._thread.join(timeout)
