# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""etcd calls made directly over gRPC (http2.py + protobuf.py): those the JSON gateway does not serve
(HashKV) or serves too slowly."""

from __future__ import annotations

from typing import Dict, List

from ansible_collections.steward.cluster.plugins.module_utils.common.deadline import Deadline
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.client import EtcdConnection
from ansible_collections.steward.cluster.plugins.module_utils.etcd.wire.http2 import DEFAULT_WINDOW, GrpcCall, GrpcError
from ansible_collections.steward.cluster.plugins.module_utils.etcd.wire.protobuf import FieldReader, encode_varint, signed


def unary(conn: EtcdConnection, endpoint: str, method: str, request: bytes, timeout: float) -> Dict[int, int]:
    """A call with one answer of which only the top-level varint fields are wanted: {field: value}."""
    fields: Dict[int, int] = {}
    ended: List[bool] = []
    call = GrpcCall(conn, endpoint, method, window=DEFAULT_WINDOW, deadline=Deadline(timeout, method))
    reader = FieldReader({}, fields.__setitem__, lambda field, data: None, lambda field, view: None,
                         lambda: ended.append(True))
    try:
        call.start(request)
        while True:
            views = call.receive()
            if views is None:
                break
            for view in views:
                reader.feed(view)
    finally:
        call.close()
    if not ended:
        raise GrpcError('%s on %s ended without an answer' % (method, endpoint))
    return fields


HASH_KV_METHOD = '/etcdserverpb.Maintenance/HashKV'


def hash_kv(conn: EtcdConnection, endpoint: str, revision: int, timeout: float) -> Dict[str, int]:
    """etcd's HashKV at `revision` on one member: {revision, hash, compact_revision}.

    The hash covers the MVCC keys up to `revision` from the compacted revision on, the same on every
    member and on a member restored from a snapshot that holds that revision (what etcd's own
    corruption check compares). gRPC only: the JSON gateway does not serve it."""
    answer = unary(conn, endpoint, HASH_KV_METHOD, b'\x08' + encode_varint(int(revision)), timeout)
    return {'revision': int(revision), 'hash': answer.get(2, 0), 'compact_revision': signed(answer.get(3, 0))}
