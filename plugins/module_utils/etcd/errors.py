# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One exception tree for the etcd area, so modules and the controller map failures in one place."""

from __future__ import annotations


class EtcdError(Exception):
    """Base of every etcd-area failure; the message says what was wrong and where."""


class EtcdUnavailable(EtcdError):
    """No endpoint answered, or the cluster has no leader."""


class QuorumRisk(EtcdError):
    """A membership change was refused because it would lose quorum."""


class MembershipError(EtcdError):
    """etcd refused a member add/remove/promote."""


class StoreError(EtcdError):
    """A snapshot store could not be read or written (I/O, HTTP, credentials)."""


class SnapshotNotFound(StoreError):
    """The named snapshot, or any valid snapshot, is not in the store."""


class SnapshotInvalid(EtcdError):
    """A snapshot failed verification (hash, size, structure, name); `check` names which
    (verify.CHECK_*), so a report says "corrupt: sha256-trailer" without parsing the message."""

    def __init__(self, message: str, check: str = ''):
        super().__init__(message)
        self.check = check


class RestoreRefused(EtcdError):
    """A restore would overwrite data without the explicit flag, or has nothing valid to restore."""


class SnapshotUnrestorable(RestoreRefused):
    """This snapshot (or its chain of deltas) cannot be restored: a gap, a replay that does not land,
    a restore tool that refuses it. A fallback may try an older snapshot."""


class BinaryNotFound(EtcdError):
    """etcd, etcdctl or etcdutl is needed and was not found."""
