# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Receive a member's snapshot stream into a private file, hashing and writing back to disk on the fly.

etcd sends a snapshot as ~32 KiB gRPC messages; wire/http2.py reads them off the socket into one reused
buffer. The blob bytes of each read (a list of slices of that buffer, up to 1 MiB) are written with one
writev and fed to one sha256 (verify.SnapshotHasher, which yields both the trailer check and the whole
file's sha256) on the receiving thread: no copy in user space, and the file is never read back. A
write-back thread calls fdatasync every SYNC_EVERY bytes, so the disk writes while the network still
delivers and the final fsync finds almost nothing left to wait for.
"""

from __future__ import annotations

import os
import queue
import threading
from typing import Any, Callable, List, Optional, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.common.deadline import Deadline
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.client import EtcdConnection
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import EtcdError, StoreError
from ansible_collections.steward.cluster.plugins.module_utils.etcd.wire.http2 import GrpcCall, GrpcError, wrap_error
from ansible_collections.steward.cluster.plugins.module_utils.etcd.wire.protobuf import STREAMED, FieldReader
from ansible_collections.steward.cluster.plugins.module_utils.common.files import FILE_MODE
from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot.verify import SnapshotHasher

SNAPSHOT_METHOD = '/etcdserverpb.Maintenance/Snapshot'
REMAINING_BYTES, BLOB = 2, 3  # SnapshotResponse fields
SYNC_EVERY = 64 * 1024 * 1024
WINDOW = 64 * 1024 * 1024  # etcd never waits for us: the disk is the limit, not flow control
IOV_MAX = 1024


class _Worker:
    """One background thread consuming a queue; its first error is re-raised by `finish`."""

    def __init__(self, name: str, step: Any):
        self.step = step
        self.queue: 'queue.Queue[Any]' = queue.Queue()
        self.error: Optional[BaseException] = None
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while True:
            item = self.queue.get()
            if item is None:
                return
            if self.error is None:
                try:
                    self.step(item)
                except BaseException as exc:  # pylint: disable=broad-except
                    self.error = exc

    def put(self, item: Any) -> None:
        self.queue.put(item)

    def finish(self) -> None:
        self.queue.put(None)
        self.thread.join()
        if self.error is not None:
            raise self.error


class SnapshotSink:
    """Where the blob goes: see the module docstring. `tail` = (bytes, callback): the callback is called once
    that many bytes are written (or by `reached_tail`, at the end)."""

    def __init__(self, fd: int, hasher: SnapshotHasher, tail: Optional[Tuple[int, Callable[[], None]]] = None):
        self.fd = fd
        self.hasher = hasher
        self._tail = tail
        self._written = 0
        self._unsynced = 0
        self._syncing = _Worker('snapshot-writeback', lambda _: os.fdatasync(fd))

    def write(self, views: List[Any]) -> None:
        """Write and hash `views` (bytes-like, in order)."""
        for start in range(0, len(views), IOV_MAX):
            group = views[start:start + IOV_MAX]
            size = sum(len(v) for v in group)
            done = os.writev(self.fd, group)
            while done < size:  # a short write (a signal, a full disk): write the rest
                rest = memoryview(b''.join(group))[done:]
                done += os.write(self.fd, rest)
            for view in group:
                self.hasher.update(view)
            self._written += size
            self._unsynced += size
        if self._tail is not None and 0 < self._tail[0] <= self._written:
            self.reached_tail()
        if self._unsynced >= SYNC_EVERY and self._syncing.queue.empty():
            self._unsynced = 0
            self._syncing.put(True)

    def reached_tail(self) -> None:
        """Call the tail callback once (when `tail[0]` bytes are written, or at the end)."""
        if self._tail is not None:
            callback, self._tail = self._tail[1], None
            callback()

    def abort(self) -> None:
        """The stream failed: stop the write-back thread; the caller deletes the file."""
        self._syncing.error = self._syncing.error or RuntimeError('aborted')
        self._syncing.put(None)
        self._syncing.thread.join()

    def finish(self) -> None:
        """Wait for the write-back thread, fsync; re-raise its error."""
        self._syncing.finish()
        os.fsync(self.fd)


class _Messages:
    """SnapshotResponse messages as they arrive: blob slices collected for the sink, remaining_bytes kept
    (etcd counts down to 0: a stream that ends above 0 was cut short)."""

    def __init__(self) -> None:
        self.blobs: List[memoryview] = []
        self.remaining = 0
        self.announced = 0  # remaining_bytes of the last whole message
        self.count = 0
        self.reader = FieldReader({BLOB: STREAMED}, self._varint, lambda field, data: None, self._blob, self._end)

    def _varint(self, field: int, value: int) -> None:
        if field == REMAINING_BYTES:
            self.remaining = value

    def _blob(self, _field: int, view: memoryview) -> None:
        self.blobs.append(view)

    def _end(self) -> None:
        self.count += 1
        self.announced, self.remaining = self.remaining, 0  # proto3 leaves a 0 out: absent means 0


def stream_snapshot(conn: EtcdConnection, endpoint: str, path: str, timeout: float,
                    tail: Optional[Tuple[int, Callable[[], None]]] = None) -> SnapshotHasher:
    """Stream the member's snapshot into the new private file `path` and fsync it, within `timeout`
    seconds for the whole stream. `tail` = (bytes, callback): the callback is called once that many bytes
    are written, or when the last byte arrived if fewer were or bytes is 0 (work that should overlap the
    stream's tail and the final fsync)."""
    hasher = SnapshotHasher()
    call = GrpcCall(conn, endpoint, SNAPSHOT_METHOD, window=WINDOW, deadline=Deadline(timeout, 'the snapshot stream'))
    messages = _Messages()
    fd = None
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, 'O_CLOEXEC', 0), FILE_MODE)
        os.fchmod(fd, FILE_MODE)
        sink = SnapshotSink(fd, hasher, tail)
        try:
            call.start(b'')  # SnapshotRequest has no fields
            while True:
                views = call.receive()
                if views is None:
                    break
                for view in views:
                    messages.reader.feed(view)
                if messages.blobs:
                    sink.write(messages.blobs)
                    messages.blobs.clear()
            if messages.reader.message_left >= 0 or messages.announced or not messages.count:
                raise GrpcError('the snapshot stream from %s ended early: %d bytes, %d more announced' % (
                    endpoint, hasher.size, messages.announced))
        except BaseException:
            sink.abort()
            raise
        sink.reached_tail()
        sink.finish()
    except OSError as exc:
        raise StoreError('cannot write snapshot temp file %s: %s' % (path, exc)) from exc
    except EtcdError:
        raise
    except Exception as exc:  # pylint: disable=broad-except  # anything else the stream raised
        raise wrap_error(endpoint, 'the snapshot stream', exc) from exc
    finally:
        call.close()
        if fd is not None:
            os.close(fd)
    return hasher
