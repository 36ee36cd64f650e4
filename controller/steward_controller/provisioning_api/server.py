# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The provisioning API's HTTP server (aiohttp, on kopf's event loop): started with the operator, stopped with it.

Handlers are thin: authenticate (TokenReview), validate with the engine (module_utils/provisioning/api.py), call the
engine in a worker thread (the Kubernetes client is synchronous), answer JSON errors that name the parameter and
rule. The join script holds a private key: it is never logged, and responses carry `Cache-Control: no-store`.
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import hashlib
import logging
import time
from typing import Any, Callable, Dict, Optional, Tuple

from aiohttp import web
from prometheus_client import Counter

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.common.tls import server_context
from ansible_collections.steward.cluster.plugins.module_utils.kube.client import api_path
from ansible_collections.steward.cluster.plugins.module_utils.kube.errors import KubeError, NotFound
from ansible_collections.steward.cluster.plugins.module_utils.provisioning import api, join_script
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.certs import parse_authority
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.errors import ProvisioningError, Refused
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.node_labels_op import NodeNotFound, ensure_labels

from steward_controller.core.background import register_background
from steward_controller.core.runtime import Runtime
from steward_controller.provisioning_api import ApiOptions

log = logging.getLogger('steward.provisioning_api')
PREFIX = '/api/v1.0'
TOKEN_REVIEWS = '/apis/authentication.k8s.io/v1/tokenreviews'
TOKEN_CACHE_SECONDS = 10.0   # a revoked token stops working within this long


class ApiError(Exception):
    def __init__(self, status: int, message: str, **details: Any):
        super().__init__(message)
        self.status = status
        self.details = details


class ProvisioningApi:
    def __init__(self, runtime: Runtime, options: ApiOptions, clock: Callable[[], float] = time.monotonic):
        self.runtime = runtime
        self.options = options
        self.clock = clock
        self.tokens: Dict[str, Tuple[float, Dict[str, Any]]] = {}
        self.requests = Counter('steward_provisioning_api_requests_total', 'Provisioning API requests by endpoint and '
                                'status code.', ['endpoint', 'code'], registry=runtime.metrics.registry)
        self.runner: Optional[web.AppRunner] = None
        self.port: Optional[int] = None

    # --- plumbing -----------------------------------------------------------------------------------
    async def call(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(None, fn, *args)

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self.middleware])
        app.router.add_get(PREFIX + '/health', self.health)
        app.router.add_get(PREFIX + '/join-scripts', self.join_scripts)
        app.router.add_put(PREFIX + '/node-labels/{node}', self.node_labels)
        return app

    async def start(self) -> None:
        context = None
        if self.options.tls_cert:
            context = server_context(self.options.tls_cert, self.options.tls_key)
        self.runner = web.AppRunner(self.app(), access_log=None)
        await self.runner.setup()
        site = web.TCPSite(self.runner, self.options.host, self.options.port, ssl_context=context)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]   # the real port when --provisioning-api-port is 0
        log.info('provisioning API listening', extra={'port': self.port, 'tls': bool(context)})

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()

    @web.middleware
    async def middleware(self, request: web.Request, handler: Callable) -> web.StreamResponse:
        endpoint = request.match_info.route.resource.canonical if request.match_info.route.resource else 'unknown'
        try:
            if request.path != PREFIX + '/health':
                user = await self.authenticate(request)
                request['user'] = user
            response = await handler(request)
        except ApiError as exc:
            response = web.json_response(dict({'message': str(exc)}, **exc.details), status=exc.status)
        except web.HTTPException as exc:
            response = web.json_response({'message': exc.reason}, status=exc.status)
        self.requests.labels(endpoint, str(response.status)).inc()
        return response

    async def authenticate(self, request: web.Request) -> str:
        header = request.headers.get('Authorization', '')
        if not header.startswith('Bearer ') or not header[7:].strip():
            raise ApiError(401, 'a bearer token is required (Authorization: Bearer <token>)')
        token = header[7:].strip()
        key = hashlib.sha256(token.encode()).hexdigest()   # the token itself is never kept
        cached = self.tokens.get(key)
        if cached is None or self.clock() - cached[0] > TOKEN_CACHE_SECONDS:
            review = {'apiVersion': 'authentication.k8s.io/v1', 'kind': 'TokenReview', 'spec': {'token': token}}
            try:
                answer = await self.call(self.runtime.client.create, TOKEN_REVIEWS, review)
            except KubeError as exc:
                raise ApiError(503, 'cannot check the token with the TokenReview API: %s' % (exc,)) from None
            status = (answer or {}).get('status') or {}
            cached = (self.clock(), status)
            self.tokens[key] = cached
        status = cached[1]
        if not status.get('authenticated'):
            raise ApiError(401, 'the token is not valid: %s' % (status.get('error') or 'not authenticated'))
        ok, name = api.allowed(status.get('user') or {}, self.options.allowed_users, self.options.allowed_groups)
        if not ok:
            raise ApiError(403, 'user %s may not use the provisioning API (allowed users: %s; groups: %s)' % (
                name, ', '.join(self.options.allowed_users) or '-', ', '.join(self.options.allowed_groups) or '-'))
        return name

    # --- endpoints ----------------------------------------------------------------------------------
    async def health(self, _request: web.Request) -> web.Response:
        return web.Response(status=204)

    def _read(self, plural: str, ref: Optional[Tuple[str, str]], flag: str) -> Dict[str, Any]:
        if ref is None:
            raise ApiError(503, 'join scripts need %s' % flag)
        try:
            return self.runtime.client.get(api_path('v1', plural, ref[0], ref[1]))
        except NotFound:
            raise ApiError(503, '%s %s/%s (%s) does not exist' % (plural[:-1], ref[0], ref[1], flag)) from None

    def render_script(self, query: Dict[str, Any]) -> Tuple[str, str]:
        config = self._read('configmaps', self.options.cluster_config, '--provisioning-cluster-config')
        nodes = self.runtime.client.list(api_path('v1', 'nodes'), label_selector=api.CONTROL_PLANE_LABEL)
        cluster = api.cluster_from_config(config.get('data'), nodes, 'configmap %s/%s' % self.options.cluster_config)
        node = api.join_request(query, cluster)
        secret = self._read('secrets', self.options.authority, '--provisioning-authority')
        data = {k: base64.b64decode(v).decode() for k, v in (secret.get('data') or {}).items() if k in ('ca.crt', 'ca.key')}
        authority = parse_authority(data, 'secret %s/%s' % self.options.authority)
        if authority is None:
            raise ApiError(503, 'secret %s/%s holds no ca.crt and ca.key' % self.options.authority)
        now = datetime.datetime.now(datetime.timezone.utc)
        return node.name, join_script.script_for(cluster, node, authority, now, 'join-%s.sh' % node.name)

    async def join_scripts(self, request: web.Request) -> web.Response:
        query = {key: request.query.getall(key) for key in set(request.query.keys())}
        try:
            name, script = await self.call(self.render_script, query)
        except InvalidInput as exc:
            raise ApiError(400, str(exc), field=exc.field, rule=exc.rule) from None
        except (ProvisioningError, KubeError) as exc:
            raise ApiError(503, str(exc)) from None
        log.info('join script rendered', extra={'node': name, 'user': request.get('user')})
        return web.Response(text=script, content_type='text/x-shellscript', headers={'Cache-Control': 'no-store'})

    async def node_labels(self, request: web.Request) -> web.Response:
        name = request.match_info['node']
        try:
            body = await request.json()
        except ValueError:
            raise ApiError(400, 'the body must be a JSON object of labels', rule='json') from None
        if not isinstance(body, dict):
            raise ApiError(400, 'the body must be a JSON object of labels', rule='mapping')
        try:
            result = await self.call(ensure_labels, self.runtime.client, name, body, False, 'body')
        except InvalidInput as exc:
            raise ApiError(400, str(exc), field=exc.field, rule=exc.rule) from None
        except NodeNotFound as exc:
            raise ApiError(404, str(exc)) from None
        except Refused as exc:
            raise ApiError(409, str(exc), rule=exc.rule) from None
        except (ProvisioningError, KubeError) as exc:
            raise ApiError(503, str(exc)) from None
        log.info('node labels: %s', result['msg'], extra={'node': name, 'user': request.get('user')})
        return web.json_response({'message': result['msg'], 'changed': result['changed'], 'set': result['set'],
                                  'removed': result['removed'], 'owned': result['owned']})


def register(registry: Any, runtime: Runtime) -> None:
    options: ApiOptions = runtime.settings.options('provisioning-api')
    if options.port is None:
        log.info('provisioning API: off (no --provisioning-api-port)')
        return
    server = ProvisioningApi(runtime, options)
    register_background(registry, 'provisioning-api', server.start, server.stop)
