# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The top-level protobuf fields of gRPC messages, read as the DATA bytes arrive (http2.py hands them over).

`FieldReader` walks a stream of messages without ever holding one whole (a snapshot's blob is handed on
slice by slice, a run of watch events gathered for one C-speed parse); `decode_fields` reads a small nested
message (a response header); `encode_varint` builds the few requests we send by hand. Malformed input
raises http2.GrpcError, as the call it arrived on failed.
"""

from __future__ import annotations

import struct
from typing import Any, Callable, Dict, List, Optional, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.etcd.wire.http2 import GrpcError

VARINT, FIXED64, LENGTH, FIXED32 = 0, 1, 2, 5
STREAMED, COLLECTED, RUN = 'streamed', 'collected', 'run'
RUN_BYTES = 1 << 20


class FieldReader:
    """The top-level fields of a stream of gRPC messages, fed DATA bytes as they arrive (`feed`).

    Varint fields go to `on_varint(field, value)`. A length-delimited field is, by its kind in `kinds`:
    `streamed` (its bytes handed to `on_stream(field, slice)` as they arrive: a snapshot's blob),
    `collected` (joined, then `on_bytes(field, data)`: a header), `run` (consecutive occurrences gathered
    as they are on the wire, key and length included, up to RUN_BYTES, then `on_bytes(field, bytearray)`: watch
    events, which one protobuf parse of a `repeated` field decodes in one go), or skipped (not named).
    `on_end()` follows the last field of each message. A message of any size is never held whole."""

    def __init__(self, kinds: Dict[int, str], on_varint: Callable[[int, int], None],
                 on_bytes: Callable[[int, Any], None], on_stream: Callable[[int, memoryview], None],
                 on_end: Callable[[], None]):
        self.kinds = kinds
        self.on_varint, self.on_bytes, self.on_stream, self.on_end = on_varint, on_bytes, on_stream, on_end
        self.message_left = -1      # bytes of the current message still to come; -1: a message prefix is next
        self.value_left = 0         # bytes of the current length-delimited value still to come
        self.field = 0
        self.kind: Optional[str] = None
        self._head = bytearray()    # a prefix, field key or length split across reads
        self._kept = bytearray()    # the collected value or the run so far
        self._run_field = 0         # the field of the run in _kept (0: none)

    def feed(self, data: memoryview) -> None:
        pos, size = 0, len(data)
        while pos < size:
            if self.value_left:
                take = min(self.value_left, size - pos)
                if self.kind == STREAMED:
                    self.on_stream(self.field, data[pos:pos + take])
                elif self.kind is not None:
                    self._kept += data[pos:pos + take]
                pos += take
                self.value_left -= take
                self.message_left -= take
                if not self.value_left:
                    self._value_done()
            elif self.message_left < 0:
                take = min(5 - len(self._head), size - pos)
                self._head += data[pos:pos + take]
                pos += take
                if len(self._head) == 5:
                    if self._head[0]:
                        raise GrpcError('a compressed gRPC message arrived (none was asked for)')
                    self.message_left = struct.unpack_from('>I', self._head, 1)[0]
                    self._head.clear()
                    self._message_maybe_done()
            elif not self._head and size - pos >= min(self.message_left, 20):
                pos = self._key_here(data, pos)
            else:
                pos = self._key_split(data, pos, size)

    def _key_here(self, data: memoryview, pos: int) -> int:
        """The common case: the key and length are whole in this read (and often the value too)."""
        parsed = _field_head(data, pos)
        if parsed is None:
            raise GrpcError('a gRPC message holds a field that cannot be parsed')
        used, field, wire, value = parsed
        kind = self.kinds.get(field) if wire == LENGTH else None
        if kind in (COLLECTED, RUN) and pos + used + value <= len(data) and used + value <= self.message_left:
            # the whole field is here: one copy, no value state; a run takes every whole field after it too
            end = pos + used + value
            if kind == RUN and data[pos] < 0x80:
                end = _run_end(data, end, data[pos], min(len(data), pos + self.message_left))
            self._field(field, wire, value, used, None, whole=True)
            self._kept += data[pos if kind == RUN else pos + used:end]
            self.message_left -= end - pos - used
            self.value_left = 0
            self._value_done()
            return end
        self._field(field, wire, value, used, data[pos:pos + used])
        return pos + used

    def _key_split(self, data: memoryview, pos: int, size: int) -> int:
        """A key or length split across reads: gathered in _head until it parses."""
        before = len(self._head)
        take = min(self.message_left - before, 20 - before, size - pos)
        self._head += data[pos:pos + take]
        parsed = _field_head(self._head, 0)
        if parsed is None:
            if len(self._head) >= min(self.message_left, 20):
                raise GrpcError('a gRPC message holds a field that cannot be parsed')
            return pos + take
        used, field, wire, value = parsed
        key = bytes(self._head[:used])
        self._head.clear()
        self._field(field, wire, value, used, key)
        return pos + used - before

    def _field(self, field: int, wire: int, value: int, used: int, key: Any, whole: bool = False) -> None:
        self.message_left -= used
        if self.message_left < 0 or (wire != VARINT and value > self.message_left):
            raise GrpcError('a gRPC message field runs past the end of its message')
        kind = self.kinds.get(field) if wire == LENGTH else None
        if self._run_field and (kind != RUN or field != self._run_field):
            self._flush_run()
        self.field = field
        if wire == VARINT:
            self.on_varint(field, value)
            self._message_maybe_done()
            return
        self.kind = kind
        if kind == RUN:
            self._run_field = field
            if not whole:
                self._kept += key
        self.value_left = value
        if not value and not whole:
            self._value_done()

    def _value_done(self) -> None:
        if self.kind == COLLECTED:
            data = bytes(self._kept)
            self._kept.clear()
            self.on_bytes(self.field, data)
        elif self.kind == RUN and len(self._kept) >= RUN_BYTES:
            self._flush_run()
        self.kind = None
        self._message_maybe_done()

    def _flush_run(self) -> None:
        """Hand the run over as the bytearray it was gathered in (a new one takes the next run)."""
        field, self._run_field = self._run_field, 0
        data, self._kept = self._kept, bytearray()
        self.on_bytes(field, data)

    def _message_maybe_done(self) -> None:
        if self.message_left == 0:
            if self._run_field:
                self._flush_run()
            self.message_left = -1
            self.on_end()


def _run_end(data: memoryview, pos: int, key: int, limit: int) -> int:
    """Where the run of whole fields with the one-byte `key` (and lengths below 2 MiB) that goes on at `pos`
    ends, before `limit`: a tight loop, since a backlog has 100,000s of events."""
    while pos + 4 <= limit and data[pos] == key:
        byte = data[pos + 1]
        if byte < 0x80:
            start, length = pos + 2, byte
        else:
            second = data[pos + 2]
            if second < 0x80:
                start, length = pos + 3, (byte & 0x7F) | (second << 7)
            else:
                third = data[pos + 3]
                if third >= 0x80:
                    break
                start, length = pos + 4, (byte & 0x7F) | ((second & 0x7F) << 7) | (third << 14)
        if start + length > limit:
            break
        pos = start + length
    return pos


def _varint(data: Any, pos: int) -> Optional[Tuple[int, int]]:
    value = shift = 0
    while pos < len(data):
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise GrpcError('a protobuf varint is longer than 10 bytes')
    return None


def _field_head(data: Any, pos: int) -> Optional[Tuple[int, int, int, int]]:
    """(bytes used from pos, field, wire type, varint value or value length), or None when more bytes are
    needed."""
    key = _varint(data, pos)
    if key is None:
        return None
    field, wire = key[0] >> 3, key[0] & 7
    if wire in (VARINT, LENGTH):
        rest = _varint(data, key[1])
        if rest is None:
            return None
        return rest[1] - pos, field, wire, rest[0]
    if wire in (FIXED64, FIXED32):
        return key[1] - pos, field, wire, 8 if wire == FIXED64 else 4
    raise GrpcError('a gRPC message holds protobuf wire type %d, which etcd does not send' % wire)


def decode_fields(data: bytes) -> List[Tuple[int, Any]]:
    """A small nested message (a response header): [(field, int or bytes)], fixed-width fields as bytes."""
    out: List[Tuple[int, Any]] = []
    pos = 0
    while pos < len(data):
        parsed = _field_head(data, pos)
        if parsed is None:
            raise GrpcError('a nested protobuf message is truncated')
        used, field, wire, value = parsed
        pos += used
        if wire == VARINT:
            out.append((field, value))
        else:
            if pos + value > len(data):
                raise GrpcError('a nested protobuf field runs past its message')
            out.append((field, data[pos:pos + value]))
            pos += value
    return out


def encode_varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # a negative int64 is ten bytes of two's complement
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def signed(value: int) -> int:
    """A varint read as int64."""
    return value - (1 << 64) if value >= 1 << 63 else value
