"""On-demand full snapshots in the backup loop (engine side, real etcd + a local store): a request's token
comes back through `requests_served` once a full snapshot is stored, never by matching the reason's text."""

from __future__ import annotations

import threading

from ansible_collections.steward.cluster.plugins.module_utils.etcd.backup.backup_loop import (
    KIND_FULL, BackupListener, BackupPolicy, BackupRunner)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.client import EtcdConnection
from ansible_collections.steward.cluster.plugins.module_utils.etcd.backup.cron import parse_cron
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.local_store import LocalStore


class Recorder(BackupListener):
    def __init__(self):
        self.events = []

    def snapshot_taken(self, kind, snapshot, duration, reason):
        self.events.append(('taken', kind, reason))

    def snapshot_failed(self, kind, error, duration):
        self.events.append(('failed', kind, error))

    def requests_served(self, tokens):
        self.events.append(('served', tokens))


def test_a_request_token_is_served_by_the_next_stored_full_snapshot(tmp_path, etcd1):
    recorder = Recorder()
    conn = EtcdConnection(endpoints=tuple(etcd1.endpoints))
    policy = BackupPolicy(full_schedule=parse_cron('0 0 1 1 *'), delta_period=0.0, gc_period=3600.0)
    runner = BackupRunner(conn, LocalStore(str(tmp_path / 'store')), policy, work_dir=str(tmp_path / 'work'),
                          listener=recorder)
    stop = threading.Event()
    (tmp_path / 'work').mkdir()
    assert runner._initialize()
    runner.step(stop)                       # the empty store needs a first full snapshot: no request served
    assert recorder.events == [('taken', KIND_FULL, 'there is no valid full snapshot')]

    recorder.events.clear()
    runner.request_full('wanted by an operator', 'token-1')   # reason text says nothing about "on demand"
    runner.request_full('and by a second one', 'token-2')
    runner.step(stop)
    assert recorder.events == [('taken', KIND_FULL, 'wanted by an operator; and by a second one'),
                               ('served', ('token-1', 'token-2'))]

    recorder.events.clear()
    runner.request_full('no token')
    runner.step(stop)
    assert recorder.events == [('taken', KIND_FULL, 'no token')]
