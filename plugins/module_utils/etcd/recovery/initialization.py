# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a member does with its data dir before etcd starts: etcd-druid's initialization table (seed 004,
ETCD-32, with ETCD-33 and ETCD-34), decided from facts, as a pure function.

The member-side program (the backup-restore sidecar's role) gathers the facts (the data dir, the cluster as
its peers see it, the store), calls `decide`, carries the decision out with the engine's own restore and
membership calls, and only then lets etcd start. Keeping the table here, pure, means every row is a unit
test, and the Ansible side (etcd_recover) and the controller read the same rules.

Where druid hurts its users we are stricter, and each refusal says why:
  * druid's row 7 restores the newest full snapshot, or starts EMPTY when the store has none; a cluster that
    had data (it has members in its status, or its bootstrap is over) never starts empty here: the decision is
    `refuse` naming what is missing, and an operator who wants an empty cluster says so (`allow_empty`).
  * a minority member whose data is invalid (rows 4/5) rejoins as a learner with an EMPTY data dir: the
    leader ships it a snapshot. druid's row 4 text restores the newest full snapshot first, but the newer
    ETCD-34 says not to (member-id mismatch); the learner path is both safe and quorum-neutral.
  * a following member without quorum or data (row 8) waits for the first member instead of restoring the
    newest full snapshot on its own: two members doing that form a second cluster on older data.
  * data that is older than `fail_below_revision` (druid's `failbelowrevision`) is invalid, as druid's
    validator treats it: a member never serves an older history than the cluster already acknowledged.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Dict, Optional

from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import EtcdError, SnapshotInvalid
from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot.bolt import MAGIC, inspect_snapshot

# validation modes (druid's `mode` query parameter of /initialization/start)
SANITY, FULL = 'sanity', 'full'
MODES = (SANITY, FULL)

# what the member does (Initialization.action)
START = 'start'                                  # use the data dir as it is (fresh or valid)
RESTORE_THEN_START = 'restore-then-start'        # restore newest full + deltas, single member, then upload
REJOIN_AS_LEARNER = 'rejoin-as-learner'          # MemberRemove the old id, empty data dir, MemberAddAsLearner
JOIN_AS_LEARNER = 'join-as-learner'              # a new member (scale-up): MemberAddAsLearner, empty data dir
REFUSE = 'refuse'                                # nothing is touched; `reason` says why

NEW, EXISTING = 'new', 'existing'


class InitializationError(EtcdError):
    """Facts that cannot be decided on (e.g. an unknown validation mode); names the field."""


@dataclasses.dataclass(frozen=True)
class DataValidity:
    """The data dir as druid's validator sees it: WAL metadata (the member's identity) and the backend db."""
    exists: bool
    metadata_valid: bool
    data_valid: bool
    revision: Optional[int]
    reason: str

    def to_dict(self) -> Dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class MemberFacts:
    """What the member knows before etcd starts.

    cluster_size:   spec.replicas (druid's n)
    ordinal:        the pod's ordinal; 0 is the first member
    bootstrapped:   the cluster has run before (status.members not empty, or a member lease holds an id)
    quorate:        the other members have a leader (None: nobody answered: treated as not quorate)
    in_membership:  this member's name is in the cluster's member list (None when nobody answered)
    learner_wanted: druid's scale-up marker (`druid.gardener.cloud/create-as-learner`, ETCD-43)
    data:           the data dir's validity
    backup_exists:  the store holds a verified full snapshot
    allow_empty:    an operator accepted starting an existing cluster empty (never assumed)
    never_started:  the cluster lists this member but it has never published its client URLs: a member of
                    the cluster's own bootstrap that starts late (druid row 2 while the others already run)
    recovery_restore: the controller's quorum-loss recovery asks this member (the first) to start a new
                    single-member cluster from the store, whatever its data dir holds (the controller stopped
                    every member first; valid data of the lost cluster would otherwise wait for peers that are
                    gone, row 6). False once this member restored for that recovery.
    """
    cluster_size: int
    ordinal: int
    bootstrapped: bool
    quorate: Optional[bool]
    in_membership: Optional[bool]
    data: DataValidity
    backup_exists: bool
    learner_wanted: bool = False
    allow_empty: bool = False
    never_started: bool = False
    recovery_restore: bool = False


@dataclasses.dataclass(frozen=True)
class Initialization:
    """The decision: `row` is druid's table row (1-8; 9 scale-up; 0 a refusal of ours), `action` one of the
    constants above, `cluster_state` etcd's initial-cluster-state, `single_member` whether the member starts
    alone (a restore's embedded single-member run, druid row 7), `upload_full` whether a full snapshot must be
    taken and uploaded before the others join (ETCD-31 step 3)."""
    row: int
    action: str
    cluster_state: str
    reason: str
    single_member: bool = False
    upload_full: bool = False

    def to_dict(self) -> Dict[str, Any]:
        return dataclasses.asdict(self)


def validate_data_dir(data_dir: str, mode: str = SANITY, fail_below_revision: int = 0) -> DataValidity:
    """druid's data validation, read-only. Sanity: the WAL and the backend db are there and the db's bolt meta
    page is sound; full: the meta pages' checksums, the bucket tree and the newest revision are read as well
    (bolt.inspect_snapshot). A revision below `fail_below_revision` makes the data invalid. (A restore never
    leaves a half-written data dir to judge: restore.py stages it beside and renames it into place.)"""
    if mode not in MODES:
        raise InitializationError('mode: %r is not a validation mode (%s)' % (mode, ', '.join(MODES)))
    member = os.path.join(data_dir, 'member')
    if not os.path.isdir(data_dir) or not os.listdir(data_dir):
        return DataValidity(False, False, False, None, 'no data dir, or an empty one, at %s' % data_dir)
    wal_dir = os.path.join(member, 'wal')
    wals = [f for f in os.listdir(wal_dir) if f.endswith('.wal')] if os.path.isdir(wal_dir) else []
    metadata = bool(wals)
    db = os.path.join(member, 'snap', 'db')
    if not os.path.isfile(db):
        return DataValidity(True, metadata, False, None, 'no backend database at %s' % db)
    try:
        found = inspect_snapshot(db, trailer=0) if mode == FULL else _meta_only(db)
    except (SnapshotInvalid, OSError) as exc:
        return DataValidity(True, metadata, False, None, 'the backend database is not sound: %s' % exc)
    revision = found.get('revision')
    if revision is not None and fail_below_revision and revision < fail_below_revision:
        return DataValidity(True, metadata, False, revision, 'revision %d is below the cluster\'s %d' % (
            revision, fail_below_revision))
    if not metadata:
        return DataValidity(True, False, True, revision, 'no WAL in %s: the member\'s identity is lost' % wal_dir)
    return DataValidity(True, True, True, revision, 'valid (%s)' % mode)


def _meta_only(db: str) -> Dict[str, Any]:
    """The sanity check: bolt's magic and page size in the first meta page, without walking the tree."""
    with open(db, 'rb') as f:
        head = f.read(4096)
    if len(head) < 32 or int.from_bytes(head[16:20], 'little') != MAGIC:
        raise SnapshotInvalid('%s: no bolt meta page (magic missing)' % db, 'structure')
    return {'revision': None}


def decide(facts: MemberFacts) -> Initialization:
    """The one decision for this start. Rows as seed 004 numbers them (ETCD-32); 9 is the scale-up join
    (ETCD-33); 0 is a refusal of ours, where druid would lose data."""
    if facts.cluster_size < 1:
        raise InitializationError('cluster_size: %r must be at least 1' % facts.cluster_size)
    data, first = facts.data, facts.ordinal == 0
    valid = data.metadata_valid and data.data_valid
    if not facts.bootstrapped and not data.exists:
        if facts.learner_wanted and facts.quorate:
            return Initialization(9, JOIN_AS_LEARNER, EXISTING, 'a new member of a running cluster (scale-up): '
                                  'added as a learner and promoted once in sync')
        return Initialization(1 if first else 2, START, NEW, 'bootstrap of a new cluster of %d' % facts.cluster_size)
    if facts.quorate:
        if not data.exists and facts.in_membership and facts.never_started:
            return Initialization(2, START, NEW, 'a member of the cluster\'s bootstrap starting after the others: '
                                  'listed, never started, no data')
        if valid and facts.in_membership is not False:
            return Initialization(3, START, EXISTING, 'restart of a member of a quorate cluster with valid data')
        # a scale-up's member (its Lease keeps the create-as-learner marker) that lost its disk later is still
        # listed under its old id: joining "again" would start etcd on an empty log under that id (etcd panics:
        # "tocommit out of range"); it is removed and added back instead (rows 4/5)
        if facts.learner_wanted and not data.exists and facts.in_membership is not True:
            return Initialization(9, JOIN_AS_LEARNER, EXISTING, 'a new member of a running cluster (scale-up)')
        row = 4 if data.metadata_valid else 5
        return Initialization(row, REJOIN_AS_LEARNER, EXISTING, 'the cluster has quorum and this member\'s data '
                              'is not usable (%s): removed and added back as a learner, with an empty data dir; '
                              'the leader sends it a snapshot' % data.reason)
    if facts.recovery_restore and first:
        if facts.backup_exists:
            return Initialization(7, RESTORE_THEN_START, NEW, 'quorum-loss recovery: no quorum, and the controller '
                                  'asks the first member to restore the newest full snapshot and its deltas (the '
                                  'data dir, %s, is moved aside), start alone, upload a full snapshot, then the '
                                  'others join' % data.reason, single_member=True, upload_full=True)
        return Initialization(0, REFUSE, NEW, 'quorum-loss recovery asks for a restore from the store, and the '
                              'store holds no verified full snapshot: nothing is touched')
    if valid:
        return Initialization(6, START, EXISTING if facts.cluster_size > 1 else NEW,
                              'restart without quorum, with valid data: the member keeps its data and waits '
                              'for its peers')
    if first:
        if facts.backup_exists:
            return Initialization(7, RESTORE_THEN_START, NEW, 'no quorum and no valid data (%s): restore the newest '
                                  'full snapshot and its deltas, start alone, upload a full snapshot, then the '
                                  'others join' % data.reason, single_member=True, upload_full=True)
        if facts.bootstrapped and not facts.allow_empty:
            return Initialization(0, REFUSE, NEW, 'no quorum, no valid data (%s) and no verified full snapshot in '
                                  'the store: starting empty would drop every key of a cluster that had data; '
                                  'restore a backup, or allow an empty start explicitly' % data.reason)
        return Initialization(7, START, NEW, 'no quorum, no data and no backup: an empty start, allowed'
                              if facts.bootstrapped else 'first start of a new cluster')
    # druid's row 8 restores the newest FULL snapshot here and starts `existing` with every member in its
    # initial cluster: two such members hold a majority of that membership and elect a leader of their own, on
    # data older than the deltas the first member restored (found on the lab: a total loss came back as two
    # clusters, the one the client Service reached empty). A following member waits instead: once the first
    # member serves from the store, the cluster is quorate and this member joins it as a learner (rows 4/5, 9).
    return Initialization(8, REFUSE, EXISTING, 'no quorum and no valid data (%s): waiting for the first member to '
                          'restore from the store and lead; this member then joins it as a learner (restoring on '
                          'its own would start a second cluster)' % data.reason)
