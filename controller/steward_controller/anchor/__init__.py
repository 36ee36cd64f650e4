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

from steward_controller.core import flags
from steward_controller.core.flags import Flag
from steward_controller.core.loops import Loop


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


FLAGS = (
    Flag('anchor-root', 'text', '/host', "the node's root as mounted in the pod"),
    Flag('anchor-node-name', 'text', '', 'this node (from the downward API)', env='STEWARD_NODE_NAME'),
    Flag('anchor-node-ip', 'text', '', "this node's address (from the downward API status.hostIP)",
         env='STEWARD_NODE_IP'),
    Flag('anchor-namespace', 'text', 'kube-system', 'namespace of the ConfigMap/Secret sources'),
    Flag('anchor-selector', 'text', 'cluster.steward.io/anchor', 'label selector of the sources'),
    Flag('anchor-interval', 'float', 10.0, 'seconds between drift checks'),
    Flag('anchor-cleanup', 'bool', True, 'leave the files (and the etcd member) in place when the anchor stops',
         off='--anchor-no-cleanup'),
    Flag('anchor-etcd-endpoints', 'text', '', 'comma-separated etcd client URLs of the cluster, for the etcd member '
                                              'source'),
    Flag('anchor-etcd-peer-port', 'int', 2380, 'etcd peer port of this node'),
)


def add_arguments(group: Any) -> None:
    flags.add(group, FLAGS)


def options(args: argparse.Namespace) -> AnchorOptions:
    try:
        value = flags.values(args, FLAGS)
        node_ip = validate.ip_address(value['anchor_node_ip'], '--anchor-node-ip') if value['anchor_node_ip'] else ''
        return AnchorOptions(
            root=validate.absolute_path(value['anchor_root'], '--anchor-root'),
            node_name=value['anchor_node_name'], node_ip=node_ip,
            namespace=dns_label(value['anchor_namespace'], '--anchor-namespace'),
            selector=validate.text(value['anchor_selector'], '--anchor-selector'),
            interval=validate.timeout(value['anchor_interval'], '--anchor-interval', maximum=3600),
            cleanup=value['anchor_cleanup'],
            etcd_endpoints=tuple(e.strip() for e in value['anchor_etcd_endpoints'].split(',') if e.strip()),
            etcd_peer_port=validate.integer(value['anchor_etcd_peer_port'], '--anchor-etcd-peer-port', 1, 65535))
    except InvalidInput as exc:
        raise ValueError(str(exc)) from exc


def register(registry: Any, runtime: Any) -> None:
    from steward_controller.anchor.loop import register as register_loop
    register_loop(registry, runtime)


LOOPS = (Loop(name='anchor', help="anchor pattern: keep this node's static manifests and files equal to their "
                                  'ConfigMap/Secret sources (a DaemonSet, no leader election)',
              register=register, add_arguments=add_arguments, options=options, watches_resources=False),)
