# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The TokenReview API (`POST /apis/authentication.k8s.io/v1/tokenreviews`) for the lab's API emulator
(lab/kube/api.py hooks it in), as the API server's service-account token authenticator answers it.

A token is valid when a Secret of type `kubernetes.io/service-account-token` holds it in `data.token` (base64):
the user is `system:serviceaccount:<namespace>:<service account>` (the Secret's annotation
`kubernetes.io/service-account.name`) with the groups `system:serviceaccounts`,
`system:serviceaccounts:<namespace>` and `system:authenticated`. Any other token is answered
`authenticated: false`, with an error, and 201 as the API server does. Nothing is stored.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any, Dict, Optional

import aiohttp.web
import kmock
from kmock._internal import enums  # private module: kmock is pinned (0.8)

SECRETS = kmock.resource('', 'v1', 'secrets')
TOKEN_TYPE = 'kubernetes.io/service-account-token'


def is_token_review(request: Any) -> bool:
    res = request.resource
    return (res is not None and res.group == 'authentication.k8s.io' and res.plural == 'tokenreviews'
            and request.method == enums.method.POST)


def _user(emulator: Any, token: str) -> Optional[Dict[str, Any]]:
    for (res, namespace, _name), obj in list(emulator._objects.items()):
        if res != SECRETS or obj.deleted:
            continue
        secret = dict(obj.raw)
        if secret.get('type') != TOKEN_TYPE:
            continue
        try:
            stored = base64.b64decode((secret.get('data') or {}).get('token') or '').decode()
        except (binascii.Error, UnicodeDecodeError):
            continue
        if stored and stored == token:
            account = ((secret.get('metadata') or {}).get('annotations') or {}).get('kubernetes.io/service-account.name')
            return {'username': 'system:serviceaccount:%s:%s' % (namespace, account), 'uid': secret['metadata'].get('uid'),
                    'groups': ['system:serviceaccounts', 'system:serviceaccounts:%s' % namespace, 'system:authenticated']}
    return None


async def token_review(emulator: Any, request: Any) -> aiohttp.web.Response:
    body = request.data if isinstance(request.data, dict) else {}
    token = ((body.get('spec') or {}).get('token')) or ''
    user = _user(emulator, token) if token else None
    status: Dict[str, Any] = {'authenticated': True, 'user': user} if user else {
        'authenticated': False, 'error': '[invalid bearer token, service account token has been invalidated]'}
    review = {'apiVersion': 'authentication.k8s.io/v1', 'kind': 'TokenReview', 'metadata': {'creationTimestamp': None},
              'spec': {'token': token}, 'status': status}
    return aiohttp.web.json_response(review, status=201)
