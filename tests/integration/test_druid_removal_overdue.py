# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A scale-down the leading member's program never carries out (plan.RemoveMembers, past --etcd-member-removal-timeout):
the `etcd` loop's own removal step against three real etcd members named as druid names them (`etcd-main-<i>`).

It removes a going member only when etcd's member of that name has the ID the pod's sidecar wrote into its Lease
(provably that pod's member), marks its Lease removed, and refuses - naming the member and why - where it cannot
prove it; the decision is the program's (druid/scale_down.plan_removal), the etcd calls the engine's."""

from __future__ import annotations

import dataclasses

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.druid import scale_down as sd
from ansible_collections.steward.cluster.plugins.module_utils.druid.status import Observed
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.client import EtcdConnection
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.cluster import cluster_info
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.members import move_leader
from ansible_collections.steward.cluster.plugins.module_utils.kube.lease import format_micro

from steward_controller.etcd_druid import target
from steward_controller.etcd_druid.loop import EtcdDruidLoop
from support.etcd_cluster import EtcdCluster, etcd_bin_dirs

pytestmark = pytest.mark.skipif(not etcd_bin_dirs(), reason='no etcd binary: run make all')


def _lease(holder, leaving=None):
    annotations = {sd.LEAVING: str(leaving), sd.LEAVING_SINCE: format_micro(0.0)} if leaving is not None else {}
    return {'metadata': {'annotations': annotations}, 'spec': {'holderIdentity': holder}}


def test_the_loop_removes_only_a_provable_going_member_and_marks_its_lease(tmp_path):
    cluster = EtcdCluster(str(tmp_path), size=3)
    cluster.members = {'etcd-main-%d' % i: dataclasses.replace(m, name='etcd-main-%d' % i)
                       for i, m in enumerate(cluster.members.values())}
    cluster.start()
    try:
        urls = tuple(cluster.endpoints)
        conn = EtcdConnection(endpoints=urls)
        ids = {m['name']: m['id'] for m in cluster_info(conn)['members']}
        info = cluster_info(conn)
        if info['leader'] != ids['etcd-main-0']:
            move_leader(conn, ids['etcd-main-0'])
        # a 3 -> 1 scale-down: member 1's Lease carries its own ID (its sidecar renewed it), member 2's another one
        leases = {'etcd-main-0': _lease('%s:Leader' % ids['etcd-main-0']),
                  'etcd-main-1': _lease('%s:Member' % ids['etcd-main-1'], leaving=1),
                  'etcd-main-2': _lease('00000000000000ff:Member', leaving=1)}
        observed = Observed(member_leases=leases)
        marked = []

        def mark(name, member_id):
            marked.append((name, member_id))
            return True
        said = EtcdDruidLoop.remove_members(observed, urls, mark)
        assert marked == [('etcd-main-1', ids['etcd-main-1'])], said
        assert any('etcd-main-1' in line and 'removed' in line for line in said), said
        left = sorted(m['name'] for m in cluster_info(EtcdConnection(endpoints=urls[:1] + urls[2:]))['members'])
        assert left == ['etcd-main-0', 'etcd-main-2']

        # member 2 is etcd's etcd-main-2, but not the ID its Lease names: not provably the pod's, so left alone
        leases['etcd-main-1']['metadata']['annotations'][sd.REMOVED] = ids['etcd-main-1']
        with pytest.raises(target.RemovalRefused) as refused:
            EtcdDruidLoop.remove_members(observed, urls, mark)
        assert 'not provably' in str(refused.value) and 'etcd-main-2' in str(refused.value)
        assert len(cluster_info(EtcdConnection(endpoints=urls[:1] + urls[2:]))['members']) == 2
    finally:
        cluster.stop()
