# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Write one delta snapshot: the encoded events (JSON + sha256 trailer), published in two phases."""

from __future__ import annotations

import hashlib
import os
import tempfile
from typing import Any, Dict, Optional

from ansible_collections.steward.cluster.plugins.module_utils.common.times import format_rfc3339
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store import naming
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.compression import (
    compressing_writer,
    suffix_for,
)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot.delta_encoding import (
    EncodedEvents,
    as_encoded,
)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import SnapshotInvalid, StoreError
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.local_store import (
    LocalStore,
    remove_quietly,
    temp_name,
)
from ansible_collections.steward.cluster.plugins.module_utils.common.files import open_private
from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot.snapshot import publish_two_phase, unix
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.store import (
    METADATA_FORMAT,
    Snapshot,
    SnapshotStore,
)


def delta_metadata(name: naming.SnapshotName, events: EncodedEvents, digests: Any, now: float,
                   compression: Optional[str], source: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    meta: Dict[str, Any] = {
        'format': METADATA_FORMAT,
        'name': str(name),
        'kind': name.kind,
        'sha256': digests['sha256'],
        'size': digests['size'],
        'start_revision': name.start_revision,
        'revision': name.end_revision,
        'created': name.created,
        'events': len(events),
        'first_event_revision': events.first_revision,
        'verified': {'at': format_rfc3339(unix(now)), 'checks': ['sha256-trailer', 'revisions']},
    }
    if compression:
        meta['compression'] = compression
    meta.update(source or {})
    return meta


WRITE_BUFFER = 1024 * 1024  # the size of an encoded chunk: chunks are written through


class _CountingSink:
    """What the (compressed) stream writes to the file: counted and hashed on the way (the stored bytes'
    sha256 and size go into the metadata without reading the file back)."""

    def __init__(self, f: Any):
        self.f = f
        self.sha256 = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes) -> int:
        self.f.write(data)
        self.sha256.update(data)
        self.size += len(data)
        return len(data)

    def flush(self) -> None:
        self.f.flush()


def write_delta(store: SnapshotStore, start_revision: int, events: Any, *, now: float,
                compression: Optional[str] = None, tmp_dir: Optional[str] = None,
                source: Optional[Dict[str, Any]] = None) -> Snapshot:
    """Publish `events` (EncodedEvents from the buffer, or delta.Event objects; revisions start_revision..
    in order) as `Incr-<start>-<end>-<now>`.

    The encoded events are streamed into the temp file as they are (JSON, its sha256 trailer, compressed
    when asked), hashed on the way: memory holds the events once, not their encoding as well."""
    events = as_encoded(events)
    if not len(events):
        raise StoreError('no events to write: an empty delta snapshot is never published')
    if events.first_revision < start_revision:
        raise SnapshotInvalid('delta starting at %d holds an older event of revision %d' % (
            start_revision, events.first_revision))
    name = naming.delta_name(start_revision, events.last_revision, unix(now), suffix_for(compression))
    directory = store.ensure_dir() if isinstance(store, LocalStore) else (tmp_dir or tempfile.gettempdir())
    path = os.path.join(directory, temp_name(str(name)))
    try:
        with open_private(path, 'wb', WRITE_BUFFER) as f:
            content = hashlib.sha256()
            if compression:
                sink = _CountingSink(f)
                writer = compressing_writer(sink, compression)
            else:
                sink, writer = None, f
            size = 0
            for part in events.json_parts():
                content.update(part)
                writer.write(part)
                size += len(part)
            trailer = content.digest()  # etcd-backup-restore's trailer: the sha256 of the JSON
            writer.write(trailer)
            if sink is not None:
                writer.close()
                digests = {'sha256': sink.sha256.hexdigest(), 'size': sink.size}
            else:
                # the stored bytes are the JSON and its digest: their sha256 continues the JSON's, no second pass
                stored = content.copy()
                stored.update(trailer)
                digests = {'sha256': stored.hexdigest(), 'size': size + len(trailer)}
            f.flush()
            os.fsync(f.fileno())
        return publish_two_phase(store, name, path, delta_metadata(name, events, digests, now, compression, source))
    finally:
        remove_quietly(path)
