# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One host's part of a recovery plan (recovery.plan_recovery), carried out on that host.

Every host of the plan runs its part at the same time (one task of the etcd_recover playbook), so
nothing waits for Ansible between two steps. The survivor restarts with --force-new-cluster; each
joiner stops what runs, sets its data aside, writes its config and waits for its turn, then is added
as a learner, started and promoted the moment etcd allows it; restored members start together. The
order between hosts is etcd's own membership, read linearizably: a joiner's turn comes when every
joiner before it in plan.rejoin is a voting member of the cluster the plan anchors (a leaderless old
cluster cannot answer, so it is never mistaken for the new one). Waits are sub-second polls within a
deadline; etcd's 5 s between membership changes is etcd's to enforce (members.py retries its refusal).

Each step's start (wall clock, so hosts line up) and duration are returned for the playbook's table.
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Any, Callable, Dict, List, Optional

from ansible_collections.steward.cluster.plugins.module_utils.common import validate
from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.client import EtcdConnection, Gateway
from ansible_collections.steward.cluster.plugins.module_utils.etcd.member.config_file import apply_config
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import EtcdError, EtcdUnavailable
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.initial_cluster import normalize_url
from ansible_collections.steward.cluster.plugins.module_utils.etcd.member.local_member import (
    DATA_ABSENT,
    DATA_EMPTY,
    data_dir_state,
    set_aside,
)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.members import (
    ensure_member_absent,
    ensure_member_present,
    join_as_learner,
    promote_learner,
)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.recovery.recovery import (
    ACTION_BLOCKED,
    ACTION_FORCE_NEW,
    ACTION_NONE,
    ACTION_REPLACE,
    ACTION_RESTORE,
)

PART_SURVIVOR = 'survivor'   # force_new_cluster: restarted alone with --force-new-cluster
PART_SEED = 'seed'           # replace_members: a healthy member, nothing to do
PART_JOINER = 'joiner'       # re-added as a learner with an empty data dir, then promoted
PART_LEARNER = 'learner'     # a healthy learner that only needs its promotion
PART_RESTORED = 'restored'   # restore_snapshot: restored already (etcd_restore), started with the others
PART_NONE = 'none'
POLL = 0.1
SNAPSHOT_GRACE = 0.25  # seconds a learner that has the leader's snapshot gets to serve before it is restarted
ACTIONS = (ACTION_NONE, ACTION_REPLACE, ACTION_FORCE_NEW, ACTION_RESTORE, ACTION_BLOCKED)


@dataclasses.dataclass
class MemberSetup:
    """This host's member as the etcd role configures it (the role passes its own config and fingerprint)."""

    name: str
    client_url: str
    peer_url: str
    data_dir: str
    config_file: str
    config: Dict[str, Any]
    fingerprint_path: str
    fingerprint: str
    config_mode: int = 0o640
    directories: List[Dict[str, Any]] = dataclasses.field(default_factory=list)
    owner: Optional[str] = None
    group: Optional[str] = None


def check_plan(plan: Any, host: Any) -> Dict[str, Any]:
    """The plan as etcd_recovery_plan returned it, checked like an API object (it decides what is wiped)."""
    validate.typed_mapping(plan, 'plan', {'action': (str,)},
                           {'seed': (str,), 'rejoin': (list,), 'remove': (list,), 'promote': (list,),
                            'initial_cluster': (dict,), 'members': (dict,), 'findings': (dict,)})
    validate.one_of(plan['action'], 'plan.action', ACTIONS)
    validate.text(host, 'host', max_length=253)
    for key in ('rejoin', 'promote'):
        for index, name in enumerate(plan.get(key) or []):
            validate.text(name, 'plan.%s[%d]' % (key, index), max_length=253)
    for index, entry in enumerate(plan.get('remove') or []):
        validate.typed_mapping(entry, 'plan.remove[%d]' % index, {'host': (str,), 'member_id': (str,)})
    part = host_part(plan, host)
    if part in (PART_SURVIVOR, PART_JOINER, PART_RESTORED) and host not in (plan.get('initial_cluster') or {}):
        raise InvalidInput('plan.initial_cluster', 'required', 'has no --initial-cluster for %s, which the plan '
                           'starts' % host, None)
    if part != PART_NONE and plan.get('seed') not in (plan.get('members') or {}):
        raise InvalidInput('plan.members', 'required', 'has no URLs of the seed %r' % plan.get('seed'), None)
    return plan


def host_part(plan: Dict[str, Any], host: str) -> str:
    action = plan['action']
    if action == ACTION_RESTORE and host in [plan.get('seed')] + list(plan.get('rejoin') or []):
        return PART_RESTORED
    if action not in (ACTION_REPLACE, ACTION_FORCE_NEW):
        return PART_NONE
    if host == plan.get('seed'):
        return PART_SURVIVOR if action == ACTION_FORCE_NEW else PART_SEED
    if host in (plan.get('rejoin') or []):
        return PART_JOINER
    if host in (plan.get('promote') or []):
        return PART_LEARNER
    return PART_NONE


def cluster_endpoints(plan: Dict[str, Any]) -> List[str]:
    """Client URLs of the members that anchor the cluster: the seed first, then (replace_members) the
    other healthy ones; membership changes and the turn checks go there."""
    members = plan.get('members') or {}
    urls = [members[plan['seed']]['client_url']]
    if plan['action'] == ACTION_REPLACE:
        urls += [m['client_url'] for h, m in members.items()
                 if h != plan['seed'] and (plan.get('findings') or {}).get(h) == 'healthy']
    return urls


def waiting_for(plan: Dict[str, Any], host: str, members: List[Dict[str, Any]]) -> List[str]:
    """The joiners before `host` (plan.rejoin order) that are not voting members of `members` yet: its turn
    comes when this is empty. Pure; members as the gateway lists them (peerURLs, isLearner)."""
    order = list(plan.get('rejoin') or [])
    voting = {normalize_url(u) for m in members if not m.get('isLearner') for u in m.get('peerURLs') or []}
    known = plan.get('members') or {}
    return [h for h in order[:order.index(host)]
            if normalize_url(known.get(h, {}).get('peer_url', '')) not in voting]


class Timeline:
    """Each step's wall-clock start and duration: [{step, start, seconds}]."""

    def __init__(self, clock: Callable[[], float]):
        self.clock = clock
        self.steps: List[Dict[str, Any]] = []

    def run(self, name: str, action: Callable[[], Any]) -> Any:
        began = self.clock()
        try:
            return action()
        finally:
            self.steps.append({'step': name, 'start': round(began, 3), 'seconds': round(self.clock() - began, 3)})


def _write_config(setup: MemberSetup, initial_cluster: str, force: bool, check_mode: bool) -> bool:
    config = dict(setup.config, **{'initial-cluster': initial_cluster, 'initial-cluster-state': 'existing',
                                   'force-new-cluster': force})
    return apply_config(path=setup.config_file, config=config, mode=setup.config_mode, directories=setup.directories,
                        fingerprint_path=setup.fingerprint_path, fingerprint=setup.fingerprint, owner=setup.owner,
                        group=setup.group, check_mode=check_mode)['changed']


def snapshot_received_at(data_dir: str) -> Optional[float]:
    """When the member was sent the leader's snapshot (etcd keeps its raft part as member/snap/<term>-<index>.snap:
    its modification time), or None."""
    snap = os.path.join(data_dir, 'member', 'snap')
    try:
        times = [os.stat(os.path.join(snap, name)).st_mtime for name in os.listdir(snap) if name.endswith('.snap')]
    except OSError:
        return None
    return max(times) if times else None


def _learner_serving(service: Any, data_dir: str, timeout: float, clock: Callable[[], float],
                     sleep: Callable[[float], None], wall: Callable[[], float] = time.time) -> bool:
    """Wait until the new learner serves clients; True when it had to be restarted for it.

    A member that joins through the leader's snapshot often publishes itself (its name and client URLs, a raft
    proposal sent the moment it learns the leader) just before the leader takes that snapshot, which then holds
    the proposal already: etcd never sees it applied and waits its request timeout (5 s + 2 election timeouts,
    7 s by default) before it publishes again and starts serving. A learner that has its snapshot and does not
    serve SNAPSHOT_GRACE after it arrived is restarted once: it is no voter yet (quorum is untouched, and etcd's 5 s
    between membership changes counts voters only), and with the data in place its publish is an ordinary
    entry, so it serves at once."""
    deadline = clock() + timeout
    restarted = False
    while not service.serving():
        if not restarted:
            received = snapshot_received_at(data_dir)
            if received is not None and wall() - received >= SNAPSHOT_GRACE:
                service.stop()
                service.start(wait=False)
                restarted = True
        if clock() > deadline:
            raise EtcdUnavailable('the new member at %s does not serve after %.0fs%s' % (
                service.describe(), timeout, ' (restarted once)' if restarted else ''))
        sleep(POLL)
    return restarted


def _members(conn: EtcdConnection) -> List[Dict[str, Any]]:
    """The member list, linearizable (only a cluster with a leader and quorum answers)."""
    with Gateway(conn) as gateway:
        return gateway.first('/v3/cluster/member/list', {'linearizable': True})[1].get('members', [])


def _wait_turn(plan: Dict[str, Any], host: str, conn: EtcdConnection, timeout: float, clock: Callable[[], float],
               sleep: Callable[[float], None]) -> None:
    deadline = clock() + timeout
    why = 'the cluster has not answered yet'
    while True:
        try:
            pending = waiting_for(plan, host, _members(conn))
            if not pending:
                return
            why = 'waiting for %s to become voting members' % ', '.join(pending)
        except EtcdError as exc:
            why = 'the cluster does not answer a linearizable member list: %s' % exc
        if clock() > deadline:
            raise EtcdUnavailable('%s: its turn to join did not come within %.0fs (%s)' % (host, timeout, why))
        sleep(POLL)


def recover_host(plan: Dict[str, Any], host: str, setup: MemberSetup, service: Any, conn: EtcdConnection, *,
                 now: float, check_mode: bool = False, wait_timeout: float = 60,
                 clock: Callable[[], float] = time.time, sleep: Callable[[float], None] = time.sleep) -> Dict[str, Any]:
    """Carry out `host`'s part of `plan`: {changed, part, actions, steps, msg}. `service` starts and stops the
    member (service.ProcessService / SystemdService); `conn` reaches the cluster (cluster_endpoints) with the
    client's TLS files. In check mode every check runs and the steps are listed, nothing acts."""
    check_plan(plan, host)
    part = host_part(plan, host)
    timeline = Timeline(clock)
    actions: List[str] = []
    result: Dict[str, Any] = {'changed': False, 'part': part, 'actions': actions, 'steps': timeline.steps}
    if part in (PART_NONE, PART_SEED):
        result['msg'] = '%s has nothing to do in this plan (%s)' % (host, plan['action'])
        return result
    if check_mode:
        actions.extend(_planned(plan, host, part, setup, service))
        result.update(changed=True, msg='; '.join(actions))
        return result
    if part == PART_SURVIVOR:
        _survivor(plan, host, setup, service, timeline, actions)
    elif part == PART_JOINER:
        _joiner(plan, host, setup, service, conn, timeline, actions, now, wait_timeout, sleep)
    elif part == PART_LEARNER:
        timeline.run('promote', lambda: ensure_member_present(conn, name=setup.name, peer_urls=[setup.peer_url],
                                                              promote_timeout=wait_timeout))
        actions.append('promoted learner %s' % setup.name)
    else:
        timeline.run('config', lambda: _write_config(setup, plan['initial_cluster'][host], False, False))
        timeline.run('start', lambda: service.start(wait=False))
        timeline.run('wait until healthy', lambda: service.wait(wait_timeout))
        actions.append('started the restored member %s with the others' % setup.name)
    result.update(changed=True, msg='; '.join(actions))
    return result


def _planned(plan: Dict[str, Any], host: str, part: str, setup: MemberSetup, service: Any) -> List[str]:
    """What the real run would do, from the same state it would start from (check mode)."""
    running = service.running()
    data = data_dir_state(setup.data_dir)['state']
    if part == PART_SURVIVOR:
        return (['stop %s' % service.describe()] if running else []) + [
            'start %s with --force-new-cluster, then write its config without it' % setup.name]
    if part == PART_JOINER:
        stale = [e['member_id'] for e in plan.get('remove') or [] if e['host'] == host]
        return ((['stop %s' % service.describe()] if running else [])
                + (['move %s aside (%s)' % (setup.data_dir, data)] if data not in (DATA_ABSENT, DATA_EMPTY) else [])
                + ['remove stale member entry %s' % i for i in stale]
                + ['add %s as a learner once the joiners before it are voting members' % setup.name,
                   'start %s and promote it once it has caught up' % setup.name])
    if part == PART_LEARNER:
        return ['promote learner %s' % setup.name]
    return ['start the restored member %s with the others' % setup.name]


def _survivor(plan: Dict[str, Any], host: str, setup: MemberSetup, service: Any, timeline: Timeline,
              actions: List[str]) -> None:
    ended = timeline.run('stop', service.stop)
    if ended:
        actions.append('stopped %s (%s)' % (service.describe(), ended))
    timeline.run('config', lambda: _write_config(setup, plan['initial_cluster'][host], True, False))
    timeline.run('start with --force-new-cluster', lambda: service.start(wait=True))
    # one-shot: a later start must never force a new cluster again
    timeline.run('config', lambda: _write_config(setup, plan['initial_cluster'][host], False, False))
    actions.append('started %s alone with --force-new-cluster' % setup.name)


def _joiner(plan: Dict[str, Any], host: str, setup: MemberSetup, service: Any, conn: EtcdConnection,
            timeline: Timeline, actions: List[str], now: float, wait_timeout: float,
            sleep: Callable[[float], None]) -> None:
    ended = timeline.run('stop', service.stop)
    if ended:
        actions.append('stopped %s (%s)' % (service.describe(), ended))
    moved = timeline.run('set data aside', lambda: set_aside(setup.data_dir, now=now, reason='lost'))
    if moved:
        actions.append('moved %s aside to %s' % (setup.data_dir, moved))
    planned = plan['initial_cluster'][host]
    timeline.run('config', lambda: _write_config(setup, planned, False, False))
    for entry in [e for e in plan.get('remove') or [] if e['host'] == host]:
        timeline.run('remove stale entry', lambda entry=entry: ensure_member_absent(
            conn, member_id=entry['member_id'], retry_timeout=wait_timeout))
        actions.append('removed the stale member entry %s' % entry['member_id'])
    turn_timeout = wait_timeout * (list(plan.get('rejoin') or []).index(host) + 1)  # each joiner before it, then it
    timeline.run('wait for its turn', lambda: _wait_turn(plan, host, conn, turn_timeout, time.monotonic, sleep))
    endpoint = conn.url(conn.endpoints[0])  # the seed: it serves (its turn came through it)
    added = timeline.run('add as learner', lambda: join_as_learner(conn, endpoint, name=setup.name,
                                                                   peer_urls=[setup.peer_url],
                                                                   retry_timeout=wait_timeout))
    if sorted(added['initial_cluster'].split(',')) != sorted(planned.split(',')):
        # another change came in between: start with the membership etcd answered
        timeline.run('config', lambda: _write_config(setup, added['initial_cluster'], False, False))
    timeline.run('start', lambda: service.start(wait=False))
    # Promoted once it serves: a learner held back after the leader's snapshot is restarted within a fraction of a
    # second (_learner_serving), which costs etcd's 5 s before the next change no more than that fraction.
    restarted = timeline.run('wait until serving', lambda: _learner_serving(
        service, setup.data_dir, wait_timeout, time.monotonic, sleep))
    if restarted:
        actions.append('restarted learner %s: it had the leader\'s snapshot and did not serve' % setup.name)
    timeline.run('promote', lambda: promote_learner(conn, endpoint, added['member']['id'], wait_timeout))
    actions.append('re-added %s as a learner, started and promoted it' % setup.name)
