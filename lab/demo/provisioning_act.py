#!/usr/bin/env python
# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The provisioning act of `make demo` (seed 002): genesis of cp1, join of cp2, cp3, w1, w2 (etcd learners promoted
one at a time, TLS everywhere, a node-local HAProxy on every host), a full power cut with everything back from disk
and no API, the removal of the genesis node (exact etcd member, quorum checked) and its provisioning again.

The lab's provisioning hosts are root prefixes below .lab/hosts with a static-pod supervisor each (lab/hosts.py,
lab/provisioning/supervisor.py); the playbooks are the collection's own, against the lab inventory.

It runs as one act of `make demo` (lab/demo/main.py lists it in ACTS).
"""

from __future__ import annotations

import os
import time
from typing import Any, Callable, Dict, List

from lab.provisioning import hosts as lab_hosts  # (lab/hosts.py)
from lab.demo.context import changes

TITLE = 'Kubernetes nodes: genesis, join, a power cut, removal and re-provisioning of the genesis node'

PKI = 'etc/kubernetes/pki/etcd'


def etcd_view(state: str, via: str) -> Dict[str, Any]:
    """Members and their health, asked over TLS with `via`'s own etcd client certificate (`etcdctl member list`)."""
    from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.client import EtcdConnection
    from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.cluster import cluster_info
    hosts = lab_hosts.read_hosts(state)
    root = lab_hosts.root_of(state, via)
    endpoints = tuple('https://%s:2379' % hv['ansible_host'] for name, hv in hosts.items() if name.startswith('cp'))
    conn = EtcdConnection(endpoints=endpoints, ca_cert=os.path.join(root, PKI, 'ca.crt'),
                          client_cert=os.path.join(root, PKI, 'healthcheck-client.crt'),
                          client_key=os.path.join(root, PKI, 'healthcheck-client.key'))
    info = cluster_info(conn)
    return {'members': sorted(m['name'] for m in info['members']),
            'healthy': sorted(m['name'] for m in info['members'] if m['healthy']),
            'learners': sorted(m['name'] for m in info['members'] if m['is_learner'])}


def backends(state: str, host: str) -> List[str]:
    path = os.path.join(lab_hosts.root_of(state, host), 'etc/kubernetes/haproxy/haproxy.cfg')
    with open(path) as f:
        return [line.split()[1] for line in f if line.strip().startswith('server ')]


def wait(what: str, check: Callable[[], Any], timeout: float = 120.0) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
            if last:
                return last
        except Exception as exc:  # not answering yet is what we wait through
            last = exc
        time.sleep(0.5)
    raise SystemExit('%s: not reached within %ss (last: %r)' % (what, timeout, last))


def run(ctx: Any) -> List[str]:
    state = ctx.state
    names = [name for name, _group in lab_hosts.HOSTS]

    def up() -> str:
        result = lab_hosts.hosts_up(state)
        return '%d hosts with a kubelet stand-in each' % len(result['supervisors'])

    def play(name: str, *extra: str) -> Callable[[], str]:
        return lambda: changes(ctx.playbook(name, *extra).changed)

    def settled(expected: List[str]) -> Callable[[], Any]:
        def check() -> Any:
            view = etcd_view(state, expected[-1])
            return view if view['healthy'] == expected and not view['learners'] else None
        return check

    def healthy(expected: List[str]) -> Callable[[], str]:
        def check() -> str:
            view = wait('etcd %s healthy' % ', '.join(expected), settled(expected))
            lbs = {h: backends(state, h) for h in names if os.path.exists(os.path.join(
                lab_hosts.root_of(state, h), 'etc/kubernetes/haproxy/haproxy.cfg'))}
            return 'etcd %s (TLS, all healthy); HAProxy backends %s on %d hosts' % (
                ', '.join(view['members']), ', '.join(sorted(set(b for v in lbs.values() for b in v))), len(lbs))
        return check

    def power_cut() -> str:
        killed = lab_hosts.reboot(state, api=False)
        view = wait('etcd back after the power cut', settled(['cp1', 'cp2', 'cp3']), 180)
        wait('haproxy back on every host', lambda: all('haproxy' in lab_hosts.pod_pids(lab_hosts.root_of(state, h))
                                                       for h in names), 60)
        lab_hosts.start_api(state)
        return '%d processes killed; etcd %s and HAProxy on %d hosts back from disk, no API needed' % (
            sum(len(p) for p in killed.values()), ', '.join(view['healthy']), len(names))

    try:
        return [
            ctx.step('provisioning hosts up (cp1-cp3, w1, w2 as root prefixes)', up),
            ctx.step('genesis, check mode first (cluster_genesis --check --diff)',
                     play('cluster_genesis', '--check', '--diff')),
            ctx.step('genesis of cp1 (steward.cluster.cluster_genesis)', play('cluster_genesis')),
            ctx.step('join cp2, cp3, w1, w2 (steward.cluster.node_join)', play('node_join')),
            ctx.step('verify etcd and the load balancers', healthy(['cp1', 'cp2', 'cp3'])),
            ctx.step('join again: nothing to do', play('node_join')),
            ctx.step('power cut: every process killed, supervisors restarted', power_cut),
            ctx.step('remove the genesis node cp1 (steward.cluster.node_remove)',
                     play('node_remove', '-e', 'provisioning_remove_node=cp1')),
            ctx.step('verify: cp1 gone from etcd and every load balancer', healthy(['cp2', 'cp3'])),
            ctx.step('provision cp1 again like any node (node_join --limit cp1)', play('node_join', '--limit', 'cp1')),
            ctx.step('verify etcd of three again', healthy(['cp1', 'cp2', 'cp3'])),
        ]
    finally:
        lab_hosts.hosts_down(state)
