# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Rebuild one snapshot from a full snapshot plus delta snapshots.

`etcdutl snapshot restore` cannot apply deltas, so the full snapshot is restored into a scratch
single-member etcd on loopback, the delta events are replayed into it one revision per
transaction, and a new snapshot is streamed out of it. Used by restore (full + deltas -> the data
dir) and by backup compaction (full + deltas -> a new full snapshot in the store).

The replay checks what etcd-backup-restore checks and more: every transaction must land on exactly
the revision the event was recorded at (etcd gives every write transaction one revision, so a
restored store continues at the snapshot's revision); a missing or doubled event would shift
every revision after it and fails the rebuild instead of producing a subtly different database.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import shutil
import socket
import tempfile
from typing import Any, Callable, Dict, Iterable, List, Optional

from ansible_collections.steward.cluster.plugins.module_utils.etcd.member.binaries import find_binary
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.client import EtcdConnection, Gateway, b64
from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot.delta import (
    EVENT_DELETE,
    Event,
    group_by_revision,
)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import EtcdError, SnapshotInvalid
from ansible_collections.steward.cluster.plugins.module_utils.etcd.member.process import (
    ProcessError, ProcessExited, ProcessSpec, start_process, stop_process)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.member.restore_tool import run_restore_tool
from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot.snapshot_stream import stream_snapshot
from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot.verify import verify_snapshot_file
from ansible_collections.steward.cluster.plugins.module_utils.etcd.wire.calls import DELETE, PUT, Transactions, txn_request

REPLAY_NAME = 'steward-replay'
CHECK_REPLAY = 'replay'      # events did not land on their recorded revisions: the chain is unrestorable
CHECK_REVISION = 'revision'  # the restored data is not at the revision the snapshot records
TXN_TIMEOUT = 30.0
# A scratch etcd must accept whatever the real one held: the quota only limits the replay's size.
QUOTA_BYTES = 8 * 1024 * 1024 * 1024


@dataclasses.dataclass
class ReplayResult:
    path: str                 # the rebuilt snapshot file
    verification: Dict[str, Any]
    base_revision: int
    revision: int             # last revision applied
    events: int               # events applied
    transactions: int
    compacted: bool


_RANDOM = random.SystemRandom()   # unaffected by a caller that seeds the global generator


def _loopback_port() -> int:
    """A free loopback port for the scratch etcd, below the kernel's ephemeral range when there is room.

    Ports in that range are handed to every outgoing connection, so one found free there can be taken
    before etcd binds it; below it only another explicit choice can collide (start() then tries again)."""
    try:
        with open('/proc/sys/net/ipv4/ip_local_port_range') as f:
            ephemeral_low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        ephemeral_low = 0
    for _attempt in range(100):
        port = _RANDOM.randrange(20000, ephemeral_low) if ephemeral_low > 21000 else 0
        with socket.socket() as s:
            try:
                s.bind(('127.0.0.1', port))
            except OSError:
                continue
            return s.getsockname()[1]
    raise ProcessError('no free loopback port for the scratch etcd in 100 tries')


class ScratchEtcd:
    """A throw-away single-member etcd on loopback, over a data dir restored from a snapshot."""

    def __init__(self, work_dir: str, etcd_binary: Optional[str] = None, tool: Optional[str] = None):
        self.work_dir = tempfile.mkdtemp(prefix='replay-', dir=work_dir)
        self.binary = find_binary('etcd', etcd_binary)
        self.tool = tool
        self.client_url = self.peer_url = ''
        self.data_dir = os.path.join(self.work_dir, 'data')
        self.pid: Optional[int] = None

    def start(self, snapshot_path: str) -> 'ScratchEtcd':
        """Restore the snapshot and start etcd on fresh loopback ports. When etcd exits before it listens
        (typically a port taken between the check and its bind) the data dir is rebuilt on other ports and
        started once more; a second exit is the answer."""
        try:
            return self._start_once(snapshot_path)
        except ProcessExited:
            shutil.rmtree(self.data_dir, ignore_errors=True)
        return self._start_once(snapshot_path)

    def _start_once(self, snapshot_path: str) -> 'ScratchEtcd':
        self.client_url = 'http://127.0.0.1:%d' % _loopback_port()
        self.peer_url = 'http://127.0.0.1:%d' % _loopback_port()
        initial = '%s=%s' % (REPLAY_NAME, self.peer_url)
        run_restore_tool(snapshot_path, self.data_dir, name=REPLAY_NAME, initial_cluster=initial,
                         initial_cluster_token=REPLAY_NAME, initial_advertise_peer_urls=[self.peer_url], tool=self.tool)
        config = {
            'name': REPLAY_NAME, 'data-dir': self.data_dir,
            'listen-client-urls': self.client_url, 'advertise-client-urls': self.client_url,
            'listen-peer-urls': self.peer_url, 'initial-advertise-peer-urls': self.peer_url,
            'initial-cluster': initial, 'initial-cluster-token': REPLAY_NAME, 'initial-cluster-state': 'new',
            'quota-backend-bytes': QUOTA_BYTES, 'snapshot-count': 100000, 'max-request-bytes': 16 * 1024 * 1024,
        }
        config_file = os.path.join(self.work_dir, 'etcd.conf.yml')
        with open(config_file, 'w') as f:
            json.dump(config, f)  # JSON is YAML
        spec = ProcessSpec(pid_file=os.path.join(self.work_dir, 'etcd.pid'), binary=self.binary,
                           config_file=config_file, log_file=os.path.join(self.work_dir, 'etcd.log'),
                           wait_url=self.client_url, wait_timeout=60, die_with_parent=True)
        self.pid = start_process(spec)
        return self

    @property
    def connection(self) -> EtcdConnection:
        return EtcdConnection(endpoints=(self.client_url,), timeout=TXN_TIMEOUT)

    def revision(self) -> int:
        """The store's current revision (the header of a read)."""
        with Gateway(self.connection) as gateway:
            return int(gateway.call(self.client_url, '/v3/kv/range', {'key': b64(b'\0')})['header']['revision'])

    def transactions(self) -> Transactions:
        """Transactions on the scratch etcd, over one connection (close it, or use it as a context manager)."""
        return Transactions(self.connection, self.client_url, TXN_TIMEOUT)

    def stop(self) -> None:
        if self.pid is not None:
            try:
                stop_process(self.pid, stop_timeout=10)
            except EtcdError:
                pass
            self.pid = None
        shutil.rmtree(self.work_dir, ignore_errors=True)

    def __enter__(self) -> 'ScratchEtcd':
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def apply_events(client: Transactions, events: Iterable[Event], revision: int) -> Dict[str, int]:
    """Replay events on top of `revision`: one transaction per revision, each checked to land on it.

    Revisions at or below the current one are skipped (an overlapping delta); a revision beyond the
    next one is a gap and fails."""
    applied = transactions = 0
    for event_revision, group in group_by_revision(events):
        if event_revision <= revision:
            continue
        if event_revision != revision + 1:
            raise SnapshotInvalid('revision gap: the data is at revision %d but the next recorded event is at %d '
                                  '(events %d..%d are missing)' % (revision, event_revision, revision + 1,
                                                                   event_revision - 1), CHECK_REPLAY)
        landed = client.txn(txn_request((DELETE, e.key, None) if e.type == EVENT_DELETE else (PUT, e.key, e.value)
                                        for e in group))
        if landed != event_revision:
            raise SnapshotInvalid('revision inconsistency: events of revision %d landed at revision %d' % (
                event_revision, landed), CHECK_REPLAY)
        revision = landed
        applied += len(group)
        transactions += 1
    return {'revision': revision, 'events': applied, 'transactions': transactions}


def replay(base_path: str, base_revision: int, delta_events: Iterable[List[Event]], out_path: str, *,
           work_dir: str, compact: bool = False, etcd_binary: Optional[str] = None, tool: Optional[str] = None,
           snapshot_timeout: float = 900, on_progress: Optional[Callable[[int], None]] = None) -> ReplayResult:
    """Restore `base_path` (a verified full snapshot at `base_revision`) into a scratch etcd, apply each
    delta's events in order, optionally compact + defragment, and stream the result to `out_path`."""
    with ScratchEtcd(work_dir, etcd_binary, tool).start(base_path) as scratch:
        with scratch.transactions() as client:
            start = scratch.revision()
            # An empty database reports revision 0 in `snapshot status`, but etcd starts counting at 1.
            if start != base_revision and not (base_revision == 0 and start == 1):
                raise SnapshotInvalid('the restored full snapshot is at revision %d, its name says %d' % (
                    start, base_revision), CHECK_REVISION)
            revision, events, transactions = start, 0, 0
            for batch in delta_events:
                outcome = apply_events(client, batch, revision)
                revision = outcome['revision']
                events += outcome['events']
                transactions += outcome['transactions']
                if on_progress is not None:
                    on_progress(revision)
        if compact and revision > 1:
            with Gateway(scratch.connection) as gateway:
                gateway.call(scratch.client_url, '/v3/kv/compaction', {'revision': revision, 'physical': True})
                gateway.call(scratch.client_url, '/v3/maintenance/defragment', {})
        hasher = stream_snapshot(scratch.connection, scratch.client_url, out_path, snapshot_timeout)
    verification = verify_snapshot_file(out_path, tool=tool, digests=hasher.result())
    if verification['revision'] != revision:
        raise SnapshotInvalid('the rebuilt snapshot is at revision %d, expected %d' % (verification['revision'], revision),
                              CHECK_REPLAY)
    return ReplayResult(out_path, verification, base_revision, revision, events, transactions, compact)
