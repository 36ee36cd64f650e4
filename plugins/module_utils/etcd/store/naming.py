# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Snapshot names in etcd-backup-restore's layout, so existing stores stay readable.

`Kind-%08d(startRev)-%08d(lastRev)-<unix created>[compressionSuffix][.final]`, Kind in {Full, Incr};
the v2 layout is flat under `<prefix>/v2/`, the legacy v1 layout groups by `Backup-<unix>/` directory.
Restore order: by last revision, then by creation time.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Optional

from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import SnapshotInvalid

KIND_FULL = 'Full'
KIND_DELTA = 'Incr'
KINDS = (KIND_FULL, KIND_DELTA)
LAYOUT_V2 = 'v2'
LAYOUT_V1 = 'v1'
FINAL_SUFFIX = '.final'
COMPRESSION_SUFFIXES = ('.gz', '.zlib', '.Z')
METADATA_SUFFIX = '.meta.json'

_NAME = re.compile(r'^(?P<kind>[A-Za-z]+)-(?P<start>\d+)-(?P<end>\d+)-(?P<created>\d+)(?P<rest>.*)$')


@dataclasses.dataclass(frozen=True, order=False)
class SnapshotName:
    kind: str
    start_revision: int
    end_revision: int
    created: int
    compression_suffix: str = ''
    final: bool = False

    def __str__(self) -> str:
        return '%s-%08d-%08d-%d%s%s' % (self.kind, self.start_revision, self.end_revision, self.created,
                                        self.compression_suffix, FINAL_SUFFIX if self.final else '')

    @property
    def is_full(self) -> bool:
        return self.kind == KIND_FULL

    @property
    def sort_key(self) -> tuple:
        """Restore order: last revision, then creation time, fulls before deltas of the same revision."""
        return (self.end_revision, self.created, 0 if self.is_full else 1)


def full_name(revision: int, created: int, compression_suffix: str = '') -> SnapshotName:
    return SnapshotName(KIND_FULL, 0, revision, created, compression_suffix)


def delta_name(start_revision: int, end_revision: int, created: int, compression_suffix: str = '') -> SnapshotName:
    return SnapshotName(KIND_DELTA, start_revision, end_revision, created, compression_suffix)


def parse_name(name: str) -> SnapshotName:
    """Parse a snapshot base name; SnapshotInvalid says what is wrong with it."""
    match = _NAME.match(name)
    if not match:
        raise SnapshotInvalid('%r is not a snapshot name (expected Kind-startRev-lastRev-unixTime)' % name)
    kind = match.group('kind')
    if kind not in KINDS:
        raise SnapshotInvalid('%r has unknown snapshot kind %r (expected Full or Incr)' % (name, kind))
    start, end = int(match.group('start')), int(match.group('end'))
    if start > end:
        raise SnapshotInvalid('%r has start revision %d after last revision %d' % (name, start, end))
    rest = match.group('rest')
    final = rest.endswith(FINAL_SUFFIX)
    if final:
        rest = rest[:-len(FINAL_SUFFIX)]
    if rest and rest not in COMPRESSION_SUFFIXES:
        raise SnapshotInvalid('%r has unknown suffix %r' % (name, rest))
    return SnapshotName(kind, start, end, int(match.group('created')), rest, final)


def try_parse_name(name: str) -> Optional[SnapshotName]:
    try:
        return parse_name(name)
    except SnapshotInvalid:
        return None
