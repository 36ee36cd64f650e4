# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Delta (incremental) snapshots: etcd watch events written as etcd-backup-restore writes them.

Format (so stores stay readable by either tool): a JSON array of
`{"etcdEvent": {"type": 1?, "kv": {key, create_revision, mod_revision, version, value, lease}}, "time": RFC3339Nano}`
(Go's encoding: []byte as base64, zero values omitted, PUT = type 0 omitted), followed by the raw
32-byte sha256 of that JSON. A delta is named `Incr-<start>-<end>-<unix>` where start is one past
the revision the previous snapshot ended at, so a missing delta shows as a gap in the names.

The chain of a store is the newest valid full snapshot plus the valid deltas that continue it
without a gap; its *tip* is the last revision it covers. Backups resume watching at tip + 1, so an
event is never written twice and never skipped, whatever restarts happen in between.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import io
import json
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import SnapshotInvalid
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.store import Snapshot

EVENT_PUT = 0
EVENT_DELETE = 1
SHA256_SIZE = 32


@dataclasses.dataclass(frozen=True)
class Event:
    """One watch event, as stored in a delta snapshot."""

    type: int
    key: bytes
    value: bytes
    mod_revision: int
    create_revision: int = 0
    version: int = 0
    lease: int = 0
    time: str = ''

    @property
    def revision(self) -> int:
        return self.mod_revision

    def to_json(self) -> Dict[str, Any]:
        """Go's encoding of clientv3.Event inside etcd-backup-restore's event struct."""
        kv: Dict[str, Any] = {}
        if self.key:
            kv['key'] = base64.b64encode(self.key).decode('ascii')
        for name in ('create_revision', 'mod_revision', 'version'):
            if getattr(self, name):
                kv[name] = getattr(self, name)
        if self.value:
            kv['value'] = base64.b64encode(self.value).decode('ascii')
        if self.lease:
            kv['lease'] = self.lease
        etcd_event: Dict[str, Any] = {}
        if self.type:
            etcd_event['type'] = self.type
        etcd_event['kv'] = kv
        return {'etcdEvent': etcd_event, 'time': self.time or '0001-01-01T00:00:00Z'}


def _event_from_json(item: Any, index: int) -> Event:
    if not isinstance(item, dict) or not isinstance(item.get('etcdEvent'), dict):
        raise SnapshotInvalid('delta event %d is not {"etcdEvent": {...}, "time": ...}' % index)
    raw = item['etcdEvent']
    kv = raw.get('kv') or {}
    try:
        event = Event(type=int(raw.get('type') or 0), key=base64.b64decode(kv.get('key') or ''),
                      value=base64.b64decode(kv.get('value') or ''), mod_revision=int(kv.get('mod_revision') or 0),
                      create_revision=int(kv.get('create_revision') or 0), version=int(kv.get('version') or 0),
                      lease=int(kv.get('lease') or 0), time=str(item.get('time') or ''))
    except (TypeError, ValueError) as exc:
        raise SnapshotInvalid('delta event %d is malformed: %s' % (index, exc)) from exc
    if event.type not in (EVENT_PUT, EVENT_DELETE):
        raise SnapshotInvalid('delta event %d has unknown type %d' % (index, event.type))
    if not event.key or event.mod_revision < 1:
        raise SnapshotInvalid('delta event %d has no key or no mod_revision' % index)
    return event


def write_events(events: Sequence[Event], out: Any) -> None:
    """Write the stored form (JSON events + sha256 of the JSON) to a file object, one event at a
    time: a delta can hold the whole memory limit's worth of events, and a second full copy of them
    in memory would double the controller's footprint."""
    digest = hashlib.sha256()
    encoder = json.JSONEncoder(separators=(',', ':'))
    for index, event in enumerate(events):
        chunk = (b'[' if index == 0 else b',') + encoder.encode(event.to_json()).encode('utf-8')
        digest.update(chunk)
        out.write(chunk)
    tail = b']' if events else b'[]'
    digest.update(tail)
    out.write(tail)
    out.write(digest.digest())


def encode_events(events: Sequence[Event]) -> bytes:
    """The stored bytes of `events` (see write_events)."""
    out = io.BytesIO()
    write_events(events, out)
    return out.getvalue()


def decode_events(blob: bytes, where: str = 'delta snapshot') -> List[Event]:
    """Events of a stored delta; SnapshotInvalid when the trailer, the JSON or the revision order is wrong."""
    if len(blob) < SHA256_SIZE + 2:
        raise SnapshotInvalid('%s is %d bytes: too short to hold events and a sha256' % (where, len(blob)))
    data, trailer = blob[:-SHA256_SIZE], blob[-SHA256_SIZE:]
    if hashlib.sha256(data).digest() != trailer:
        raise SnapshotInvalid('%s: sha256 trailer does not match its content (truncated or corrupt)' % where)
    try:
        items = json.loads(data.decode('utf-8'))
    except (UnicodeDecodeError, ValueError) as exc:
        raise SnapshotInvalid('%s: events are not valid JSON: %s' % (where, exc)) from exc
    if not isinstance(items, list):
        raise SnapshotInvalid('%s: expected a JSON array of events' % where)
    events = [_event_from_json(item, index) for index, item in enumerate(items)]
    for before, after in zip(events, events[1:]):
        if after.revision < before.revision:
            raise SnapshotInvalid('%s: revision %d comes after %d: events out of order' % (
                where, after.revision, before.revision))
    return events


def group_by_revision(events: Iterable[Event]) -> Iterator[Tuple[int, List[Event]]]:
    """(revision, events) in order: one etcd transaction each when replayed."""
    group: List[Event] = []
    for event in events:
        if group and event.revision != group[0].revision:
            yield group[0].revision, group
            group = []
        group.append(event)
    if group:
        yield group[0].revision, group


# --- the chain of a store -----------------------------------------------------------------------
@dataclasses.dataclass
class Chain:
    base: Optional[Snapshot]            # the newest valid full snapshot
    deltas: List[Snapshot]              # valid deltas continuing it, in order
    tip: int                            # last revision the chain covers (0: no full snapshot)
    gap: str = ''                       # why the chain stops before the newest delta
    orphans: List[Snapshot] = dataclasses.field(default_factory=list)  # valid deltas beyond a gap

    @property
    def events_since_full(self) -> int:
        return self.tip - self.base.name.end_revision if self.base is not None else 0

    def names(self) -> List[str]:
        return ([str(self.base.name)] if self.base else []) + [str(d.name) for d in self.deltas]


def plan_chain(snapshots: Sequence[Snapshot], base: Optional[Snapshot] = None) -> Chain:
    """The base full snapshot (the newest valid one unless given) and the deltas that continue it.

    A delta continues the chain when it starts at or before tip + 1 and ends after the tip (one that
    overlaps is fine: replay skips revisions it has). A delta starting after tip + 1 means events
    are missing: the chain stops there and says so."""
    valid = sorted((s for s in snapshots if s.valid and s.name is not None), key=lambda s: s.name.sort_key)
    if base is None:
        fulls = [s for s in valid if s.is_full]
        base = fulls[-1] if fulls else None
    if base is None:
        return Chain(None, [], 0)
    tip = base.name.end_revision
    chain: List[Snapshot] = []
    orphans: List[Snapshot] = []
    gap = ''
    for snap in valid:
        if snap.is_full or snap.name.end_revision <= tip:
            continue
        if gap:
            orphans.append(snap)
        elif snap.name.start_revision > tip + 1:
            gap = 'revisions %d..%d are in no valid delta snapshot (next delta %s starts at %d)' % (
                tip + 1, snap.name.start_revision - 1, snap.name, snap.name.start_revision)
            orphans.append(snap)
        else:
            chain.append(snap)
            tip = snap.name.end_revision
    return Chain(base, chain, tip, gap, orphans)
