# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A scale-down the leading member's program never carries out (plan.RemoveMembers, past --etcd-member-removal-timeout):
the `etcd` loop's own removal step against three real etcd members named as druid names them (`etcd-main-<i>`).

It removes a going member only when etcd's member of that name has the ID the pod's sidecar wrote into its Lease
(provably that pod's member), marks its Lease removed, and refuses - naming the member and why - where it cannot
prove it; the decision is the program's (druid/scale_down.plan_removal), the etcd calls the engine's. With the
Etcd's `spec.etcd.clientUrlTls` the step speaks https with the Etcd's own CA and client certificate Secrets
(druid/client_tls.py), against members that serve only to a client with a certificate."""

from __future__ import annotations

import base64
import dataclasses

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.druid import scale_down as sd
from ansible_collections.steward.cluster.plugins.module_utils.druid.spec import parse_etcd
from ansible_collections.steward.cluster.plugins.module_utils.druid.status import Observed
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.client import EtcdConnection
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.cluster import cluster_info
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.members import move_leader
from ansible_collections.steward.cluster.plugins.module_utils.kube.lease import format_micro

from steward_controller.etcd_druid import target
from steward_controller.etcd_druid.loop import EtcdDruidLoop
from support.etcd_cluster import EtcdCluster, etcd_bin_dirs
from support.tls import make_pki

pytestmark = pytest.mark.skipif(not etcd_bin_dirs(), reason='no etcd binary: run make all')


def _lease(holder, leaving=None):
    annotations = {sd.LEAVING: str(leaving), sd.LEAVING_SINCE: format_micro(0.0)} if leaving is not None else {}
    return {'metadata': {'annotations': annotations}, 'spec': {'holderIdentity': holder}}


def _etcd(tls):
    spec = {'replicas': 1, 'labels': {'app': 'etcd-main'}, 'etcd': {}, 'backup': {}}
    if tls:
        spec['etcd']['clientUrlTls'] = {'tlsCASecretRef': {'name': 'ca-etcd', 'dataKey': 'bundle.crt'},
                                        'serverTLSSecretRef': {'name': 'etcd-server-tls'},
                                        'clientTLSSecretRef': {'name': 'etcd-client-tls'}}
    return parse_etcd({'apiVersion': 'druid.gardener.cloud/v1alpha1', 'kind': 'Etcd',
                       'metadata': {'name': 'etcd-main', 'namespace': 'shoot'}, 'spec': spec})


def _secrets(pki):
    """The Etcd's Secrets as the API returns them (what the loop's read_secret answers), from make_pki's files."""
    def data(**files):
        return {'data': {key: base64.b64encode(open(path, 'rb').read()).decode() for key, path in files.items()}}
    found = {('shoot', 'ca-etcd'): data(**{'bundle.crt': pki['ca']}),
             ('shoot', 'etcd-client-tls'): data(**{'tls.crt': pki['client_cert'], 'tls.key': pki['client_key']})}
    return lambda namespace, name: found.get((namespace, name))


@pytest.mark.parametrize('tls', [False, True], ids=['http', 'client-tls'])
def test_the_loop_removes_only_a_provable_going_member_and_marks_its_lease(tmp_path, tls):
    pki = make_pki(str(tmp_path / 'pki')) if tls else None
    spec = _etcd(tls)
    read_secret = _secrets(pki) if tls else (lambda namespace, name: None)
    cluster = EtcdCluster(str(tmp_path), size=3, pki=pki)
    cluster.members = {'etcd-main-%d' % i: dataclasses.replace(m, name='etcd-main-%d' % i)
                       for i, m in enumerate(cluster.members.values())}
    cluster.start()
    try:
        urls = tuple(cluster.endpoints)
        conn = EtcdConnection(endpoints=urls, **({'ca_cert': pki['ca'], 'client_cert': pki['client_cert'],
                                                  'client_key': pki['client_key']} if tls else {}))
        assert all(u.startswith('https://' if tls else 'http://') for u in urls)
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
        said = EtcdDruidLoop.remove_members(spec, observed, urls, mark, read_secret)
        assert marked == [('etcd-main-1', ids['etcd-main-1'])], said
        assert any('etcd-main-1' in line and 'removed' in line for line in said), said
        left = sorted(m['name'] for m in cluster_info(conn.with_endpoints(urls[:1] + urls[2:]))['members'])
        assert left == ['etcd-main-0', 'etcd-main-2']

        # member 2 is etcd's etcd-main-2, but not the ID its Lease names: not provably the pod's, so left alone
        leases['etcd-main-1']['metadata']['annotations'][sd.REMOVED] = ids['etcd-main-1']
        with pytest.raises(target.RemovalRefused) as refused:
            EtcdDruidLoop.remove_members(spec, observed, urls, mark, read_secret)
        assert 'not provably' in str(refused.value) and 'etcd-main-2' in str(refused.value)
        assert len(cluster_info(conn.with_endpoints(urls[:1] + urls[2:]))['members']) == 2
        if tls:   # a Secret that is not there: refused naming the field and the Secret, etcd not asked
            with pytest.raises(target.RemovalRefused) as refused:
                EtcdDruidLoop.remove_members(spec, observed, urls, mark, lambda namespace, name: None)
            assert 'spec.etcd.clientUrlTls.tlsCASecretRef: Secret shoot/ca-etcd not found' in str(refused.value)
    finally:
        cluster.stop()
