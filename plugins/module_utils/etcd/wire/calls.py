# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""etcd calls made directly over gRPC (http2.py + protobuf.py): those the JSON gateway does not serve
(HashKV), and transactions, which it serves too slowly for a replay (etcd decodes the JSON and base64 of
every value: 330 transactions of 16 puts of 1 KiB a second against 1,130 over gRPC, on 2 cores).
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Optional, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.common.deadline import Deadline
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.client import EtcdConnection
from ansible_collections.steward.cluster.plugins.module_utils.etcd.wire.http2 import DEFAULT_WINDOW, GrpcCall, GrpcError
from ansible_collections.steward.cluster.plugins.module_utils.etcd.wire.protobuf import (
    COLLECTED,
    FieldReader,
    decode_fields,
    encode_varint,
    signed,
)


def unary(conn: EtcdConnection, endpoint: str, method: str, request: bytes, timeout: float) -> Dict[int, int]:
    """A call with one answer of which only the top-level varint fields are wanted: {field: value}."""
    fields: Dict[int, int] = {}
    ended: List[bool] = []
    call = GrpcCall(conn, endpoint, method, window=DEFAULT_WINDOW, deadline=Deadline(timeout, method))
    reader = FieldReader({}, fields.__setitem__, lambda field, data: None, lambda field, view: None,
                         lambda: ended.append(True))
    try:
        call.start(request)
        _read_answer(call, reader, ended)
    finally:
        call.close()
    return fields


def _read_answer(call: GrpcCall, reader: FieldReader, ended: List[bool]) -> None:
    """Feed the call's answer to `reader` until the call ends; one whole message must have come."""
    del ended[:]
    while True:
        views = call.receive()
        if views is None:
            break
        for view in views:
            reader.feed(view)
    if not ended:
        raise GrpcError('%s on %s ended without an answer' % (call.method, call.endpoint))


HASH_KV_METHOD = '/etcdserverpb.Maintenance/HashKV'


def hash_kv(conn: EtcdConnection, endpoint: str, revision: int, timeout: float) -> Dict[str, int]:
    """etcd's HashKV at `revision` on one member: {revision, hash, compact_revision}.

    The hash covers the MVCC keys up to `revision` from the compacted revision on, the same on every
    member and on a member restored from a snapshot that holds that revision (what etcd's own
    corruption check compares). gRPC only: the JSON gateway does not serve it."""
    answer = unary(conn, endpoint, HASH_KV_METHOD, b'\x08' + encode_varint(int(revision)), timeout)
    return {'revision': int(revision), 'hash': answer.get(2, 0), 'compact_revision': signed(answer.get(3, 0))}


TXN_METHOD = '/etcdserverpb.KV/Txn'
PUT, DELETE = 'put', 'delete'
TXN_HEADER, HEADER_REVISION = 1, 3    # TxnResponse.header, ResponseHeader.revision


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field."""
    return encode_varint(number << 3 | 2) + encode_varint(len(payload)) + payload


def txn_request(ops: Iterable[Tuple[str, bytes, Optional[bytes]]]) -> bytes:
    """TxnRequest{success: [RequestOp]} with no compare, for ops (PUT, key, value) or (DELETE, key, None):
    RequestOp.request_put = PutRequest{key, value}, RequestOp.request_delete_range = DeleteRangeRequest{key}."""
    out = []
    for kind, key, value in ops:
        if kind == PUT:
            op = _field(2, _field(1, key) + _field(2, value or b''))
        elif kind == DELETE:
            op = _field(3, _field(1, key))
        else:
            raise ValueError('a transaction op is put or delete, not %r' % (kind,))
        out.append(_field(2, op))
    return b''.join(out)


class Transactions:
    """Txn calls on one endpoint, one after the other on one HTTP/2 connection (GrpcCall.call_again), each
    with its own deadline of `timeout` seconds. `txn(request)` returns the revision the transaction landed on."""

    def __init__(self, conn: EtcdConnection, endpoint: str, timeout: float):
        self.conn, self.endpoint, self.timeout = conn, endpoint, timeout
        self._call: Optional[GrpcCall] = None
        self._revision: List[int] = []
        self._ended: List[bool] = []
        self._reader = FieldReader({TXN_HEADER: COLLECTED}, lambda field, value: None, self._header,
                                   lambda field, view: None, lambda: self._ended.append(True))

    def _header(self, field: int, data: Any) -> None:
        if field == TXN_HEADER:
            self._revision[:] = [value for number, value in decode_fields(data) if number == HEADER_REVISION]

    def txn(self, request: bytes) -> int:
        deadline = Deadline(self.timeout, TXN_METHOD)
        self._revision[:] = []
        if self._call is None:
            self._call = GrpcCall(self.conn, self.endpoint, TXN_METHOD, window=DEFAULT_WINDOW, deadline=deadline)
            self._call.start(request)
        else:
            self._call.call_again(request, deadline)
        _read_answer(self._call, self._reader, self._ended)
        if not self._revision:
            raise GrpcError('%s on %s answered without a header revision' % (TXN_METHOD, self.endpoint))
        return signed(self._revision[0])

    def close(self) -> None:
        if self._call is not None:
            self._call.close()
            self._call = None

    def __enter__(self) -> 'Transactions':
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
