# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node-local apiserver load balancer's config, rendered from the control-plane set (Promenade's HAProxy
discovery): every node reaches the apiservers at https://<local address>:<lb_port>, so kubelets and
controllers find a working apiserver after any node is lost and after a full reboot, without external DNS or
a cloud load balancer.

Servers are named after their nodes and sorted, so the same control-plane set always renders the same bytes
(no reload when nothing changed) and a removed node disappears from every config on the next render.
"""

from __future__ import annotations

from typing import List

from ansible_collections.steward.cluster.plugins.module_utils.common.netaddr import url_host
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.spec import ClusterSpec

HEADER = '# Node-local load balancer in front of every kube-apiserver (steward.cluster; do not edit: re-rendered\n' \
         '# from the control-plane set, validated with `haproxy -c` before it replaces this file).\n'
# Connections kept by a previous worker after a reload end at the latest after this (kubelets reconnect).
HARD_STOP_AFTER = '1h'
# Connections one node's kubelet, proxies and controllers hold at most; within a default 20,000-descriptor limit
# (HAProxy needs about five descriptors per allowed connection and refuses to start above the limit).
MAXCONN = 4000


def render(cluster: ClusterSpec, local_address: str) -> bytes:
    """The config of a node whose load balancer listens on `local_address` (127.0.0.1 on a real host)."""
    lines: List[str] = [
        HEADER.rstrip('\n'),
        'global',
        '  maxconn %d' % MAXCONN,
        '  hard-stop-after %s' % HARD_STOP_AFTER,
        '',
        'defaults',
        '  mode tcp',
        '  timeout connect 5s',
        '  timeout client 24h',
        '  timeout server 24h',
        '  timeout check 5s',
        '',
        'frontend kube-apiserver',
        '  bind %s:%d' % (url_host(local_address), cluster.lb_port),
        '  default_backend kube-apiserver',
        '',
        'backend kube-apiserver',
        '  balance roundrobin',
        '  option redispatch',
        '  default-server inter 5s fall 3 rise 2',
    ]
    for member in sorted(cluster.control_plane, key=lambda m: m.name):
        lines.append('  server %s %s:%d check' % (member.name, url_host(member.address), cluster.apiserver_port))
    return ('\n'.join(lines) + '\n').encode()


def backends(config: bytes) -> List[str]:
    """The server names of the apiserver backend in a rendered config (for reports and tests)."""
    names, inside = [], False
    for line in config.decode('utf-8', 'replace').splitlines():
        stripped = line.strip()
        if not line.startswith(' ') and stripped:
            inside = stripped == 'backend kube-apiserver'
        elif inside and stripped.startswith('server '):
            names.append(stripped.split()[1])
    return names
