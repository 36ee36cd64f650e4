# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Receive a member's snapshot stream into a private file, hashing and writing back to disk on the fly.

etcd sends a snapshot in 32 KiB messages. Three things happen to them at once, on three threads that
each spend their time outside the GIL:
* the receiving thread batches messages into BATCH bytes and writes each batch with one system call
  (no user-space file buffer: one copy of the data, not two);
* a hashing thread feeds every batch to one sha256 (hashlib releases the GIL on large buffers), which
  yields both the trailer check and the whole file's sha256 (verify.SnapshotHasher);
* a write-back thread calls fdatasync every SYNC_EVERY bytes, so the disk writes while the network
  still delivers, and the final fsync finds almost nothing left to wait for.
The file is never read back: what was received is what was hashed.
"""

from __future__ import annotations

import os
import queue
import threading
from typing import Any, List, Optional

from ansible_collections.steward.cluster.plugins.module_utils.etcd.client import EtcdConnection, grpc_client
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import EtcdError, EtcdUnavailable, StoreError
from ansible_collections.steward.cluster.plugins.module_utils.etcd.private_files import FILE_MODE
from ansible_collections.steward.cluster.plugins.module_utils.etcd.verify import SnapshotHasher

BATCH = 4 * 1024 * 1024
SYNC_EVERY = 64 * 1024 * 1024
QUEUE_BATCHES = 16  # at most this many batches (64 MiB) wait for the hash thread


class _Worker:
    """One background thread consuming a queue; its first error is re-raised by `finish`."""

    def __init__(self, name: str, step: Any, size: int = 0):
        self.step = step
        self.queue: 'queue.Queue[Any]' = queue.Queue(maxsize=size)
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
    """The file-like target of pyetcd's snapshot(): see the module docstring."""

    def __init__(self, fd: int, hasher: SnapshotHasher):
        self.fd = fd
        self.hasher = hasher
        self._pending: List[bytes] = []
        self._pending_size = 0
        self._unsynced = 0
        self._hashing = _Worker('snapshot-hash', hasher.update, QUEUE_BATCHES)
        self._syncing = _Worker('snapshot-writeback', lambda _: os.fdatasync(fd))

    def write(self, data: bytes) -> int:
        self._pending.append(data)
        self._pending_size += len(data)
        if self._pending_size >= BATCH:
            self._flush()
        return len(data)

    def _flush(self) -> None:
        if not self._pending:
            return
        batch = self._pending[0] if len(self._pending) == 1 else b''.join(self._pending)
        self._pending, self._pending_size = [], 0
        view = memoryview(batch)
        while view:
            view = view[os.write(self.fd, view):]
        self._hashing.put(batch)
        self._unsynced += len(batch)
        if self._unsynced >= SYNC_EVERY and self._syncing.queue.empty():
            self._unsynced = 0
            self._syncing.put(True)

    def abort(self) -> None:
        """The stream failed: stop both threads; the caller deletes the file."""
        for worker in (self._hashing, self._syncing):
            worker.error = worker.error or RuntimeError('aborted')
            worker.put(None)
            worker.thread.join()

    def finish(self) -> None:
        """Write and hash what is left, wait for both threads, fsync; re-raise a thread's error."""
        try:
            self._flush()
        finally:
            self._hashing.finish()
            self._syncing.finish()
        os.fsync(self.fd)


def stream_snapshot(conn: EtcdConnection, endpoint: str, path: str, timeout: float) -> SnapshotHasher:
    """Stream the member's snapshot into the new private file `path` and fsync it; a fresh client,
    because pyetcd applies its timeout to the whole stream and poisons an endpoint after a failure."""
    hasher = SnapshotHasher()
    client = grpc_client(conn, endpoint, timeout=timeout)
    fd = None
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, 'O_CLOEXEC', 0), FILE_MODE)
        os.fchmod(fd, FILE_MODE)
        sink = SnapshotSink(fd, hasher)
        try:
            client.snapshot(sink)
        except BaseException:
            sink.abort()
            raise
        sink.finish()
    except OSError as exc:
        raise StoreError('cannot write snapshot temp file %s: %s' % (path, exc)) from exc
    except EtcdError:
        raise
    except Exception as exc:  # grpc / pyetcd errors: connection lost, deadline exceeded
        raise EtcdUnavailable('snapshot stream from %s failed after %d bytes: %s: %s' % (
            endpoint, hasher.size, exc.__class__.__name__, exc)) from exc
    finally:
        if fd is not None:
            os.close(fd)
        try:
            client.close()
        except Exception:  # pylint: disable=broad-except
            pass
    return hasher
