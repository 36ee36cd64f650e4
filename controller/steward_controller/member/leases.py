# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Leases a member renews for druid's status (ETCD-16, ETCD-30): its own member Lease `<pod>` with
holderIdentity `<hex member id>:Leader|Member`, and, on the backup leader, the snapshot Leases
`<etcd>-full-snap` / `<etcd>-delta-snap` with the newest snapshot's revision as holderIdentity.

The controller creates and deletes these Leases; a member only patches ones that exist (druid's rule: a
member must never resurrect a Lease the controller removed on a scale-down).

Beyond druid, what the `etcd` loop's safety rules read (plugins/module_utils/druid): the member's revision on its
Lease (`cluster.steward.io/revision`: which survivor holds the newest data after a quorum loss), and on the full
snapshot Lease the newest verified full snapshot (`cluster.steward.io/verified-revision`, `-verified-at`: no
destructive step without a fresh one). A full snapshot is verified when it is taken (etcd's sha256 trailer and
the bolt structure, before it is published), so each full snapshot the backup leader publishes counts."""

from __future__ import annotations

import time
from typing import Any, Dict, Optional

from ansible_collections.steward.cluster.plugins.module_utils.kube.client import KubeClient, api_path
from ansible_collections.steward.cluster.plugins.module_utils.kube.errors import KubeError, NotFound
from ansible_collections.steward.cluster.plugins.module_utils.kube.lease import format_micro
from ansible_collections.steward.cluster.plugins.module_utils.druid.components import (
    CREATE_AS_LEARNER, MEMBER_LEARNER, TLS_ENABLED)
from ansible_collections.steward.cluster.plugins.module_utils.druid.plan import MEMBER_REVISION
from ansible_collections.steward.cluster.plugins.module_utils.druid.recovery import RESTORE_MARKER
from ansible_collections.steward.cluster.plugins.module_utils.druid.scale_down import LEAVING, REMOVED
from ansible_collections.steward.cluster.plugins.module_utils.druid.status import VERIFIED_AT, VERIFIED_REVISION

LEASES = 'coordination.k8s.io/v1'


def holder_identity(member_id_hex: str, leader: bool) -> str:
    return '%s:%s' % (member_id_hex, 'Leader' if leader else 'Member')


class LeaseWriter:
    """Patches holderIdentity and renewTime of existing Leases in `namespace`; a missing Lease is reported,
    never created."""

    def __init__(self, client: KubeClient, namespace: str, member_lease: str, full_lease: str, delta_lease: str,
                 etcd: str = ''):
        self.client, self.namespace, self.etcd = client, namespace, etcd
        self.member_lease, self.full_lease, self.delta_lease = member_lease, full_lease, delta_lease
        self.last_error = ''
        self.peer_tls: Optional[bool] = None   # written as TLS_ENABLED on the member Lease when known

    def _renew(self, name: str, holder: str, now: Optional[float] = None,
               annotations: Optional[Dict[str, str]] = None) -> bool:
        if not name:
            return False  # that renewal is not enabled
        when = now if now is not None else time.time()
        patch: Dict[str, Any] = {'spec': {'holderIdentity': holder, 'renewTime': format_micro(when)}}
        if annotations:
            patch['metadata'] = {'annotations': annotations}
        try:
            self.client.merge_patch(api_path(LEASES, 'leases', self.namespace, name), patch)
            return True
        except NotFound:
            self.last_error = 'lease %s/%s does not exist (the controller creates it)' % (self.namespace, name)
        except KubeError as exc:
            self.last_error = 'lease %s/%s: %s' % (self.namespace, name, exc)
        return False

    def member(self, member_id_hex: str, leader: bool, revision: Optional[int] = None,
               learner: Optional[bool] = None) -> bool:
        annotations = {MEMBER_REVISION: str(revision)} if revision is not None else {}
        if learner is not None:
            annotations[MEMBER_LEARNER] = 'true' if learner else 'false'
        if self.peer_tls is not None:
            annotations[TLS_ENABLED] = 'true' if self.peer_tls else 'false'
        return self._renew(self.member_lease, holder_identity(member_id_hex, leader), annotations=annotations or None)

    def snapshot(self, kind: str, revision: int, verified: bool = False) -> bool:
        now = time.time()
        annotations = {VERIFIED_REVISION: str(revision), VERIFIED_AT: format_micro(now)} if verified else None
        return self._renew(self.full_lease if kind == 'full' else self.delta_lease, str(revision), now, annotations)

    def _annotation(self, key: str) -> str:
        """One annotation of this member's Lease ('' when absent or unreadable: the error is kept in last_error)."""
        if not self.member_lease:
            return ''
        try:
            lease = self.client.get_or_none(api_path(LEASES, 'leases', self.namespace, self.member_lease))
        except KubeError as exc:
            self.last_error = 'lease %s/%s: %s' % (self.namespace, self.member_lease, exc)
            return ''
        return str(((lease or {}).get('metadata') or {}).get('annotations', {}).get(key, ''))

    def learner_wanted(self) -> bool:
        """druid's `druid.gardener.cloud/create-as-learner` on this member's Lease (ETCD-43): a scale-up's member."""
        return self._annotation(CREATE_AS_LEARNER).lower() == 'true'

    def recovery_marker(self) -> Optional[str]:
        """The `etcd` loop's quorum-loss recovery asks this (first) member to restore from the store before it
        starts (druid/recovery.RESTORE_MARKER: the recovery's start, unix seconds); None when not asked."""
        return self._annotation(RESTORE_MARKER) or None

    def leaving(self) -> bool:
        """The `etcd` loop marked this member's Lease: a scale-down removes this member (druid/scale_down.LEAVING)."""
        return bool(self._annotation(LEAVING))

    def member_leases(self) -> Optional[Dict[str, Dict[str, Any]]]:
        """This Etcd's member Leases `<etcd>-<ordinal>` by name; None when they cannot be read (nothing is decided
        on a partial view)."""
        if not self.etcd:
            return None
        prefix = self.etcd + '-'
        try:
            items = self.client.list(api_path(LEASES, 'leases', self.namespace))
        except KubeError as exc:
            self.last_error = 'leases in %s: %s' % (self.namespace, exc)
            return None
        return {i['metadata']['name']: i for i in items
                if i['metadata']['name'].startswith(prefix) and i['metadata']['name'][len(prefix):].isdigit()}

    def mark_removed(self, name: str, member_id: str) -> bool:
        """Tell the `etcd` loop that etcd no longer lists member `name` (druid/scale_down.REMOVED): the StatefulSet
        may shrink. Only an existing Lease is patched."""
        try:
            self.client.merge_patch(api_path(LEASES, 'leases', self.namespace, name),
                                    {'metadata': {'annotations': {REMOVED: member_id}}})
            return True
        except KubeError as exc:   # NotFound included: the loop deleted it, nothing to tell
            self.last_error = 'lease %s/%s: %s' % (self.namespace, name, exc)
            return False
