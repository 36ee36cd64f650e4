# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The etcd member of a provisioned control-plane node, for the rolling upgrade (etcd/upgrade): a static pod whose
manifest this area writes (manifests.py), changed by its image tag.

What only the node knows comes from the manifest, as the kubelet runs it: the data dir (free disk), the quota, the
server and peer certificates (`--cert-file`, `--peer-cert-file`, read with pki.py, the collection's x509 reader),
all below the node's root prefix. The run's record and the previous manifest go to /etc/kubernetes/tmp, where
kubeadm keeps its manifest backups: outside the manifests directory, whose every file a kubelet runs.

This sits in the provisioning area because the etcd area, below it, may not import it; `upgrade_member` here is
etcd/upgrade/host.upgrade_member with this member and this reader, the `etcd_upgrade` module's entry.
"""

from __future__ import annotations

import os
import shutil
from typing import Any, Dict, List, Mapping, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.common.times import format_rfc3339
from ansible_collections.steward.cluster.plugins.module_utils.etcd.upgrade import host
from ansible_collections.steward.cluster.plugins.module_utils.etcd.upgrade.member_ops import (
    ManifestError,
    ManifestImageSwap,
    StaticPodMemberOps,
)
from ansible_collections.steward.cluster.plugins.module_utils.provisioning import layout
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.errors import PkiError
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.manifests import etcd_flags
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.pki import load_cert

TMP_DIR = '/etc/kubernetes/tmp'
PREVIOUS_MANIFEST = TMP_DIR + '/etcd.yaml.pre-upgrade'
RECORD = TMP_DIR + '/etcd-upgrade-record.json'
# The member's own certificates, as the static pod's flags name them (server, then peer).
CERT_FLAGS = ('cert-file', 'peer-cert-file')


class StaticPodMember:
    """The static-pod member of the node below `p['root']` whose manifest is `p['manifest']` (node paths)."""

    def __init__(self, p: Mapping[str, Any]):
        self.p = p
        self.manifest = layout.host_path(p['root'], p['manifest'])

    def _host(self, path: str) -> str:
        return layout.host_path(self.p['root'], path)

    def _flags(self) -> Dict[str, str]:
        try:
            with open(self.manifest, 'rb') as f:
                return etcd_flags(f.read()) or {}
        except OSError as exc:
            raise InvalidInput('manifest', 'readable', 'cannot read the etcd static-pod manifest %s: %s' % (
                self.manifest, exc), value=self.p['manifest'])

    def check(self) -> None:
        """The manifest exists and names an etcd image: before the plan, so check mode refuses it too."""
        try:
            self._swap().image()
        except ManifestError as exc:
            raise InvalidInput('manifest', 'etcd-static-pod', str(exc), value=self.p['manifest'])

    def facts(self) -> Dict[str, Any]:
        """Quota (the manifest's `--quota-backend-bytes` when set, else the option) and the data dir's free disk."""
        flags = self._flags()
        quota = flags.get('quota-backend-bytes') or ''
        facts: Dict[str, Any] = {'quota_bytes': int(quota) if quota.isdigit() and int(quota) > 0
                                 else self.p['quota_backend_bytes']}
        data_dir = self.p['data_dir'] or (self._host(flags['data-dir']) if flags.get('data-dir') else None)
        if data_dir and os.path.isdir(data_dir):
            facts['disk_free_bytes'] = shutil.disk_usage(data_dir).free
        return facts

    def cert_paths(self) -> List[Tuple[str, str]]:
        """`member_certs` when given, else what the manifest's flags name: (as the node names it, below the root)."""
        if self.p.get('member_certs'):
            return [(path, self._host(path)) for path in self.p['member_certs']]
        flags = self._flags()
        return [(flags[flag], self._host(flags[flag])) for flag in CERT_FLAGS if flags.get(flag)]

    def _swap(self) -> ManifestImageSwap:
        return ManifestImageSwap(self.manifest, self.p['target_image'], self._host(PREVIOUS_MANIFEST))

    def ops(self) -> StaticPodMemberOps:
        return StaticPodMemberOps(self._swap())

    def record_path(self) -> str:
        return self.p['record_path'] or self._host(RECORD)


def read_member_certs(paths: List[Tuple[str, str]]) -> List[Dict[str, Any]]:
    """[{path, not_after (epoch s), not_after_text}] of the member's certificates, for the plan's cert-expiring check;
    one that cannot be read is refused by name (an upgrade restarts the member, which must read it)."""
    certs = []
    for shown, path in paths:
        try:
            with open(path, 'rb') as f:
                cert = load_cert(f.read(), shown)
        except (OSError, PkiError) as exc:
            raise InvalidInput('member_certs', 'certificate', 'cannot read the member certificate %s: %s' % (
                shown, exc), value=shown)
        not_after = cert.not_valid_after_utc
        certs.append({'path': shown, 'not_after': not_after.timestamp(), 'not_after_text': format_rfc3339(not_after)})
    return certs


def upgrade_member(p: Mapping[str, Any], check_mode: bool) -> Dict[str, Any]:
    """The `etcd_upgrade` module's entry: either kind of member, certificates read here."""
    return host.upgrade_member(p, check_mode, static_pod=StaticPodMember, read_certs=read_member_certs)
