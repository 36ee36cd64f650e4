# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Atomic file writes: the one home (a minimal version; the helpers branch holds the full one)."""

from __future__ import annotations

import os
import tempfile
from typing import Union


def write_atomic(path: str, data: Union[bytes, str], mode: int = 0o600) -> None:
    """Replace `path` with `data` so that a reader sees the old file or the new one, never a part, and a power cut
    after the return keeps the new one: a unique temporary file created at `mode` before the first byte, fsynced,
    renamed over `path`, then the directory fsynced (the rename itself is durable only then)."""
    payload = data.encode('utf-8') if isinstance(data, str) else data
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix='.%s.' % os.path.basename(path))
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, 'wb') as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
