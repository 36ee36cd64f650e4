# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The member program's side of a quorum-loss recovery: the restore marker on its Lease asks for a restore from the
store until this data dir has been restored for that recovery (a restart after the restore keeps its data)."""

from __future__ import annotations

import json

from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.client import EtcdConnection
from ansible_collections.steward.cluster.plugins.module_utils.etcd.recovery.restore import marker_path

from steward_controller.member.initializer import Initializer, MemberOptions

STARTED = 1_800_000_000


def facts(tmp_path, marker, restored_at=None):
    data_dir = str(tmp_path / 'new.etcd')
    if restored_at is not None:
        with open(marker_path(data_dir), 'w') as f:
            json.dump({'snapshot': 'Full-0-9-1', 'restored_at': restored_at}, f)
    options = MemberOptions(name='etcd-main-0', data_dir=data_dir, cluster_size=1,
                            initial_cluster='etcd-main-0=http://127.0.0.1:2380', peer_urls=('http://127.0.0.1:2380',),
                            endpoints=('http://127.0.0.1:2379',))
    return Initializer(options, None, EtcdConnection(endpoints=('http://127.0.0.1:2379',)),
                       recovery_marker=lambda: marker).facts('sanity', 0)


def test_the_marker_asks_for_a_restore(tmp_path):
    assert facts(tmp_path, str(STARTED)).recovery_restore


def test_no_marker_or_a_restore_done_for_this_recovery_asks_nothing(tmp_path):
    assert not facts(tmp_path, None).recovery_restore
    assert not facts(tmp_path, str(STARTED), restored_at=STARTED + 5).recovery_restore


def test_a_restore_from_before_this_recovery_does_not_count(tmp_path):
    assert facts(tmp_path, str(STARTED), restored_at=STARTED - 3600).recovery_restore
