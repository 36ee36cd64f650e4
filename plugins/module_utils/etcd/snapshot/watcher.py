# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A watch on every key from a given revision, its events encoded once, as they arrive.

The watch is etcd's bidirectional gRPC stream (wire/http2.py), read on its own thread. Runs of events (up
to 1 MiB, as they are on the wire) are decoded with one protobuf parse each and encoded into a delta
snapshot's JSON at once (delta_encoding.ChunkBuilder): a watch response is never held whole (etcd answers a watcher
catching up with 1,000 revisions at a time: 17 MB for revisions of 16 puts of 1 KiB). Chunks of whole
revisions are queued for the backup loop, so a slow store never blocks the stream (etcd would otherwise
buffer, then cancel a slow watcher). The queue is bounded in bytes: when the loop falls that far behind,
the reading thread waits, the HTTP/2 window (WINDOW bytes) holds etcd back, and the memory stays what
the loop's limit allows plus QUEUE_BYTES.

A watch may also read a span of history only (`end_revision`): catch_up.py reads a backlog with several at
once, sharing one byte budget (QueueBudget).
"""

from __future__ import annotations

import dataclasses
import functools
import queue
import threading
import time
from typing import Any, Dict, Optional

from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.client import EtcdConnection
from ansible_collections.steward.cluster.plugins.module_utils.common.times import format_rfc3339
from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot.delta_encoding import (
    ChunkBuilder,
    EncodedChunk,
)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import EtcdError, EtcdUnavailable
from ansible_collections.steward.cluster.plugins.module_utils.etcd.wire.http2 import GrpcCall, wrap_error
from ansible_collections.steward.cluster.plugins.module_utils.etcd.wire.protobuf import (
    COLLECTED,
    RUN,
    FieldReader,
    decode_fields,
    encode_varint,
)

ALL_KEYS = b'\0'
QUEUE_BYTES = 8 * 1024 * 1024  # encoded events waiting for the loop before the stream is held back
WINDOW = 4 * 1024 * 1024       # bytes etcd may send ahead of what the reading thread has taken
WATCH_METHOD = '/etcdserverpb.Watch/Watch'
# WatchResponse fields (etcd's rpc.proto); events come last (Go writes fields in number order)
HEADER, CREATED, CANCELED, COMPACT_REVISION, CANCEL_REASON, EVENTS = 1, 3, 4, 5, 6, 11
HEADER_REVISION = 3  # ResponseHeader.revision


def create_request(start_revision: int) -> bytes:
    """WatchRequest{create_request: {key: \\0, range_end: \\0 (every key), start_revision, progress_notify}}."""
    create = (b'\x0a\x01' + ALL_KEYS + b'\x12\x01' + ALL_KEYS + b'\x18' + encode_varint(start_revision)
              + b'\x20\x01')
    return b'\x0a' + encode_varint(len(create)) + create


@functools.lru_cache(maxsize=None)
def events_message() -> Any:
    """A protobuf class for a run of WatchResponse.events as they are on the wire (field 11, mvccpb.Event),
    built from a descriptor here: one C-speed parse decodes a run of events without importing etcd's
    generated modules (and grpc with them)."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory  # pylint: disable=import-outside-toplevel
    field = descriptor_pb2.FieldDescriptorProto
    proto = descriptor_pb2.FileDescriptorProto(name='steward_watch_events.proto', package='steward_watch',
                                               syntax='proto3')
    key_value = proto.message_type.add(name='KeyValue')  # mvccpb.KeyValue
    for name, number, kind in (('key', 1, field.TYPE_BYTES), ('create_revision', 2, field.TYPE_INT64),
                               ('mod_revision', 3, field.TYPE_INT64), ('version', 4, field.TYPE_INT64),
                               ('value', 5, field.TYPE_BYTES), ('lease', 6, field.TYPE_INT64)):
        key_value.field.add(name=name, number=number, type=kind, label=field.LABEL_OPTIONAL)
    event = proto.message_type.add(name='Event')  # mvccpb.Event
    event.field.add(name='type', number=1, type=field.TYPE_INT32, label=field.LABEL_OPTIONAL)
    event.field.add(name='kv', number=2, type=field.TYPE_MESSAGE, type_name='.steward_watch.KeyValue',
                    label=field.LABEL_OPTIONAL)
    event.field.add(name='prev_kv', number=3, type=field.TYPE_MESSAGE, type_name='.steward_watch.KeyValue',
                    label=field.LABEL_OPTIONAL)
    events = proto.message_type.add(name='Events')  # WatchResponse.events alone
    events.field.add(name='events', number=EVENTS, type=field.TYPE_MESSAGE, type_name='.steward_watch.Event',
                     label=field.LABEL_REPEATED)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    descriptor = pool.FindMessageTypeByName('steward_watch.Events')
    if hasattr(message_factory, 'GetMessageClass'):
        return message_factory.GetMessageClass(descriptor)
    return message_factory.MessageFactory(pool).GetPrototype(descriptor)  # protobuf < 4.22


class HistoryCompacted(EtcdError):
    """The revision to resume from is compacted away: only a new full snapshot can continue the chain."""

    def __init__(self, message: str, compact_revision: int):
        super().__init__(message)
        self.compact_revision = compact_revision


class QueueBudget:
    """The bytes of encoded events waiting to be taken, counted over every watch that shares it (the spans of
    one backlog), against `limit`. A watch waits for room while it would go over, unless it is the one being
    taken (`Watcher.head`) and has nothing queued: the reader of the current span always makes progress, so the
    spans ahead of their turn can never block the loop that would free their room."""

    def __init__(self, limit: int):
        self.limit = limit
        self.queued = 0
        self.room = threading.Condition()


SPAN_READ = object()  # queued by a watch with an end_revision after its last event: the span is complete


@dataclasses.dataclass
class WatchBatch:
    events: EncodedChunk
    header_revision: int
    received: float


class _Closed(Exception):
    pass


class Watcher:
    """Watch all keys from `start_revision` on one endpoint. `created_revision`: the cluster's revision when
    etcd created the watch (events up to it were history already: a backlog).

    `end_revision`: read only the span before it; at the first event at or past it (or a response that ends
    just before it) the last chunk and then SPAN_READ are queued and the call is closed. `budget`: shared with
    other watches (default: one of its own of `queue_bytes`); `head`: whether this watch is the one being taken."""

    def __init__(self, conn: EtcdConnection, endpoint: str, start_revision: int, clock=time.time,
                 queue_bytes: int = QUEUE_BYTES, end_revision: Optional[int] = None,
                 budget: Optional[QueueBudget] = None, head: bool = True):
        self.conn = conn
        self.endpoint = endpoint
        self.start_revision = start_revision
        self.clock = clock
        self.queue: 'queue.Queue[Any]' = queue.Queue()
        self.budget = budget if budget is not None else QueueBudget(queue_bytes)
        self.head = head
        self.created_revision: Optional[int] = None
        self._queued = 0  # this watch's part of budget.queued
        self._stop_at = end_revision if end_revision is not None else 1 << 63
        self._last_revision = 0
        self._closed = threading.Event()
        self._call: Optional[GrpcCall] = None
        self._thread: Optional[threading.Thread] = None
        # the response being read
        self._response: Dict[int, Any] = {}
        self._builder: Optional[ChunkBuilder] = None
        self._received = 0.0
        self._events = events_message()
        self._reader = FieldReader({HEADER: COLLECTED, CANCEL_REASON: COLLECTED, EVENTS: RUN},
                                   self._response.__setitem__, self._bytes, lambda field, view: None, self._end)

    def start(self) -> 'Watcher':
        try:
            self._call = GrpcCall(self.conn, self.endpoint, WATCH_METHOD, window=WINDOW)
            self._call.start(create_request(self.start_revision), end_stream=False)
        except Exception as exc:  # pylint: disable=broad-except
            self.close()
            raise self._translate(exc) from exc
        self._thread = threading.Thread(target=self._read, name='etcd-watch', daemon=True)
        self._thread.start()
        return self

    def _read(self) -> None:
        try:
            while not self._closed.is_set():
                views = self._call.receive()
                if views is None:
                    raise EtcdUnavailable('the watch stream from %s ended' % self.endpoint)
                for view in views:
                    self._reader.feed(view)
        except _Closed:
            return
        except Exception as exc:  # pylint: disable=broad-except
            if not self._closed.is_set():
                self.queue.put(self._translate(exc))

    # --- one response, field by field ----------------------------------------------------------------
    def _bytes(self, field: int, data: bytes) -> None:
        if field == EVENTS:
            if self._builder is None:
                self._builder = ChunkBuilder(format_rfc3339(self._received or self.clock(), 'ns'))
            add, stop_at, revision = self._builder.add, self._stop_at, 0
            for event in self._events.FromString(data).events:
                kv = event.kv
                revision = kv.mod_revision
                if revision >= stop_at:
                    self._span_read()
                done = add(event.type, kv.key, kv.value, kv.create_revision, revision, kv.version, kv.lease)
                if done is not None:
                    self._put(WatchBatch(done, self._response.get(HEADER, 0), self._received))
            self._last_revision = revision or self._last_revision
        elif field == HEADER:
            self._received = self.clock()
            self._response[HEADER] = dict(decode_fields(data)).get(HEADER_REVISION, 0)
        else:
            self._response[field] = data

    def _end(self) -> None:
        response = dict(self._response)
        self._response.clear()  # the same dict: the field reader writes into it
        builder, self._builder = self._builder, None
        if response.get(COMPACT_REVISION):
            raise HistoryCompacted('cannot watch from revision %d: etcd compacted its history up to %d' % (
                self.start_revision, response[COMPACT_REVISION]), int(response[COMPACT_REVISION]))
        if response.get(CANCELED):
            raise EtcdUnavailable('etcd canceled the watch on %s: %s' % (
                self.endpoint, bytes(response.get(CANCEL_REASON, b'')).decode('utf-8', 'replace') or 'no reason given'))
        if response.get(CREATED) and self.created_revision is None:
            self.created_revision = int(response.get(HEADER, 0))
        self._put_last(builder, response.get(HEADER, 0))
        if self._last_revision >= self._stop_at - 1:
            self._span_read()

    def _put_last(self, builder: Optional[ChunkBuilder], header_revision: int) -> None:
        """What `builder` still holds, queued as the response's last chunk."""
        last = builder.finish() if builder is not None else None
        if last is not None:
            self._put(WatchBatch(last, header_revision, self._received))

    def _span_read(self) -> None:
        """Every event of the span is read: queue what is encoded, then SPAN_READ; close the call (etcd drops
        its watcher) and end the reading thread."""
        builder, self._builder = self._builder, None
        self._put_last(builder, self._response.get(HEADER, 0))
        self.queue.put(SPAN_READ)
        call, self._call = self._call, None
        if call is not None:
            call.close()
        raise _Closed()

    def _put(self, batch: WatchBatch) -> None:
        size, budget = batch.events.size, self.budget
        with budget.room:
            while budget.queued > 0 and budget.queued + size > budget.limit and not (self.head and not self._queued):
                if self._closed.is_set():
                    raise _Closed()
                budget.room.wait(0.5)
            budget.queued += size
            self._queued += size
        self.queue.put(batch)

    def _translate(self, exc: BaseException) -> EtcdError:
        return wrap_error(self.endpoint, 'the watch from revision %d' % self.start_revision, exc)

    def get(self, timeout: float) -> Optional[Any]:
        """The next WatchBatch or error, or None after `timeout` seconds."""
        try:
            item = self.queue.get(timeout=max(timeout, 0))
        except queue.Empty:
            return None
        if isinstance(item, WatchBatch):
            with self.budget.room:
                self.budget.queued -= item.events.size
                self._queued -= item.events.size
                self.budget.room.notify_all()
        return item

    def pending(self) -> int:
        """Items queued now (a get(0) each returns at once)."""
        return self.queue.qsize()

    def take_turn(self) -> None:
        """This watch is now the one being taken (see QueueBudget)."""
        with self.budget.room:
            self.head = True
            self.budget.room.notify_all()

    def close(self) -> None:
        self._closed.set()
        with self.budget.room:
            self.budget.room.notify_all()
        call, self._call = self._call, None
        if call is not None:
            call.close()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(5)
