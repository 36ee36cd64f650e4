# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Peer TLS before a scale-up (druid's ETCD-42 step 2).

The member program's part against a real etcd: started with other peer URLs than etcd's member list names (the
https ones of `spec.etcd.peerUrlTls` over data that names http), its heartbeat updates its own member (MemberUpdate)
and its Lease says `member.etcd.gardener.cloud/tls-enabled` as etcd's member list has it.

The journey on the lab's parts (the API emulator with the pod runtime, the controller's `etcd` loop): an `Etcd` of
one member without peer TLS holds keys; one apply gives it `spec.etcd.peerUrlTls` and replicas 3. The loop first
writes the pod template with peer TLS and restarts the member onto it, the member's program turns its peer URL to
https, and only then are members added: three Ready, every peer URL https in etcd's member list, every key there,
and the Events in that order. The certificates name the pod IPs (the lab rewrites peer names to IPs)."""

from __future__ import annotations


import pytest

from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.client import EtcdConnection
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.cluster import cluster_info

from lab.pods import images
from steward_controller.member.leader import Heartbeat
from support.druid_lab import WRAPPER, DruidLab
from support.etcd_cluster import EtcdCluster, etcd_bin_dirs

TLS_ENABLED = 'member.etcd.gardener.cloud/tls-enabled'
MERGE = {'Content-Type': 'application/merge-patch+json'}


class Leases:
    """What the heartbeat writes on its member Lease (a stand-in of the program's LeaseWriter: no API here)."""

    def __init__(self):
        self.peer_tls, self.renewed = None, []

    def member(self, member_id, leader, revision=None, learner=None):
        self.renewed.append((member_id, self.peer_tls))
        return True

    def member_leases(self):
        return {}


@pytest.mark.skipif(not etcd_bin_dirs(), reason='no etcd binary: run make all')
def test_the_member_program_updates_its_own_peer_urls_and_says_so_on_its_lease(tmp_path):
    cluster = EtcdCluster(str(tmp_path), size=1).start()
    try:
        member = next(iter(cluster.members.values()))
        conn = EtcdConnection(endpoints=(member.client_url,))
        wanted = 'https://127.0.0.1:%d' % member.peer_port
        leases = Leases()
        heartbeat = Heartbeat(conn, conn, store=None, policy=None, work_dir=str(tmp_path / 'work'), leases=leases,
                              defrag_schedule=None, defrag_timeout=60, peer_urls=(wanted,))
        heartbeat.beat()
        (own,) = cluster_info(conn)['members']
        assert own['peer_urls'] == [wanted] and heartbeat.last_peer_update['result'] == 'updated'
        assert leases.renewed == [(own['id'], True)] and heartbeat.peer_urls_settled
        heartbeat.beat()   # settled: no second update
        assert leases.renewed[-1] == (own['id'], True) and heartbeat.last_peer_update['result'] == 'updated'
        # the cluster cannot be reached for the update (it goes through the cluster, not the member alone): it fails,
        # the Lease keeps saying what etcd lists, and it is tried again next heartbeat
        refused = Heartbeat(conn, EtcdConnection(endpoints=('http://127.0.0.1:9',), timeout=1.0), store=None,
                            policy=None, work_dir=str(tmp_path / 'work'), leases=leases, defrag_schedule=None,
                            defrag_timeout=60, peer_urls=('http://127.0.0.1:%d' % member.peer_port,))
        refused.beat()
        assert refused.last_peer_update['result'].startswith('failed') and not refused.peer_urls_settled
        assert leases.renewed[-1] == (own['id'], True) and cluster_info(conn)['members'][0]['peer_urls'] == [wanted]
    finally:
        cluster.stop()


@pytest.mark.skipif(images.etcd_binary('3.5') is None, reason='no etcd 3.5 binary: run make all')
def test_a_scale_up_that_asks_for_peer_tls_turns_the_running_member_to_tls_first(tmp_path):
    lab = DruidLab(str(tmp_path), controller_args=['--controllers', 'etcd', '--etcd-status-sync-period', '2s'])
    try:
        lab.start()
        peer_tls = lab.peer_tls_secrets(str(tmp_path / 'pki'))
        answer = lab.session.post(lab.kube.url + lab.etcd_path.rsplit('/', 1)[0], json={
            'apiVersion': 'druid.gardener.cloud/v1alpha1', 'kind': 'Etcd',
            'metadata': {'name': lab.name, 'namespace': lab.ns, 'labels': {'role': 'main'}},
            'spec': {'replicas': 1, 'labels': {'app': lab.name, 'role': 'main'},
                     'etcd': {'image': WRAPPER + 'v3.5.21', 'quota': '2Gi', 'defragmentationSchedule': '0 3 * * *'},
                     'backup': {'fullSnapshotSchedule': '0 */24 * * *'}}})
        assert answer.status_code == 201, answer.text
        lab.wait(lambda: lab.all_ready(1), 180, 'one member Ready')
        (before,) = lab.member_list()
        assert all(u.startswith('http://') for u in before['peerURLs']), before
        expected = lab.put_keys('k/', 20)

        # one apply: peer TLS and three replicas (with the reconcile annotation, as a druid user applies a change)
        answer = lab.session.patch(lab.kube.url + lab.etcd_path, headers=MERGE, json={
            'metadata': {'annotations': {'gardener.cloud/operation': 'reconcile'}},
            'spec': {'replicas': 3, 'etcd': {'peerUrlTls': peer_tls}}})
        assert answer.status_code == 200, answer.text
        lab.wait(lambda: lab.all_ready(3), 360, 'three members Ready')

        members = lab.member_list()
        assert len(members) == 3 and not any(m.get('isLearner') for m in members), members
        assert all(u.startswith('https://') for m in members for u in m['peerURLs']), members
        assert before['ID'] in {m['ID'] for m in members}        # the same member, its data kept
        lab.assert_keys_everywhere('k/', expected)
        leases = lab.session.get(lab.kube.url + '/apis/coordination.k8s.io/v1/namespaces/%s/leases' % lab.ns).json()
        said = {i['metadata']['name']: (i['metadata'].get('annotations') or {}).get(TLS_ENABLED)
                for i in leases['items'] if i['metadata']['name'][-1].isdigit()}
        assert said == {'etcd-main-0': 'true', 'etcd-main-1': 'true', 'etcd-main-2': 'true'}, said
        assert lab.status().get('peerUrlTLSEnabled') is True

        # the Events say what was done, in order: the template with peer TLS, the member restarted onto it, and only
        # then the scale-up
        events = [(e['reason'], e.get('message') or '') for e in lab.events()]
        reasons = [r for r, _m in events]
        updated = next(i for i, (r, m) in enumerate(events) if r == 'StatefulSetUpdated' and 'peer TLS first' in m)
        restarted = next(i for i, (r, m) in enumerate(events) if r == 'MemberRestarted' and 'etcd-main-0' in m)
        scaled = reasons.index('ScaledUp')
        assert updated < restarted < scaled, events
        assert 'scaling up 1 -> 3' in events[scaled][1], events
    finally:
        lab.stop()
