# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Network addresses as they appear in URLs and `host:port` strings."""

from __future__ import annotations


def url_host(address: str) -> str:
    """`address` as the host part of a URL or of `host:port`: an IPv6 address in brackets (RFC 3986 3.2.2, and
    what etcd, haproxy and the kubelet expect), anything else as it is."""
    return '[%s]' % address if ':' in address else address
