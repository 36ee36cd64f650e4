# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Removing a node from the cluster (the cluster side; the node's own files go with teardown.py):
plan first, then drain, remove its etcd member, delete the Node.

Everything that can refuse is decided before anything changes: the etcd member is found by exact peer URL (or
member ID) and its removal checked against quorum; a removal that would break quorum is refused with nothing
drained, nothing removed. The drain is the maintenance area's (`kubectl drain` rules, PodDisruptionBudgets
respected through the Eviction API). Running it again once the node is gone changes nothing.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Sequence

from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.client import EtcdConnection
from ansible_collections.steward.cluster.plugins.module_utils.kube.client import KubeClient, api_path
from ansible_collections.steward.cluster.plugins.module_utils.kube.drain import DrainError, drain, plan_drain
from ansible_collections.steward.cluster.plugins.module_utils.provisioning import etcd_membership
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.errors import ProvisioningError


class DrainFailed(ProvisioningError):
    """The drain did not finish (pods refused or left); nothing else was done and the node stays cordoned."""


def remove_node(*, name: str, client: Optional[KubeClient], etcd: Optional[EtcdConnection], peer_url: Optional[str],
                member_id: Optional[str], check_mode: bool, drain_node: bool = True, delete_node: bool = True,
                timeout: float = 600.0, eviction_timeout: float = 120.0, protected_namespaces: Sequence[str] = (),
                force: bool = False) -> Dict[str, Any]:
    result: Dict[str, Any] = {'changed': False, 'actions': [], 'warnings': [], 'member': None, 'node_found': False,
                              'drain': None}
    removal = None
    if etcd is not None and (peer_url or member_id):
        removal = etcd_membership.plan_removal(etcd, peer_url, member_id, name)   # Refused on quorum
        result['warnings'].extend(removal['warnings'])
        if removal['member'] is not None:
            member = removal['member']
            result['member'] = {k: member[k] for k in ('id', 'name', 'peer_urls', 'is_learner')}
            result['actions'].append('remove etcd member %s (%s, %s)' % (member['name'] or '(unstarted)', member['id'],
                                                                         ', '.join(member['peer_urls'])))
    node_path = api_path('v1', 'nodes', name=name)
    node = client.get_or_none(node_path) if client is not None else None
    result['node_found'] = node is not None
    if node is not None:
        if drain_node:
            plan = plan_drain(client, name, protected_namespaces, force)
            if plan.refused:
                raise DrainFailed('cannot drain node %s: pods without a controller (set force to evict them anyway): '
                                  '%s; nothing was changed' % (name, ', '.join(ref for ref, _why in plan.refused)), name)
            result['drain'] = {'evict': ['%s/%s' % ((p.get('metadata') or {}).get('namespace'),
                                                    (p.get('metadata') or {}).get('name')) for p in plan.evict],
                               'skipped': ['%s (%s)' % item for item in plan.skipped]}
            result['actions'].insert(0, 'drain node %s (%d pod(s) to evict)' % (name, len(plan.evict)))
        if delete_node:
            result['actions'].append('delete Node %s' % name)
    result['changed'] = bool(result['actions'])
    if check_mode or not result['changed']:
        result['msg'] = '; '.join(result['actions']) or 'node %s is not in the cluster: nothing to remove' % name
        return result
    if node is not None and drain_node:
        try:
            drained = drain(client, name, timeout=timeout, eviction_timeout=eviction_timeout,
                            protected_namespaces=protected_namespaces, force=force)
        except DrainError as exc:
            raise DrainFailed('%s; the etcd member and the Node were left as they are' % exc, name) from exc
        result['drain'] = {'evicted': drained.evicted, 'skipped': drained.skipped}
    if removal is not None and removal['member'] is not None:
        outcome = etcd_membership.remove(etcd, removal['member'], check_mode=False)
        result['members'] = outcome['members']
    if node is not None and delete_node:
        client.delete(node_path)
    result['msg'] = '; '.join(result['actions'])
    return result
