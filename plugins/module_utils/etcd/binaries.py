# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Find etcd's own tools. etcd 3.5+ restores with etcdutl; 3.4 only has etcdctl, so both are accepted."""

from __future__ import annotations

import os
import shutil
import subprocess
from typing import Optional, Sequence

from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import BinaryNotFound

SEARCH_ENV = 'STEWARD_ETCD_BIN_DIRS'


def search_dirs(extra: Sequence[str] = ()) -> list:
    """Explicit dirs first, then STEWARD_ETCD_BIN_DIRS, then PATH and the usual install places."""
    dirs = [d for d in extra if d]
    dirs += [d for d in os.environ.get(SEARCH_ENV, '').split(os.pathsep) if d]
    dirs += os.environ.get('PATH', '').split(os.pathsep)
    dirs += ['/usr/local/bin', '/usr/bin', '/opt/etcd/bin']
    return dirs


def find_binary(name: str, path: Optional[str] = None, dirs: Sequence[str] = ()) -> str:
    """Return an executable path for `name`; `path` wins when given."""
    if path:
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
        raise BinaryNotFound('%s not executable at %s' % (name, path))
    for d in search_dirs(dirs):
        candidate = os.path.join(d, name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    found = shutil.which(name)
    if found:
        return found
    raise BinaryNotFound('%s not found in %s or PATH; install etcd or set the path option' % (name, SEARCH_ENV))


def find_snapshot_tool(path: Optional[str] = None, dirs: Sequence[str] = ()) -> tuple:
    """(path, kind) of the tool that can read and restore snapshots: etcdutl if present, else etcdctl."""
    if path:
        kind = 'etcdutl' if os.path.basename(path).startswith('etcdutl') else 'etcdctl'
        return find_binary(kind, path), kind
    for name in ('etcdutl', 'etcdctl'):
        try:
            return find_binary(name, dirs=dirs), name
        except BinaryNotFound:
            continue
    raise BinaryNotFound('neither etcdutl nor etcdctl found; they are needed to verify and restore snapshots')


def binary_version(path: str) -> str:
    """The version an etcd binary reports, e.g. '3.5.1'."""
    out = subprocess.run([path, '--version'], capture_output=True, text=True, check=False, timeout=30).stdout
    for line in out.splitlines():
        low = line.lower()
        if 'version:' in low and ('etcd' in low or 'etcdctl' in low or 'etcdutl' in low):
            return line.split(':', 1)[1].strip()
    return ''
