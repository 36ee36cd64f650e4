# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment:
    # How to reach an etcd cluster; matches ETCD_CONNECTION_SPEC in module_utils/etcd/args.py.
    DOCUMENTATION = r'''
options:
  endpoints:
    description:
      - Client URLs of the etcd members, as C(https://host:2379) or C(host:2379).
      - Without a scheme, C(https) is used when O(ca_cert) is set, C(http) otherwise.
    type: list
    elements: str
    default: ['http://127.0.0.1:2379']
  ca_cert:
    description: CA bundle that signed the members' client certificates.
    type: path
  client_cert:
    description: Client certificate for etcd client TLS authentication.
    type: path
  client_key:
    description: Private key of O(client_cert).
    type: path
  user:
    description: etcd user name when etcd authentication is enabled.
    type: str
    aliases: [username]
  password:
    description: Password of O(user).
    type: str
  timeout:
    description: Seconds to wait for one etcd request before the endpoint counts as unreachable.
    type: float
    default: 5.0
requirements:
  - requests
'''
