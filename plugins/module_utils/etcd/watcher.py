# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A watch on every key from a given revision, delivered as whole watch responses.

pyetcd calls back on its own thread; responses go into a queue that the backup loop drains, so a
slow store never blocks the watch stream (etcd would otherwise buffer, then cancel a slow watcher).
"""

from __future__ import annotations

import dataclasses
import queue
import time
from typing import Any, List, Optional

from ansible_collections.steward.cluster.plugins.module_utils.etcd.client import EtcdConnection, grpc_client
from ansible_collections.steward.cluster.plugins.module_utils.etcd.delta import Event, event_from_pb, rfc3339_nano
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import EtcdError, EtcdUnavailable

try:
    from pyetcd.exceptions import RevisionCompactedError
except ImportError:  # reported through grpc_client
    RevisionCompactedError = None

ALL_KEYS = b'\0'


class HistoryCompacted(EtcdError):
    """The revision to resume from is compacted away: only a new full snapshot can continue the chain."""

    def __init__(self, message: str, compact_revision: int):
        super().__init__(message)
        self.compact_revision = compact_revision


@dataclasses.dataclass
class WatchBatch:
    events: List[Event]
    header_revision: int
    received: float


class Watcher:
    """Watch all keys from `start_revision` on one endpoint."""

    def __init__(self, conn: EtcdConnection, endpoint: str, start_revision: int, clock=time.time):
        self.conn = conn
        self.endpoint = endpoint
        self.start_revision = start_revision
        self.clock = clock
        self.queue: 'queue.Queue[Any]' = queue.Queue()
        self._client: Any = None
        self._watch_id: Optional[int] = None

    def start(self) -> 'Watcher':
        self._client = grpc_client(self.conn, self.endpoint, timeout=self.conn.timeout)
        try:
            self._watch_id = self._client.add_watch_callback(
                ALL_KEYS, self._callback, range_end=ALL_KEYS, start_revision=self.start_revision, progress_notify=True)
        except Exception as exc:  # pylint: disable=broad-except
            self.close()
            raise self._translate(exc) from exc
        return self

    def _callback(self, response: Any) -> None:
        if isinstance(response, Exception):
            self.queue.put(self._translate(response))
            return
        received = self.clock()
        stamp = rfc3339_nano(received)
        events = [event_from_pb(e, stamp) for e in response.events]
        self.queue.put(WatchBatch(events, int(response.header.revision), received))

    def _translate(self, exc: BaseException) -> EtcdError:
        if RevisionCompactedError is not None and isinstance(exc, RevisionCompactedError):
            rev = int(getattr(exc, 'compacted_revision', 0) or 0)
            return HistoryCompacted('cannot watch from revision %d: etcd compacted its history up to %d' % (
                self.start_revision, rev), rev)
        if isinstance(exc, EtcdError):
            return exc
        return EtcdUnavailable('watch on %s from revision %d failed: %s: %s' % (
            self.endpoint, self.start_revision, exc.__class__.__name__, exc))

    def get(self, timeout: float) -> Optional[Any]:
        """The next WatchBatch or error, or None after `timeout` seconds."""
        try:
            return self.queue.get(timeout=max(timeout, 0))
        except queue.Empty:
            return None

    def close(self) -> None:
        client, self._client = self._client, None
        if client is None:
            return
        try:
            if self._watch_id is not None:
                client.cancel_watch(self._watch_id)
        except Exception:  # pylint: disable=broad-except
            pass
        try:
            client.close()
        except Exception:  # pylint: disable=broad-except
            pass
