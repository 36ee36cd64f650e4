# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One member's initialization: gather the facts, decide with druid's table, act through the engine.

The decision is the engine's (etcd/recovery/initialization.py); this file only asks the world for the facts
(the data dir, the other members, the store) and calls the engine's restore and membership functions. A data
dir that is replaced is moved aside, never deleted: a wrong decision costs disk, not data.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.druid.scale_down import LEAVING
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.client import EtcdConnection, Gateway
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.members import (
    ensure_member_absent, join_as_learner)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import EtcdError, EtcdUnavailable
from ansible_collections.steward.cluster.plugins.module_utils.etcd.member.local_member import aside_path
from ansible_collections.steward.cluster.plugins.module_utils.etcd.recovery import initialization as init
from ansible_collections.steward.cluster.plugins.module_utils.etcd.recovery.restore import (
    read_marker, restore_with_fallback)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.store import SnapshotStore


@dataclasses.dataclass(frozen=True)
class MemberOptions:
    """name: this member (druid: the pod name); data_dir; cluster_size: spec.replicas; initial_cluster: the
    bootstrap config's `name=peerURL,...`; peer_urls: this member's; endpoints: the client URLs of the cluster
    (druid: the client Service), used for quorum and membership; token: initial-cluster-token; client_url: this
    member's own client URL (where the full snapshot after a restore is taken once etcd serves)."""
    name: str
    data_dir: str
    cluster_size: int
    initial_cluster: str
    peer_urls: Tuple[str, ...]
    endpoints: Tuple[str, ...]
    token: str = 'etcd-cluster'
    learner_wanted: bool = False
    allow_empty: bool = False
    client_url: str = ''
    timeout: float = 5.0

    @property
    def ordinal(self) -> int:
        tail = self.name.rsplit('-', 1)[-1]
        return int(tail) if tail.isdigit() else 0


def others(conn: EtcdConnection, own_client_url: str) -> List[str]:
    """The cluster's client URLs except this member's own (which is not serving before initialization)."""
    return [e for e in conn.endpoints if conn.url(e) != conn.url(own_client_url)] if own_client_url else list(conn.endpoints)


def _cluster_view(conn: EtcdConnection, name: str, own_client_url: str,
                  peer_urls: Tuple[str, ...]) -> Tuple[Optional[bool], Optional[bool], bool]:
    """(quorate, in_membership, never_started) as the other members see it: a linearizable member list needs a
    leader and quorum. A member is found by name or by its peer URLs (a member that never started has no name
    yet); it never started when it has published no client URL. (None, None, False): nobody else to ask."""
    others_ = others(conn, own_client_url)
    if not others_:
        return None, None, False
    with Gateway(conn.with_endpoints(others_)) as gateway:
        try:
            members = gateway.member_list(linearizable=True)
        except EtcdUnavailable:
            return False, None, False
    own = [m for m in members if m.get('name') == name or set(m.get('peerURLs') or ()) & set(peer_urls)]
    return True, bool(own), bool(own) and not any(m.get('clientURLs') for m in own)


def _self_only(name: str, peer_urls: Tuple[str, ...]) -> str:
    return ','.join('%s=%s' % (name, url) for url in peer_urls)


class Initializer:
    """Facts → decision → action, once per /initialization/start."""

    def __init__(self, options: MemberOptions, store: Optional[SnapshotStore], conn: EtcdConnection,
                 learner_marker: Optional[Callable[[], bool]] = None,
                 recovery_marker: Optional[Callable[[], Optional[str]]] = None,
                 leaving: Optional[Callable[[], bool]] = None):
        """`learner_marker`: reads druid's create-as-learner annotation on this member's Lease (leases.py);
        `recovery_marker`: reads the quorum-loss recovery's restore marker on it (druid/recovery.RESTORE_MARKER,
        the recovery's start in unix seconds; None when absent)."""
        self.options, self.store, self.conn = options, store, conn
        self.learner_marker = learner_marker
        self.recovery_marker = recovery_marker
        self.leaving = leaving   # the loop's scale-down mark on this member's Lease (druid/scale_down.LEAVING)
        self.last: Dict[str, Any] = {}

    def facts(self, mode: str, fail_below_revision: int) -> init.MemberFacts:
        data = init.validate_data_dir(self.options.data_dir, mode, fail_below_revision)
        quorate, in_membership, never_started = (None, None, False)
        if self.options.cluster_size > 1:
            quorate, in_membership, never_started = _cluster_view(self.conn, self.options.name, self.options.client_url,
                                                                  self.options.peer_urls)
        backup = False
        if self.store is not None:
            backup = any(s.valid and s.is_full for s in self.store.list())
        return init.MemberFacts(cluster_size=self.options.cluster_size, ordinal=self.options.ordinal,
                                bootstrapped=data.exists or backup or bool(in_membership), quorate=quorate,
                                in_membership=in_membership, data=data, backup_exists=backup,
                                learner_wanted=self.options.learner_wanted or bool(
                                    self.learner_marker and self.learner_marker()),
                                allow_empty=self.options.allow_empty,
                                never_started=never_started, recovery_restore=self._recovery_restore())

    def _recovery_restore(self) -> bool:
        """The recovery's marker is set and this data dir was not restored since that recovery started (a restart
        after the restore keeps the restored data: the marker is removed only once the member is Ready)."""
        text = (self.recovery_marker() if self.recovery_marker else None) or ''
        if not text.isdigit():
            return False
        restored = (read_marker(self.options.data_dir) or {}).get('restored_at')
        return not (isinstance(restored, int) and restored >= int(text))

    def run(self, mode: str = init.SANITY, fail_below_revision: int = 0) -> Dict[str, Any]:
        """Decide and act; returns {decision, facts, done}. Raises EtcdError when the decision is a refusal or
        an action fails (the status turns Failed and etcd is not started)."""
        facts = self.facts(mode, fail_below_revision)
        if facts.in_membership is False and self.leaving is not None and self.leaving():
            # removed by the leading member in a scale-down: rows 4/5 would add it back as a learner
            reason = ('this member left etcd in a scale-down (its Lease carries %s) and is not added back; its pod '
                      'goes when the StatefulSet shrinks' % LEAVING)
            self.last = {'decision': {'action': init.REFUSE, 'reason': reason}, 'data': facts.data.to_dict(), 'done': None}
            raise EtcdError('initialization refused (%s)' % reason)
        decision = init.decide(facts)
        self.last = {'decision': decision.to_dict(), 'data': facts.data.to_dict(), 'done': None}
        if decision.action == init.REFUSE:
            raise EtcdError('initialization refused (%s)' % decision.reason)
        self.last['done'] = self._act(decision)
        return self.last

    def _act(self, decision: init.Initialization) -> Dict[str, Any]:
        o = self.options
        if decision.action == init.START:
            return {'action': 'none'}
        if decision.action in (init.REJOIN_AS_LEARNER, init.JOIN_AS_LEARNER):
            moved = self._move_aside()
            peers = self.conn.with_endpoints(others(self.conn, o.client_url))
            if decision.action == init.REJOIN_AS_LEARNER:
                ensure_member_absent(peers, name=o.name, retry_timeout=60)
            joined = join_as_learner(peers, peers.endpoints[0], name=o.name, peer_urls=list(o.peer_urls),
                                     retry_timeout=60)
            return {'action': decision.action, 'moved_aside': moved, 'initial_cluster': joined.get('initial_cluster'),
                    'member_id': joined['member']['id']}
        if self.store is None:
            raise EtcdError('the decision (%s) needs the snapshot store, and none is configured' % decision.action)
        member = dict(name=o.name, data_dir=o.data_dir, initial_cluster_token=o.token,
                      initial_advertise_peer_urls=list(o.peer_urls), force=True, now=time.time())
        if decision.action != init.RESTORE_THEN_START:
            raise EtcdError('initialization: no way to carry out the decision %r' % decision.action)
        result = restore_with_fallback(self.store, initial_cluster=_self_only(o.name, o.peer_urls), **member)
        return {'action': decision.action, 'snapshot': result.get('snapshot', {}).get('name'),
                'revision': result.get('revision'), 'moved_aside': result.get('moved_aside'),
                'upload_full': decision.upload_full}

    def _move_aside(self) -> Optional[str]:
        if not os.path.lexists(self.options.data_dir) or not os.listdir(self.options.data_dir):
            return None
        target = aside_path(self.options.data_dir, time.time(), 'pre-rejoin')
        shutil.move(self.options.data_dir, target)
        return target


def initial_cluster_for(options: MemberOptions, members: List[Dict[str, Any]]) -> str:
    """druid's /config rule: with more than one member listed, initial-cluster names only the members that are
    already in the cluster, and this one (etcd refuses a list whose count differs from the membership)."""
    if len(members) <= 1:
        return options.initial_cluster
    names = {m.get('name') for m in members} | {options.name}
    kept = [entry for entry in options.initial_cluster.split(',') if entry.split('=', 1)[0] in names]
    return ','.join(kept)
