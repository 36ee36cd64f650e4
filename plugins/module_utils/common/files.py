# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Files written so that a crash or a power cut leaves the old content or the new, never half, and private files
that nobody else can open, not even for a moment.

`write_atomic` is the one way this collection replaces a file (etcd config and pid files, the restore marker,
sabakan's files, every file provisioning puts on a node): a unique temporary file beside the target, created at
its final mode before the first byte (O_EXCL: never an existing file, never a planted symlink), written, fsynced,
renamed over the target, and then the directory fsynced. The last step is the one that is easy to forget: a rename
is a change to the directory, and until the directory reaches the disk a power cut can bring back the old name,
or no file at all.

`open_private` and `makedirs_private` are for what holds secrets (etcd snapshots hold every Kubernetes Secret):
files 0600 with O_EXCL and directories 0700 whatever the umask says; existing directories are never changed.
"""

from __future__ import annotations

import errno
import os
import uuid
from typing import IO, Any, List, Union

FILE_MODE = 0o600
DIR_MODE = 0o700
_O_CLOEXEC = getattr(os, 'O_CLOEXEC', 0)
_O_NOFOLLOW = getattr(os, 'O_NOFOLLOW', 0)


def fsync_path(path: str) -> None:
    """fsync a file, or a directory so that a rename (or a create, or an unlink) in it is durable too.

    A filesystem that cannot fsync a directory (EINVAL: some network and FUSE filesystems) is not an error: there
    is nothing more we can do for durability there, and refusing to write would help nobody."""
    fd = os.open(path, os.O_RDONLY | _O_CLOEXEC)
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno != errno.EINVAL:
            raise
    finally:
        os.close(fd)


def write_atomic(path: str, data: Union[bytes, str], mode: int = FILE_MODE) -> None:
    """Replace `path` with `data` (str is written as UTF-8) at `mode`: a crash leaves the old file or the new one.

    The temporary file `.<name>.tmp-<random>` is created beside `path` with O_EXCL at `mode` (fchmod after the
    open, since the umask may have taken bits away) before anything is written to it, so content meant to be
    private is never readable by others; it is fsynced, renamed over `path`, and the directory is fsynced so the
    rename itself survives a power cut. On any failure the temporary file is removed and the error (OSError)
    raised; the target is then untouched."""
    directory = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(directory, '.%s.tmp-%s' % (os.path.basename(path), uuid.uuid4().hex[:12]))
    content = data.encode('utf-8') if isinstance(data, str) else data
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_CLOEXEC | _O_NOFOLLOW, mode & 0o7777)
    try:
        try:
            os.fchmod(fd, mode & 0o7777)
            view = memoryview(content)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    fsync_path(directory)


def open_private(path: str, mode: str = 'wb', buffering: int = -1) -> IO[Any]:
    """A new file, 0600 from the first byte; FileExistsError when anything is at `path` already."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_CLOEXEC, FILE_MODE)
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
