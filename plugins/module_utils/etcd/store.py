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
"""

from __future__ import annotations

import abc
import dataclasses
from typing import Any, Dict, List, Optional

from ansible_collections.steward.cluster.plugins.module_utils.etcd.naming import SnapshotName

STATUS_VALID = 'valid'            # data + metadata present, size agrees (sha256 agrees when checked)
STATUS_INCOMPLETE = 'incomplete'  # data without metadata: never verified, never restored
STATUS_CORRUPT = 'corrupt'        # metadata present but size or sha256 disagree
STATUS_ORPHAN = 'orphan-metadata'  # metadata without data
STATUS_PARTIAL = 'partial'        # a temp object of an upload that has not finished (or died)

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

    @property
    def valid(self) -> bool:
        return self.status == STATUS_VALID

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
