# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The etcd side of provisioning, on the etcd area's member code: which flags a new member starts with, adding
it as a learner before its manifest exists, promoting it once it caught up, and removing exactly one member.

Members are matched by peer URL (or member ID), never by a name or a substring of one: kubespray's removal of
`etcd1` also hit `etcd10` (#11482). A removal that would leave fewer healthy voters than a quorum is refused
before anything changes (the etcd area's quorum check, `etcd-quorum`).

Provisioning talks to etcd with a short-lived client certificate issued from the etcd CA into a private
temporary directory, so check mode and a node that has no certificates yet can read the cluster too.
"""

from __future__ import annotations

import contextlib
import datetime
import time
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.client import EtcdConnection, pem_connection
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.cluster import (
    cluster_info,
    would_keep_quorum,
)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import EtcdError, EtcdUnavailable, QuorumRisk
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.members import (
    ensure_member_absent, ensure_member_present, normalize_url,
)
from ansible_collections.steward.cluster.plugins.module_utils.provisioning import layout
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.errors import NotReady, Refused
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.files import Root
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.pki import KeyPair, Subject, issue
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.spec import ClusterSpec, NodeSpec

CLIENT_NAME = 'steward-provisioning'
NEW, EXISTING = 'new', 'existing'


@contextlib.contextmanager
def client_connection(endpoints: Sequence[str], etcd_ca: KeyPair, now: datetime.datetime, timeout: float = 5.0,
                      algorithm: str = 'ecdsa-p256') -> Iterator[EtcdConnection]:
    """An EtcdConnection with a one-day client certificate from the etcd CA, in a 0700 temporary directory that
    is removed afterwards (the key never outlives the call)."""
    pair = issue(Subject(CLIENT_NAME), etcd_ca, algorithm, now, 1)
    with pem_connection(endpoints, etcd_ca.cert_pem, pair.cert_pem, pair.key_pem, timeout) as conn:
        yield conn


def cluster_endpoints(cluster: ClusterSpec) -> List[str]:
    return [cluster.client_url(m.address) for m in cluster.control_plane]


def member_of(info: Dict[str, Any], peer_url: str) -> Optional[Dict[str, Any]]:
    """The member whose peer URLs include `peer_url` exactly (normalised), or None."""
    wanted = normalize_url(peer_url)
    for member in info['members']:
        if wanted in {normalize_url(u) for u in member['peer_urls']}:
            return member
    return None


def join_flags(conn: EtcdConnection, cluster: ClusterSpec, node: NodeSpec, bootstrap: bool,
               check_mode: bool) -> Tuple[Tuple[str, str], Dict[str, Any]]:
    """((initial-cluster, initial-cluster-state), report) for a member whose manifest does not exist yet.

    No member answers: with `bootstrap` (genesis) a new one-member cluster, else NotReady. A cluster answers: the
    node joins it as a learner (added now, before its manifest is written; promoted later by `promote`), unless
    this is genesis for a node that is not a member, which is refused (`cluster-exists`)."""
    peer = cluster.peer_url(node.address)
    try:
        info = cluster_info(conn)
    except EtcdUnavailable as exc:
        if not bootstrap:
            raise NotReady('no etcd member of the cluster answers (%s): bootstrap it with steward.cluster.'
                           'cluster_genesis first, or bring a quorum back (%s)' % (', '.join(conn.endpoints), exc),
                           node.name) from None
        return ('%s=%s' % (node.name, peer), NEW), {'actions': ['bootstrap a new etcd cluster with member %s (%s)'
                                                                % (node.name, peer)], 'members': []}
    member = member_of(info, peer)
    if bootstrap and member is None:
        raise Refused('an etcd cluster already answers at %s with members %s and %s is not one of them: genesis '
                      'never starts a second cluster; join this node with steward.cluster.node_join' % (
                          ', '.join(r['endpoint'] for r in info['endpoints'] if r['reachable']),
                          ', '.join(m['name'] or m['id'] for m in info['members']), node.name),
                      'cluster-exists', node.name)
    result = ensure_member_present(conn, name=node.name, peer_urls=[peer], learner=True, promote=False,
                                   check_mode=check_mode)
    return (result['initial_cluster'], EXISTING), {'actions': result['actions'], 'members': result['members'],
                                                   'warnings': result.get('warnings', [])}


def wait_started(conn: EtcdConnection, node: NodeSpec, peer_url: str, timeout: float,
                 clock: Any = time.monotonic, sleep: Any = time.sleep) -> Dict[str, Any]:
    """Wait until the member with `peer_url` has started (it has a name) and answers reads: the kubelet (or the
    lab's supervisor) starts it from the manifest just written. Returns the member."""
    deadline = clock() + timeout
    last = 'no answer yet'
    while True:
        try:
            info = cluster_info(conn)
            member = member_of(info, peer_url)
            if member is None:
                last = 'not a member (removed meanwhile?)'
            elif member['name'] and member['id'] in info['healthy_members']:
                return member
            else:
                last = 'member %s not started or not answering yet' % member['id']
        except EtcdError as exc:
            last = str(exc)
        if clock() > deadline:
            raise NotReady('the etcd member of %s did not start within %ss (is the kubelet running its static pods?): '
                           '%s' % (node.name, timeout, last), node.name)
        sleep(0.5)


def promote(conn: EtcdConnection, node: NodeSpec, peer_url: str, timeout: float) -> Dict[str, Any]:
    """Wait for the node's member to start, then promote it if it is a learner (once it caught up)."""
    started = time.monotonic()
    member = wait_started(conn, node, peer_url, timeout)
    if not member['is_learner']:
        return {'actions': [], 'member': member}
    remaining = max(timeout - (time.monotonic() - started), 1.0)
    try:
        result = ensure_member_present(conn, name=node.name, peer_urls=[peer_url], learner=True, promote=True,
                                       promote_timeout=remaining, retry_timeout=remaining)
    except EtcdError as exc:
        raise NotReady('the etcd learner of %s did not catch up within %ss: %s' % (node.name, timeout, exc),
                       node.name) from exc
    return {'actions': result['actions'], 'member': result['member']}


def plan_removal(conn: EtcdConnection, peer_url: Optional[str], member_id: Optional[str],
                 name: str) -> Dict[str, Any]:
    """Which member a removal would take (exact peer URL or ID) and whether quorum allows it; Refused
    (`etcd-quorum`) when it does not. Read-only."""
    info = cluster_info(conn)
    member = None
    if member_id:
        member = next((m for m in info['members'] if int(m['id'], 16) == int(member_id, 16)), None)
    elif peer_url:
        member = member_of(info, peer_url)
    namesakes = [m for m in info['members'] if m['name'] == name and m is not member]
    plan = {'member': member, 'members': info['members'], 'warnings': [
        'member %s (%s) has the same name but other peer URLs (%s): not removed' % (
            m['name'], m['id'], ', '.join(m['peer_urls'])) for m in namesakes]}
    if member is not None and not member['is_learner']:
        ok, numbers = would_keep_quorum(info['voting_members'], info['healthy_members'], remove=member['id'])
        if not ok:
            raise Refused('refusing to remove etcd member %s (%s): afterwards %d of %d voting members would be '
                          'healthy and quorum needs %d; nothing was changed' % (
                              member['name'] or '(unstarted)', member['id'], numbers['healthy_after'],
                              numbers['voting_after'], numbers['quorum_after']), 'etcd-quorum', name)
    return plan


def remove(conn: EtcdConnection, member: Dict[str, Any], check_mode: bool) -> Dict[str, Any]:
    """Remove exactly `member` (by its ID), with the etcd area's own quorum check once more right before."""
    try:
        result = ensure_member_absent(conn, member_id=member['id'], check_mode=check_mode)
    except QuorumRisk as exc:
        raise Refused(str(exc), 'etcd-quorum', member['name']) from exc
    return {'actions': result['actions'], 'members': result['members']}


def member_check(root: Root, endpoints: Sequence[str], force: bool) -> Callable[[str], bool]:
    """node_teardown's question to etcd: is the member with this peer URL still in the cluster? Asked with the
    node's own health-check client certificate below `root`; `force` answers no without asking. When the cluster
    cannot be asked (no endpoints, none answers) the teardown is refused (`etcd-unreachable`), never guessed."""
    def check(peer_url: str) -> bool:
        if force:
            return False
        if not endpoints:
            raise Refused('etcd_endpoints is empty: cannot tell whether the etcd member %s left the cluster' % peer_url,
                          'etcd-unreachable')
        conn = EtcdConnection(endpoints=tuple(endpoints), ca_cert=root.host(layout.pki('etcd/ca.crt')),
                              client_cert=root.host(layout.pki('etcd/healthcheck-client.crt')),
                              client_key=root.host(layout.pki('etcd/healthcheck-client.key')))
        try:
            return member_of(cluster_info(conn), peer_url) is not None
        except EtcdError as exc:
            raise Refused('cannot ask the cluster whether the etcd member %s left it (%s); use force if the cluster is '
                          'gone for good' % (peer_url, exc), 'etcd-unreachable') from exc
    return check
