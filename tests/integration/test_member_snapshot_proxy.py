# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A follower's `steward-etcd-member` proxies `/snapshot/full` and `/snapshot/delta` to the leading member's program,
as etcd-backup-restore's followers do: three real etcd members, each on its own loopback address (as pods have their
own IPs), and the programs' HTTP servers on the same port of the leader's and a follower's address (as every pod runs
the program on `spec.backup.port`). Whichever member a caller asks, the backup leader answers; a request proxied
once is answered where it lands; with the leader's program away a full snapshot is taken by the follower itself and
a delta is refused, naming the leader's program."""

from __future__ import annotations

import dataclasses
import socket
import types

import pytest
import requests

from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.client import EtcdConnection
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.cluster import cluster_info
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.stores import open_store

from steward_controller.member.server import PROXIED_FROM, PROXIED_TO, MemberState, serve
from support.etcd_cluster import EtcdCluster, etcd_bin_dirs

pytestmark = pytest.mark.skipif(not etcd_bin_dirs(), reason='no etcd binary: run make all')


def _free_port_on(hosts):
    for _attempt in range(50):
        with socket.socket() as probe:
            probe.bind((hosts[0], 0))
            port = probe.getsockname()[1]
        try:
            for host in hosts[1:]:
                with socket.socket() as other:
                    other.bind((host, port))
            return port
        except OSError:
            continue
    raise AssertionError('no port free on %s' % hosts)


def _program(name, member, cluster, store, host, port):
    options = types.SimpleNamespace(name=name, client_url=member.client_url)
    initializer = types.SimpleNamespace(options=options, store=store, conn=EtcdConnection(endpoints=tuple(cluster.endpoints)),
                                        last={})
    state = MemberState(initializer, {})
    state.initialized = True
    return state, serve(state, host, port)


def test_a_followers_program_proxies_snapshot_requests_to_the_leaders(tmp_path):
    cluster = EtcdCluster(str(tmp_path / 'etcd'), size=3)
    hosts = {}
    for i, name in enumerate(list(cluster.members)):
        hosts[name] = '127.0.%d.%d' % (77, 11 + i)
        cluster.members[name] = dataclasses.replace(cluster.members[name], host=hosts[name])
    cluster.start()
    servers = []
    try:
        info = cluster_info(EtcdConnection(endpoints=tuple(cluster.endpoints)))
        leader = next(m['name'] for m in info['members'] if m['id'] == info['leader'])
        follower = next(n for n in cluster.members if n != leader)
        store = open_store(str(tmp_path / 'store'))
        port = _free_port_on([hosts[leader], hosts[follower]])
        _lead_state, lead_server = _program(leader, cluster.members[leader], cluster, store, hosts[leader], port)
        _state, follow_server = _program(follower, cluster.members[follower], cluster, store, hosts[follower], port)
        servers = [lead_server, follow_server]
        at_follower = 'http://%s:%d' % (hosts[follower], port)

        def put():   # a new revision: two full snapshots of one revision within a second share a name
            return int(requests.post(cluster.members[leader].client_url + '/v3/kv/put',
                                     json={'key': 'aw==', 'value': 'dg=='}, timeout=10).json()['header']['revision'])
        revision = put()
        answer = requests.get(at_follower + '/snapshot/full', timeout=60)
        assert answer.status_code == 200, answer.text
        assert answer.headers[PROXIED_TO] == 'http://%s:%d/snapshot/full' % (hosts[leader], port)
        assert answer.json()['end_revision'] >= revision and answer.json()['name']
        # the leader has no backup runner here: its own answer to a delta, relayed
        delta = requests.get(at_follower + '/snapshot/delta', timeout=60)
        assert delta.status_code == 405 and 'not the backup leader' in delta.text and PROXIED_TO in delta.headers
        # a request proxied once is answered where it lands
        put()
        here = requests.get(at_follower + '/snapshot/full', headers={PROXIED_FROM: 'another'}, timeout=60)
        assert here.status_code == 200 and PROXIED_TO not in here.headers, here.text

        # the leader's program is away: a full snapshot is the follower's own, a delta names the leader's program
        lead_server.shutdown()
        lead_server.server_close()
        servers = [follow_server]
        put()
        alone = requests.get(at_follower + '/snapshot/full', timeout=60)
        assert alone.status_code == 200 and PROXIED_TO not in alone.headers
        refused = requests.get(at_follower + '/snapshot/delta', timeout=60)
        assert refused.status_code == 502 and hosts[leader] in refused.json()['error']
        assert len([s for s in store.list() if s.is_full]) >= 3
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()
        cluster.stop()
