# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One exception tree for the etcd area, so modules and the controller map failures in one place."""

from __future__ import annotations

import enum
from typing import Optional

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput


class Refusal(enum.Enum):
    """Why etcd refused a request, when the reason decides what the caller does next (retry or give up).
    client.gateway_error reads it from etcd's answer once; everyone else matches on this, not on text."""
    UNHEALTHY = 'unhealthy'                   # a membership change within ~5 s of the last, or members not started
    NO_LEADER = 'no-leader'                   # no leader right now, or the leader changed during the request
    TIMEOUT = 'timeout'                       # the request timed out inside etcd
    LEARNER_NOT_READY = 'learner-not-ready'   # promote before the learner started and caught up
    TOO_MANY_LEARNERS = 'too-many-learners'   # etcd allows one learner at a time
    LEARNER_PENDING = 'learner-pending'       # (ours) a learner is not promoted yet, so no second one is added


class EtcdError(Exception):
    """Base of every etcd-area failure; the message says what was wrong and where, `refusal` why etcd said no
    (None when it did not, or for no reason a caller acts on)."""

    refusal: Optional[Refusal] = None

    def __init__(self, message: str = '', refusal: Optional[Refusal] = None):
        super().__init__(message)
        self.refusal = refusal


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


class RestoreInputError(RestoreRefused, InvalidInput):
    """The member a restore would create is described wrongly (name, initial_cluster, peer URLs): `field` names the
    option, so a module reports it before it reads a store."""

    __init__ = InvalidInput.__init__


class SnapshotUnrestorable(RestoreRefused):
    """This snapshot (or its chain of deltas) cannot be restored: a gap, a replay that does not land,
    a restore tool that refuses it. A fallback may try an older snapshot."""


class BinaryNotFound(EtcdError):
    """etcd, etcdctl or etcdutl is needed and was not found."""


class SpecError(EtcdError, InvalidInput):
    """An EtcdBackup spec (or a Secret it names) cannot be acted on: `field`, `rule` and `value` say where and why."""

    __init__ = InvalidInput.__init__


class CronError(EtcdError, InvalidInput):
    """A cron schedule cannot be parsed or never fires; the message names the cron field and the token."""

    __init__ = InvalidInput.__init__
