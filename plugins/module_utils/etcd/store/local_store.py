# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A snapshot store in a local directory (`/path` or `file:///path`).

Layout `<root>/v2/<name>` + `<root>/v2/<name>.meta.json`; the legacy v1 layout
(`<root>/v1/Backup-<unix>/<name>`) is listed too. Every object is published with
temp file (`.<name>.tmp-<random>`, same directory) -> fsync -> rename -> fsync directory,
so a crash leaves either nothing or a dot-file that lists as `partial`, never a half file
under a snapshot name. The data is renamed into place only after its metadata: a data file
without metadata is then never ours, which is how etcd-backup-restore's files are told apart
(store.mark_unrecorded); a crash in between leaves orphan metadata, which is never valid. Files are 0600 from their first byte and directories we create 0700
(common/files.py; etcd/private_files.py reports wider store directories): a snapshot holds every Secret of the cluster.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from typing import Any, Dict, List, Optional, Tuple
from urllib.parse import unquote, urlsplit

from ansible_collections.steward.cluster.plugins.module_utils.common.files import fsync_path, makedirs_private, open_private
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import SnapshotNotFound, StoreError
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.private_files import ModeNote, wide_mode_notes
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.naming import (
    LAYOUT_V1,
    LAYOUT_V2,
    METADATA_SUFFIX,
    SnapshotName,
    try_parse_name,
)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.store import (
    STATUS_CORRUPT,
    STATUS_INCOMPLETE,
    STATUS_ORPHAN,
    STATUS_PARTIAL,
    STATUS_VALID,
    Snapshot,
    SnapshotStore,
    mark_unrecorded,
)

TEMP_MARK = '.tmp-'
COPY_CHUNK = 8 * 1024 * 1024


def temp_name(name: str) -> str:
    """`.<name>.tmp-<random>`: hidden, unique, and recognisable as partial by `list()`."""
    return '.%s%s%s' % (name, TEMP_MARK, uuid.uuid4().hex[:12])


def parse_metadata(raw: bytes, name: str, size: int) -> Tuple[Optional[Dict[str, Any]], str]:
    """(metadata, problem) for a data object of `size` bytes; problem is '' when they agree."""
    try:
        meta = json.loads(raw.decode('utf-8'))
    except (ValueError, UnicodeDecodeError) as exc:
        return None, 'metadata is not valid JSON: %s' % exc
    if not isinstance(meta, dict):
        return None, 'metadata is not a JSON object'
    if meta.get('name') not in (None, name):
        return meta, 'metadata names %r, not %r' % (meta.get('name'), name)
    if not meta.get('sha256'):
        return meta, 'metadata has no sha256'
    try:
        meta_size = int(meta.get('size'))
    except (TypeError, ValueError):
        return meta, 'metadata has no valid size'
    if meta_size != size:
        return meta, 'size %d differs from %d recorded in metadata' % (size, meta_size)
    return meta, ''


def classify(key: str, name: Optional[SnapshotName], size: int, modified: float, raw_meta: Optional[bytes],
             has_data: bool = True) -> Snapshot:
    """Status of one snapshot from what exists of it; shared by the local and S3 stores."""
    if not has_data:
        meta = None
        if raw_meta is not None:
            meta = parse_metadata(raw_meta, str(name), -1)[0]
        return Snapshot(name, key, 0, modified, STATUS_ORPHAN, meta, 'metadata without snapshot data')
    if raw_meta is None:
        return Snapshot(name, key, size, modified, STATUS_INCOMPLETE, None,
                        'no metadata: the upload never finished its second phase')
    meta, problem = parse_metadata(raw_meta, str(name), size)
    if problem:
        return Snapshot(name, key, size, modified, STATUS_CORRUPT, meta, problem)
    return Snapshot(name, key, size, modified, STATUS_VALID, meta)


def partial_name(filename: str) -> Optional[SnapshotName]:
    base = filename.lstrip('.').split(TEMP_MARK, 1)[0]
    if base.endswith(METADATA_SUFFIX):
        base = base[:-len(METADATA_SUFFIX)]
    return try_parse_name(base)


def sort_snapshots(snapshots: List[Snapshot]) -> List[Snapshot]:
    """Restore order; unnamed partial objects last."""
    return sorted(snapshots, key=lambda s: (s.name is None, s.name.sort_key if s.name else (), s.key))


class LocalStore(SnapshotStore):
    """Snapshots in a directory on this machine."""

    def __init__(self, url: str):
        self.url = url
        if url.startswith('file://'):
            parts = urlsplit(url)
            if parts.netloc not in ('', 'localhost'):
                raise StoreError('file store %r names host %r; only local paths are supported' % (url, parts.netloc))
            path = unquote(parts.path)
        else:
            path = url
        if not path or not os.path.isabs(path):
            raise StoreError('local store %r must be an absolute path (e.g. /var/backups/etcd)' % url)
        self.root = os.path.normpath(path)
        self.v2_dir = os.path.join(self.root, LAYOUT_V2)
        self._pending: Dict[str, Tuple[str, bool]] = {}  # key -> (verified data under a temp name, ours to delete)

    def __repr__(self) -> str:
        return 'LocalStore(%r)' % self.root

    def path_of(self, snapshot: Snapshot) -> str:
        return os.path.join(self.root, snapshot.key)

    def ensure_dir(self) -> str:
        try:
            makedirs_private(self.v2_dir)
        except OSError as exc:
            raise StoreError('cannot create snapshot directory %s: %s' % (self.v2_dir, exc)) from exc
        return self.v2_dir

    def mode_notes(self) -> List[ModeNote]:
        """Store directories that others may read or enter (left alone: the operator made them so)."""
        return wide_mode_notes([self.root, self.v2_dir])

    def check(self, create: bool = True) -> None:
        """Fail early when the directory cannot hold snapshots; create it unless in check mode."""
        if create:
            self.ensure_dir()
            if not os.access(self.v2_dir, os.W_OK):
                raise StoreError('snapshot directory %s is not writable' % self.v2_dir)
            return
        existing = self.root
        while not os.path.exists(existing):
            existing = os.path.dirname(existing)
        if not os.path.isdir(existing):
            raise StoreError('local store %s: %s is not a directory' % (self.root, existing))

    # --- listing -------------------------------------------------------------------------------
    def list(self) -> List[Snapshot]:
        if os.path.exists(self.root) and not os.path.isdir(self.root):
            raise StoreError('local store %s is not a directory' % self.root)
        found = self._list_dir(self.v2_dir, LAYOUT_V2)
        v1 = os.path.join(self.root, LAYOUT_V1)
        if os.path.isdir(v1):
            for entry in sorted(os.listdir(v1)):
                if entry.startswith('Backup-') and os.path.isdir(os.path.join(v1, entry)):
                    found += self._list_dir(os.path.join(v1, entry), LAYOUT_V1 + '/' + entry)
        return sort_snapshots(mark_unrecorded(found))

    def _list_dir(self, directory: str, rel: str) -> List[Snapshot]:
        try:
            entries = os.listdir(directory)
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise StoreError('cannot list snapshot directory %s: %s' % (directory, exc)) from exc
        files = set(entries)
        result: List[Snapshot] = []
        for filename in sorted(files):
            path = os.path.join(directory, filename)
            key = rel + '/' + filename
            try:
                st = os.stat(path)
            except FileNotFoundError:
                continue  # deleted while listing
            if not os.path.isfile(path):
                continue
            if filename.startswith('.') and TEMP_MARK in filename:
                result.append(Snapshot(partial_name(filename), key, st.st_size, st.st_mtime, STATUS_PARTIAL, None,
                                       'temporary file of an unfinished (or killed) write'))
                continue
            if filename.endswith(METADATA_SUFFIX):
                base = filename[:-len(METADATA_SUFFIX)]
                name = try_parse_name(base)
                if name is not None and base not in files:
                    result.append(classify(rel + '/' + base, name, 0, st.st_mtime, self._read(path), has_data=False))
                continue
            name = try_parse_name(filename)
            if name is None:
                continue  # not ours
            meta_path = path + METADATA_SUFFIX
            raw = self._read(meta_path) if (filename + METADATA_SUFFIX) in files else None
            result.append(classify(key, name, st.st_size, st.st_mtime, raw))
        return result

    @staticmethod
    def _read(path: str) -> Optional[bytes]:
        try:
            with open(path, 'rb') as f:
                return f.read()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StoreError('cannot read %s: %s' % (path, exc)) from exc

    # --- publishing ----------------------------------------------------------------------------
    def new_temp_path(self, name: str = 'snapshot') -> str:
        """A temp path inside the store, so the final publish is a same-filesystem rename."""
        return os.path.join(self.ensure_dir(), temp_name(name))

    def _publish_file(self, tmp_path: str, final_path: str) -> None:
        if os.path.exists(final_path):
            raise StoreError('%s already exists in the store; refusing to overwrite it' % final_path)
        os.rename(tmp_path, final_path)
        fsync_path(os.path.dirname(final_path))

    def publish_data(self, name: SnapshotName, source_path: str) -> Snapshot:
        """Phase 1 here: the data, fsynced, under a temp name in the store; publish_metadata renames it."""
        directory = self.ensure_dir()
        final_path = os.path.join(directory, str(name))
        tmp_path = source_path
        try:
            if os.path.exists(final_path):
                raise StoreError('%s already exists in the store; refusing to overwrite it' % final_path)
            if os.path.dirname(os.path.abspath(source_path)) != directory:
                tmp_path = os.path.join(directory, temp_name(str(name)))
                copy_file(source_path, tmp_path)
            else:
                fsync_path(tmp_path)
        except OSError as exc:
            if tmp_path != source_path:
                remove_quietly(tmp_path)
            raise StoreError('cannot write snapshot %s: %s' % (final_path, exc)) from exc
        except StoreError:
            if tmp_path != source_path:
                remove_quietly(tmp_path)
            raise
        st = os.stat(tmp_path)
        key = LAYOUT_V2 + '/' + str(name)
        self._pending[key] = (tmp_path, tmp_path != source_path)
        return Snapshot(name, key, st.st_size, st.st_mtime, STATUS_INCOMPLETE, None, 'metadata not yet published')

    def publish_metadata(self, snapshot: Snapshot, metadata: Dict[str, Any]) -> Snapshot:
        data_path = self.path_of(snapshot)
        pending = self._pending.get(snapshot.key, (data_path, False))[0]
        meta_path = data_path + METADATA_SUFFIX
        tmp_path = os.path.join(os.path.dirname(meta_path), temp_name(os.path.basename(meta_path)))
        try:
            if not os.path.isfile(pending):
                raise StoreError('cannot publish metadata of %s: its data is not in the store' % data_path)
            with open_private(tmp_path) as f:
                f.write(json.dumps(metadata, indent=2, sort_keys=True).encode('utf-8'))
                f.flush()
                os.fsync(f.fileno())
            self._publish_file(tmp_path, meta_path)
            if pending != data_path:
                self._publish_file(pending, data_path)
                self._pending.pop(snapshot.key, None)
        except OSError as exc:
            remove_quietly(tmp_path)
            raise StoreError('cannot write metadata %s: %s' % (meta_path, exc)) from exc
        except StoreError:
            remove_quietly(tmp_path)
            raise
        raw = self._read(meta_path)
        st = os.stat(data_path)
        return classify(snapshot.key, snapshot.name, st.st_size, st.st_mtime, raw)

    def fetch(self, snapshot: Snapshot, dest_path: str) -> None:
        src = self.path_of(snapshot)
        if not os.path.isfile(src):
            raise SnapshotNotFound('snapshot %s is not in the store %s' % (snapshot.key, self.root))
        dest_dir = os.path.dirname(os.path.abspath(dest_path))
        tmp = os.path.join(dest_dir, temp_name(os.path.basename(dest_path)))
        try:
            copy_file(src, tmp)
            os.rename(tmp, dest_path)
        except OSError as exc:
            remove_quietly(tmp)
            raise StoreError('cannot copy snapshot %s to %s: %s' % (src, dest_path, exc)) from exc

    def delete(self, snapshot: Snapshot) -> None:
        path = self.path_of(snapshot)
        pending, owned = self._pending.pop(snapshot.key, (None, False))
        try:
            for victim in (path + METADATA_SUFFIX, path) + ((pending,) if owned else ()):
                if os.path.exists(victim):
                    os.remove(victim)
            fsync_path(os.path.dirname(path))
        except OSError as exc:
            raise StoreError('cannot delete snapshot %s: %s' % (path, exc)) from exc

    def remove_partial(self, snapshot: Snapshot) -> None:
        """Remove a temp object left by a killed write (only `partial` entries)."""
        if snapshot.status == STATUS_PARTIAL:
            remove_quietly(self.path_of(snapshot))


def copy_file(src: str, dest: str) -> None:
    """Copy to a new private file `dest` and fsync it."""
    with open(src, 'rb') as fin, open_private(dest) as fout:
        shutil.copyfileobj(fin, fout, COPY_CHUNK)
        fout.flush()
        os.fsync(fout.fileno())


def remove_quietly(path: Optional[str]) -> None:
    if path:
        try:
            os.remove(path)
        except OSError:
            pass
