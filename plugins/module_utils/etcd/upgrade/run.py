# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Walking the plan (plan.py) on a live cluster: observe, gate, one member at a time, record, roll back.

How a member is stopped, given its new binary (or image) and started is the caller's: a `MemberOps` per member
(module: the role's process or systemd unit and its binary file; tests and bench: processes they started;
the `Etcd` resource: a pod's image). Each op is idempotent (stop a stopped member, swap to the binary it already
has, start a running one: nothing), which is what makes a killed run safe to start again.

The run's record (a small JSON file, `UpgradeRecord`) names the member being touched and its phase; with what members
report it is enough to resume: a member at the target that serves is done and never restarted, the member in flight
is finished first.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any, Callable, Dict, List, Optional, Protocol

from ansible_collections.steward.cluster.plugins.module_utils.common.files import write_atomic
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.client import EtcdConnection, Gateway
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.cluster import cluster_info, member_endpoint
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import EtcdError
from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot.snapshot import (
    VERIFY_CONTENT,
    list_snapshots,
    take_full_snapshot,
)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.store import SnapshotStore
from ansible_collections.steward.cluster.plugins.module_utils.etcd.upgrade.member_ops import (
    LEADER_MOVE_TIMEOUT, move_leadership_away)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.upgrade.plan import (
    CatchUp, Lag, hash_verdict, plan_upgrade, revision_verdict)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.upgrade.versions import minor, parse_version
from ansible_collections.steward.cluster.plugins.module_utils.etcd.wire.calls import hash_kv

CAUGHT_UP_TIMEOUT = 120.0   # seconds for a restarted member to serve and match the others


class UpgradeError(EtcdError):
    """The run stopped: `reason` says why ('snapshot-failed', 'member-failed', 'refused', 'leader-move-failed'),
    `member` which member, `rollback` what was done about it (see run_upgrade)."""

    def __init__(self, message: str, reason: str, member: Optional[str] = None,
                 rollback: Optional[Dict[str, Any]] = None):
        super().__init__(message)
        self.reason = reason
        self.member = member
        self.rollback = rollback or {}
        self.target_version: Optional[str] = None   # set by the caller that knows it (etcd/upgrade/host.py)

    def result(self) -> Dict[str, Any]:
        """What a failed module run reports beside the message: the reason, the member, what the rollback did, and
        the plan and verdict as far as they got."""
        rollback = dict(self.rollback)
        plan = rollback.pop('plan', None) or {}
        return {'reason': self.reason, 'member': self.member, 'rollback': rollback, 'plan': plan,
                'verdict': plan.get('verdict'), 'target_version': self.target_version}


class MemberOps(Protocol):
    """One member's hands. Every op is idempotent; none waits for health (the run does, against the cluster)."""

    def stop(self) -> None: ...

    def swap(self) -> None: ...                 # put the target binary/image in place (keep the previous one)

    def start(self) -> None: ...

    def restore_previous(self) -> None: ...     # put the previous binary/image back (rollback)


# --- the run's record ---------------------------------------------------------------------------
class UpgradeRecord:
    """{target_version, in_flight: {id, name, phase} | None, completed: [names], snapshot: {...}} in one file,
    replaced atomically at each phase so a kill leaves the last phase written."""

    def __init__(self, path: Optional[str]):
        self.path = path
        self.data: Dict[str, Any] = {}
        if path and os.path.exists(path):
            with open(path) as f:
                self.data = json.load(f)

    def for_target(self, target: str) -> Dict[str, Any]:
        """The record when it belongs to an upgrade to `target`; a record of another target is history."""
        return self.data if self.data.get('target_version') == target else {}

    def save(self, **changes: Any) -> None:
        self.data.update(changes)
        if not self.path:
            return
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)   # a node's first upgrade
        write_atomic(self.path, json.dumps(self.data, indent=1, sort_keys=True))


# --- the snapshot gate ----------------------------------------------------------------------------
def _gate_view(snap: Dict[str, Any], taken_at: Optional[float]) -> Dict[str, Any]:
    return {'name': snap['name'], 'key': snap.get('key'), 'revision': snap.get('end_revision'),
            'taken_at': taken_at if taken_at is not None else float(snap.get('created') or 0),
            'verified': bool(snap.get('valid'))}


def newest_verified_full(store: SnapshotStore, tool: Optional[str] = None,
                         tmp_dir: Optional[str] = None) -> Optional[Dict[str, Any]]:
    """The newest full snapshot in the store, read back and verified (content), as the plan's `snapshot` option."""
    latest = list_snapshots(store, verify=VERIFY_CONTENT, tool=tool, tmp_dir=tmp_dir)['latest_valid']
    return _gate_view(latest, None) if latest else None


def pre_upgrade_snapshot(conn: EtcdConnection, store: SnapshotStore, now: float, tool: Optional[str] = None,
                         tmp_dir: Optional[str] = None) -> Dict[str, Any]:
    """Take, verify and publish the pre-upgrade full snapshot (the rollback of last resort)."""
    taken = take_full_snapshot(conn, store, now=now, tool=tool, tmp_dir=tmp_dir)
    return _gate_view(taken['snapshot'], now)


# --- observing ----------------------------------------------------------------------------------
def observe(conn: EtcdConnection) -> Dict[str, Any]:
    """What plan_upgrade needs, from the cluster: every member's version, health, revision, database size and
    the member list it reports; the leader, alarms and the cluster version (etcd's rule: the lowest minor)."""
    info = cluster_info(conn)
    members = []
    with Gateway(conn) as gw:
        for m in info['members']:
            endpoint = member_endpoint(info, m['id'])
            probe = next((r for r in info['endpoints'] if r['endpoint'] == endpoint), {}) if endpoint else {}
            seen = None
            if probe.get('reachable'):
                try:
                    seen = sorted('%x' % int(x.get('ID', 0)) for x in gw.member_list(endpoint))
                except EtcdError:
                    seen = None
            members.append({
                'id': m['id'], 'name': m['name'], 'is_learner': m['is_learner'], 'endpoint': endpoint,
                'healthy': m['healthy'], 'reachable': m['reachable'], 'version': probe.get('version'),
                'revision': probe.get('revision'), 'db_size': probe.get('db_size'), 'member_ids_seen': seen,
            })
    versions = [parse_version(m['version']) for m in members if m['version']]
    low = min(versions) if versions else None
    return {'members': members, 'leader': info['leader'], 'alarms': info['alarms'],
            'cluster_version': '%d.%d' % minor(low) if low else None}


def wait_caught_up(conn: EtcdConnection, member_id: str, version: str, timeout: float,
                   clock: Callable[[], float] = time.monotonic,
                   sleep: Callable[[float], None] = time.sleep) -> Dict[str, Any]:
    """Until the member serves at `version`, has applied the leader's revision of the moment and HashKV at that
    revision is equal on every member (plan.revision_verdict and plan.hash_verdict, the same verdict a druid
    member's readiness gives against the leader alone): {revision, hash, seconds}. Raises UpgradeError at the
    deadline."""
    start = clock()
    deadline = start + timeout
    why = 'not observed yet'
    while clock() < deadline:
        try:
            info = cluster_info(conn)
            probes = {r['member_id']: r for r in info['endpoints'] if r['healthy']}
            verdict, revision = revision_verdict(probes.get(member_id), probes.get(info['leader'] or ''), version)
            if verdict is None and len(probes) < len(info['members']):
                verdict = CatchUp(False, Lag.PEERS_DOWN, 'not every member serves')
            if verdict is None:
                verdict = hash_verdict({mid: hash_kv(conn, r['endpoint'], revision,
                                                     timeout=max(deadline - clock(), 1.0))
                                        for mid, r in probes.items()}, revision)
            if verdict.ok:
                return {'revision': verdict.revision, 'hash': verdict.hash, 'seconds': round(clock() - start, 3)}
            why = verdict.message
        except EtcdError as exc:
            why = str(exc)
        sleep(0.1)
    raise UpgradeError('member %s did not catch up within %ss: %s' % (member_id, timeout, why), 'member-failed',
                       member_id)


def _rollback(conn: EtcdConnection, step: Dict[str, Any], ops: MemberOps, state: Dict[str, Any],
              timeout: float, clock: Callable[[], float], sleep: Callable[[float], None]) -> Dict[str, Any]:
    """The previous binary (or manifest) while the cluster version still allows it (it stays at the old minor until
    every member runs the new one; a patch upgrade always allows it); else the way back is the pre-upgrade snapshot."""
    previous = parse_version(step['from_version'])
    cluster = parse_version(state.get('cluster_version'))
    if previous is None or (cluster is not None and minor(cluster) > minor(previous)):
        return {'action': 'restore-snapshot', 'reason': 'the cluster version is %s: a %s member cannot rejoin' % (
            state.get('cluster_version'), step['from_version'])}
    try:
        ops.stop()
        ops.restore_previous()
        ops.start()
        caught = wait_caught_up(conn, step['id'], step['from_version'], timeout, clock, sleep)
    except (EtcdError, OSError) as exc:
        return {'action': 'restore-snapshot', 'reason': 'the previous binary did not come back: %s' % exc}
    # 'previous-binary' names the way back for both swap kinds (a static pod's is its previous manifest): `swap` says
    return {'action': 'previous-binary', 'swap': step.get('swap', 'binary'), 'version': step['from_version'],
            'caught_up': caught}


def run_upgrade(conn: EtcdConnection, ops: Dict[str, MemberOps], target_version: str,
                options: Optional[Dict[str, Any]] = None, *, record_path: Optional[str] = None,
                now: Optional[float] = None, take_snapshot: Optional[Callable[[], Dict[str, Any]]] = None,
                only: Optional[List[str]] = None, member_facts: Optional[Dict[str, Dict[str, Any]]] = None,
                in_flight: Optional[str] = None,
                caught_up_timeout: float = CAUGHT_UP_TIMEOUT,
                check_mode: bool = False, clock: Callable[[], float] = time.monotonic,
                sleep: Callable[[float], None] = time.sleep) -> Dict[str, Any]:
    """Upgrade the members in `ops` (by name) following the plan; `only` limits the run to those members
    (a playbook's one host); `member_facts` adds what only a member's host knows (quota_bytes, disk_free_bytes) by
    member name; `in_flight` names the member a killed run left in flight when this host's record cannot say (the
    record is on that member's host: the playbook reads every host's and passes the name). Returns {changed, plan,
    upgraded: [{name, seconds, caught_up}], snapshot}.
    Raises UpgradeError when pre-flight refuses (reason 'refused', nothing touched), the snapshot fails
    ('snapshot-failed', nothing touched) or a member fails ('member-failed': the run stops before the next
    member; `rollback` says whether the previous binary is back or the pre-upgrade snapshot must be restored)."""
    now = time.time() if now is None else now
    record = UpgradeRecord(record_path)
    state = observe(conn)
    for m in state['members']:
        m.update((member_facts or {}).get(m['name'], {}))
    state['auth_enabled'] = bool(conn.user)   # a run that must log in runs against a cluster with auth on
    target = plan_upgrade(state, target_version, options, now)['target_version']   # parses, names the target
    mine = record.for_target(target)
    by_name = {m['name']: m['id'] for m in state['members']}
    state['in_flight'] = (mine.get('in_flight') or {}).get('id') or by_name.get(in_flight or '')
    opts = dict(options or {})
    if mine.get('snapshot') and 'snapshot' not in opts:
        opts['snapshot'] = mine['snapshot']
    plan = plan_upgrade(state, target, opts, now)
    result: Dict[str, Any] = {'changed': False, 'plan': plan, 'upgraded': [], 'snapshot': opts.get('snapshot')}
    if not plan['verdict']['ok']:
        raise UpgradeError('pre-flight refused the upgrade to %s: %s' % (target, '; '.join(
            r['message'] for r in plan['verdict']['refusals'])), 'refused', rollback={'plan': plan})
    steps = [s for s in plan['steps'] if only is None or s['name'] in only]
    if check_mode or not steps:
        result['changed'] = bool(steps)
        return result
    if plan['take_snapshot']:
        if take_snapshot is None:
            raise UpgradeError('no verified recent snapshot and no way to take one', 'snapshot-failed')
        try:
            snap = take_snapshot()
        except (EtcdError, OSError) as exc:
            raise UpgradeError('the pre-upgrade snapshot failed, nothing was touched: %s' % exc,
                               'snapshot-failed') from exc
        result['snapshot'] = snap
        record.save(target_version=target, snapshot=snap)
    record.save(target_version=target, completed=list(mine.get('completed') or []))
    for step in steps:
        name = step['name']
        member_ops = ops[name]
        began = clock()
        record.save(in_flight={'id': step['id'], 'name': name, 'phase': 'leader'})
        try:
            move_leadership_away(conn, step['id'], plan['done'] + [u['name'] for u in result['upgraded']],
                                 LEADER_MOVE_TIMEOUT, clock=clock, sleep=sleep)
            record.save(in_flight={'id': step['id'], 'name': name, 'phase': 'restart'})
            result['changed'] = True
            member_ops.stop()
            member_ops.swap()
            member_ops.start()
            caught = wait_caught_up(conn, step['id'], target, caught_up_timeout, clock, sleep)
        except (EtcdError, OSError) as exc:   # OSError: the binary could not be swapped
            # the cluster version before the run: it rises only once every member runs the target
            rollback = _rollback(conn, step, member_ops, state, caught_up_timeout, clock, sleep)
            if rollback['action'] == 'restore-snapshot' and result['snapshot']:
                rollback['snapshot'] = result['snapshot']
                rollback['loss_window'] = 'writes after revision %s (the snapshot) are lost on restore' % (
                    (result['snapshot'] or {}).get('revision', '?'))
            record.save(failed={'name': name, 'error': str(exc), 'rollback': rollback})
            raise UpgradeError('upgrading %s to %s failed, the run stopped before the next member: %s' % (
                name, target, exc), 'member-failed', name, rollback) from exc
        result['upgraded'].append({'name': name, 'seconds': round(clock() - began, 3), 'caught_up': caught})
        record.save(in_flight=None, completed=list(record.data.get('completed') or []) + [name])
    return result
