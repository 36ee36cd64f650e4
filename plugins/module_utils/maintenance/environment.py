# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Everything the engine touches outside the node it reconciles, passed in by the caller.

The engine itself never opens a socket, reads a clock or lists the cluster: the controller fills an
`Environment` with real implementations (KubeClient-backed node lists and leases, SMTP, HTTP, a gate),
tests with in-memory ones. All fields have safe defaults so a caller only sets what its config uses.
See `state.reconcile` for the gate and commit contract.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from typing import Any, Callable, ContextManager, Dict, List, Mapping, Optional

from ansible_collections.steward.cluster.plugins.module_utils.maintenance.leases import LeaseStore
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.senders import (
    HttpPoster, SmtplibSender, SmtpSender, UrllibPoster)

NodeList = List[Dict[str, Any]]


def _no_nodes() -> NodeList:
    return []


def _no_pods(node_name: str) -> NodeList:
    return []


@dataclasses.dataclass
class Environment:
    # Cluster view for maxMaintenance, stagger, nodeCount, clusterSemver, anyLabel, affinity.
    nodes: Callable[[], NodeList] = _no_nodes                # may be a cache (informer); read once per reconcile
    fresh_nodes: Optional[Callable[[], NodeList]] = None     # a direct read, used inside the gate (default: nodes)
    pods_on_node: Callable[[str], NodeList] = _no_pods       # the pods scheduled on a node (affinity)
    leases: Optional[LeaseStore] = None                      # stagger, slackThread
    kube: Any = None                                         # KubeClient for the cordon, uncordon, drain triggers
    smtp: SmtpSender = dataclasses.field(default_factory=SmtplibSender)
    http: HttpPoster = dataclasses.field(default_factory=UrllibPoster)
    slack_api_url: str = 'https://slack.com/api'
    # The race contract (see state.reconcile): a critical section and the write of the node.
    gate: Callable[[], ContextManager[Any]] = contextlib.nullcontext
    commit: Optional[Callable[[str, Dict[str, Any]], Any]] = None
    # Drain waits in real time; tests pass fakes.
    clock: Callable[[], float] = time.time
    sleep: Callable[[float], None] = time.sleep


@dataclasses.dataclass
class PluginParams:
    """What a plugin sees of one profile of one node at one instant (upstream's plugin.Parameters)."""

    node: Dict[str, Any]                  # the working copy: triggers change it, the caller patches the difference
    profile: str
    state: str                            # the profile's current state
    last_transition: float                # seconds; when this profile last changed state
    in_maintenance: bool                  # some profile of this node is in-maintenance
    now: float
    env: Environment
    last_profile: str = ''                # the profile of the node's most recent transition (templates)
    cluster: Optional['ClusterView'] = None

    @property
    def node_name(self) -> str:
        return (self.node.get('metadata') or {}).get('name') or ''

    def _section(self, name: str) -> Dict[str, str]:
        meta = self.node.setdefault('metadata', {})
        if meta.get(name) is None:   # absent or JSON null: give triggers a dict they can write to
            meta[name] = {}
        return meta[name]

    @property
    def labels(self) -> Dict[str, str]:
        return self._section('labels')

    @property
    def annotations(self) -> Dict[str, str]:
        return self._section('annotations')

    def cluster_nodes(self) -> NodeList:
        if self.cluster is None:
            self.cluster = ClusterView(self.env.nodes)
        return self.cluster.get()


class ClusterView:
    """One read of the node list per reconcile phase, shared by all checks of that phase."""

    def __init__(self, source: Callable[[], NodeList]):
        self.source = source
        self.items: Optional[NodeList] = None

    def get(self) -> NodeList:
        if self.items is None:
            self.items = list(self.source())
        return self.items


def labels_of(node: Mapping[str, Any]) -> Mapping[str, str]:
    """The node's labels as stored, not a copy: cluster-scoped checks call this for every node on every check."""
    return (node.get('metadata') or {}).get('labels') or {}


def name_of(node: Mapping[str, Any]) -> str:
    return (node.get('metadata') or {}).get('name') or ''
