# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One member's turn in a rolling change, shared by every caller (the etcd_upgrade run, the `Etcd` resource's
member-side program): leadership moved to a caught-up follower before a member stops (move_leadership_away) and the
check that a restarted member serves and has caught up with the leader (member_caught_up; the whole-cluster form is
run.wait_caught_up, both on plan.revision_verdict and plan.hash_verdict).

And the MemberOps of the members the collection runs on hosts: the `steward.cluster.etcd` role's (a service - process or
systemd unit, member/service.py - and its binary file, swapped in place) and the provisioning area's static pods (the
manifest's image tag, rewritten in place; the kubelet does the restart).

The binary the role installed (`etcd_binary`) is replaced by the target one where it stands, so the process spec and
the systemd unit keep naming the same path (no config change, no restart fingerprint change). The previous binary is
kept beside it as `<binary>.pre-upgrade` until the next upgrade: the rollback's first way back. Every op is
idempotent: a swap to the binary already in place copies nothing, a start of a running member starts nothing.
"""

from __future__ import annotations

import filecmp
import os
import re
import time
from typing import Any, Callable, Dict, Iterable, Optional

from ansible_collections.steward.cluster.plugins.module_utils.common.files import write_atomic
from ansible_collections.steward.cluster.plugins.module_utils.common.commands import run_bounded
from ansible_collections.steward.cluster.plugins.module_utils.common.deadline import DeadlineExceeded
from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.common.yaml_text import load_yaml
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.client import (
    EtcdConnection, Gateway, member_id_hex)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.cluster import (
    cluster_info, members_from_raw)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.members import move_leader
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import EtcdError
from ansible_collections.steward.cluster.plugins.module_utils.etcd.upgrade.plan import (
    CatchUp, Lag, hash_verdict, revision_verdict)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.wire.calls import hash_kv

PREVIOUS_SUFFIX = '.pre-upgrade'
VERSION_SECONDS = 20.0
_VERSION_LINE = re.compile(r'etcd Version:\s*(\S+)')


LEADER_MOVE_TIMEOUT = 10.0
READY_MAX_LAG = 100   # revisions a member may trail the leader by and count as caught up (readiness; HashKV decides)


class LeaderMoveError(EtcdError):
    """Leadership could not be handed over (no healthy follower, or it did not leave within the deadline)."""


# --- leadership and catch-up ----------------------------------------------------------------------------------------
def move_leadership_away(conn: EtcdConnection, member_id: str, prefer: Iterable[str] = (),
                         timeout: float = LEADER_MOVE_TIMEOUT, info: Optional[Dict[str, Any]] = None,
                         clock: Callable[[], float] = time.monotonic,
                         sleep: Callable[[float], None] = time.sleep) -> Optional[str]:
    """Before `member_id` stops: when it leads, hand leadership (etcd's MoveLeader) to the most caught-up healthy
    voting follower, members named in `prefer` first (the run: those already upgraded, they will not restart again),
    and wait until another member leads. Returns the new leader's id, or None when `member_id` does not lead.
    A caught-up target takes over at once; a lagging one makes the leader drop proposals until it has caught up,
    which a client sees as failed writes, hence the choice. Raises LeaderMoveError."""
    info = info or cluster_info(conn)
    if info['leader'] != member_id:
        return None
    revisions = {r['member_id']: int(r.get('revision') or 0) for r in info['endpoints'] if r.get('healthy')}
    lead = revisions.get(member_id, max(revisions.values(), default=0))
    preferred = set(prefer)
    others = [m for m in info['members'] if m['id'] != member_id and m['healthy'] and not m['is_learner']]
    if not others:
        raise LeaderMoveError('no healthy voting member to hand leadership to')
    others.sort(key=lambda m: (m['name'] not in preferred, max(0, lead - revisions.get(m['id'], 0)), m['name']))
    move_leader(conn, others[0]['id'], info)
    deadline = clock() + timeout
    while clock() < deadline:
        try:
            now_leading = cluster_info(conn, discover=False)['leader']
        except EtcdError:
            now_leading = None
        if now_leading and now_leading != member_id:
            return now_leading
        sleep(0.05)
    raise LeaderMoveError('leadership did not leave %s within %ss' % (member_id, timeout))


def _probe(status: Dict[str, Any]) -> Dict[str, Any]:
    header = status.get('header') or {}
    return {'member_id': member_id_hex(header.get('member_id', 0)), 'revision': int(header.get('revision') or 0),
            'version': status.get('version'), 'is_learner': bool(status.get('isLearner', False)),
            'leader': member_id_hex(status['leader']) if str(status.get('leader') or '0') != '0' else None}


def member_caught_up(conn: EtcdConnection, endpoint: str, max_lag: int = READY_MAX_LAG,
                     timeout: float = 2.0) -> CatchUp:
    """Whether the member at `endpoint` serves and has caught up with the leader: its revision within `max_lag` of
    the leader's and HashKV equal on both at the lower of the two revisions (plan.revision_verdict, hash_verdict).
    Only this member and the leader are asked, so one member's readiness never depends on a third (the
    member-side program's /healthz, the pod's readiness). Never raises: a member that does not answer is
    CatchUp(False, Lag.NOT_SERVING)."""
    try:
        with Gateway(conn) as gw:
            mine = _probe(gw.status(endpoint, timeout=timeout))
            leader = mine if mine['leader'] == mine['member_id'] else None
            leader_url = endpoint
            if mine['leader'] and leader is None and not mine['is_learner']:
                found = [m for m in members_from_raw(gw.member_list(endpoint)) if m['id'] == mine['leader']]
                for url in (found[0]['client_urls'] if found else []):
                    try:
                        leader, leader_url = _probe(gw.status(url, timeout=timeout)), url
                        break
                    except EtcdError:
                        continue
        verdict, revision = revision_verdict(mine, leader, max_lag=max_lag)
        if verdict is not None:
            return verdict
        lag = int(leader['revision']) - int(mine['revision'])
        if leader is mine:
            return CatchUp(True, None, 'the leader', revision=revision)
        hashes = {mine['member_id']: hash_kv(conn, endpoint, revision, timeout),
                  leader['member_id']: hash_kv(conn, leader_url, revision, timeout)}
        return hash_verdict(hashes, revision, max(lag, 0))
    except EtcdError as exc:
        return CatchUp(False, Lag.NOT_SERVING, str(exc))


def binary_version(path: str, option: str = 'target_binary') -> str:
    """The version `path --version` prints (`etcd Version: 3.5.1`); InvalidInput naming `option` when it does
    not run or says no version: the target of an upgrade is read from the binary itself, never assumed."""
    if not path or not os.path.isabs(path):
        raise InvalidInput(option, 'absolute-path', 'must be an absolute path to an etcd binary, got %r' % (path,),
                           value=path)
    if not os.path.isfile(path) or not os.access(path, os.X_OK):
        raise InvalidInput(option, 'executable', '%s is not an executable file' % path, value=path)
    try:
        proc = run_bounded([path, '--version'], VERSION_SECONDS)
    except (OSError, DeadlineExceeded) as exc:
        raise InvalidInput(option, 'etcd-binary', '%s --version did not run: %s' % (path, exc), value=path)
    match = _VERSION_LINE.search(proc.stdout or '')
    if proc.returncode != 0 or not match:
        raise InvalidInput(option, 'etcd-binary', '%s --version printed no etcd version (rc=%d)' % (
            path, proc.returncode), value=path)
    return match.group(1)


def _copy_in_place(source: str, dest: str) -> None:
    """Copy `source` over `dest` atomically (a temp file beside it, then rename: a symlink at `dest` is replaced,
    never followed, so a shared file behind it is not touched)."""
    with open(source, 'rb') as f:
        write_atomic(dest, f.read(), 0o755)


class BinarySwap:
    """The installed binary and the target: swap() puts the target in place (keeping the previous one once),
    restore() puts the previous one back."""

    def __init__(self, installed: str, target: str):
        self.installed = installed
        self.target = target
        self.previous = installed + PREVIOUS_SUFFIX

    def in_place(self) -> bool:
        return os.path.exists(self.installed) and filecmp.cmp(self.installed, self.target, shallow=False)

    def swap(self) -> None:
        if self.in_place():
            return
        if os.path.exists(self.installed):
            _copy_in_place(self.installed, self.previous)
        _copy_in_place(self.target, self.installed)

    def restore(self) -> None:
        if os.path.exists(self.previous):
            _copy_in_place(self.previous, self.installed)


class ServiceMemberOps:
    """MemberOps over a member/service.py service (ProcessService or SystemdService) and a BinarySwap."""

    def __init__(self, service: Any, swap: BinarySwap):
        self.service = service
        self.binary = swap

    def stop(self) -> None:
        self.service.stop()

    def swap(self) -> None:
        self.binary.swap()

    def start(self) -> None:
        if not self.service.running():
            self.service.start(wait=False)

    def restore_previous(self) -> None:
        self.binary.restore()


# --- static pods ----------------------------------------------------------------------------------
class ManifestError(EtcdError):
    """The static-pod manifest cannot be read or names no etcd container: nothing was written."""


def _etcd_container(pod: Dict[str, Any]) -> Dict[str, Any]:
    containers = ((pod or {}).get('spec') or {}).get('containers') or []
    named = [c for c in containers if isinstance(c, dict) and c.get('name') == 'etcd']
    if not (named or containers):
        raise ManifestError('the manifest has no container')
    return (named or containers)[0]


def manifest_image(text: bytes, path: str) -> str:
    """The image of the manifest's etcd container (the container named etcd, else the first)."""
    try:
        pod = load_yaml(text, path)
    except InvalidInput as exc:
        raise ManifestError('%s: %s' % (path, exc.detail)) from None
    image = _etcd_container(pod if isinstance(pod, dict) else {}).get('image')
    if not isinstance(image, str) or not image:
        raise ManifestError('%s: the etcd container names no image' % path)
    return image


def with_image(text: bytes, path: str, image: str) -> bytes:
    """The manifest with the etcd container's image replaced and every other byte kept (the `image:` line is
    rewritten where it stands, so the file differs from the provisioning render in that line only); a manifest whose
    image line is not found that way is written back from its parsed form."""
    import yaml  # PyYAML (an ansible-core dependency), imported where it is used
    old = manifest_image(text, path)
    lines = text.decode('utf-8').split('\n')
    pattern = re.compile(r'^(\s*(?:-\s+)?image:\s*)([\'"]?)%s\2(\s*)$' % re.escape(old))
    hits = [i for i, line in enumerate(lines) if pattern.match(line)]
    if len(hits) == 1:
        lines[hits[0]] = pattern.sub(lambda m: m.group(1) + m.group(2) + image + m.group(2) + m.group(3),
                                     lines[hits[0]])
        new = '\n'.join(lines).encode('utf-8')
        if manifest_image(new, path) == image:
            return new
    pod = load_yaml(text, path)   # read once already by manifest_image above
    _etcd_container(pod)['image'] = image
    return yaml.safe_dump(pod, default_flow_style=False, sort_keys=False).encode('utf-8')


class ManifestImageSwap:
    """The static pod's manifest and the target image: swap() rewrites the tag in place (the previous manifest kept
    once at `previous`, outside the manifests directory: a kubelet would run any file left inside it), restore()
    puts the previous manifest back. The kubelet stops the old pod and starts the new one when the file changes."""

    def __init__(self, manifest: str, target_image: str, previous: str):
        self.manifest = manifest
        self.target = target_image
        self.previous = previous

    def _read(self) -> bytes:
        try:
            with open(self.manifest, 'rb') as f:
                return f.read()
        except OSError as exc:
            raise ManifestError('cannot read the etcd static-pod manifest %s: %s' % (self.manifest, exc))

    def image(self) -> str:
        return manifest_image(self._read(), self.manifest)

    def in_place(self) -> bool:
        return self.image() == self.target

    def swap(self) -> None:
        text = self._read()
        if manifest_image(text, self.manifest) == self.target:
            return
        mode = os.stat(self.manifest).st_mode & 0o777
        os.makedirs(os.path.dirname(self.previous), exist_ok=True)
        write_atomic(self.previous, text, 0o600)
        write_atomic(self.manifest, with_image(text, self.manifest, self.target), mode)

    def restore(self) -> None:
        if os.path.exists(self.previous):
            mode = os.stat(self.manifest).st_mode & 0o777 if os.path.exists(self.manifest) else 0o600
            with open(self.previous, 'rb') as f:
                write_atomic(self.manifest, f.read(), mode)


class StaticPodMemberOps:
    """MemberOps of a static-pod member: the kubelet owns the process, so stop and start are the kubelet's reaction
    to the manifest's change (swap); the run's caught-up wait is what tells the new pod serves."""

    def __init__(self, swap: ManifestImageSwap):
        self.manifest = swap

    def stop(self) -> None:
        """Nothing: the kubelet stops the old pod when its manifest changes."""

    def swap(self) -> None:
        self.manifest.swap()

    def start(self) -> None:
        """Nothing: the kubelet starts the pod of the new manifest."""

    def restore_previous(self) -> None:
        self.manifest.restore()
