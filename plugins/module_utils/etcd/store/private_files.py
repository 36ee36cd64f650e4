# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Files and directories that hold backups: private from the first byte.

An etcd snapshot holds every Kubernetes Secret of the cluster, so whatever the umask says:
* snapshot and temporary files are created 0600 with O_EXCL (never an existing file, never a
  moment in which another user could open them) and keep that mode when renamed into place;
* store and work directories we create are 0700;
* a store directory that already exists with a wider mode was set up by the operator: it is left
  alone, and said (`Note`), because changing permissions someone chose is not ours to do.
"""

from __future__ import annotations

import dataclasses
import os
import stat
from typing import IO, Any, List

FILE_MODE = 0o600
DIR_MODE = 0o700


@dataclasses.dataclass(frozen=True)
class ModeNote:
    """A store directory that is readable or writable by others, left as it was."""

    path: str
    mode: str       # e.g. '0755'
    expected: str   # '0700'

    def message(self) -> str:
        return ('store directory %s has mode %s, not %s: left as it is (it was there before); snapshots hold every '
                'Secret of the cluster, consider chmod %s' % (self.path, self.mode, self.expected, self.expected))

    def to_dict(self) -> dict:
        return dict(dataclasses.asdict(self), message=self.message())


def open_private(path: str, mode: str = 'wb', buffering: int = -1) -> IO[Any]:
    """A new file, 0600 from the first byte; FileExistsError when anything is at `path` already."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, 'O_CLOEXEC', 0), FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)  # a restrictive umask may have taken the owner's write bit
        return os.fdopen(fd, mode, buffering)
    except BaseException:
        os.close(fd)
        raise


def make_private(path: str) -> None:
    """chmod 0600 a file we just wrote through a library that does not take a mode (boto3 downloads)."""
    os.chmod(path, FILE_MODE)


def makedirs_private(path: str) -> None:
    """Create `path` and its missing parents 0700. Existing directories are never changed."""
    path = os.path.abspath(path)
    missing: List[str] = []
    probe = path
    while not os.path.isdir(probe):
        if os.path.lexists(probe):
            raise NotADirectoryError('%s exists and is not a directory' % probe)
        missing.append(probe)
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    for directory in reversed(missing):
        try:
            os.mkdir(directory, DIR_MODE)
        except FileExistsError:
            continue  # created meanwhile by someone else: theirs, left alone
        os.chmod(directory, DIR_MODE)


def wide_mode_notes(paths: List[str]) -> List[ModeNote]:
    """Notes for the existing directories in `paths` that group or others may read, write or enter."""
    notes: List[ModeNote] = []
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            continue
        if stat.S_ISDIR(st.st_mode) and st.st_mode & 0o077:
            notes.append(ModeNote(path, '%04o' % stat.S_IMODE(st.st_mode), '%04o' % DIR_MODE))
    return notes
