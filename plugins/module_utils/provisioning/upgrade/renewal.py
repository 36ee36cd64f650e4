# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Certificates renewed on the way: a control-plane step of an upgrade restarts static pods (the manifest's image
changes, the kubelet starts the pod again), and a restarted pod reads its certificates once, at start. So the
certificates those pods read that end within `renew_before_days` are renewed first, in the same step, and the pod
restarted for the upgrade starts with them: no second restart later for `cert_renew`, and no certificate that ends
between two upgrades because nothing restarted the pod in between.

  kube-apiserver step                 apiserver, apiserver-etcd-client, apiserver-kubelet-client, front-proxy-client
  controller-manager-scheduler step   the client certificates embedded in controller-manager.conf, scheduler.conf

A renewal signs the same certificate again with the CA on the node (/etc/kubernetes/pki: a control-plane node
keeps the whole authority): its key, subject, SANs and usages kept (pki.renew_leaf), valid `days` from now, so the
provisioning engine's check keeps it byte for byte on a later join. The manifest's inputs annotation (the digest of
the files a pod reads, node_files.MANIFEST_INPUTS) is computed again from the files on disk when the image is
rewritten, so a later `node_join` or `cert_renew` sees nothing to restart. Pure over `read` (node path -> bytes or
None): what to write is returned, the caller writes it.
"""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any, Callable, Dict, List, Optional, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.provisioning import kubeconfig, layout
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.certs import read_authority
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.errors import PkiError
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.node_files import MANIFEST_INPUTS
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.pki import KeyPair, describe, renew_leaf
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.render import digest
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.upgrade.plan import APISERVER, COMPONENTS

Read = Callable[[str], Optional[bytes]]
PAIR, KUBECONFIG = 'pair', 'kubeconfig'

# step kind -> (kubeadm's name, the CA that signs it, storage, path): the certificates the step's pods read
LEAVES: Dict[str, Tuple[Tuple[str, str, str, str], ...]] = {
    APISERVER: tuple((name, ca, PAIR, layout.pki(name + '.crt')) for name, ca in (
        ('apiserver', 'ca'), ('apiserver-etcd-client', 'etcd/ca'), ('apiserver-kubelet-client', 'ca'),
        ('front-proxy-client', 'front-proxy-ca'))),
    COMPONENTS: (('controller-manager.conf', 'ca', KUBECONFIG, layout.KUBECONFIG['controller-manager']),
                 ('scheduler.conf', 'ca', KUBECONFIG, layout.KUBECONFIG['scheduler'])),
}


@dataclasses.dataclass(frozen=True)
class Due:
    """One certificate a step renews: why (its days left within the window) and where."""
    name: str
    path: str
    ca: str
    storage: str
    days_left: int
    not_after: str

    @property
    def message(self) -> str:
        when = 'expired' if self.days_left < 0 else 'expires in %d days' % self.days_left
        return 'renew %s cert: %s (%s)' % (self.name, when, self.not_after)

    def as_dict(self) -> Dict[str, Any]:
        return {'name': self.name, 'path': self.path, 'days_left': self.days_left, 'not_after': self.not_after,
                'message': self.message}


def _pair(read: Read, storage: str, path: str) -> Optional[KeyPair]:
    data = read(path)
    if not data:
        return None
    if storage == KUBECONFIG:
        return kubeconfig.embedded_client(data, path)
    key = read(path[:-len('.crt')] + '.key')
    return KeyPair(data, key) if key else None


def due(read: Read, kind: str, now: datetime.datetime, renew_before_days: int) -> List[Due]:
    """The certificates of this step's pods ending within `renew_before_days` (the provisioning engine's rule: days
    left <= the window). A certificate the node does not have, or keeps elsewhere, is not this step's to renew; one
    that cannot be read is refused (PkiError naming it) before anything is written."""
    out = []
    for name, ca, storage, path in LEAVES.get(kind, ()):
        pair = _pair(read, storage, path)
        if pair is None:
            continue
        seen = describe(pair.cert_pem, now, path)
        if seen['days_left'] <= renew_before_days:
            out.append(Due(name, path, ca, storage, seen['days_left'], seen['not_after']))
    return out


def renewed(read: Read, due_now: List[Due], now: datetime.datetime, days: int) -> Dict[str, bytes]:
    """node path -> new content for every certificate in `due_now` (a certificate file, or the kubeconfig with the
    new embedded certificate), signed by the node's CAs. PkiError when the node has no CA key to sign with (a
    worker, or a control-plane node whose authority lives elsewhere): nothing is written then."""
    if not due_now:
        return {}
    authority = read_authority(read)
    if authority is None:
        raise PkiError('renewing %s needs the cluster CA on this node (%s): none found'
                       % (', '.join(d.name for d in due_now), layout.PKI_DIR), due_now[0].path)
    out = {}
    for item in due_now:
        pair = _pair(read, item.storage, item.path)
        if pair is None:
            raise PkiError('%s disappeared while renewing it' % item.path, item.path)
        fresh = renew_leaf(pair, authority.ca(item.ca), now, days, item.path)
        out[item.path] = (kubeconfig.with_client(read(item.path) or b'', fresh, item.path)
                          if item.storage == KUBECONFIG else fresh.cert_pem)
    return out


def inputs_digest(read: Read, component: str) -> Optional[str]:
    """The inputs annotation a manifest of `component` gets from the files on disk (node_files renders the same);
    None for a component without one, or when an input is missing (then the annotation is left as it is)."""
    paths = MANIFEST_INPUTS.get(component)
    if not paths:
        return None
    parts = [read(p) for p in paths]
    if any(part is None for part in parts):
        return None
    return 'sha256:' + digest(parts)
