# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one place TLS contexts are built (etcd's HTTP/2 wire and its /health polls, sabakan, the maintenance
notifiers, the controller's provisioning API), so that every connection gets the same defaults: the standard
library's `create_default_context` (certificate and host name checks on, the system's CA store unless a CA file is
given), with nothing left for a caller to forget.

Errors stay the caller's: a CA or key file that cannot be read raises `OSError` or `ssl.SSLError` here, and each
caller turns that into its area's error naming its own option (ca_cert, ca_path, tls_cert, ...).
"""

from __future__ import annotations

import ssl
from typing import Optional, Sequence


def client_context(cafile: Optional[str] = None, certfile: Optional[str] = None, keyfile: Optional[str] = None,
                   *, verify: bool = True, alpn: Optional[Sequence[str]] = None) -> ssl.SSLContext:
    """A context for connecting to a server.

    `cafile`: the CAs to trust (None: the system's); `certfile`/`keyfile`: a client certificate, loaded when
    `certfile` is given (`keyfile` None: the key is in `certfile`); `verify=False` turns off the certificate and
    host name checks (sabakan's validate_certs=false), and then `cafile` is not read; `alpn`: the protocols to offer
    (['h2'] for etcd's gRPC over HTTP/2)."""
    context = ssl.create_default_context(cafile=cafile if verify else None)
    if not verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if certfile:
        context.load_cert_chain(certfile, keyfile)
    if alpn:
        context.set_alpn_protocols(list(alpn))
    return context


def server_context(certfile: str, keyfile: Optional[str] = None) -> ssl.SSLContext:
    """A context for serving TLS with this certificate (clients are not asked for one)."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(certfile, keyfile)
    return context
