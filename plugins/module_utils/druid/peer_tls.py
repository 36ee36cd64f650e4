# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Peer TLS before a scale-up (druid's ETCD-42 step 2): the two halves of one rule, as pure decisions.

A single member needs no peers, so an `Etcd` of one replica may run with plain-http peer URLs; adding members needs
the peers to speak TLS first when the Etcd asks for `spec.etcd.peerUrlTls`. etcd keeps each member's advertised peer
URLs in its membership (in the data), not in its flags: a member restarted with https peer URLs over data that
names its http ones still tells its peers to dial http. So, as druid and etcd-backup-restore do it:

  - the `etcd` loop (plan.py) holds a scale-up while a running member's Lease does not say
    `member.etcd.gardener.cloud/tls-enabled: "true"` (`members_without_peer_tls`): the StatefulSet keeps its
    replicas and the bootstrap config its member list; the new pod template (peer TLS volumes and config) is written
    and the members are restarted onto it through the rolling plan (its gates, leader last), then the loop waits;
  - each member's program, once its etcd serves, compares its own member's peer URLs in etcd's member list with the
    ones it was started with and, when they differ, asks etcd to update them (MemberUpdate: `peer_urls_change`);
    it reports `tls-enabled: "true"` only when etcd's member list shows https peer URLs for it
    (`peer_tls_reported`): the evidence, not its flags.

druid restarts a member's pod when its Lease says "false"; here the restart is the rolling plan's (one member at a
time, only while the cluster is healthy and backed up) for pods on an older template, and a member already on the
new template is waited for (its program retries the update every heartbeat): a restart would not change what
etcd's member list says.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.druid import components as c
from ansible_collections.steward.cluster.plugins.module_utils.druid.spec import EtcdSpec, member_names
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.initial_cluster import normalize_url


WAKING_OVER_HTTP = (' over http peer URLs, as their data names them; spec.etcd.peerUrlTls is turned on by a rolling '
                    'restart once they run (ETCD-42)')


WOKEN_OVER_HTTP = ('peer TLS waits until every member runs Ready over the http peer URLs its data names (not yet: %s); '
                   'then the components with spec.etcd.peerUrlTls are applied and the members roll onto them (ETCD-42)')


def wakes_over_http(spec: EtcdSpec, status: Mapping[str, Any]) -> bool:
    """Woken from 0 replicas with spec.etcd.peerUrlTls while the members last ran without peer TLS (the status's
    `peerUrlTLSEnabled`, kept while the StatefulSet has 0 replicas: status.py). Their data's membership names http
    peer URLs: members listening on https only could never reach each other, so neither form a quorum nor update
    their peer URLs (MemberUpdate needs one). They wake over http, and the components stay without peer TLS until
    every member of the template without it runs Ready (the ConfigMap a starting member reads must match its
    template); the template with peer TLS then rolls them as any peer TLS change of running members does, each
    program updating its member's peer URLs. Until then the plan says so (Postponed, gate PeerTLS): the spec is not
    applied yet, so its generation is not reconciled either."""
    return spec.replicas > 0 and spec.peer_tls_enabled and status.get('peerUrlTLSEnabled') is False


def without_peer_tls(spec: EtcdSpec) -> EtcdSpec:
    """The spec the components of a wake over http are built from (wakes_over_http)."""
    return dataclasses.replace(spec, etcd=dataclasses.replace(spec.etcd, peer_tls=None))


def lease_says_peer_tls(lease: Optional[Mapping[str, Any]]) -> bool:
    annotations = ((lease or {}).get('metadata') or {}).get('annotations') or {}
    return str(annotations.get(c.TLS_ENABLED, '')).lower() == 'true'


def members_without_peer_tls(spec: EtcdSpec, member_leases: Mapping[str, Mapping[str, Any]],
                             current: int) -> Tuple[str, ...]:
    """The running members (ordinals below `current`, the StatefulSet's replicas) whose Lease does not say their
    peers speak TLS, by ordinal; () when the Etcd asks for no peer TLS (a cluster without it scales over http)."""
    if not spec.peer_tls_enabled:
        return ()
    return tuple(name for name in member_names(spec.name, current)
                 if not lease_says_peer_tls(member_leases.get(name)))


@dataclasses.dataclass(frozen=True)
class PeerURLChange:
    """etcd's member `member_id` (hex) advertises `current`; its program was started with `wanted`."""
    member_id: str
    current: Tuple[str, ...]
    wanted: Tuple[str, ...]


def _own(members: Iterable[Mapping[str, Any]], member_id: str) -> Optional[Mapping[str, Any]]:
    return next((m for m in members if str(m.get('id')) == member_id), None)


def peer_urls_change(members: Iterable[Mapping[str, Any]], member_id: str,
                     wanted: Iterable[str]) -> Optional[PeerURLChange]:
    """The MemberUpdate this member's program makes (None: nothing to do): its own member (by ID, as etcd's status
    names it) in etcd's member list (cluster.members_from_raw's dicts) advertises other peer URLs than `wanted`
    (the ones in its bootstrap config). Not found (a learner not yet started, a removed member) or no wanted URLs:
    None."""
    want = tuple(u for u in wanted if u)
    own = _own(members, member_id)
    if not want or own is None:
        return None
    current = tuple(own.get('peer_urls') or ())
    if sorted(normalize_url(u) for u in current) == sorted(normalize_url(u) for u in want):
        return None
    return PeerURLChange(member_id=member_id, current=current, wanted=want)


def peer_tls_reported(members: Iterable[Mapping[str, Any]], member_id: str) -> Optional[bool]:
    """What the member's Lease says (`tls-enabled`): every peer URL etcd lists for it is https; None when etcd does
    not list it (nothing is written then)."""
    own = _own(members, member_id)
    if own is None or not own.get('peer_urls'):
        return None
    return all(str(u).lower().startswith('https://') for u in own['peer_urls'])


def describe(change: PeerURLChange) -> str:
    return 'member %s advertised %s, started with %s' % (change.member_id, ','.join(change.current) or 'nothing',
                                                         ','.join(change.wanted))


def waiting_message(current: int, to: int, pending: Iterable[str], leases: Mapping[str, Mapping[str, Any]]) -> str:
    """The loop's `Waiting` words while a scale-up waits for peer TLS, naming each member and what its Lease says."""
    said: List[str] = []
    for name in pending:
        annotations: Dict[str, Any] = ((leases.get(name) or {}).get('metadata') or {}).get('annotations') or {}
        said.append('%s (%s)' % (name, '%s: "%s"' % (c.TLS_ENABLED, annotations[c.TLS_ENABLED])
                                 if c.TLS_ENABLED in annotations else 'no %s yet' % c.TLS_ENABLED))
    return ('scale-up %d -> %d waits for peer TLS (ETCD-42): not yet on https peer URLs: %s; their programs update '
            'their members\' peer URLs in etcd once they run with spec.etcd.peerUrlTls' % (current, to, ', '.join(said)))
