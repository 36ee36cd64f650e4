# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The member program's Lease writes: what druid reads (holderIdentity) and what the etcd loop's safety rules read."""

from __future__ import annotations

from steward_controller.member.leases import LeaseWriter


class Client:
    """Records merge patches; answers get_or_none from a dict."""

    def __init__(self, leases=None):
        self.leases = leases or {}
        self.patches = []

    def merge_patch(self, path, patch):
        self.patches.append((path.rsplit('/', 1)[-1], patch))

    def get_or_none(self, path):
        return self.leases.get(path.rsplit('/', 1)[-1])

    def list(self, path):
        return [dict(lease, metadata=dict(lease.get('metadata') or {}, name=name)) for name, lease in self.leases.items()]


def test_member_and_snapshot_leases_carry_revisions_and_the_verified_full_snapshot():
    client = Client()
    writer = LeaseWriter(client, 'shoot', 'etcd-main-0', 'etcd-main-full-snap', 'etcd-main-delta-snap')
    assert writer.member('8e9e05c52164694d', True, 42)
    assert writer.snapshot('full', 40, verified=True) and writer.snapshot('delta', 42)
    (name, member), (full_name, full), (delta_name, delta) = client.patches
    assert name == 'etcd-main-0' and member['spec']['holderIdentity'] == '8e9e05c52164694d:Leader'
    assert member['metadata']['annotations'] == {'cluster.steward.io/revision': '42'}
    assert full_name == 'etcd-main-full-snap' and full['spec']['holderIdentity'] == '40'
    assert full['metadata']['annotations']['cluster.steward.io/verified-revision'] == '40'
    assert delta_name == 'etcd-main-delta-snap' and 'metadata' not in delta


def test_a_learner_says_so_on_its_lease_and_a_voter_too():
    client = Client()
    writer = LeaseWriter(client, 'shoot', 'etcd-main-1', '', '')
    assert writer.member('8e9e05c52164694d', False, 7, learner=True)
    assert writer.member('8e9e05c52164694d', False, 9, learner=False)
    assert [p['metadata']['annotations']['cluster.steward.io/learner'] for _name, p in client.patches] == ['true', 'false']


def test_the_scale_up_marker_is_read_from_the_members_lease():
    marked = {'etcd-main-2': {'metadata': {'annotations': {'druid.gardener.cloud/create-as-learner': 'true'}}}}
    assert LeaseWriter(Client(marked), 'shoot', 'etcd-main-2', '', '').learner_wanted()
    assert not LeaseWriter(Client({'etcd-main-2': {'metadata': {}}}), 'shoot', 'etcd-main-2', '', '').learner_wanted()
    assert not LeaseWriter(Client(), 'shoot', '', '', '').learner_wanted(), 'member lease renewal off: no marker read'


def test_the_recovery_restore_marker_is_read_from_the_members_lease():
    marked = {'etcd-main-0': {'metadata': {'annotations': {'cluster.steward.io/restore-from-store': '1800000000'}}}}
    assert LeaseWriter(Client(marked), 'shoot', 'etcd-main-0', '', '').recovery_marker() == '1800000000'
    assert LeaseWriter(Client({'etcd-main-0': {}}), 'shoot', 'etcd-main-0', '', '').recovery_marker() is None


def test_a_scale_down_reads_this_etcds_member_leases_and_marks_a_removed_member():
    leases = {'etcd-main-0': {}, 'etcd-main-2': {'metadata': {'annotations': {'cluster.steward.io/leaving': '1'}}},
              'etcd-main-full-snap': {}, 'etcd-events-0': {}, 'etcd-main-x': {}}
    client = Client(leases)
    writer = LeaseWriter(client, 'shoot', 'etcd-main-0', '', '', etcd='etcd-main')
    assert sorted(writer.member_leases()) == ['etcd-main-0', 'etcd-main-2']   # only `<etcd>-<ordinal>`
    assert LeaseWriter(client, 'shoot', 'etcd-main-2', '', '').leaving()
    assert not writer.leaving()
    assert writer.mark_removed('etcd-main-2', 'a2')
    assert client.patches == [('etcd-main-2', {'metadata': {'annotations': {'cluster.steward.io/member-removed': 'a2'}}})]
    assert LeaseWriter(client, 'shoot', 'etcd-main-0', '', '').member_leases() is None   # no Etcd name: nothing read


def test_peer_tls_is_said_on_the_members_lease_once_known():
    client = Client()
    writer = LeaseWriter(client, 'shoot', 'etcd-main-0', '', '')
    assert writer.member('8e9e05c52164694d', True, 5)
    writer.peer_tls = True
    assert writer.member('8e9e05c52164694d', True, 6)
    writer.peer_tls = False
    assert writer.member('8e9e05c52164694d', True, 7)
    said = [p['metadata']['annotations'].get('member.etcd.gardener.cloud/tls-enabled') for _n, p in client.patches]
    assert said == [None, 'true', 'false']
