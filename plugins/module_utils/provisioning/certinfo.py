# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One report of every certificate on a node (`kubeadm certs check-expiration`, with more): certificates under
/etc/kubernetes/pki, the client certificates embedded in the kubeconfigs, and the kubelet's client certificate,
each with path, subject, issuer, SANs, not-after, days left, and whether it is due for renewal.

Time is an input: pass `now` to ask "what expires before my maintenance window".
"""

from __future__ import annotations

import datetime
import os
from typing import Any, Dict, List

from ansible_collections.steward.cluster.plugins.module_utils.provisioning import kubeconfig, layout
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.errors import PkiError
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.files import Root
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.pki import describe, split_pem


def _pki_files(root: Root) -> List[str]:
    found = []
    base = root.host(layout.PKI_DIR)
    for directory, _dirs, names in os.walk(base):
        for name in sorted(names):
            if name.endswith('.crt'):
                found.append(layout.node_path(root.root, os.path.join(directory, name)))
    return sorted(found)


def certificates(root: Root, now: datetime.datetime, renew_before_days: int) -> List[Dict[str, Any]]:
    """Every certificate found, sorted by path; unreadable ones are rows with an `error`."""
    sources: List[tuple] = [(path, 'file') for path in _pki_files(root)]
    sources += [(path, 'kubeconfig') for path in sorted(layout.KUBECONFIG.values())]
    sources.append((layout.KUBELET_CLIENT_PEM, 'combined'))
    rows = []
    for path, kind in sources:
        data = root.read(path)
        if not data:
            continue
        if kind == 'kubeconfig':
            pair = kubeconfig.embedded_client(data, path)
            if pair is None:
                continue   # the kubelet's kubeconfig points at its rotated file: reported from that file
            data = pair.cert_pem
        elif kind == 'combined':
            data = split_pem(data)[0]
        row: Dict[str, Any] = {'path': path, 'name': _name(path)}
        try:
            row.update(describe(data, now, path))
            row['due'] = row['days_left'] <= renew_before_days
        except PkiError as exc:
            row.update(error=str(exc), due=True)
        rows.append(row)
    return rows


def _name(path: str) -> str:
    """kubeadm's name for a certificate (`apiserver`, `etcd-server`, `admin.conf`, `ca`, `etcd-ca`)."""
    base = os.path.basename(path)
    if path.startswith(layout.KUBERNETES_DIR + '/') and base.endswith('.conf'):
        return base
    if path == layout.KUBELET_CLIENT_PEM:
        return 'kubelet-client'
    stem = base[:-4] if base.endswith('.crt') else base
    if path.startswith(layout.ETCD_PKI_DIR + '/'):
        return 'etcd-' + stem
    return stem
