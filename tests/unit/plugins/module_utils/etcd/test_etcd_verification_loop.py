"""When scheduled restore verification runs: on its cron, soon after a start that missed a run, on demand,
only with a full snapshot in the store, one at a time, and never again once stopped."""

from __future__ import annotations

import calendar
import threading

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.etcd.backup.cron import parse_cron
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import StoreError
from ansible_collections.steward.cluster.plugins.module_utils.etcd.backup.verification_loop import RestoreVerifier

DAILY = parse_cron('30 0 * * *')
T = float(calendar.timegm((2026, 1, 2, 12, 0, 0)))  # noon: the run of 00:30 is past


class UnreadableStore:
    """A store whose listing blocks until released, then fails (verification reports, never raises)."""

    url = '/nowhere'

    def __init__(self):
        self.release = threading.Event()
        self.calls = 0

    def list(self):
        self.calls += 1
        self.release.wait(5)
        raise StoreError('cannot list /nowhere')


def verifier(last_run, store=None, reports=None):
    clock = [T]
    reports = [] if reports is None else reports
    v = RestoreVerifier(store or UnreadableStore(), DAILY, work_dir='/tmp', report=reports.append,
                        clock=lambda: clock[0], last_run=last_run, start_delay=60)
    return v, clock, reports


@pytest.mark.parametrize('last_run, first', [
    (None, T + 60),                                    # never ran: soon after start
    (T - 86400, T + 60),                               # the run of today 00:30 was missed
    (float(calendar.timegm((2026, 1, 2, 0, 31, 0))), float(calendar.timegm((2026, 1, 3, 0, 30, 0)))),  # done today
], ids=['never', 'missed', 'done-today'])
def test_first_run(last_run, first):
    v, _clock, _reports = verifier(last_run)
    assert v.next_run == first


def test_runs_when_due_with_a_full_snapshot_one_at_a_time_and_reports_failures():
    store = UnreadableStore()
    v, clock, reports = verifier(None, store)
    assert not v.poll(T + 59, has_full=True)          # not due yet
    assert not v.poll(T + 61, has_full=False)         # due, but nothing to verify
    assert v.poll(T + 61, has_full=True) and v.running
    assert v.next_run == float(calendar.timegm((2026, 1, 3, 0, 30, 0)))
    v.request()
    assert not v.poll(T + 62, has_full=True)          # one at a time, even on demand
    store.release.set()
    v._thread.join(5)
    assert reports and reports[0]['ok'] is False and 'cannot list /nowhere' in reports[0]['msg']
    assert v.poll(T + 63, has_full=True)              # the on-demand request runs next
    v.stop(5)
    assert store.calls == 2 and not v.poll(T + 10 ** 6, has_full=True)  # stopped: never again
