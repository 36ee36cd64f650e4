# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""etcd-druid's initialization table (seed 004, ETCD-32/33/34), row by row, and where we refuse to lose data."""

from __future__ import annotations

import os
import struct

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.etcd.recovery import initialization as init
from ansible_collections.steward.cluster.plugins.module_utils.etcd.recovery.initialization import (
    DataValidity, MemberFacts, decide, validate_data_dir)

NONE = DataValidity(False, False, False, None, 'no data dir')
VALID = DataValidity(True, True, True, 42, 'valid (sanity)')
CORRUPT = DataValidity(True, True, False, None, 'the backend database is not sound')
NO_WAL = DataValidity(True, False, True, 42, 'no WAL')


def facts(**kw) -> MemberFacts:
    base = dict(cluster_size=3, ordinal=0, bootstrapped=True, quorate=True, in_membership=True, data=VALID,
                backup_exists=True)
    base.update(kw)
    return MemberFacts(**base)


@pytest.mark.parametrize('ordinal,row', [(0, 1), (2, 2)])
def test_rows_1_2_bootstrap_of_a_new_cluster_is_new_with_every_peer(ordinal, row):
    got = decide(facts(bootstrapped=False, quorate=None, in_membership=None, data=NONE, backup_exists=False,
                       ordinal=ordinal))
    assert (got.row, got.action, got.cluster_state) == (row, init.START, init.NEW)


def test_row_2_a_bootstrap_member_starting_after_the_others_have_quorum_is_still_new():
    got = decide(facts(data=NONE, ordinal=2, never_started=True))
    assert (got.row, got.action, got.cluster_state) == (2, init.START, init.NEW)


def test_row_3_restart_in_a_quorate_cluster_with_valid_data_reuses_it():
    got = decide(facts())
    assert (got.row, got.action, got.cluster_state) == (3, init.START, init.EXISTING)


@pytest.mark.parametrize('data,row', [(CORRUPT, 4), (NO_WAL, 5), (NONE, 5)])
def test_rows_4_5_bad_data_in_a_quorate_cluster_rejoins_as_a_learner_with_no_restore(data, row):
    got = decide(facts(data=data, ordinal=1))
    assert (got.row, got.action, got.cluster_state) == (row, init.REJOIN_AS_LEARNER, init.EXISTING)
    assert not got.single_member and not got.upload_full and 'learner' in got.reason


def test_a_valid_member_the_cluster_no_longer_lists_rejoins_too():
    got = decide(facts(in_membership=False, ordinal=2))
    assert got.action == init.REJOIN_AS_LEARNER


@pytest.mark.parametrize('size,state', [(3, init.EXISTING), (1, init.NEW)])
def test_row_6_no_quorum_with_valid_data_keeps_it(size, state):
    got = decide(facts(quorate=False, cluster_size=size))
    assert (got.row, got.action, got.cluster_state) == (6, init.START, state)


def test_row_7_first_member_without_quorum_or_data_restores_alone_and_uploads_before_the_others_join():
    got = decide(facts(quorate=None, data=CORRUPT))
    assert (got.row, got.action, got.cluster_state) == (7, init.RESTORE_THEN_START, init.NEW)
    assert got.single_member and got.upload_full


def test_row_7_without_a_backup_refuses_to_start_an_existing_cluster_empty():
    got = decide(facts(quorate=False, data=NONE, backup_exists=False))
    assert (got.row, got.action) == (0, init.REFUSE)
    assert 'drop every key' in got.reason and 'allow an empty start' in got.reason
    allowed = decide(facts(quorate=False, data=NONE, backup_exists=False, allow_empty=True))
    assert (allowed.row, allowed.action, allowed.cluster_state) == (7, init.START, init.NEW)


@pytest.mark.parametrize('backup', [True, False])
def test_row_8_following_member_without_quorum_or_data_waits_for_the_first_member(backup):
    # druid restores the newest full snapshot here: two members doing so elect a leader of their own (a second
    # cluster on older data than the first member's full + deltas; found on the lab as a total loss that came
    # back empty behind the client Service). Waiting is safe: once the first member serves, rows 4/5/9 apply.
    got = decide(facts(quorate=False, data=CORRUPT, ordinal=1, backup_exists=backup))
    assert (got.row, got.action, got.cluster_state) == (8, init.REFUSE, init.EXISTING)
    assert 'waiting for the first member' in got.reason
    later = decide(facts(quorate=True, data=CORRUPT, ordinal=1, backup_exists=backup, in_membership=False))
    assert later.action == init.REJOIN_AS_LEARNER


def test_scale_up_joins_as_a_learner_of_the_running_cluster():
    got = decide(facts(bootstrapped=False, data=NONE, ordinal=1, learner_wanted=True, in_membership=False))
    assert (got.row, got.action, got.cluster_state) == (9, init.JOIN_AS_LEARNER, init.EXISTING)
    bootstrapped = decide(facts(data=NONE, ordinal=2, learner_wanted=True, in_membership=False))
    assert bootstrapped.action == init.JOIN_AS_LEARNER


def test_a_scale_up_member_that_lost_its_disk_later_is_removed_and_added_back_not_joined_under_its_old_id():
    # found on the lab: the Lease keeps the create-as-learner marker after the scale-up; the member lost its PVC;
    # joining "again" let etcd start under its old id with an empty log, and the leader's heartbeat panicked it
    got = decide(facts(data=NONE, ordinal=1, learner_wanted=True, in_membership=True))
    assert (got.row, got.action, got.cluster_state) == (5, init.REJOIN_AS_LEARNER, init.EXISTING)
    unknown = decide(facts(data=NONE, ordinal=1, learner_wanted=True, in_membership=None))
    assert unknown.action == init.JOIN_AS_LEARNER   # nobody listed it: a plain scale-up join


def test_a_cluster_size_below_one_is_refused_naming_the_field():
    with pytest.raises(init.InitializationError, match='cluster_size'):
        decide(facts(cluster_size=0))


# --- validation of a data dir ------------------------------------------------------------------------------
def _bolt_meta_page() -> bytes:
    page = bytearray(4096)
    struct.pack_into('<QHHI', page, 0, 0, 0x04, 0, 0)                  # page header: id 0, meta flag
    struct.pack_into('<I', page, 16, 0xED0CDAED)
    return bytes(page)


def _data_dir(tmp_path, wal=True, db=None):
    data = tmp_path / 'data'
    (data / 'member' / 'snap').mkdir(parents=True)
    if wal:
        (data / 'member' / 'wal').mkdir()
        (data / 'member' / 'wal' / '0000000000000000-0000000000000000.wal').write_bytes(b'\0' * 64)
    if db is not None:
        (data / 'member' / 'snap' / 'db').write_bytes(db)
    return str(data)


def test_validation_of_an_absent_or_empty_data_dir(tmp_path):
    assert not validate_data_dir(str(tmp_path / 'nothing')).exists
    (tmp_path / 'empty').mkdir()
    got = validate_data_dir(str(tmp_path / 'empty'))
    assert (got.exists, got.metadata_valid, got.data_valid) == (False, False, False)


def test_sanity_validation_reads_the_bolt_magic_and_full_walks_the_tree(tmp_path):
    path = _data_dir(tmp_path, db=_bolt_meta_page() * 2)
    sane = validate_data_dir(path, init.SANITY)
    assert sane.metadata_valid and sane.data_valid
    full = validate_data_dir(path, init.FULL)           # a meta page alone is no etcd database
    assert full.metadata_valid and not full.data_valid and 'not sound' in full.reason


def test_validation_finds_garbage_a_missing_db_and_a_missing_wal(tmp_path):
    assert not validate_data_dir(_data_dir(tmp_path / 'a', db=os.urandom(8192))).data_valid
    missing = validate_data_dir(_data_dir(tmp_path / 'b'))
    assert missing.metadata_valid and not missing.data_valid and 'no backend database' in missing.reason
    no_wal = validate_data_dir(_data_dir(tmp_path / 'c', wal=False, db=_bolt_meta_page() * 2))
    assert not no_wal.metadata_valid and no_wal.data_valid


def test_an_unknown_mode_is_refused_naming_the_field(tmp_path):
    with pytest.raises(init.InitializationError, match='mode'):
        validate_data_dir(str(tmp_path), 'quick')


@pytest.mark.parametrize('data', [VALID, CORRUPT, NONE])
def test_a_quorum_loss_recovery_restores_the_first_member_over_whatever_it_holds(data):
    got = decide(facts(quorate=False, data=data, recovery_restore=True))
    assert (got.row, got.action, got.cluster_state) == (7, init.RESTORE_THEN_START, init.NEW)
    assert got.single_member and got.upload_full and 'quorum-loss recovery' in got.reason


def test_a_quorum_loss_recovery_without_a_backup_refuses():
    got = decide(facts(quorate=False, data=VALID, recovery_restore=True, backup_exists=False))
    assert (got.row, got.action) == (0, init.REFUSE) and 'no verified full snapshot' in got.reason


def test_the_recovery_marker_is_ignored_by_other_members_and_in_a_quorate_cluster():
    assert decide(facts(quorate=True, recovery_restore=True)).row == 3
    assert decide(facts(quorate=False, ordinal=1, recovery_restore=True)).row == 6
