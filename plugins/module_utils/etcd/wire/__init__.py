# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gRPC spoken directly over HTTP/2, for the calls the JSON gateway cannot serve (Snapshot and Watch streams,
HashKV) or serves too slowly (a replay's transactions). Not grpcio: one thread, one reused buffer, nothing copied.

  http2.py     GrpcCall: one call on its own connection (RFC 9113), flow control both ways, then further unary calls
               on the same connection (call_again); GrpcError carries the gRPC status
  hpack.py     HPACK (RFC 7541): the server's headers decoded in full (grpc-status, grpc-message)
  protobuf.py  FieldReader: the top-level fields of the messages as they arrive; varints; small nested messages
  calls.py     etcd calls on top: unary, hash_kv, Transactions (Txn after Txn on one connection) and txn_request
The stream consumers live with what they serve: snapshot/snapshot_stream.py and snapshot/watcher.py.
"""
