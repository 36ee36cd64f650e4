# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Store directories that hold backups: a wider mode than 0700 is said, not changed.

The files and directories themselves are made by `common/files.py` (open_private, makedirs_private), by this rule:

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
from typing import List

from ansible_collections.steward.cluster.plugins.module_utils.common.files import DIR_MODE


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
