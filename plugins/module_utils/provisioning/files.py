# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Files below a root prefix: read, plan (what changes, as data and as a diff), write atomically, and keep
the record of what is ours.

Every file this collection writes on a node is listed in /etc/kubernetes/steward-provisioning.json (Promenade
keeps /etc/promenade-manifest for the same reason): teardown removes exactly those paths and nothing that
another tool or an operator put there. Writes go through common/files.write_atomic (a temporary file at the final
mode, fsynced, renamed over the old file, the directory fsynced), so a crash or a power cut leaves the old or the
new content, never half.
"""

from __future__ import annotations

import dataclasses
import json
import os
import stat
from typing import Any, Dict, Iterable, List, Mapping, Optional

from ansible_collections.steward.cluster.plugins.module_utils.common import validate
from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.common.files import write_atomic
from ansible_collections.steward.cluster.plugins.module_utils.provisioning import layout
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.node_files import FileSpec

CREATE, UPDATE, REMOVE = 'create', 'update', 'remove'
RECORD_VERSION = 1
# Directories holding keys are private; every other directory we create is 0755.
PRIVATE_DIRS = (layout.PKI_DIR, layout.ETCD_PKI_DIR, '/var/lib/kubelet/pki', layout.ETCD_DATA_DIR)


@dataclasses.dataclass(frozen=True)
class Change:
    path: str
    action: str                     # create | update | remove
    what: str                       # content, mode, content and mode
    before: Optional[bytes]
    after: Optional[bytes]
    mode: Optional[int]
    secret: bool

    def line(self) -> str:
        return '%s %s%s' % (self.action, self.path, '' if self.action != UPDATE else ' (%s)' % self.what)


class Root:
    """A node's filesystem below `root` ('/' on a real host): an absolute path that, when it exists, is a
    directory (InvalidInput on `root` otherwise, before anything is read or written)."""

    def __init__(self, root: str):
        self.root = validate.absolute_path(root, 'root')
        if os.path.exists(self.root) and not os.path.isdir(self.root):
            raise InvalidInput('root', 'directory', '%s exists and is not a directory' % root, root)

    def host(self, path: str) -> str:
        return layout.host_path(self.root, path)

    def read(self, path: str) -> Optional[bytes]:
        try:
            with open(self.host(path), 'rb') as f:
                return f.read()
        except (FileNotFoundError, NotADirectoryError):
            return None

    def mode(self, path: str) -> Optional[int]:
        try:
            return stat.S_IMODE(os.stat(self.host(path)).st_mode)
        except (FileNotFoundError, NotADirectoryError):
            return None

    def exists(self, path: str) -> bool:
        return os.path.lexists(self.host(path))

    def write(self, path: str, content: bytes, mode: int) -> None:
        target = self.host(path)
        self.makedirs(os.path.dirname(path))
        write_atomic(target, content, mode)

    def chmod(self, path: str, mode: int) -> None:
        os.chmod(self.host(path), mode)

    def makedirs(self, path: str) -> None:
        """Create `path` (a node path) and its parents; private ones 0700."""
        missing = []
        current = path
        while current not in ('', '/') and not os.path.isdir(self.host(current)):
            missing.append(current)
            current = os.path.dirname(current)
        for directory in reversed(missing):
            os.makedirs(self.host(directory), exist_ok=True)
            os.chmod(self.host(directory), 0o700 if directory in PRIVATE_DIRS else 0o755)

    def remove(self, path: str) -> bool:
        try:
            os.unlink(self.host(path))
            return True
        except FileNotFoundError:
            return False


# --- the record -------------------------------------------------------------------------------
def read_record(root: Root) -> Dict[str, Any]:
    """{'files': [...], 'role': ..., 'node': ...}; empty lists when there is no record (a fresh node)."""
    data = root.read(layout.RECORD)
    if not data:
        return {'files': [], 'role': None, 'node': None}
    try:
        record = json.loads(data.decode())
        return {'files': sorted(str(p) for p in record.get('files') or []), 'role': record.get('role'),
                'node': record.get('node')}
    except (ValueError, UnicodeDecodeError, AttributeError):
        return {'files': [], 'role': None, 'node': None, 'unreadable': True}


def record_content(node: str, role: str, paths: Iterable[str]) -> bytes:
    return (json.dumps({'version': RECORD_VERSION, 'node': node, 'role': role, 'files': sorted(set(paths))},
                       indent=2, sort_keys=True) + '\n').encode()


# --- planning ---------------------------------------------------------------------------------
def plan(root: Root, desired: Mapping[str, FileSpec], remove: Iterable[str] = ()) -> List[Change]:
    """What writing `desired` (and removing `remove`) would change, in path order; unchanged files are left out."""
    changes: List[Change] = []
    for path in sorted(desired):
        spec = desired[path]
        before, mode = root.read(path), root.mode(path)
        if before is None:
            changes.append(Change(path, CREATE, 'content', None, spec.content, spec.mode, spec.secret))
            continue
        what = [w for w, differs in (('content', before != spec.content), ('mode', mode != spec.mode)) if differs]
        if what:
            changes.append(Change(path, UPDATE, ' and '.join(what), before, spec.content, spec.mode, spec.secret))
    for path in sorted(set(remove) - set(desired)):
        before = root.read(path)
        if before is not None:
            changes.append(Change(path, REMOVE, 'file', before, None, None, True))
    return changes


def apply(root: Root, changes: Iterable[Change]) -> None:
    for change in changes:
        if change.action == REMOVE:
            root.remove(change.path)
        elif change.what == 'mode':
            root.chmod(change.path, change.mode or 0o600)
        else:
            root.write(change.path, change.after or b'', change.mode or 0o600)


def _text(data: Optional[bytes], secret: bool) -> str:
    if data is None:
        return ''
    if secret:
        return '(secret, %d bytes)\n' % len(data)
    try:
        return data.decode('utf-8')
    except UnicodeDecodeError:
        return '(binary, %d bytes)\n' % len(data)


def diff(changes: Iterable[Change], root: str) -> List[Dict[str, str]]:
    """Ansible's file diff, one entry per changed file; secrets show only their size."""
    out = []
    for change in changes:
        where = layout.host_path(root, change.path)
        out.append({'before_header': '%s (%s)' % (where, 'absent' if change.before is None else 'content'),
                    'after_header': '%s (%s)' % (where, 'absent' if change.after is None else 'content'),
                    'before': _text(change.before, change.secret), 'after': _text(change.after, change.secret)})
    return out
