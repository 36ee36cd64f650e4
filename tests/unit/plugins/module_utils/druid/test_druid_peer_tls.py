# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""druid/peer_tls.py: which running members a scale-up waits for (ETCD-42 step 2), and a member program's own
decision: update its member's peer URLs in etcd, and what its Lease says (etcd's member list is the evidence)."""

from ansible_collections.steward.cluster.plugins.module_utils.druid import components as c
from ansible_collections.steward.cluster.plugins.module_utils.druid import peer_tls as pt
from ansible_collections.steward.cluster.plugins.module_utils.druid.spec import parse_etcd

from support.druid_samples import sample

TLS = {'tlsCASecretRef': {'name': 'ca-etcd-peer'}, 'serverTLSSecretRef': {'name': 'etcd-peer-server'}}


def spec(peer_tls):
    obj = sample(replicas=3)
    if peer_tls:
        obj['spec']['etcd']['peerUrlTls'] = TLS
    return parse_etcd(obj)


def lease(value=None):
    return {'metadata': {'annotations': {c.TLS_ENABLED: value} if value is not None else {}}}


def test_only_running_members_without_a_true_lease_are_waited_for():
    leases = {'etcd-main-0': lease('true'), 'etcd-main-1': lease('false'), 'etcd-main-2': lease(),
              'etcd-main-3': lease()}
    assert pt.members_without_peer_tls(spec(True), leases, 3) == ('etcd-main-1', 'etcd-main-2')
    assert pt.members_without_peer_tls(spec(True), {'etcd-main-0': lease('True')}, 1) == ()
    assert pt.members_without_peer_tls(spec(True), {}, 1) == ('etcd-main-0',)      # no Lease: no evidence
    assert pt.members_without_peer_tls(spec(False), leases, 3) == ()              # no peer TLS asked for


MEMBERS = [{'id': 'a1', 'name': 'etcd-main-0', 'peer_urls': ['http://127.0.100.1:2380']},
           {'id': 'a2', 'name': '', 'peer_urls': ['https://127.0.100.2:2380']}]


def test_a_member_started_with_other_peer_urls_than_etcd_lists_updates_them():
    change = pt.peer_urls_change(MEMBERS, 'a1', ['https://127.0.100.1:2380'])
    assert change == pt.PeerURLChange('a1', ('http://127.0.100.1:2380',), ('https://127.0.100.1:2380',))
    assert pt.describe(change) == ('member a1 advertised http://127.0.100.1:2380, started with '
                                   'https://127.0.100.1:2380')
    assert pt.peer_urls_change(MEMBERS, 'a2', ['HTTPS://127.0.100.2:2380/']) is None    # the same, normalized
    assert pt.peer_urls_change(MEMBERS, 'ff', ['https://127.0.100.9:2380']) is None     # not (yet) a member
    assert pt.peer_urls_change(MEMBERS, 'a1', ['']) is None                              # nothing configured


def test_the_lease_says_what_etcds_member_list_says():
    assert pt.peer_tls_reported(MEMBERS, 'a1') is False
    assert pt.peer_tls_reported(MEMBERS, 'a2') is True
    assert pt.peer_tls_reported(MEMBERS, 'ff') is None
    assert pt.peer_tls_reported([{'id': 'a3', 'peer_urls': []}], 'a3') is None


def test_the_waiting_message_names_each_member_and_its_lease():
    said = pt.waiting_message(1, 3, ('etcd-main-0',), {'etcd-main-0': lease('false')})
    assert said.startswith('scale-up 1 -> 3 waits for peer TLS (ETCD-42)')
    assert 'etcd-main-0 (%s: "false")' % c.TLS_ENABLED in said
    assert 'etcd-main-0 (no %s yet)' % c.TLS_ENABLED in pt.waiting_message(1, 3, ('etcd-main-0',), {})
