# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A watch on every key from a given revision, delivered as whole watch responses, encoded once.

The watch is etcd's bidirectional gRPC stream, read on its own thread straight from the protobuf
responses (no per-event wrapper objects): each response is encoded into a delta snapshot's JSON at once
(delta_encoding.encode_response) and queued for the backup loop, so a slow store never blocks the watch
stream (etcd would otherwise buffer, then cancel a slow watcher). The queue is bounded in bytes: when
the loop falls that far behind, the reading thread waits, gRPC's flow control holds etcd back, and the
memory stays what the loop's limit allows. The watch asks etcd to fragment large responses (at most
about 1.5 MiB each instead of up to 1,000 revisions at once), so one response in flight stays small;
a revision split across fragments is marked incomplete until its last fragment, and never flushed
in halves.
"""

from __future__ import annotations

import dataclasses
import queue
import threading
import time
from typing import Any, Optional

from ansible_collections.steward.cluster.plugins.module_utils.etcd.client import EtcdConnection, grpc_client
from ansible_collections.steward.cluster.plugins.module_utils.etcd.delta import rfc3339_nano
from ansible_collections.steward.cluster.plugins.module_utils.etcd.delta_encoding import EncodedChunk, encode_response
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import EtcdError, EtcdUnavailable

ALL_KEYS = b'\0'
QUEUE_BYTES = 16 * 1024 * 1024  # encoded events waiting for the loop before the stream is held back
WATCH_METHOD = '/etcdserverpb.Watch/Watch'
# etcd's WatchCreateRequest.fragment (field 8) and WatchResponse.fragment (field 7) came after the protos
# pyetcd ships: the request carries the field as raw bytes, the answer's flag is read from unknown fields.
FRAGMENT_REQUEST_FIELD = b'\x40\x01'
FRAGMENT_RESPONSE_FIELD = 7


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _more_fragments(response: Any) -> bool:
    """True when etcd split this response and the next one continues it."""
    try:
        from google.protobuf import unknown_fields  # pylint: disable=import-outside-toplevel
        return any(f.field_number == FRAGMENT_RESPONSE_FIELD and f.data for f in unknown_fields.UnknownFieldSet(response))
    except (ImportError, AttributeError, TypeError):
        return bool(getattr(response, 'fragment', False))


class HistoryCompacted(EtcdError):
    """The revision to resume from is compacted away: only a new full snapshot can continue the chain."""

    def __init__(self, message: str, compact_revision: int):
        super().__init__(message)
        self.compact_revision = compact_revision


@dataclasses.dataclass
class WatchBatch:
    events: EncodedChunk
    header_revision: int
    received: float
    complete: bool = True  # False: the last revision goes on in the next fragment


class _Closed(Exception):
    pass


class Watcher:
    """Watch all keys from `start_revision` on one endpoint."""

    def __init__(self, conn: EtcdConnection, endpoint: str, start_revision: int, clock=time.time,
                 queue_bytes: int = QUEUE_BYTES):
        self.conn = conn
        self.endpoint = endpoint
        self.start_revision = start_revision
        self.clock = clock
        self.queue: 'queue.Queue[Any]' = queue.Queue()
        self.queue_bytes = queue_bytes
        self._queued = 0
        self._room = threading.Condition()
        self._closed = threading.Event()
        self._client: Any = None
        self._responses: Any = None
        self._thread: Optional[threading.Thread] = None

    def start(self) -> 'Watcher':
        from pyetcd import etcdrpc  # pylint: disable=import-outside-toplevel (client.HAS_PYETCD)
        try:
            self._client = grpc_client(self.conn, self.endpoint, timeout=self.conn.timeout)
            create = etcdrpc.WatchCreateRequest(key=ALL_KEYS, range_end=ALL_KEYS, start_revision=self.start_revision,
                                                progress_notify=True).SerializeToString() + FRAGMENT_REQUEST_FIELD
            request = b'\x0a' + _varint(len(create)) + create  # WatchRequest{create_request (field 1)}
            watch = self._client.channel.stream_stream(WATCH_METHOD, request_serializer=bytes,
                                                       response_deserializer=etcdrpc.WatchResponse.FromString)
            self._responses = watch(self._requests(request), credentials=self._client.call_credentials,
                                    metadata=self._client.metadata)
        except Exception as exc:  # pylint: disable=broad-except
            self.close()
            raise self._translate(exc) from exc
        self._thread = threading.Thread(target=self._read, name='etcd-watch', daemon=True)
        self._thread.start()
        return self

    def _requests(self, create: Any):
        """The request side of the stream: the create request, then open until close()."""
        yield create
        self._closed.wait()

    def _read(self) -> None:
        try:
            for response in self._responses:
                if self._closed.is_set():
                    return
                if response.compact_revision:
                    raise HistoryCompacted('cannot watch from revision %d: etcd compacted its history up to %d' % (
                        self.start_revision, response.compact_revision), int(response.compact_revision))
                if response.canceled:
                    raise EtcdUnavailable('etcd canceled the watch on %s: %s' % (
                        self.endpoint, response.cancel_reason or 'no reason given'))
                if response.created and not response.events:
                    continue
                received = self.clock()
                fragmented = _more_fragments(response)
                chunks = list(encode_response(response.events, rfc3339_nano(received)))
                for index, chunk in enumerate(chunks):
                    # chunks end between revisions; only the last one of a fragment may end inside one
                    complete = index < len(chunks) - 1 or not fragmented
                    self._put(WatchBatch(chunk, int(response.header.revision), received, complete), chunk.size)
            if not self._closed.is_set():
                raise EtcdUnavailable('the watch stream from %s ended' % self.endpoint)
        except _Closed:
            return
        except Exception as exc:  # pylint: disable=broad-except
            if not self._closed.is_set():
                self.queue.put(self._translate(exc))

    def _put(self, batch: WatchBatch, size: int) -> None:
        with self._room:
            while self._queued > 0 and self._queued + size > self.queue_bytes:
                if self._closed.is_set():
                    raise _Closed()
                self._room.wait(0.5)
            self._queued += size
        self.queue.put(batch)

    def _translate(self, exc: BaseException) -> EtcdError:
        if isinstance(exc, EtcdError):
            return exc
        details = getattr(exc, 'details', None)
        return EtcdUnavailable('watch on %s from revision %d failed: %s: %s' % (
            self.endpoint, self.start_revision, exc.__class__.__name__, details() if callable(details) else exc))

    def get(self, timeout: float) -> Optional[Any]:
        """The next WatchBatch or error, or None after `timeout` seconds."""
        try:
            item = self.queue.get(timeout=max(timeout, 0))
        except queue.Empty:
            return None
        if isinstance(item, WatchBatch):
            with self._room:
                self._queued -= item.events.size
                self._room.notify_all()
        return item

    def close(self) -> None:
        self._closed.set()
        with self._room:
            self._room.notify_all()
        responses, self._responses = self._responses, None
        if responses is not None:
            try:
                responses.cancel()
            except Exception:  # pylint: disable=broad-except
                pass
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(5)
        client, self._client = self._client, None
        if client is not None:
            try:
                client.close()
            except Exception:  # pylint: disable=broad-except
                pass
