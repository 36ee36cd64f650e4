# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The `anchor` loop (seed 002's anchor pattern): run as a DaemonSet on control-plane nodes with the host's root
mounted; keeps the node's static pod manifests and files equal to their ConfigMap/Secret sources, rewrites drift,
removes them when it stops; for etcd it adds the node's member as a learner before writing its manifest, promotes
it once it caught up, and removes it (quorum permitting) on stop. Run it without leader election: every node's
anchor acts for its own node.

loop.py holds the loop; the planning is the engine's (module_utils/provisioning/anchor.py).
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.common import validate
from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.common.names import dns_label

from steward_controller.core.loops import Loop, env_default


@dataclasses.dataclass(frozen=True)
class AnchorOptions:
    root: str                        # the host's root as mounted in the pod
    node_name: str                   # this pod's node (downward API spec.nodeName)
    node_ip: str                     # its address (downward API status.hostIP)
    namespace: str                   # where the sources live
    selector: str                    # label selector of the sources
    interval: float                  # seconds between drift checks
    cleanup: bool                    # remove everything (and the etcd member) when the anchor stops
    etcd_endpoints: Tuple[str, ...]  # the cluster's etcd client URLs (for the etcd member)
    etcd_peer_port: int


def add_arguments(group: Any) -> None:
    group.add_argument('--anchor-root', default=env_default('STEWARD_ANCHOR_ROOT', '/host'),
                       help="the node's root as mounted in the pod (env STEWARD_ANCHOR_ROOT)")
    group.add_argument('--anchor-node-name', default=env_default('STEWARD_NODE_NAME', ''),
                       help='this node (env STEWARD_NODE_NAME, from the downward API)')
    group.add_argument('--anchor-node-ip', default=env_default('STEWARD_NODE_IP', ''),
                       help="this node's address (env STEWARD_NODE_IP, from the downward API status.hostIP)")
    group.add_argument('--anchor-namespace', default=env_default('STEWARD_ANCHOR_NAMESPACE', 'kube-system'),
                       help='namespace of the ConfigMap/Secret sources (env STEWARD_ANCHOR_NAMESPACE)')
    group.add_argument('--anchor-selector', default=env_default('STEWARD_ANCHOR_SELECTOR', 'cluster.steward.io/anchor'),
                       help='label selector of the sources (env STEWARD_ANCHOR_SELECTOR)')
    group.add_argument('--anchor-interval', type=float, default=float(env_default('STEWARD_ANCHOR_INTERVAL', '10')),
                       help='seconds between drift checks (env STEWARD_ANCHOR_INTERVAL)')
    group.add_argument('--anchor-no-cleanup', dest='anchor_cleanup', action='store_false',
                       default=env_default('STEWARD_ANCHOR_CLEANUP', 'true').lower() != 'false',
                       help='leave the files (and the etcd member) in place when the anchor stops')
    group.add_argument('--anchor-etcd-endpoints', default=env_default('STEWARD_ANCHOR_ETCD_ENDPOINTS', ''),
                       help='comma-separated etcd client URLs of the cluster, for the etcd member source '
                            '(env STEWARD_ANCHOR_ETCD_ENDPOINTS)')
    group.add_argument('--anchor-etcd-peer-port', type=int,
                       default=int(env_default('STEWARD_ANCHOR_ETCD_PEER_PORT', '2380')),
                       help='etcd peer port of this node (env STEWARD_ANCHOR_ETCD_PEER_PORT)')


def options(args: argparse.Namespace) -> AnchorOptions:
    try:
        from ansible_collections.steward.cluster.plugins.module_utils.common import validate
        node_ip = validate.ip_address(args.anchor_node_ip, '--anchor-node-ip') if args.anchor_node_ip else ''
        return AnchorOptions(
            root=validate.absolute_path(args.anchor_root, '--anchor-root'),
            node_name=args.anchor_node_name, node_ip=node_ip,
            namespace=dns_label(args.anchor_namespace, '--anchor-namespace'),
            selector=validate.text(args.anchor_selector, '--anchor-selector'),
            interval=validate.timeout(args.anchor_interval, '--anchor-interval', maximum=3600),
            cleanup=args.anchor_cleanup,
            etcd_endpoints=tuple(e.strip() for e in args.anchor_etcd_endpoints.split(',') if e.strip()),
            etcd_peer_port=validate.integer(args.anchor_etcd_peer_port, '--anchor-etcd-peer-port', 1, 65535))
    except InvalidInput as exc:
        raise ValueError(str(exc)) from exc


def register(registry: Any, runtime: Any) -> None:
    from steward_controller.anchor.loop import register as register_loop
    register_loop(registry, runtime)


LOOPS = (Loop(name='anchor', help="anchor pattern: keep this node's static manifests and files equal to their "
                                  'ConfigMap/Secret sources (a DaemonSet, no leader election)',
              register=register, add_arguments=add_arguments, options=options, watches_resources=False),)
