# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The snapshot store contract shared by local directories and S3.

Publishing is two-phase so that nothing partial can ever look valid:
1. the snapshot data is made visible atomically (local: temp file, fsync, rename, fsync dir;
   S3: a (multipart) upload, which only becomes visible complete);
2. only after the data is verified, its metadata object `<name>.meta.json` (sha256, size, revision,
   cluster id, etcd version, verification) is published the same way.
A snapshot is *valid* only when both exist and agree. Data without metadata is *incomplete*
(an interrupted upload or a crash between the phases) and is never restored from.

etcd-backup-restore (etcd-druid's sidecar) writes the same names without metadata objects. Objects
without metadata that are older than every snapshot with metadata (or in a store with no metadata at
all) are its snapshots: *unrecorded*, usable once their content is verified (etcd's sha256 trailer
and the bolt structure for a full snapshot, the trailer and the events for a delta), so an etcd-druid
user keeps their bucket. Ours can never be older than our own first snapshot.
"""

from __future__ import annotations

import abc
import dataclasses
from typing import Any, Callable, Dict, List, Optional

from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.naming import SnapshotName

STATUS_VALID = 'valid'            # data + metadata present, size agrees (sha256 agrees when checked)
STATUS_INCOMPLETE = 'incomplete'  # data without metadata: never verified, never restored
STATUS_CORRUPT = 'corrupt'        # metadata present but size or sha256 disagree
STATUS_ORPHAN = 'orphan-metadata'  # metadata without data
STATUS_PARTIAL = 'partial'        # a temp object of an upload that has not finished (or died)
STATUS_UNRECORDED = 'unrecorded'  # written by etcd-backup-restore: no metadata; verified by content when read
USABLE = (STATUS_VALID, STATUS_UNRECORDED)
UNRECORDED_PROBLEM = ('no metadata object: written by etcd-backup-restore (or before this store had metadata); '
                      'its content is verified whenever it is read')

METADATA_FORMAT = 1


@dataclasses.dataclass
class Snapshot:
    """One entry of a store listing."""

    name: Optional[SnapshotName]  # None for partial temp objects whose name cannot be parsed
    key: str                      # object key (S3) or path relative to the store root (local)
    size: int
    modified: float               # unix time of the data object
    status: str
    metadata: Optional[Dict[str, Any]] = None
    problem: str = ''             # why the snapshot is not valid
    failed_check: str = ''        # the verification that failed (verify.CHECK_*), when content was checked
    checked: str = 'listing'      # how far it was verified: 'listing' (names, sizes, metadata) or 'content'

    @property
    def valid(self) -> bool:
        """Usable as far as the listing can tell (valid, or unrecorded and checked by content when read)."""
        return self.status in USABLE

    @property
    def recorded(self) -> bool:
        """Has metadata with a sha256 to check the stored bytes against."""
        return bool((self.metadata or {}).get('sha256'))

    @property
    def is_full(self) -> bool:
        return self.name is not None and self.name.is_full

    def to_dict(self) -> Dict[str, Any]:
        """JSON-shaped view for module results and CR status."""
        name = self.name
        return {
            'name': str(name) if name else self.key.rsplit('/', 1)[-1],
            'key': self.key,
            'kind': name.kind if name else None,
            'start_revision': name.start_revision if name else None,
            'end_revision': name.end_revision if name else None,
            'created': name.created if name else None,
            'size': self.size,
            'status': self.status,
            'valid': self.valid,
            'problem': self.problem,
            'failed_check': self.failed_check or None,
            'checked': self.checked,
            'sha256': (self.metadata or {}).get('sha256'),
            'metadata': self.metadata,
        }


class SnapshotStore(abc.ABC):
    """Where snapshots live. Implementations: LocalStore (a directory), S3Store (s3://bucket/prefix)."""

    url: str

    @abc.abstractmethod
    def list(self) -> List[Snapshot]:
        """Every snapshot object (valid or not), sorted in restore order (oldest first)."""

    @abc.abstractmethod
    def publish_data(self, name: SnapshotName, source_path: str) -> Snapshot:
        """Phase 1: make the data visible atomically under its final name. Returns it as incomplete."""

    @abc.abstractmethod
    def publish_metadata(self, snapshot: Snapshot, metadata: Dict[str, Any]) -> Snapshot:
        """Phase 2: publish the metadata atomically; the snapshot becomes valid."""

    @abc.abstractmethod
    def fetch(self, snapshot: Snapshot, dest_path: str) -> None:
        """Copy the snapshot data to a local file (written to a temp name, then renamed)."""

    @abc.abstractmethod
    def delete(self, snapshot: Snapshot) -> None:
        """Delete data and metadata (metadata first, so a half-deleted snapshot is never valid)."""

    def latest_valid(self, full_only: bool = True) -> Optional[Snapshot]:
        candidates = [s for s in self.list() if s.valid and (s.is_full or not full_only)]
        return candidates[-1] if candidates else None


def mark_unrecorded(snapshots: List[Snapshot],
                    written_by_us: Optional[Callable[[Snapshot], bool]] = None) -> List[Snapshot]:
    """Incomplete objects older than every snapshot with metadata are etcd-backup-restore's (see above).

    In a store with no metadata at all, `written_by_us` is asked about the newest object without
    metadata: when our first write there was interrupted between its phases, nothing is marked."""
    recorded = [s.name.created for s in snapshots if s.name is not None and s.metadata is not None
                and s.status != STATUS_PARTIAL]
    first_recorded = min(recorded) if recorded else None
    bare = [s for s in snapshots if s.status == STATUS_INCOMPLETE and s.name is not None]
    if first_recorded is None and bare and written_by_us is not None and \
            written_by_us(max(bare, key=lambda s: s.name.sort_key)):
        return snapshots
    marked = []
    for snap in snapshots:
        if snap.status == STATUS_INCOMPLETE and snap.name is not None and (
                first_recorded is None or snap.name.created < first_recorded):
            snap = dataclasses.replace(snap, status=STATUS_UNRECORDED, problem=UNRECORDED_PROBLEM)
        marked.append(snap)
    return marked
