# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Decide the least destructive way back to a healthy cluster, from per-host facts.

Pure: the facts come from `local_member.inspect_member` on every host (or a stand-in for a host
Ansible could not reach), the decision is data, and the playbook carries it out. The table:

| what the hosts say                                   | action             |
|------------------------------------------------------|--------------------|
| every host is a healthy voting member                | none               |
| a quorum is healthy, some hosts are not (lost data,  | replace_members:   |
| crashed for good, split-brain, never joined)         | remove + re-add as learner, promote |
| a healthy learner is stuck                           | replace_members (promote only) |
| no quorum; some running member still has data        | force_new_cluster on the survivor with the highest raft index, then re-add the others |
| no member has data (or none can start)               | restore_snapshot on one host, then re-add the others |
| nothing reachable, or no data and no backup store    | blocked            |

Unreachable hosts (powered off, network gone) are never a reason to fail: they are reported and
left as they are; running the playbook again once they are back brings them in.

Every host the plan starts gets its `--initial-cluster` here, before the first change: a joiner's is the
membership it will find (the cluster plus the joiners added before it), a restored host's is every
restored host. So the playbook writes every config at once and only the membership changes themselves
run one after another, spaced as etcd requires.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any, Dict, List, Optional, Sequence

from ansible_collections.steward.cluster.plugins.module_utils.common import validate
from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.initial_cluster import initial_cluster

ACTION_NONE = 'none'
ACTION_REPLACE = 'replace_members'
ACTION_FORCE_NEW = 'force_new_cluster'
ACTION_RESTORE = 'restore_snapshot'
ACTION_BLOCKED = 'blocked'


@dataclasses.dataclass
class RecoveryPlan:
    action: str
    seed: Optional[str] = None            # host that anchors the cluster (healthy member, survivor, restore target)
    rejoin: List[str] = dataclasses.field(default_factory=list)   # hosts re-added fresh, in order
    remove: List[Dict[str, str]] = dataclasses.field(default_factory=list)  # stale member entries {host, member_id}
    promote: List[str] = dataclasses.field(default_factory=list)  # healthy learners to promote
    unreachable: List[str] = dataclasses.field(default_factory=list)
    foreign_members: List[Dict[str, Any]] = dataclasses.field(default_factory=list)
    findings: Dict[str, str] = dataclasses.field(default_factory=dict)
    reasons: List[str] = dataclasses.field(default_factory=list)
    initial_cluster: Dict[str, str] = dataclasses.field(default_factory=dict)  # host -> its --initial-cluster
    members: Dict[str, Dict[str, str]] = dataclasses.field(default_factory=dict)  # host -> {name, peer_url, client_url}

    @property
    def changes(self) -> bool:
        return self.action not in (ACTION_NONE, ACTION_BLOCKED)

    def to_dict(self) -> Dict[str, Any]:
        data = dataclasses.asdict(self)
        data['changes'] = self.changes
        return data


def _entry_for(host: Dict[str, Any], members: Sequence[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """The member-list entry of a host: same peer URL, else same name."""
    for member in members:
        if host.get('peer_url') and host['peer_url'] in member.get('peer_urls', []):
            return member
    names = {host['name'], host.get('member_name')}
    for member in members:
        if member.get('name') and member.get('name') in names:
            return member
    return None


def _majority_cluster(hosts: Sequence[Dict[str, Any]]) -> Optional[str]:
    counts = Counter(h['cluster_id'] for h in hosts if h.get('cluster_id'))
    if not counts:
        return None
    ranked = counts.most_common()
    return ranked[0][0]


def classify(host: Dict[str, Any], cluster_id: Optional[str]) -> str:
    """A one-word finding per host, for the report."""
    if not host.get('host_reachable', False):
        return 'unreachable'
    if host.get('responding'):
        if cluster_id and host.get('cluster_id') != cluster_id:
            return 'split-brain'
        if host.get('is_learner'):
            return 'learner'
        return 'healthy' if host.get('healthy') else 'no-quorum'
    if host.get('data_has_data'):
        return 'down-with-data'
    return 'down-without-data'


# The host facts a plan is built from (`inspect_member` output, or {name, host_reachable: False}): this input
# decides what is wiped and re-added, so it is checked like an API object before anything is planned.
HOST_REQUIRED = {'name': (str,), 'host_reachable': (bool,)}
HOST_OPTIONAL = {'responding': (bool,), 'healthy': (bool,), 'is_learner': (bool,), 'data_has_data': (bool,),
                 'process_running': (bool,), 'member_id': (str,), 'cluster_id': (str,), 'member_name': (str,),
                 'raft_index': (int,), 'raft_term': (int,), 'members': (list,), 'peer_url': (str,),
                 'client_url': (str,)}
MEMBER_OPTIONAL = {'id': (str,), 'name': (str,), 'peer_urls': (list,), 'client_urls': (list,), 'is_learner': (bool,)}


def check_hosts(hosts: Any) -> List[Dict[str, Any]]:
    """The host facts, or InvalidInput naming the host and key that is wrong (`hosts[1].raft_index`)."""
    if not isinstance(hosts, (list, tuple)) or not hosts:
        raise InvalidInput('hosts', 'non-empty', 'expected a non-empty list of host facts, got %r' % (hosts,), hosts)
    seen: Dict[str, int] = {}
    for index, host in enumerate(hosts):
        where = 'hosts[%d]' % index
        validate.typed_mapping(host, where, HOST_REQUIRED, HOST_OPTIONAL)
        name = validate.text(host['name'], where + '.name', max_length=253)
        if name in seen:
            raise InvalidInput(where + '.name', 'unique', 'host %r appears twice (hosts[%d] and hosts[%d])'
                               % (name, seen[name], index), name)
        seen[name] = index
        for key in ('member_id', 'cluster_id', 'member_name', 'peer_url'):   # identifiers: one line, as etcd prints
            if isinstance(host.get(key), str):
                validate.text(host[key], '%s.%s' % (where, key), allow_empty=True, max_length=253)
        if isinstance(host.get('raft_index'), int) and host['raft_index'] < 0:
            raise InvalidInput(where + '.raft_index', 'minimum', 'must not be negative', host['raft_index'])
        for position, member in enumerate(host.get('members') or []):
            validate.typed_mapping(member, '%s.members[%d]' % (where, position), {}, MEMBER_OPTIONAL)
    return list(hosts)


def plan_recovery(hosts: Sequence[Dict[str, Any]], *, store_configured: bool) -> RecoveryPlan:
    """`hosts` in inventory order; each is `inspect_member` output or {name, host_reachable: False}.
    InvalidInput (see check_hosts) before anything is planned."""
    hosts = check_hosts(hosts)
    reachable = [h for h in hosts if h.get('host_reachable', False)]
    healthy = [h for h in reachable if h.get('healthy') and not h.get('is_learner')]
    cluster_id = _majority_cluster(healthy) or _majority_cluster([h for h in reachable if h.get('responding')])
    plan = RecoveryPlan(action=ACTION_BLOCKED)
    plan.findings = {h['name']: classify(h, cluster_id) for h in hosts}
    plan.unreachable = [h['name'] for h in hosts if not h.get('host_reachable', False)]
    for name in plan.unreachable:
        plan.reasons.append('%s is unreachable: left as it is; run again once it is back' % name)
    if not reachable:
        plan.reasons.append('no etcd host is reachable: nothing can be done')
        return plan
    if healthy:
        plan = _plan_with_quorum(plan, hosts, reachable, healthy, cluster_id)
    else:
        plan = _plan_without_quorum(plan, reachable, cluster_id, store_configured)
    plan.initial_cluster = initial_clusters(plan, {h['name']: h for h in reachable})
    plan.members = {h['name']: {'name': h.get('member_name') or h['name'], 'peer_url': h.get('peer_url') or '',
                                'client_url': h.get('client_url') or ''} for h in reachable}
    return plan


def _member_of(host: Dict[str, Any]) -> Dict[str, Any]:
    return {'id': '', 'name': host.get('member_name') or host['name'], 'peer_urls': [host.get('peer_url') or '']}


def initial_clusters(plan: RecoveryPlan, hosts: Dict[str, Dict[str, Any]]) -> Dict[str, str]:
    """{host: --initial-cluster} for every host the plan starts (see the module docstring)."""
    if plan.action == ACTION_RESTORE:
        restored = [_member_of(hosts[name]) for name in [plan.seed] + plan.rejoin]
        text = ','.join(sorted('%s=%s' % (m['name'], m['peer_urls'][0]) for m in restored))
        return {name: text for name in [plan.seed] + plan.rejoin}
    found: Dict[str, str] = {}
    if plan.action == ACTION_FORCE_NEW:
        current = [_member_of(hosts[plan.seed])]
        # etcd ignores it (the survivor has data), but its config is written with the joiners' at once
        found[plan.seed] = initial_cluster([], current[0]['name'], current[0]['peer_urls'])
    elif plan.action == ACTION_REPLACE:
        stale = {entry['member_id'] for entry in plan.remove}
        current = [m for m in hosts[plan.seed].get('members', []) if m.get('id') not in stale]
    else:
        return {}
    for name in plan.rejoin:
        joiner = _member_of(hosts[name])
        found[name] = initial_cluster(current, joiner['name'], joiner['peer_urls'])
        current = current + [joiner]
    return found


def _plan_with_quorum(plan: RecoveryPlan, hosts, reachable, healthy, cluster_id) -> RecoveryPlan:
    in_cluster = [h for h in healthy if h.get('cluster_id') == cluster_id]
    seed = in_cluster[0]
    members = seed.get('members', [])
    plan.seed = seed['name']
    for host in reachable:
        finding = plan.findings[host['name']]
        if finding == 'healthy':
            continue
        if finding == 'learner':
            plan.promote.append(host['name'])
            plan.reasons.append('%s is a learner of the cluster: promote it' % host['name'])
            continue
        entry = _entry_for(host, members)
        if entry:
            plan.remove.append({'host': host['name'], 'member_id': entry['id']})
        plan.rejoin.append(host['name'])
        plan.reasons.append('%s is %s: %sre-add it as a learner with an empty data dir, then promote it' % (
            host['name'], finding, 'remove its stale member entry %s, ' % entry['id'] if entry else ''))
    known = [_entry_for(h, members) for h in hosts]
    known_ids = {m['id'] for m in known if m}
    plan.foreign_members = [m for m in members if m['id'] not in known_ids]
    for member in plan.foreign_members:
        plan.reasons.append('member %s (%s) is not in the inventory: left alone' % (member['id'], member.get('name') or '?'))
    plan.action = ACTION_REPLACE if (plan.rejoin or plan.promote) else ACTION_NONE
    if plan.action == ACTION_NONE:
        plan.reasons.append('cluster is healthy: %d of %d hosts are healthy voting members' % (len(healthy), len(hosts)))
    return plan


def _plan_without_quorum(plan: RecoveryPlan, reachable, cluster_id, store_configured: bool) -> RecoveryPlan:
    survivors = [h for h in reachable if h.get('responding') and h.get('raft_index') is not None
                 and not h.get('is_learner')]
    if survivors:
        # Most up-to-date data wins; members of the majority cluster id first, then inventory order.
        order = {h['name']: i for i, h in enumerate(reachable)}
        best = max(survivors, key=lambda h: (h.get('raft_index') or 0, h.get('cluster_id') == cluster_id,
                                             -order[h['name']]))
        plan.action = ACTION_FORCE_NEW
        plan.seed = best['name']
        plan.rejoin = [h['name'] for h in reachable if h['name'] != best['name']]
        plan.reasons.append('quorum is lost; %s has the most recent data (raft index %s): start it with '
                            '--force-new-cluster, then re-add the others as learners with empty data dirs'
                            % (best['name'], best.get('raft_index')))
        return plan
    if not store_configured:
        plan.reasons.append('quorum is lost and no member has usable data; set etcd_backup_store to restore '
                            'the latest valid snapshot')
        return plan
    plan.action = ACTION_RESTORE
    plan.seed = reachable[0]['name']
    plan.rejoin = [h['name'] for h in reachable[1:]]
    plan.reasons.append('no member has usable data: restore the latest valid snapshot on %s, then re-add the '
                        'others as learners with empty data dirs' % plan.seed)
    return plan
