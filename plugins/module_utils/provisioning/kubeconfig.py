# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""kubeconfig files as kubeadm writes them (admin.conf, controller-manager.conf, scheduler.conf, kubelet.conf):
one cluster, one user, one context, certificates embedded (the kubelet's points at its rotated client file)."""

from __future__ import annotations

import base64
from typing import Any, Dict, Optional

from ansible_collections.steward.cluster.plugins.module_utils.provisioning.pki import KeyPair
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.render import from_yaml, to_yaml


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def render(cluster_name: str, server: str, ca_pem: bytes, user: str, client: Optional[KeyPair] = None,
           client_file: Optional[str] = None, tls_server_name: Optional[str] = None) -> bytes:
    """A kubeconfig for `user` at `server`; the client certificate embedded, or read from `client_file`."""
    cluster: Dict[str, Any] = {'certificate-authority-data': _b64(ca_pem), 'server': server}
    if tls_server_name:
        cluster['tls-server-name'] = tls_server_name
    if client is not None:
        credentials = {'client-certificate-data': _b64(client.cert_pem), 'client-key-data': _b64(client.key_pem)}
    else:
        credentials = {'client-certificate': client_file, 'client-key': client_file}
    context = '%s@%s' % (user, cluster_name)
    doc = {
        'apiVersion': 'v1',
        'kind': 'Config',
        'clusters': [{'name': cluster_name, 'cluster': cluster}],
        'contexts': [{'name': context, 'context': {'cluster': cluster_name, 'user': user}}],
        'current-context': context,
        'preferences': {},
        'users': [{'name': user, 'user': credentials}],
    }
    return to_yaml(doc)


def embedded_client(data: Optional[bytes], where: str = '') -> Optional[KeyPair]:
    """The client certificate and key embedded in a kubeconfig, or None (missing, unreadable, not embedded)."""
    if not data:
        return None
    try:
        doc = from_yaml(data, where)
        user = doc['users'][0]['user']
        return KeyPair(base64.b64decode(user['client-certificate-data']), base64.b64decode(user['client-key-data']))
    except Exception:  # any shape we did not write counts as "not there": it gets a new certificate
        return None


def with_client(data: bytes, client: KeyPair, where: str = '') -> bytes:
    """The kubeconfig `data` with another embedded client certificate and key, everything else kept (a renewal on
    the way: the file `render` wrote, its server and CA unchanged)."""
    doc = from_yaml(data, where)
    user = doc['users'][0]['user']
    user['client-certificate-data'] = _b64(client.cert_pem)
    user['client-key-data'] = _b64(client.key_pem)
    return to_yaml(doc)
