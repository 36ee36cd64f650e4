# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A small Kubernetes REST client over the official client's transport and auth.

Plain dicts in and out, every write a PATCH or a POST (never PUT, so concurrent writers only touch
what they mean to), optimistic concurrency through `metadata.resourceVersion` in merge patches,
and errors mapped to the classes in `kube.errors` so the engine can tell "gone" from "changed"
from "down". Shared by the controller and modules; nothing here imports kopf.
"""

from __future__ import annotations

import copy
import json
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple
from urllib.parse import quote

from ansible_collections.steward.cluster.plugins.module_utils.common.deadline import Deadline, DeadlineExceeded, read_within
from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.common.http_deadline import watch_pool_manager, watching
from ansible_collections.steward.cluster.plugins.module_utils.kube.errors import (
    AlreadyExists,
    BadAnswer,
    Conflict,
    Invalid,
    KubeError,
    KubeUnavailable,
    NotFound,
)
from ansible_collections.steward.cluster.plugins.module_utils.kube.selectors import parse_label_selector, selector_matches

try:
    import kubernetes
    from kubernetes.client.exceptions import ApiException
    HAS_KUBERNETES = True
except ImportError:  # reported by the caller
    HAS_KUBERNETES = False

MERGE_PATCH = 'application/merge-patch+json'
JSON_PATCH = 'application/json-patch+json'


def api_path(api_version: str, plural: str, namespace: Optional[str] = None, name: Optional[str] = None,
             subresource: Optional[str] = None) -> str:
    """`/api/v1/namespaces/ns/configmaps/x` or `/apis/group/version/plural/name/status`."""
    base = '/api/%s' % api_version if '/' not in api_version else '/apis/%s' % api_version
    parts = [base]
    if namespace:
        parts.append('namespaces/%s' % quote(namespace, safe=''))
    parts.append(plural)
    if name:
        parts.append(quote(name, safe=''))
        if subresource:
            parts.append(subresource)
    return '/'.join(parts)


def load_configuration(kubeconfig: Optional[str] = None, context: Optional[str] = None) -> 'kubernetes.client.Configuration':
    """In-cluster service account when running in a pod, else the kubeconfig (KUBECONFIG or ~/.kube/config)."""
    if not HAS_KUBERNETES:
        raise KubeError('the python library kubernetes is required')
    configuration = kubernetes.client.Configuration()
    if kubeconfig is None:
        try:
            kubernetes.config.load_incluster_config(client_configuration=configuration)
            return configuration
        except kubernetes.config.ConfigException:
            pass
    try:
        kubernetes.config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=configuration)
    except (kubernetes.config.ConfigException, OSError, TypeError) as exc:
        raise KubeError('no Kubernetes credentials: not in a pod and no usable kubeconfig (%s)' % exc) from exc
    except Exception as exc:  # PyYAML's errors and whatever a malformed file makes the loader trip over
        raise InvalidInput('kubeconfig', 'kubeconfig', '%s is not a usable kubeconfig: %s'
                           % (kubeconfig or 'the default kubeconfig', ' '.join(str(exc).split())[:300]),
                           kubeconfig) from None
    return configuration


def _checked(answer: Any, method: str, where: str) -> Any:
    """An answer as the API server gives it: nothing, or an object (a mapping) whose metadata is a mapping."""
    if answer is None:
        return None
    if not isinstance(answer, dict) or not isinstance(answer.get('metadata', {}), dict):
        raise BadAnswer('%s %s: the answer is not a Kubernetes object (%s), not an API server\'s answer' % (
            method, where, type(answer).__name__ if not isinstance(answer, dict) else 'metadata is not a mapping'))
    return answer


class KubeClient:
    """Generic verbs on API paths (see `api_path`). `user_agent`, when a process sets it, names the caller in the
    API server's audit log (the controller: steward-controller and its loops)."""

    user_agent: Optional[str] = None

    def __init__(self, configuration: 'kubernetes.client.Configuration', timeout: float = 30.0):
        if not HAS_KUBERNETES:
            raise KubeError('the python library kubernetes is required')
        self.configuration = configuration
        self.api = kubernetes.client.ApiClient(configuration)
        if self.user_agent:
            self.api.user_agent = self.user_agent
        watch_pool_manager(self.api.rest_client.pool_manager)   # a server dripping its headers is cut at the deadline
        self.timeout = timeout

    @classmethod
    def from_config(cls, kubeconfig: Optional[str] = None, context: Optional[str] = None,
                    timeout: float = 30.0) -> 'KubeClient':
        return cls(load_configuration(kubeconfig, context), timeout=timeout)

    def with_pool(self, size: int) -> 'KubeClient':
        """A client for `size` threads at once: the same configuration with a connection pool of at least `size`
        (the kubernetes client's default is 5 per CPU; a thread beyond the pool opens and drops a connection per
        request, with a warning each time)."""
        configuration = copy.deepcopy(self.configuration)
        configuration.connection_pool_maxsize = max(int(configuration.connection_pool_maxsize or 0), int(size))
        return KubeClient(configuration, timeout=self.timeout)

    @property
    def host(self) -> str:
        return self.configuration.host

    def close(self) -> None:
        self.api.close()

    # --- transport -----------------------------------------------------------------------------
    def request(self, method: str, path: str, body: Any = None, query: Optional[Iterable[Tuple[str, Any]]] = None,
                content_type: str = 'application/json') -> Any:
        headers = {'Accept': 'application/json', 'Content-Type': content_type}
        deadline = Deadline(self.timeout, '%s %s%s' % (method, self.host, path))
        try:
            with watching(deadline, self.host):
                response = self.api.call_api(
                    path, method, query_params=list(query or []), header_params=headers, body=body,
                    auth_settings=['BearerToken'], _preload_content=False, _request_timeout=self.timeout)
                answer = response[0] if isinstance(response, tuple) else response
                raw = read_within(lambda: answer.read1(65536, decode_content=True), deadline)
                answer.release_conn()
        except ApiException as exc:
            raise error_from(method, path, exc.status, exc.reason, exc.body) from None
        except DeadlineExceeded as exc:
            raise KubeUnavailable('%s: the API server did not finish its answer' % exc) from None
        except Exception as exc:  # urllib3 connection errors, timeouts
            raise KubeUnavailable('%s %s%s: the API server did not answer within %ss (%.1fs spent): %s' % (
                method, self.host, path, self.timeout, deadline.spent(), exc.__class__.__name__)) from exc
        try:
            answer = json.loads(raw) if raw else None
        except ValueError:
            raise BadAnswer('%s %s%s: the answer is not JSON: %r' % (method, self.host, path, raw[:80])) from None
        return _checked(answer, method, '%s%s' % (self.host, path))

    # --- verbs ---------------------------------------------------------------------------------
    def get(self, path: str) -> Dict[str, Any]:
        return self.request('GET', path)

    def get_or_none(self, path: str) -> Optional[Dict[str, Any]]:
        try:
            return self.get(path)
        except NotFound:
            return None

    def list(self, path: str, label_selector: Optional[str] = None, field_selector: Optional[str] = None) -> List[Dict[str, Any]]:
        query = []
        if label_selector:
            query.append(('labelSelector', label_selector))
        if field_selector:
            query.append(('fieldSelector', field_selector))
        items = (self.request('GET', path, query=query) or {}).get('items') or []
        if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
            raise BadAnswer('GET %s%s: items is not a list of objects, not an API server\'s answer' % (self.host, path))
        for item in items:
            _checked(item, 'GET', '%s%s' % (self.host, path))
        # Filter here too: the selector is a contract of ours, not only a hint to the server.
        if label_selector:
            selector = parse_label_selector(label_selector)
            items = [i for i in items if selector_matches(selector, (i.get('metadata') or {}).get('labels') or {})]
        return items

    def create(self, path: str, body: Mapping[str, Any]) -> Dict[str, Any]:
        return self.request('POST', path, body=dict(body))

    def merge_patch(self, path: str, patch: Mapping[str, Any], resource_version: Optional[str] = None) -> Dict[str, Any]:
        """RFC 7386 merge patch; with `resource_version` it fails with Conflict if the object moved on."""
        body = dict(patch)
        if resource_version:
            body['metadata'] = dict(body.get('metadata') or {}, resourceVersion=resource_version)
        return self.request('PATCH', path, body=body, content_type=MERGE_PATCH)

    def json_patch(self, path: str, operations: List[Mapping[str, Any]]) -> Dict[str, Any]:
        return self.request('PATCH', path, body=[dict(op) for op in operations], content_type=JSON_PATCH)

    def delete(self, path: str, missing_ok: bool = True) -> Optional[Dict[str, Any]]:
        try:
            return self.request('DELETE', path)
        except NotFound:
            if missing_ok:
                return None
            raise


def error_from(method: str, path: str, status: int, reason: str, body: Any) -> KubeError:
    message = ''
    try:
        data = json.loads(body) if body else {}
        message = data.get('message') or ''
        reason = data.get('reason') or reason
    except (ValueError, TypeError, AttributeError):
        message = (body or '')[:300] if isinstance(body, str) else ''
    text = '%s %s: HTTP %s %s%s' % (method, path, status, reason or '', ': ' + message if message else '')
    if status == 404:
        return NotFound(text, status, reason)
    if status == 409:
        return AlreadyExists(text, status, reason) if method == 'POST' else Conflict(text, status, reason)
    if status == 422:
        return Invalid(text, status, reason)
    if status >= 500 or status == 0:
        return KubeUnavailable(text, status, reason)
    return KubeError(text, status, reason)
