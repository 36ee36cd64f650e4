# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""MemberOps for a member run by the `steward.cluster.etcd` role: its service (process or systemd unit, member/
service.py) and its binary file, swapped in place.

The binary the role installed (`etcd_binary`) is replaced by the target one where it stands, so the process spec and
the systemd unit keep naming the same path (no config change, no restart fingerprint change). The previous binary is
kept beside it as `<binary>.pre-upgrade` until the next upgrade: the rollback's first way back. Every op is
idempotent: a swap to the binary already in place copies nothing, a start of a running member starts nothing.
"""

from __future__ import annotations

import filecmp
import os
import re
from typing import Any

from ansible_collections.steward.cluster.plugins.module_utils.common.files import write_atomic
from ansible_collections.steward.cluster.plugins.module_utils.common.commands import run_bounded
from ansible_collections.steward.cluster.plugins.module_utils.common.deadline import DeadlineExceeded
from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput

PREVIOUS_SUFFIX = '.pre-upgrade'
VERSION_SECONDS = 20.0
_VERSION_LINE = re.compile(r'etcd Version:\s*(\S+)')


def binary_version(path: str, option: str = 'target_binary') -> str:
    """The version `path --version` prints (`etcd Version: 3.5.1`); InvalidInput naming `option` when it does
    not run or says no version: the target of an upgrade is read from the binary itself, never assumed."""
    if not path or not os.path.isabs(path):
        raise InvalidInput(option, 'absolute-path', 'must be an absolute path to an etcd binary, got %r' % (path,),
                           value=path)
    if not os.path.isfile(path) or not os.access(path, os.X_OK):
        raise InvalidInput(option, 'executable', '%s is not an executable file' % path, value=path)
    try:
        proc = run_bounded([path, '--version'], VERSION_SECONDS)
    except (OSError, DeadlineExceeded) as exc:
        raise InvalidInput(option, 'etcd-binary', '%s --version did not run: %s' % (path, exc), value=path)
    match = _VERSION_LINE.search(proc.stdout or '')
    if proc.returncode != 0 or not match:
        raise InvalidInput(option, 'etcd-binary', '%s --version printed no etcd version (rc=%d)' % (
            path, proc.returncode), value=path)
    return match.group(1)


def _copy_in_place(source: str, dest: str) -> None:
    """Copy `source` over `dest` atomically (a temp file beside it, then rename: a symlink at `dest` is replaced,
    never followed, so a shared file behind it is not touched)."""
    with open(source, 'rb') as f:
        write_atomic(dest, f.read(), 0o755)


class BinarySwap:
    """The installed binary and the target: swap() puts the target in place (keeping the previous one once),
    restore() puts the previous one back."""

    def __init__(self, installed: str, target: str):
        self.installed = installed
        self.target = target
        self.previous = installed + PREVIOUS_SUFFIX

    def in_place(self) -> bool:
        return os.path.exists(self.installed) and filecmp.cmp(self.installed, self.target, shallow=False)

    def swap(self) -> None:
        if self.in_place():
            return
        if os.path.exists(self.installed):
            _copy_in_place(self.installed, self.previous)
        _copy_in_place(self.target, self.installed)

    def restore(self) -> None:
        if os.path.exists(self.previous):
            _copy_in_place(self.previous, self.installed)


class ServiceMemberOps:
    """MemberOps over a member/service.py service (ProcessService or SystemdService) and a BinarySwap."""

    def __init__(self, service: Any, swap: BinarySwap):
        self.service = service
        self.binary = swap

    def stop(self) -> None:
        self.service.stop()

    def swap(self) -> None:
        self.binary.swap()

    def start(self) -> None:
        if not self.service.running():
            self.service.start(wait=False)

    def restore_previous(self) -> None:
        self.binary.restore()
