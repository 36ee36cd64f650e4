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
import threading
import time
from typing import Any, Callable, ContextManager, Dict, List, Mapping, Optional

from ansible_collections.steward.cluster.plugins.module_utils.maintenance.constants import IN_MAINTENANCE, STATE_LABEL
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
    # The nodes labelled in-maintenance, from an index the source of `nodes` keeps as it changes (the controller's
    # node cache does): maxMaintenance then counts without a walk over every node for every node it checks. None:
    # derived from `nodes`, one walk per node list (remembered while `nodes` returns the same list object).
    nodes_in_maintenance: Optional[Callable[[], NodeList]] = None
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
        return self._view().get()

    def cluster_in_maintenance(self) -> NodeList:
        """The nodes of `cluster_nodes()` labelled in-maintenance (maxMaintenance's count)."""
        return self._view().in_maintenance()

    def _view(self) -> 'ClusterView':
        if self.cluster is None:
            self.cluster = ClusterView(self.env.nodes, self.env.nodes_in_maintenance)
        return self.cluster


class ClusterView:
    """One read of the node list per reconcile phase, shared by all checks of that phase.

    `index` answers `in_maintenance()` from the caller's own index; it belongs to the same source as `source`
    (the cache), so the gated phase, whose source is a fresh read, gets none and walks its fresh list once."""

    def __init__(self, source: Callable[[], NodeList], index: Optional[Callable[[], NodeList]] = None):
        self.source = source
        self.index = index
        self.read: Optional[NodeList] = None        # what the source returned (its identity keys the memo)
        self.items: Optional[NodeList] = None
        self.maintained: Optional[NodeList] = None

    def _read(self) -> NodeList:
        """The one read of the source for this view (inside the gate the source is a LIST from the API)."""
        if self.read is None:
            self.read = self.source()
        return self.read

    def get(self) -> NodeList:
        if self.items is None:
            self.items = list(self._read())
        return self.items

    def in_maintenance(self) -> NodeList:
        if self.maintained is None:
            self.maintained = list(self.index()) if self.index is not None else _IN_MAINTENANCE.of(self._read())
        return self.maintained


class _LastListMemo:
    """The in-maintenance nodes of the last node list seen, kept while the source returns that same list object.

    A cache such as the controller's returns one list object until a node changes, so a steady pass (every node
    reconciled, nothing written) walks the list once instead of once per node: maxMaintenance on every node was
    n² label reads per pass. The memo holds the list itself, so its identity cannot be reused while remembered."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._source: Optional[NodeList] = None
        self._result: NodeList = []

    def of(self, nodes: NodeList) -> NodeList:
        with self._lock:
            if nodes is self._source:
                return list(self._result)
        result = [n for n in nodes if labels_of(n).get(STATE_LABEL) == IN_MAINTENANCE]
        with self._lock:
            self._source, self._result = nodes, result
        return list(result)


_IN_MAINTENANCE = _LastListMemo()


def labels_of(node: Mapping[str, Any]) -> Mapping[str, str]:
    """The node's labels as stored, not a copy: cluster-scoped checks call this for every node on every check."""
    return (node.get('metadata') or {}).get('labels') or {}


def name_of(node: Mapping[str, Any]) -> str:
    return (node.get('metadata') or {}).get('name') or ''
