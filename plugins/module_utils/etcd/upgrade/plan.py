# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""THE rolling plan of an etcd cluster: which member goes when, and whether the cluster may go at all.

Pure: plain data in (what each member reports, the target version, options, `now`), plain data out (a verdict and
ordered steps). The Ansible upgrade (binary swap) and the `Etcd` resource's rolling update (image change) both walk
these steps; only how a member is stopped and started differs.

The order (rolling_order), the gate between two members (next_member), the version path (version_path_refusals) and
the caught-up verdict (revision_verdict, hash_verdict) are shared with the `Etcd` resource's rolling restart
(druid/plan.py) and the member-side program's readiness.

Order: followers first (by name, numbers as numbers), the leader last, so the cluster changes leader once at most; a member a killed run
left half-done goes first. A member already at the target is done: a second run never restarts it (resume is derived
from what members report, plus the run's record of the member it was touching).
"""

from __future__ import annotations

import dataclasses
import enum
import re
from typing import Any, Dict, Iterable, List, Mapping, NamedTuple, Optional, Sequence, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.etcd.upgrade.versions import (
    AUTH_BREAKS_ROLLING,
    NOT_FOR_PRODUCTION,
    format_version,
    minimum_before,
    minor,
    move_kind,
    parse_version,
)

# Per-member actions, in order. `move-leader` only when the member leads when its turn comes.
ACTIONS = ('move-leader', 'stop', 'swap', 'start', 'wait-caught-up')
DEFAULTS = {
    'snapshot_max_age': 3600.0,   # seconds: a verified full snapshot younger than this gates the run
    'take_snapshot': True,        # the run takes that snapshot itself (and refuses if it fails)
    'require_snapshot': True,     # False: no snapshot gate at all (the user's own backup is the way back)
    'headroom_factor': 2.0,       # quota and free disk must each hold this many times the database
    'cert_window': 86400.0,       # seconds: a member certificate expiring sooner than now + this refuses
    'swap': 'binary',             # how each member changes version: 'binary' (file in place) or 'image' (a pod's tag)
}
SWAP_KINDS = ('binary', 'image')


class Refusal(enum.Enum):
    """Why pre-flight refuses; callers and docs/upgrades.md match on these, never on message text."""
    UNKNOWN_VERSION = 'unknown-version'           # a member's version could not be read
    DOWNGRADE = 'downgrade'                       # target older than a member (or the cluster version)
    SKIPS_MINOR = 'skips-minor'                   # more than one minor up (or a major change)
    BELOW_MINIMUM_PATCH = 'below-minimum-patch'   # etcd's guide names a minimum patch before this minor
    AUTH_ENABLED = 'auth-enabled'                 # 3.4 -> 3.5 with auth on: etcd does not support it rolling
    LEARNER = 'learner'                           # a learner must be promoted (or removed) first
    NOT_STARTED = 'not-started'                   # a member added but never started
    MEMBER_DOWN = 'member-down'                   # a member does not answer (and the run did not stop it)
    MEMBERSHIP_DIFFERS = 'membership-differs'     # members report different member lists
    ALARM = 'alarm'                               # NOSPACE / CORRUPT raised
    QUOTA_HEADROOM = 'quota-headroom'             # quota under headroom_factor x db size
    DISK_HEADROOM = 'disk-headroom'               # free disk under headroom_factor x db size
    NO_RECENT_SNAPSHOT = 'no-recent-snapshot'     # no verified full snapshot newer than snapshot_max_age
    CERT_EXPIRING = 'cert-expiring'               # a member's server/peer certificate ends within cert_window


def _refusal(reason: Refusal, message: str, member: Optional[str] = None) -> Dict[str, Any]:
    return {'reason': reason.value, 'member': member, 'message': message}


def _label(m: Dict[str, Any]) -> str:
    return '%s (%s)' % (m.get('name') or '(unstarted)', m.get('id'))


def parse_target(target_version: Any) -> tuple:
    version = parse_version(str(target_version or ''))
    if version is None:
        raise InvalidInput('target_version', 'version', 'must be an etcd version like 3.5.21, got %r'
                           % (target_version,), value=target_version)
    return version


def _options(options: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    merged = dict(DEFAULTS, **(options or {}))
    if float(merged['headroom_factor']) < 1.0:
        raise InvalidInput('headroom_factor', 'minimum', 'must be at least 1.0, got %r' % merged['headroom_factor'],
                           value=merged['headroom_factor'])
    if float(merged['cert_window']) < 0:
        raise InvalidInput('cert_window', 'minimum', 'must be 0 or more seconds, got %r' % merged['cert_window'],
                           value=merged['cert_window'])
    if merged['swap'] not in SWAP_KINDS:
        raise InvalidInput('swap', 'choices', 'must be one of %s, got %r' % (', '.join(SWAP_KINDS), merged['swap']),
                           value=merged['swap'])
    if float(merged['snapshot_max_age']) <= 0:
        raise InvalidInput('snapshot_max_age', 'positive', 'must be positive, got %r' % merged['snapshot_max_age'],
                           value=merged['snapshot_max_age'])
    return merged


def _version_refusals(members: List[Dict[str, Any]], target: tuple, cluster_version: Optional[tuple],
                      auth_enabled: bool) -> List[Dict[str, Any]]:
    refusals = []
    if cluster_version is not None and minor(cluster_version) > minor(target):
        refusals.append(_refusal(Refusal.DOWNGRADE, 'the cluster version is %d.%d, the target %s is older: etcd '
                                 'cannot go back a minor this way' % (minor(cluster_version) + (
                                     format_version(target),))))
    floor = minimum_before(target)
    for m in members:
        if m.get('in_flight'):
            continue
        current = parse_version(m.get('version'))
        if current is None:
            if m.get('reachable', True):
                refusals.append(_refusal(Refusal.UNKNOWN_VERSION, '%s reports no readable version (%r)' % (
                    _label(m), m.get('version')), m.get('name')))
            continue
        kind = move_kind(current, target)
        if kind == 'downgrade':
            refusals.append(_refusal(Refusal.DOWNGRADE, '%s runs %s, newer than the target %s' % (
                _label(m), format_version(current), format_version(target)), m.get('name')))
        elif kind == 'skip':
            refusals.append(_refusal(Refusal.SKIPS_MINOR, '%s runs %s: %s skips a minor; upgrade to %d.%d first' % (
                _label(m), format_version(current), format_version(target), current[0], current[1] + 1),
                m.get('name')))
        elif kind == 'minor':
            if floor is not None and current < floor:
                refusals.append(_refusal(Refusal.BELOW_MINIMUM_PATCH, '%s runs %s: etcd requires %s or later before '
                                         '%d.%d; upgrade to that patch first' % (
                                             _label(m), format_version(current), format_version(floor),
                                             target[0], target[1]), m.get('name')))
            if auth_enabled and (minor(current), minor(target)) in AUTH_BREAKS_ROLLING:
                refusals.append(_refusal(Refusal.AUTH_ENABLED, 'auth is enabled: etcd does not support a rolling '
                                         'upgrade from %d.%d to %d.%d with auth (WAL format of auth entries)' % (
                                             minor(current) + minor(target)), m.get('name')))
    return refusals


def _cert_refusals(m: Dict[str, Any], opts: Dict[str, Any], now: float) -> List[Dict[str, Any]]:
    """Every restart re-reads the member's certificates: one that ends inside the window would leave a restarted
    member unable to serve or to reach its peers halfway through the upgrade."""
    window = float(opts['cert_window'])
    refusals = []
    for cert in m.get('certs') or []:
        if float(cert['not_after']) < now + window:
            refusals.append(_refusal(Refusal.CERT_EXPIRING, '%s: certificate %s ends %s (notAfter), within the '
                                     'upgrade window of %ds: renew it first (the steward.cluster.cert_renew '
                                     'playbook on provisioned nodes) or narrow cert_window' % (
                                         _label(m), cert['path'], cert.get('not_after_text') or cert['not_after'],
                                         window), m.get('name')))
    return refusals


def _member_refusals(members: List[Dict[str, Any]], alarms: List[Dict[str, Any]],
                     opts: Dict[str, Any], now: float) -> List[Dict[str, Any]]:
    refusals = []
    factor = float(opts['headroom_factor'])
    for m in members:
        refusals += _cert_refusals(m, opts, now)
        if m.get('is_learner'):
            refusals.append(_refusal(Refusal.LEARNER, '%s is a learner: promote or remove it before an upgrade'
                                     % _label(m), m.get('name')))
        elif not m.get('name'):
            refusals.append(_refusal(Refusal.NOT_STARTED, 'member %s was added but never started: start or remove '
                                     'it before an upgrade' % m.get('id'), None))
        elif not m.get('healthy', True) and not m.get('in_flight'):
            refusals.append(_refusal(Refusal.MEMBER_DOWN, '%s does not serve: heal it before an upgrade (an upgrade '
                                     'restarts members one at a time and needs every other one)' % _label(m),
                                     m.get('name')))
        db_size = int(m.get('db_size') or 0)
        if db_size and m.get('quota_bytes') and int(m['quota_bytes']) < factor * db_size:
            refusals.append(_refusal(Refusal.QUOTA_HEADROOM, '%s: quota %d bytes is under %g x the database (%d '
                                     'bytes): raise --quota-backend-bytes or defragment first' % (
                                         _label(m), int(m['quota_bytes']), factor, db_size), m.get('name')))
        if db_size and m.get('disk_free_bytes') is not None and int(m['disk_free_bytes']) < factor * db_size:
            message = '%s: %d bytes free on the data dir\'s disk, under %g x the database (%d bytes)' % (
                _label(m), int(m['disk_free_bytes']), factor, db_size)
            refusals.append(_refusal(Refusal.DISK_HEADROOM, message, m.get('name')))
    seen = {}
    for m in members:
        if m.get('member_ids_seen') is not None:
            seen[m.get('name') or m.get('id')] = sorted(m['member_ids_seen'])
    if len({tuple(v) for v in seen.values()}) > 1:
        refusals.append(_refusal(Refusal.MEMBERSHIP_DIFFERS, 'members report different member lists: %s' % '; '.join(
            '%s sees %s' % (k, ','.join(v)) for k, v in sorted(seen.items()))))
    raised = [a for a in alarms or [] if a.get('alarm') not in (None, 'NONE')]
    if raised:
        refusals.append(_refusal(Refusal.ALARM, 'alarms raised: %s; clear them (etcdctl alarm disarm after fixing '
                                 'the cause) first' % ', '.join('%s on %s' % (a['alarm'], a.get('member_id'))
                                                                for a in raised)))
    return refusals


def _snapshot_verdict(opts: Dict[str, Any], now: float) -> tuple:
    """(refusal or None, whether the run takes a snapshot first)."""
    snap = opts.get('snapshot')
    if not opts['require_snapshot']:
        return None, False
    fresh = bool(snap and snap.get('verified') and now - float(snap.get('taken_at', 0)) <= float(
        opts['snapshot_max_age']))
    if fresh:
        return None, False
    if opts['take_snapshot']:
        return None, True
    return _refusal(Refusal.NO_RECENT_SNAPSHOT, 'no verified full snapshot newer than %ds (newest: %s) and the run '
                    'was told not to take one' % (opts['snapshot_max_age'], snap.get('name') if snap else 'none')
                    ), False


def plan_upgrade(members_state: Dict[str, Any], target_version: Any, options: Optional[Dict[str, Any]] = None,
                 now: float = 0.0) -> Dict[str, Any]:
    """The verdict and the ordered steps of an upgrade to `target_version`.

    members_state: {members: [{id, name, version, is_learner, healthy, reachable, revision, db_size, quota_bytes?,
    disk_free_bytes?, member_ids_seen?, certs?: [{path, not_after (epoch s), not_after_text?}]}], leader: id,
    alarms: [{member_id, alarm}], cluster_version?,
    auth_enabled?, in_flight?: id of the member a killed run was touching (from the run's record)}.
    options: snapshot ({name, taken_at, verified} of the newest full snapshot, or None), snapshot_max_age (s),
    take_snapshot, headroom_factor, cert_window (s), swap ('binary' or 'image': the step names it, the caller's
    MemberOps does it).
    Returns {target_version, swap, verdict: {ok, refusals, warnings}, take_snapshot, steps, done}; each step is
    {id, name, from_version, to_version, was_leader, resume, swap, actions}."""
    target = parse_target(target_version)
    opts = _options(options)
    in_flight = members_state.get('in_flight')
    members = [dict(m, in_flight=(m.get('id') == in_flight)) for m in members_state.get('members') or []]
    cluster_version = parse_version(members_state.get('cluster_version'))
    refusals = _version_refusals(members, target, cluster_version, bool(members_state.get('auth_enabled')))
    refusals += _member_refusals(members, members_state.get('alarms') or [], opts, now)
    snapshot_refusal, take_snapshot = _snapshot_verdict(opts, now)
    if snapshot_refusal:
        refusals.append(snapshot_refusal)
    warnings = []
    if target in NOT_FOR_PRODUCTION:
        warnings.append('etcd %s is not recommended for production (etcd advises 3.5.3 or later: data '
                        'inconsistency on crash in 3.5.0-3.5.2)' % format_version(target))
    leader = members_state.get('leader')
    done, pending = [], []
    for m in members:
        # A member at the target is done, the one a killed run was touching too once it serves again: never twice.
        if parse_version(m.get('version')) == target and (not m['in_flight'] or m.get('healthy')):
            done.append(m.get('name') or m.get('id'))
            continue
        pending.append({
            'id': m.get('id'), 'name': m.get('name'), 'from_version': m.get('version'),
            'to_version': format_version(target), 'was_leader': m.get('id') == leader, 'resume': m['in_flight'],
            'swap': opts['swap'],
            'actions': [a for a in ACTIONS if a != 'move-leader' or m.get('id') == leader],
        })
    pending = rolling_order(pending, leader=lambda s: s['was_leader'], resume=lambda s: s['resume'])
    return {
        'target_version': format_version(target),
        'swap': opts['swap'],
        'verdict': {'ok': not refusals, 'refusals': refusals, 'warnings': warnings},
        'take_snapshot': take_snapshot and bool(pending),
        'steps': pending,
        'done': sorted(done),
    }


# --- one member at a time: the order and the gate, shared with the Etcd resource (druid/plan.py) -----------------
def _natural(name: Optional[str]) -> Tuple[Any, ...]:
    """`etcd-main-2` before `etcd-main-10`: digit runs compare as numbers (a StatefulSet's ordinals)."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r'(\d+)', name or ''))


def rolling_order(members: Iterable[Mapping[str, Any]], leader: Any = None, resume: Any = None,
                  name: Any = None) -> List[Mapping[str, Any]]:
    """THE order of a rolling change: a member a killed run left in flight first (finish what was started), then
    the followers by name (numbers as numbers), the leader last, so leadership changes once at most. `leader`,
    `resume` and `name` read an item (default: the keys 'leader', 'resume', 'name' of a mapping); plan_upgrade
    orders its steps with it, druid/plan.py the pods on an older template."""
    def read(item: Any, how: Any, key: str) -> Any:
        return how(item) if how is not None else item.get(key)
    return sorted(members, key=lambda m: (not read(m, resume, 'resume'), bool(read(m, leader, 'leader')),
                                          _natural(read(m, name, 'name')), str(m.get('id') or '')))


class Turn(NamedTuple):
    """The next member of a rolling change and whether it may go now: `hold` is None (go), `IN_FLIGHT` (a member
    is being restarted: wait for it) or the name of the first gate that is not open, `why` says what is awaited."""
    member: Optional[str]
    leader: bool
    left: int
    hold: Optional[str]
    why: str


IN_FLIGHT = 'InFlight'
ALL_MEMBERS_READY = 'AllMembersReady'


def next_member(members: Sequence[Mapping[str, Any]],
                gates: Sequence[Tuple[str, bool, str]] = ()) -> Turn:
    """THE gate between two members of a rolling change. members: [{name, pending (still to change), leader,
    ready (serves and has caught up: revision and HashKV, see catch_up_verdict), restarting (being stopped or
    started now)}]; gates: the caller's further (name, open, why) in order (druid: BackupReady, VerifiedBackup).
    The next member is the first pending one in rolling_order; it goes only when no member is restarting and every
    member is ready (a restarted member has caught up before the next one stops), then when every gate is open."""
    pending = rolling_order([m for m in members if m.get('pending')])
    if not pending:
        return Turn(None, False, 0, None, 'every member is done')
    first = pending[0]
    turn = (first.get('name'), bool(first.get('leader')), len(pending))
    restarting = sorted(str(m.get('name')) for m in members if m.get('restarting'))
    if restarting:
        return Turn(*turn, IN_FLIGHT, '%s is restarting' % ', '.join(restarting))
    lagging = sorted(str(m.get('name')) for m in members if not m.get('ready'))
    if lagging:
        return Turn(*turn, ALL_MEMBERS_READY, '%s not ready (serving and caught up)' % ', '.join(lagging))
    for gate, is_open, why in gates:
        if not is_open:
            return Turn(*turn, gate, why or '%s is not True' % gate)
    return Turn(*turn, None, '')


def version_path_refusals(versions: Mapping[str, Optional[str]], target_version: Any) -> List[Dict[str, Any]]:
    """The version-path part of pre-flight for members known only by the version they run ({name: version}, e.g.
    from the image tag of each pod: the `Etcd` resource's restart row): downgrade, a skipped minor, below etcd's
    minimum patch before a minor, as plan_upgrade refuses them (the same Refusal reasons). A member whose version
    is unknown (None) is left out: the caller only knows what a tag says."""
    target = parse_target(target_version)
    members = [{'name': name, 'id': name, 'version': version} for name, version in sorted(versions.items())
               if parse_version(version) is not None]
    return _version_refusals(members, target, None, False)


class Lag(enum.Enum):
    """Why a member has not caught up; callers match on these (readiness, the run's wait), never on text."""
    NOT_SERVING = 'not-serving'           # its status does not answer
    LEARNER = 'learner'                   # a learner: not caught up until promoted
    VERSION = 'version'                   # it serves another version than the one it was started with
    NO_LEADER = 'no-leader'               # it (or the cluster) names no leader
    PEERS_DOWN = 'peers-down'             # (whole-cluster check) not every member serves
    BEHIND = 'behind'                     # its revision trails the leader's by more than the bound
    COMPACTION_DIFFERS = 'compaction'     # the two compacted at different revisions so far: compare again later
    HASH_DIFFERS = 'hash-differs'         # HashKV at a common revision differs: its data is not the leader's


@dataclasses.dataclass(frozen=True)
class CatchUp:
    """The verdict on one member: ok, or the Lag reason and a message; `revision` is the common revision compared
    (0 before the hash step), `lag` the revisions it trailed the leader by."""
    ok: bool
    reason: Optional[Lag] = None
    message: str = ''
    revision: int = 0
    hash: int = 0
    lag: int = 0


DEFAULT_MAX_LAG = 0   # the run's own check: the member has the leader's revision of the moment


def revision_verdict(mine: Optional[Mapping[str, Any]], leader: Optional[Mapping[str, Any]], version: Any = None,
                     max_lag: int = DEFAULT_MAX_LAG) -> Tuple[Optional[CatchUp], int]:
    """First half of the catch-up check, over two probes ({member_id, version, revision, is_learner} as
    cluster.probe_endpoint reports; `leader` may be `mine`): (a not-ok CatchUp, 0), or (None, the common revision
    at which the caller compares HashKV: the lower of the two, which both have applied)."""
    if mine is None:
        return CatchUp(False, Lag.NOT_SERVING, 'member does not serve yet'), 0
    if mine.get('is_learner'):
        return CatchUp(False, Lag.LEARNER, 'member is a learner'), 0
    if version is not None and parse_version(mine.get('version')) != parse_version(str(version)):
        return CatchUp(False, Lag.VERSION, 'member reports version %s, not %s' % (mine.get('version'), version)), 0
    if leader is None:
        return CatchUp(False, Lag.NO_LEADER, 'no leader'), 0
    own, lead = int(mine.get('revision') or 0), int(leader.get('revision') or 0)
    if lead - own > max_lag:
        return CatchUp(False, Lag.BEHIND, 'member at revision %d, leader at %d (bound %d)' % (own, lead, max_lag),
                       lag=lead - own), 0
    return None, min(own, lead)


def hash_verdict(hashes: Mapping[str, Mapping[str, int]], revision: int, lag: int = 0) -> CatchUp:
    """Second half: HashKV at `revision` from each member compared ({member: {hash, compact_revision}}). Hashes are
    only comparable between members that compacted at the same revision (etcd's own corruption check says so)."""
    compacted = {m: int(h.get('compact_revision') or 0) for m, h in hashes.items()}
    if len(set(compacted.values())) > 1:
        return CatchUp(False, Lag.COMPACTION_DIFFERS, 'compacted at different revisions so far: %s' % compacted,
                       revision=revision, lag=lag)
    values = {m: h.get('hash') for m, h in hashes.items()}
    if len(set(values.values())) > 1:
        return CatchUp(False, Lag.HASH_DIFFERS, 'HashKV at revision %d differs: %s' % (revision, values),
                       revision=revision, lag=lag)
    return CatchUp(True, None, 'caught up at revision %d' % revision, revision=revision,
                   hash=int(next(iter(values.values()), 0) or 0), lag=lag)
