"""Delta snapshot format, buffer and chain: etcd-backup-restore's encoding, gaps, overlaps."""

import base64
import hashlib
import json

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.etcd.delta import (
    EVENT_DELETE, EVENT_PUT, DeltaBuffer, Event, decode_events, encode_events, group_by_revision, plan_chain)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import SnapshotInvalid
from ansible_collections.steward.cluster.plugins.module_utils.etcd.naming import delta_name, full_name
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store import STATUS_INCOMPLETE, STATUS_VALID, Snapshot


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


def test_buffer_skips_repeats_take_restore_and_advance():
    buf = DeltaBuffer(10)
    assert buf.add([ev(9), ev(10), ev(11), ev(12)]) == 2  # a resumed watch may repeat old revisions
    assert buf.last_revision == 12 and buf.size > 0
    start, events = buf.take()
    assert start == 11 and [e.revision for e in events] == [11, 12] and len(buf) == 0 and buf.after_revision == 12
    buf.restore(start, events)  # the write failed: nothing lost
    assert buf.after_revision == 10 and [e.revision for e in buf.events] == [11, 12]
    buf.add([ev(13)])
    buf.advance_to(12)  # a full snapshot at 12 holds 11 and 12
    assert buf.after_revision == 12 and [e.revision for e in buf.events] == [13]
    assert buf.take()[0] == 13


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
