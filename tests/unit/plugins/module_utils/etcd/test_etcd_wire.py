"""etcd/wire without a server: HPACK against RFC 7541's own examples, the protobuf field reader fed the same
messages cut at every possible place (a read can end anywhere; the result must not depend on where), and the
transactions calls.py encodes as protobuf itself decodes them."""

from __future__ import annotations

import struct

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.etcd.wire import calls, hpack, protobuf
from ansible_collections.steward.cluster.plugins.module_utils.etcd.wire.http2 import GrpcError, grpc_message
from ansible_collections.steward.cluster.plugins.module_utils.etcd.wire.protobuf import (
    COLLECTED,
    RUN,
    STREAMED,
    FieldReader,
    decode_fields,
    encode_varint,
    signed,
)


def test_hpack_decodes_rfc7541_c4_request_with_huffman():
    block = bytes.fromhex('828684418cf1e3c2e5f23a6ba0ab90f4ff')
    assert hpack.Decoder().decode(block) == [(b':method', b'GET'), (b':scheme', b'http'), (b':path', b'/'),
                                             (b':authority', b'www.example.com')]


def test_hpack_decodes_rfc7541_c6_responses_with_evictions():
    """Three responses on one connection, a 256-octet table: indexing, eviction and Huffman strings."""
    decoder = hpack.Decoder(max_table_size=256)
    first = decoder.decode(bytes.fromhex(
        '488264025885aec3771a4b6196d07abe941054d444a8200595040b8166e082a62d1bff6e919d29ad171863c78f0b97c8e9ae82ae43d3'))
    assert first == [(b':status', b'302'), (b'cache-control', b'private'), (b'date', b'Mon, 21 Oct 2013 20:13:21 GMT'),
                     (b'location', b'https://www.example.com')]
    second = decoder.decode(bytes.fromhex('4883640effc1c0bf'))
    assert second[0] == (b':status', b'307') and second[1:] == first[1:]
    third = decoder.decode(bytes.fromhex(
        '88c16196d07abe941054d444a8200595040b8166e084a62d1bffc05a839bd9ab77ad94e7821dd7f2e6c7b335dfdfcd5b3960d5af2708'
        '7f3672c1ab270fb5291f9587316065c003ed4ee5b1063d5007'))
    assert third == [(b':status', b'200'), (b'cache-control', b'private'), (b'date', b'Mon, 21 Oct 2013 20:13:22 GMT'),
                     (b'location', b'https://www.example.com'), (b'content-encoding', b'gzip'),
                     (b'set-cookie', b'foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1')]
    assert decoder.size <= 256


def test_hpack_literals_we_send_decode_back_with_long_values():
    headers = [(b':path', b'/etcdserverpb.Watch/Watch'), (b'token', b't' * 300), (b'te', b'trailers')]
    assert hpack.Decoder().decode(hpack.encode(headers)) == headers


@pytest.mark.parametrize('block, problem', [
    (bytes([0x80 | 70]), 'not in the table'),          # an index beyond both tables
    (bytes([0x40, 0x81, 0x00, 0x00]), 'padding'),      # a Huffman string whose last bits are not EOS's ones
    (bytes([0x40, 0x05, 0x61]), 'ends inside a string'),
    (bytes([0x3F, 0xFF, 0xFF]), 'integer'),
], ids=['bad-index', 'bad-padding', 'truncated-string', 'truncated-integer'])
def test_hpack_refuses_broken_blocks(block, problem):
    with pytest.raises(hpack.HpackError, match=problem):
        hpack.Decoder().decode(block)


def test_varints_round_trip_and_int64_sign():
    assert encode_varint(0) == b'\x00' and encode_varint(300) == b'\xac\x02'
    assert len(encode_varint(-1)) == 10 and signed((1 << 64) - 1) == -1
    assert decode_fields(b'\x08' + encode_varint(2 ** 40) + b'\x12\x03abc') == [(1, 2 ** 40), (2, b'abc')]


def _field(number: int, payload) -> bytes:
    if isinstance(payload, int):
        return encode_varint(number << 3) + encode_varint(payload)
    return encode_varint(number << 3 | 2) + encode_varint(len(payload)) + payload


def _messages():
    """Two messages: varints, a collected header, a streamed blob, a run of events, a skipped field, and an
    empty message between them (a progress notification has nothing but a header)."""
    events = [_field(11, b'event-%d-' % i + b'x' * (i * 37 % 300)) for i in range(40)]
    first = (_field(1, b'\x18\x07') + _field(2, 123456) + _field(3, b'blob' * 500) + b''.join(events[:25])
             + _field(9, b'skipped') + b''.join(events[25:]))
    second = _field(2, 0) + _field(3, b'')
    return grpc_message(first) + grpc_message(b'') + grpc_message(second), events


def _read(stream: bytes, cuts):
    seen = []
    reader = FieldReader({1: COLLECTED, 3: STREAMED, 11: RUN},
                         lambda f, v: seen.append(('varint', f, v)),
                         lambda f, d: seen.append(('bytes', f, bytes(d))),
                         lambda f, v: seen.append(('stream', f, bytes(v))),
                         lambda: seen.append(('end',)))
    view = memoryview(stream)
    previous = 0
    for cut in list(cuts) + [len(stream)]:
        reader.feed(view[previous:cut])
        previous = cut
    assert reader.message_left == -1
    # a streamed field arrives in as many pieces as there were reads: join them for comparison (runs end where
    # their content says, at RUN_BYTES, another field or the message's end, never where a read ends)
    joined = []
    for item in seen:
        if joined and item[0] == 'stream' and joined[-1][:2] == item[:2]:
            joined[-1] = (item[0], item[1], joined[-1][2] + item[2])
        else:
            joined.append(item)
    return joined


def test_field_reader_gives_the_same_fields_wherever_the_reads_end():
    stream, events = _messages()
    whole = _read(stream, [])
    assert whole[0] == ('bytes', 1, b'\x18\x07') and ('varint', 2, 123456) in whole
    assert ('stream', 3, b'blob' * 500) in whole
    assert [item for item in whole if item[:2] == ('bytes', 11)] == [
        ('bytes', 11, b''.join(events[:25])), ('bytes', 11, b''.join(events[25:]))]  # the skipped field ends a run
    assert whole.count(('end',)) == 3
    for cut in range(1, len(stream)):
        assert _read(stream, [cut]) == whole, 'one read ending at %d' % cut
    assert _read(stream, range(1, len(stream))) == whole  # a byte at a time


def test_a_long_run_is_handed_over_in_pieces_of_about_run_bytes(monkeypatch):
    monkeypatch.setattr(protobuf, 'RUN_BYTES', 1000)
    events = [_field(11, b'e' * 90) for _unused in range(100)]
    runs = []
    reader = FieldReader({11: RUN}, lambda f, v: None, lambda f, d: runs.append(bytes(d)), lambda f, v: None,
                         lambda: None)
    stream = grpc_message(b''.join(events))
    for start in range(0, len(stream), 700):
        reader.feed(memoryview(stream)[start:start + 700])
    assert b''.join(runs) == b''.join(events) and len(runs) > 5 and all(len(r) < 2000 for r in runs)
    assert all(r[0] == 0x5A for r in runs), 'every run starts at a field key'


@pytest.mark.parametrize('stream, problem', [
    (b'\x01' + struct.pack('>I', 0), 'compressed'),
    (grpc_message(b'\x1a\x10abc'), 'past the end'),   # a length beyond its message
    (grpc_message(b'\x0b'), 'wire type 3'),            # a group: etcd never sends one
], ids=['compressed', 'overlong-field', 'wire-type'])
def test_field_reader_refuses_what_etcd_never_sends(stream, problem):
    reader = FieldReader({}, lambda f, v: None, lambda f, d: None, lambda f, v: None, lambda: None)
    with pytest.raises(GrpcError, match=problem):
        reader.feed(memoryview(stream))


def _txn_request_class():
    """etcd's TxnRequest (rpc.proto), only the fields a replay sends, built from a descriptor here."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    field = descriptor_pb2.FieldDescriptorProto
    proto = descriptor_pb2.FileDescriptorProto(name='test_txn.proto', package='test_txn', syntax='proto3')
    messages = {
        'PutRequest': [('key', 1, field.TYPE_BYTES, None), ('value', 2, field.TYPE_BYTES, None)],
        'DeleteRangeRequest': [('key', 1, field.TYPE_BYTES, None), ('range_end', 2, field.TYPE_BYTES, None)],
        'RequestOp': [('request_put', 2, field.TYPE_MESSAGE, 'PutRequest'),
                      ('request_delete_range', 3, field.TYPE_MESSAGE, 'DeleteRangeRequest')],
        'TxnRequest': [('success', 2, field.TYPE_MESSAGE, 'RequestOp')],
    }
    for name, fields in messages.items():
        message = proto.message_type.add(name=name)
        for fname, number, kind, type_name in fields:
            message.field.add(name=fname, number=number, type=kind, label=field.LABEL_REPEATED if fname == 'success'
                              else field.LABEL_OPTIONAL, **({'type_name': '.test_txn.' + type_name} if type_name else {}))
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName('test_txn.TxnRequest'))


def test_txn_request_is_what_protobuf_decodes_as_etcds_txn():
    big = bytes(range(256)) * 600   # a value whose length takes a three-byte varint
    request = _txn_request_class().FromString(calls.txn_request([
        (calls.PUT, b'/a', b'1'), (calls.DELETE, b'/b', None), (calls.PUT, b'/c', big), (calls.PUT, b'/empty', b'')]))
    ops = list(request.success)
    assert [(op.HasField('request_put'), op.HasField('request_delete_range')) for op in ops] == [
        (True, False), (False, True), (True, False), (True, False)]
    assert (ops[0].request_put.key, ops[0].request_put.value) == (b'/a', b'1')
    assert (ops[1].request_delete_range.key, ops[1].request_delete_range.range_end) == (b'/b', b'')
    assert ops[2].request_put.value == big and ops[3].request_put.value == b''
    with pytest.raises(ValueError, match='put or delete'):
        calls.txn_request([('compare', b'/a', None)])
