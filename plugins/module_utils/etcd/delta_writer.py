# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Write one delta snapshot: encode (JSON + sha256 trailer), publish in two phases."""

from __future__ import annotations

import os
import tempfile
from typing import Any, Dict, Optional, Sequence

from ansible_collections.steward.cluster.plugins.module_utils.etcd import naming
from ansible_collections.steward.cluster.plugins.module_utils.etcd.compression import compressing_writer, suffix_for
from ansible_collections.steward.cluster.plugins.module_utils.etcd.delta import Event, write_events
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import SnapshotInvalid, StoreError
from ansible_collections.steward.cluster.plugins.module_utils.etcd.local_store import (
    LocalStore,
    remove_quietly,
    temp_name,
)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.private_files import open_private
from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot import iso, publish_two_phase, unix
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store import METADATA_FORMAT, Snapshot, SnapshotStore
from ansible_collections.steward.cluster.plugins.module_utils.etcd.verify import hash_file


def delta_metadata(name: naming.SnapshotName, events: Sequence[Event], digests: Any, now: float,
                   compression: Optional[str], source: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    meta: Dict[str, Any] = {
        'format': METADATA_FORMAT,
        'name': str(name),
        'kind': name.kind,
        'sha256': digests.sha256,
        'size': digests.size,
        'start_revision': name.start_revision,
        'revision': name.end_revision,
        'created': name.created,
        'events': len(events),
        'first_event_revision': events[0].revision,
        'verified': {'at': iso(now), 'checks': ['sha256-trailer', 'revisions']},
    }
    if compression:
        meta['compression'] = compression
    meta.update(source or {})
    return meta


def write_delta(store: SnapshotStore, start_revision: int, events: Sequence[Event], *, now: float,
                compression: Optional[str] = None, tmp_dir: Optional[str] = None,
                source: Optional[Dict[str, Any]] = None) -> Snapshot:
    """Publish `events` (revisions start_revision.. in order) as `Incr-<start>-<end>-<now>`.

    The events are encoded (and compressed) straight into the temp file: memory holds the events
    once, not their encoding as well."""
    if not events:
        raise StoreError('no events to write: an empty delta snapshot is never published')
    if events[0].revision < start_revision:
        raise SnapshotInvalid('delta starting at %d holds an older event of revision %d' % (
            start_revision, events[0].revision))
    name = naming.delta_name(start_revision, events[-1].revision, unix(now), suffix_for(compression))
    directory = store.ensure_dir() if isinstance(store, LocalStore) else (tmp_dir or tempfile.gettempdir())
    path = os.path.join(directory, temp_name(str(name)))
    try:
        with open_private(path) as f:
            writer = compressing_writer(f, compression)
            write_events(events, writer)
            writer.close()
            f.flush()
            os.fsync(f.fileno())
        digests = hash_file(path)
        return publish_two_phase(store, name, path, delta_metadata(name, events, digests, now, compression, source))
    finally:
        remove_quietly(path)
