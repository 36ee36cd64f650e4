"""Delta snapshot format, buffer and chain: etcd-backup-restore's encoding, gaps, overlaps."""

import base64
import hashlib
import json

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot.delta import (
    EVENT_DELETE, EVENT_PUT, Event, decode_events, encode_events, group_by_revision, plan_chain)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot.delta_encoding import DeltaBuffer
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import SnapshotInvalid
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.naming import delta_name, full_name
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.store import (
    STATUS_INCOMPLETE,
    STATUS_VALID,
    Snapshot,
)


def ev(rev, key='k', value='v', type_=EVENT_PUT):
    return Event(type=type_, key=key.encode(), value=value.encode(), mod_revision=rev, create_revision=rev, version=1,
                 time='2026-11-22T00:00:00.000000000Z')


def test_encoding_is_etcd_backup_restore_json_plus_sha256():
    blob = encode_events([ev(5, 'a', 'b'), ev(6, 'a', type_=EVENT_DELETE)])
    data, trailer = blob[:-32], blob[-32:]
    assert hashlib.sha256(data).digest() == trailer
    items = json.loads(data)
    assert items[0] == {'etcdEvent': {'kv': {'key': base64.b64encode(b'a').decode(), 'create_revision': 5,
                                             'mod_revision': 5, 'version': 1,
                                             'value': base64.b64encode(b'b').decode()}},
                        'time': '2026-11-22T00:00:00.000000000Z'}
    assert items[1]['etcdEvent']['type'] == EVENT_DELETE  # PUT (0) is omitted, as Go omits zero values
    assert 'type' not in items[0]['etcdEvent']


def test_round_trip_keeps_binary_keys_and_values():
    events = [Event(EVENT_PUT, b'\x00\xffkey', b'\x01' * 300, 9, 2, 3, 77, 'now')]
    assert decode_events(encode_events(events)) == events


@pytest.mark.parametrize('mutate, message', [
    (lambda b: b[:-1], 'sha256 trailer'),
    (lambda b: b[:5] + bytes([b[5] ^ 1]) + b[6:], 'sha256 trailer'),
    (lambda b: b'x', 'too short'),
    (lambda b: b'{"a":1}' + hashlib.sha256(b'{"a":1}').digest(), 'JSON array'),
    (lambda b: b'[1]' + hashlib.sha256(b'[1]').digest(), 'event 0'),
    (lambda b: b'not json' + hashlib.sha256(b'not json').digest(), 'not valid JSON'),
])
def test_damaged_deltas_are_refused(mutate, message):
    with pytest.raises(SnapshotInvalid, match=message):
        decode_events(mutate(encode_events([ev(5), ev(6)])))


def test_out_of_order_events_are_refused():
    data = json.dumps([ev(6).to_json(), ev(5).to_json()]).encode()
    with pytest.raises(SnapshotInvalid, match='out of order'):
        decode_events(data + hashlib.sha256(data).digest())


def test_group_by_revision():
    groups = list(group_by_revision([ev(3, 'a'), ev(3, 'b'), ev(4, 'c'), ev(6, 'd')]))
    assert [(rev, [e.key for e in evs]) for rev, evs in groups] == [(3, [b'a', b'b']), (4, [b'c']), (6, [b'd'])]


def held(buf):
    return [r for chunk in buf.chunks for r in chunk.revisions]


def test_buffer_skips_repeats_take_restore_and_advance():
    buf = DeltaBuffer(10)
    assert buf.add([ev(9), ev(10), ev(11), ev(12)]) == 2  # a resumed watch may repeat old revisions
    assert buf.last_revision == 12 and buf.size > 0
    start, events = buf.take()
    assert start == 11 and list(events.revisions()) == [11, 12] and len(buf) == 0 and buf.after_revision == 12
    buf.restore(start, events)  # the write failed: nothing lost
    assert buf.after_revision == 10 and held(buf) == [11, 12] and len(buf) == 2
    buf.add([ev(13)])
    buf.advance_to(12)  # a full snapshot at 12 holds 11 and 12
    assert buf.after_revision == 12 and held(buf) == [13]
    assert buf.take()[0] == 13


def test_events_are_encoded_once_exactly_as_stored_and_kept_without_objects():
    """The buffer holds the JSON a delta stores (byte for byte what decode_events reads back), one bytes
    object per watch response and two integer arrays, whatever the number of events."""
    events = [ev(5, 'a', 'b'), ev(5, 'c', ''), ev(6, 'a', type_=EVENT_DELETE),
              Event(EVENT_PUT, b'k\xff', b'\x00v', 7, 3, 2, 1234, '2026-01-01T00:00:00.000000001Z')]
    buf = DeltaBuffer(4)
    buf.add(events)
    chunk = buf.chunks[0]
    assert len(buf.chunks) == 1 and list(chunk.revisions) == [5, 5, 6, 7] and len(buf) == 4
    data = b'[' + chunk.data + b']'
    assert decode_events(data + hashlib.sha256(data).digest()) == events
    assert encode_events(events) == data + hashlib.sha256(data).digest()  # the same bytes as the Event path
    buf.advance_to(5)
    assert list(buf.chunks[0].revisions) == [6, 7] and buf.chunks[0].data.startswith(b'{"etcdEvent":{"type":1')


@pytest.mark.parametrize('event', [
    ev(5, 'a', 'b'),  # a put with every field: the one-formatting path
    Event(EVENT_PUT, b'k\xff', b'\x00v', 7, 3, 2, 1234, '2026-01-01T00:00:00.000000001Z'),  # with a lease
    Event(EVENT_PUT, b'k', b'v', 7, 3, 2, 0, ''),  # no time: Go's zero time
    ev(5, 'c', ''),  # empty value: left out
    ev(6, 'a', type_=EVENT_DELETE),
    Event(EVENT_DELETE, b'gone', b'', 9, 0, 0, 0, '2026-01-01T00:00:00Z'),  # a delete as etcd sends it
], ids=['put', 'lease', 'no-time', 'empty-value', 'delete', 'delete-bare'])
def test_encoding_is_the_json_of_the_event_struct(event):
    from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot.delta_encoding import encode_event
    encoded = encode_event(event.type, event.key, event.value, event.create_revision, event.mod_revision,
                           event.version, event.lease, event.time)
    assert encoded == json.dumps(event.to_json(), separators=(',', ':')).encode()


def snap(name, valid=True):
    return Snapshot(name, 'v2/%s' % name, 10, float(name.created), STATUS_VALID if valid else STATUS_INCOMPLETE,
                    {'sha256': 'x'})


def test_chain_follows_deltas_and_stops_at_a_gap():
    full = snap(full_name(100, 1000))
    deltas = [snap(delta_name(101, 120, 1010)), snap(delta_name(121, 150, 1020)), snap(delta_name(161, 170, 1030))]
    chain = plan_chain([deltas[2], full, deltas[0], deltas[1]])
    assert chain.base is full and chain.deltas == deltas[:2] and chain.tip == 150
    assert 'revisions 151..160' in chain.gap and chain.orphans == [deltas[2]]
    assert chain.events_since_full == 50


def test_chain_ignores_invalid_and_older_deltas_and_accepts_overlap():
    old_full = snap(full_name(50, 900))
    full = snap(full_name(100, 1000))
    chain = plan_chain([old_full, snap(delta_name(51, 99, 950)), full, snap(delta_name(101, 130, 1010), valid=False),
                        snap(delta_name(95, 130, 1011)), snap(delta_name(131, 140, 1012))])
    assert chain.base is full and [str(d.name) for d in chain.deltas] == [
        'Incr-00000095-00000130-1011', 'Incr-00000131-00000140-1012'] and chain.tip == 140 and not chain.gap


def test_chain_without_full_and_with_a_given_base():
    assert plan_chain([snap(delta_name(1, 5, 10))]).base is None
    older = snap(full_name(10, 100))
    newer = snap(full_name(20, 200))
    chain = plan_chain([older, snap(delta_name(11, 20, 150)), newer, snap(delta_name(21, 30, 250))], base=older)
    assert chain.base is older and chain.tip == 30 and len(chain.deltas) == 2


def test_a_large_watch_response_is_encoded_in_chunks_cut_only_between_revisions(monkeypatch):
    from types import SimpleNamespace
    from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot import delta_encoding
    monkeypatch.setattr(delta_encoding, 'CHUNK_BYTES', 300)
    pb = [SimpleNamespace(type=0, kv=SimpleNamespace(key=b'k%d' % i, value=b'v' * 100, create_revision=0,
                                                     mod_revision=10 + i // 3, version=1, lease=0)) for i in range(12)]
    chunks = list(delta_encoding.encode_response(pb, '2026-01-01T00:00:00Z'))
    assert len(chunks) > 1 and sum(len(c) for c in chunks) == 12
    for before, after in zip(chunks, chunks[1:]):
        assert before.revisions[-1] < after.revisions[0], 'a revision split across chunks'
    data = b'[' + b','.join(c.data for c in chunks) + b']'
    decoded = decode_events(data + hashlib.sha256(data).digest())
    assert [(e.key, e.revision) for e in decoded] == [(b'k%d' % i, 10 + i // 3) for i in range(12)]
