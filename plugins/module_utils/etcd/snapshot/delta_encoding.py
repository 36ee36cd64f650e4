# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Watch events encoded once, kept compact, written as they are (issue 17: delta snapshots).

A delta snapshot is etcd-backup-restore's JSON array of events. Each watch response is encoded into
that JSON the moment it arrives (`encode_response`), into one bytes object per response with the
events' revisions and offsets in two arrays of integers: memory holds the bytes that will be written,
and no Python object per event. The buffer between two deltas (`DeltaBuffer`) keeps these chunks;
writing a delta streams them into the file as they are. So the memory a backup loop holds is what its
limit counts, plus a fixed overhead, and the CPU per event is one encoding.

The encoding is Go's encoding of etcd-backup-restore's event struct (see delta.Event.to_json, which it
matches byte for byte): `{"etcdEvent":{"type":1,"kv":{"key":"..","create_revision":N,"mod_revision":N,
"version":N,"value":"..","lease":N}},"time":".."}` with zero values left out (PUT is type 0).
"""

from __future__ import annotations

import array
import binascii
from typing import Any, Iterable, Iterator, List, Optional, Sequence, Tuple

ARRAY_ITEM = 8  # bytes per revision and per offset


_B64 = binascii.b2a_base64


def encode_event(type_: int, key: bytes, value: bytes, create_revision: int, mod_revision: int, version: int,
                 lease: int, time_text: str) -> bytes:
    """One event as etcd-backup-restore's JSON (the same bytes as json.dumps(Event.to_json()) compact)."""
    return _encode(type_, key, value, create_revision, mod_revision, version, lease, _tail(time_text))


def _tail(time_text: str) -> bytes:
    return b'}},"time":"' + (time_text or '0001-01-01T00:00:00Z').encode('ascii') + b'"}'


def _event_pieces(type_: int, key: bytes, value: bytes, create_revision: int, mod_revision: int, version: int,
                  lease: int, tail: bytes) -> List[bytes]:
    """Go's field order and omitempty rules; base64 and integers need no JSON escaping."""
    pieces = [b'{"etcdEvent":{"type":%d,"kv":{' % type_ if type_ else b'{"etcdEvent":{"kv":{']
    fields = []
    if key:
        fields.append(b'"key":"' + _B64(key, newline=False) + b'"')
    if create_revision:
        fields.append(b'"create_revision":%d' % create_revision)
    if mod_revision:
        fields.append(b'"mod_revision":%d' % mod_revision)
    if version:
        fields.append(b'"version":%d' % version)
    if value:
        fields.append(b'"value":"' + _B64(value, newline=False) + b'"')
    if lease:
        fields.append(b'"lease":%d' % lease)
    pieces.append(b','.join(fields))
    pieces.append(tail)
    return pieces


def _encode(type_: int, key: bytes, value: bytes, create_revision: int, mod_revision: int, version: int,
            lease: int, tail: bytes) -> bytes:
    """One event; a put with every field set (nearly every event) is one formatting operation."""
    if key and value and create_revision and mod_revision and version:
        return b'%s"key":"%s","create_revision":%d,"mod_revision":%d,"version":%d,"value":"%s"%s%s' % (
            b'{"etcdEvent":{"type":%d,"kv":{' % type_ if type_ else b'{"etcdEvent":{"kv":{',
            _B64(key, newline=False), create_revision, mod_revision, version, _B64(value, newline=False),
            b',"lease":%d' % lease if lease else b'', tail)
    return b''.join(_event_pieces(type_, key, value, create_revision, mod_revision, version, lease, tail))


class EncodedChunk:
    """Encoded events of one watch response (or a piece of one): `data` is the events joined by commas,
    revisions[i] is event i's revision. Event boundaries are found again in `data` when a chunk must be
    cut (`,{"etcdEvent":` cannot occur inside an event: keys and values are base64)."""

    __slots__ = ('data', 'revisions')

    def __init__(self, data: bytes, revisions: 'array.array'):
        self.data = data
        self.revisions = revisions

    @property
    def size(self) -> int:
        return len(self.data) + ARRAY_ITEM * len(self.revisions)

    def __len__(self) -> int:
        return len(self.revisions)

    def after(self, revision: int) -> Optional['EncodedChunk']:
        """The events newer than `revision` (None when none is): a copy of the tail only when cut."""
        revisions = self.revisions
        if not revisions or revisions[-1] <= revision:
            return None
        if revisions[0] > revision:
            return self
        first = next(i for i, r in enumerate(revisions) if r > revision)
        offset = -1
        for _unused in range(first):
            offset = self.data.index(BOUNDARY, offset + 1)
        return EncodedChunk(self.data[offset + 1:], array.array('q', revisions[first:]))


BOUNDARY = b',{"etcdEvent":'
CHUNK_BYTES = 1024 * 1024  # a large watch response is split into chunks of about this size


class ChunkBuilder:
    """Events of one watch response encoded as they arrive, into chunks of about CHUNK_BYTES cut between
    revisions (one revision is never split, so every chunk handed out can be flushed on its own)."""

    __slots__ = ('tail', 'pieces', 'revisions', 'size')

    def __init__(self, time_text: str):
        self.tail = _tail(time_text)
        self.pieces: List[bytes] = []
        self.revisions = array.array('q')
        self.size = 0

    def add(self, type_: int, key: bytes, value: bytes, create_revision: int, mod_revision: int, version: int,
            lease: int) -> Optional[EncodedChunk]:
        """Encode one event; returns the chunk it completed (when this event starts a new revision and the
        events before it reached CHUNK_BYTES), else None."""
        done = None
        if self.size >= CHUNK_BYTES and mod_revision != self.revisions[-1]:
            done = self.finish()
        encoded = _encode(type_, key, value, create_revision, mod_revision, version, lease, self.tail)
        self.pieces.append(encoded)
        self.revisions.append(mod_revision)
        self.size += len(encoded)
        return done

    def finish(self) -> Optional[EncodedChunk]:
        """What is encoded so far as a chunk (None when nothing is); the builder starts empty again."""
        if not self.revisions:
            return None
        chunk = EncodedChunk(b','.join(self.pieces), self.revisions)
        self.pieces, self.revisions, self.size = [], array.array('q'), 0
        return chunk


def encode_response(pb_events: Iterable[Any], time_text: str) -> Iterator[EncodedChunk]:
    """Encode decoded etcd mvccpb.Events (objects with .type and .kv), in chunks (ChunkBuilder)."""
    builder = ChunkBuilder(time_text)
    for event in pb_events:
        kv = event.kv
        done = builder.add(event.type, kv.key, kv.value, kv.create_revision, kv.mod_revision, kv.version, kv.lease)
        if done is not None:
            yield done
    last = builder.finish()
    if last is not None:
        yield last


def encode_event_objects(events: Sequence[Any]) -> EncodedChunk:
    """delta.Event objects (tests, replays of stored deltas) as one chunk."""
    data = b','.join(encode_event(e.type, e.key, e.value, e.create_revision, e.mod_revision, e.version, e.lease,
                                  e.time) for e in events)
    return EncodedChunk(data, array.array('q', (e.mod_revision for e in events)))


class EncodedEvents:
    """Events taken from the buffer for one delta: chunks in revision order."""

    def __init__(self, chunks: List[EncodedChunk]):
        self.chunks = chunks

    def __len__(self) -> int:
        return sum(len(c) for c in self.chunks)

    @property
    def first_revision(self) -> int:
        return self.chunks[0].revisions[0]

    @property
    def last_revision(self) -> int:
        return self.chunks[-1].revisions[-1]

    @property
    def size(self) -> int:
        return sum(c.size for c in self.chunks)

    def revisions(self) -> Iterator[int]:
        for chunk in self.chunks:
            yield from chunk.revisions

    def json_parts(self) -> Iterator[bytes]:
        """The JSON array, piece by piece: `[`, the chunks with commas between them, `]`."""
        yield b'['
        for index, chunk in enumerate(self.chunks):
            if index:
                yield b','
            yield chunk.data
        yield b']'


def as_encoded(events: Any) -> EncodedEvents:
    """EncodedEvents as they are, or a sequence of delta.Event encoded."""
    if isinstance(events, EncodedEvents):
        return events
    events = list(events)
    return EncodedEvents([encode_event_objects(events)] if events else [])


class DeltaBuffer:
    """Events received since the last stored revision, encoded. Only chunks of whole revisions are added
    (ChunkBuilder, and etcd never splits one revision across watch responses), so a flush always ends on a
    revision boundary."""

    def __init__(self, after_revision: int):
        self.after_revision = after_revision  # the tip of the stored chain
        self.chunks: List[EncodedChunk] = []
        self.size = 0
        self._count = 0

    @property
    def last_revision(self) -> int:
        return self.chunks[-1].revisions[-1] if self.chunks else self.after_revision

    @property
    def first_revision(self) -> int:
        """The oldest revision held (after_revision + 1 when empty)."""
        return self.chunks[0].revisions[0] if self.chunks else self.after_revision + 1

    def __len__(self) -> int:
        return self._count

    def add(self, events: Any) -> int:
        """Append events newer than what is held (a resumed watch may repeat some); returns how many.
        `events`: an EncodedChunk (whole revisions), or delta.Event objects."""
        chunk = events if isinstance(events, EncodedChunk) else encode_event_objects(list(events))
        fresh = chunk.after(self.last_revision)
        if fresh is None:
            return 0
        self.chunks.append(fresh)
        self.size += fresh.size
        self._count += len(fresh)
        return len(fresh)

    def take(self) -> Tuple[int, EncodedEvents]:
        """(start revision, events) to write, and empty the buffer."""
        start, taken = self.after_revision + 1, EncodedEvents(self.chunks)
        self.after_revision = self.last_revision
        self.chunks, self.size, self._count = [], 0, 0
        return start, taken

    def advance_to(self, revision: int) -> None:
        """A full snapshot at `revision` holds everything up to it: drop those events, continue after it."""
        if revision <= self.after_revision:
            return
        kept = [c for c in (chunk.after(revision) for chunk in self.chunks) if c is not None]
        self.chunks = kept
        self.after_revision = revision
        self.size = sum(c.size for c in kept)
        self._count = sum(len(c) for c in kept)

    def restore(self, start: int, taken: EncodedEvents) -> None:
        """Put back what `take` returned when writing failed (nothing is lost)."""
        self.chunks = list(taken.chunks) + self.chunks
        self.after_revision = start - 1
        self.size = sum(c.size for c in self.chunks)
        self._count = sum(len(c) for c in self.chunks)
