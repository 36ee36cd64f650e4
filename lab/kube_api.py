"""The lab's Kubernetes API server (used by `make demo` and the tests): kmock's KubernetesEmulator
with the fidelity the controller relies on, served over real HTTP on loopback from a background thread.

Added on top of kmock 0.8 (each is what a real kube-apiserver does):
* metadata.uid / creationTimestamp / resourceVersion / generation (generation moves on spec changes);
* 201 on create, 409 AlreadyExists on a duplicate name;
* optimistic concurrency: a merge patch that carries metadata.resourceVersion is refused with 409
  Conflict when the object has moved on; a failed JSON-patch `test` op answers 422, not 500;
* labelSelector (=, !=, exists, !exists) and fieldSelector (metadata.name, metadata.namespace) on lists;
* CustomResourceDefinitions: creating one serves its resource, and custom objects are validated
  against the CRD's openAPIV3Schema (422 Invalid with the field path) like the API server does;
* PATCH on the `status` subresource changes only status; PATCH on the object leaves status alone
  when the CRD declares the status subresource;
* PUT (replace) on named objects, with the same resourceVersion check;
* Namespaces: kmock 0.8 parses `/api/v1/namespaces[/<name>[/status|/finalize]]` as a namespace prefix
  without a resource (POST answers 500, GET of one namespace misses); those paths address the
  cluster-scoped `namespaces` resource, as on a real server (see `_parse_path`);
* `?dryRun=All` on create, patch, replace and delete (server-side dry run, what `kubectl --dry-run=server`
  and kubernetes.core's check mode send): the request is validated and answered with the object it would
  produce, and nothing is stored or announced to watchers;
* lists carry `kind: <Kind>List` and `apiVersion` (kubernetes.core reads `kind` of a list response);
* fieldSelector also on `spec.nodeName` and `status.phase` (what `kubectl drain` lists a node's pods with;
  an unset field compares as "", so `spec.nodeName=` selects unscheduled pods);
* the pod `eviction` subresource (`POST /api/v1/namespaces/<ns>/pods/<name>/eviction`, a policy/v1 Eviction;
  kmock routes a POST to a named object to no action, so `_handle` serves it before kmock). 404 if the pod
  does not exist, 400 if the body names another pod, 500 if several PodDisruptionBudgets select the pod (as
  the API server). Pending/Succeeded/Failed or already deleting pods are evicted without a budget check.
  Otherwise each policy/v1 PDB of the pod's namespace whose `spec.selector` (matchLabels, matchExpressions)
  selects the pod must allow it. There is no disruption controller, so the budget is computed at request
  time from the pods present: healthy = Ready condition True and not deleting; expected = the pod count, or
  for maxUnavailable / a percentage the sum of `spec.replicas` of the pods' controllers (ReplicaSet,
  StatefulSet, ReplicationController) when they all exist; desired healthy = minAvailable (percentages
  rounded up) or expected - maxUnavailable (neither set: minAvailable 1). A Ready pod may go if
  healthy - 1 >= desired, an unready one if healthy >= desired or `unhealthyPodEvictionPolicy: AlwaysAllow`.
  Refused: 429 TooManyRequests "Cannot evict pod as it would violate the pod's disruption budget." with a
  DisruptionBudget cause; allowed: the pod is deleted like a DELETE (deletionTimestamp first if it has
  finalizers) and the answer is 201 Status Success. `?dryRun=All` checks without deleting. A test plays
  the ReplicaSet by creating the replacement pods itself.
"""

from __future__ import annotations

import asyncio
import copy
import datetime
import itertools
import json
import math
import os
import threading
import uuid
from typing import Any, Dict, List, Optional, Tuple

import aiohttp.web
import jsonpatch
import jsonschema
import kmock
from kmock._internal import enums, k8s, parsing  # private modules: kmock is pinned (0.8)

from ansible_collections.steward.cluster.plugins.module_utils.kube.client import labels_match
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.eviction import selector_matches

_RV = itertools.count(1)
_NAMESPACE_SUBRESOURCES = ('status', 'finalize')


def _parse_path(path: str) -> parsing.ParsedPath:
    """kmock's path parser, except for the `namespaces` resource itself.

    kmock reads `/api/v1/namespaces/<x>/...` as "namespace <x>, then a resource", so the list
    `/api/v1/namespaces` fails to parse and `/api/v1/namespaces/<name>` has no resource. On a real
    server these (and the `status` / `finalize` subresources) address the cluster-scoped Namespace
    objects; every other path (e.g. `/api/v1/namespaces/<ns>/pods`) is parsed by kmock unchanged.
    """
    parts = path.strip('/').split('/')
    if parts[:3] == ['api', 'v1', 'namespaces'] and (
            len(parts) <= 4 or (len(parts) == 5 and parts[4] in _NAMESPACE_SUBRESOURCES)):
        return parsing.ParsedPath(group='', version='v1', plural='namespaces',
                                  name=parts[3] if len(parts) > 3 else None,
                                  subresource=parts[4] if len(parts) > 4 else None)
    return _KMOCK_PARSE_PATH(path)


# kmock's Request._parse looks parse_path up on the module at call time; wrap it once per process.
_KMOCK_PARSE_PATH = getattr(parsing.parse_path, 'kmock_original', parsing.parse_path)
_parse_path.kmock_original = _KMOCK_PARSE_PATH  # type: ignore[attr-defined]
parsing.parse_path = _parse_path
CRD_RESOURCE = kmock.resource('apiextensions.k8s.io', 'v1', 'customresourcedefinitions')
PDB_RESOURCE = kmock.resource('policy', 'v1', 'poddisruptionbudgets')
_SCALED_KINDS = {'ReplicaSet': kmock.resource('apps', 'v1', 'replicasets'),
                 'StatefulSet': kmock.resource('apps', 'v1', 'statefulsets'),
                 'ReplicationController': kmock.resource('', 'v1', 'replicationcontrollers')}


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ')


def _invalid(message: str, status: int = 422, reason: str = 'Invalid') -> k8s.KubernetesError:
    return k8s.KubernetesError(status=status, reason=reason, message=message, details={})


def _structural(schema: Any) -> Any:
    """A CRD schema as JSON Schema: drop the x-kubernetes-* keys, map int-or-string."""
    if isinstance(schema, list):
        return [_structural(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out: Dict[str, Any] = {}
    if schema.get('x-kubernetes-int-or-string'):
        out['anyOf'] = [{'type': 'integer'}, {'type': 'string'}]
    for key, value in schema.items():
        if key.startswith('x-kubernetes-') or (key == 'format' and value == 'int-or-string'):
            continue
        if key in ('properties', 'patternProperties', 'definitions'):
            out[key] = {k: _structural(v) for k, v in value.items()}
        else:
            out[key] = _structural(value)
    if schema.get('x-kubernetes-preserve-unknown-fields'):
        out.pop('additionalProperties', None)
    return out


def _field_match(obj: Dict[str, Any], selector: str) -> bool:
    meta = obj.get('metadata', {})
    for term in [t.strip() for t in selector.split(',') if t.strip()]:
        negate = '!=' in term
        key, value = [p.strip() for p in term.replace('!=', '=').replace('==', '=').split('=', 1)]
        actual = {'metadata.name': meta.get('name'), 'metadata.namespace': meta.get('namespace'),
                  'spec.nodeName': (obj.get('spec') or {}).get('nodeName') or '',
                  'status.phase': (obj.get('status') or {}).get('phase') or ''}.get(key)
        if (actual == value) == negate:
            return False
    return True


class FidelityEmulator(kmock.KubernetesEmulator):
    """kmock's emulator plus the API server behaviour listed in the module docstring."""

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        self._schemas: Dict[Tuple[str, str, str], Any] = {}
        self._status_sub: set = set()
        # A write's checks (resourceVersion, name taken) and the write itself are one step, as in etcd;
        # otherwise two compare-and-swap writers could both pass the check while a third holds kmock's lock.
        self._write_lock = asyncio.Lock()
        self._serving: set = set()   # ids of the requests being served (see _forget_served_requests)

    def _forget_served_requests(self) -> None:
        """Keep kmock's request log to the requests still being served.

        kmock 0.8 appends every request to a log and finds the reaction for a new one by scanning, for each
        reaction, the whole log for that request (`request in payload._source`): each request costs time in
        proportion to all requests ever served, so an emulator renewing leases for a few minutes slows to
        seconds per request. Nothing here reads the log, and a request only has to be in it until kmock has
        matched it, i.e. while it is being served."""
        log = self._requests
        if len(log) > 64:
            log[:] = [r for r in log if id(r) in self._serving]

    # --- CRDs ------------------------------------------------------------------------------
    def register_crd(self, crd: Dict[str, Any]) -> None:
        spec = crd['spec']
        names = spec['names']
        for version in spec.get('versions', []):
            res = kmock.resource(spec['group'], version['name'], names['plural'])
            subresources = set((version.get('subresources') or {}).keys())
            self.resources[res] = kmock.ResourceInfo(
                kind=names['kind'], singular=names.get('singular'), namespaced=spec.get('scope') == 'Namespaced',
                verbs={'create', 'delete', 'get', 'list', 'patch', 'update', 'watch', 'deletecollection'},
                shortnames=set(names.get('shortNames', [])), subresources=subresources)
            schema = (version.get('schema') or {}).get('openAPIV3Schema')
            key = (spec['group'], version['name'], names['plural'])
            if schema:
                self._schemas[key] = _structural(schema)
            if 'status' in subresources:
                self._status_sub.add(key)

    def _validate(self, request: kmock.Request, obj: Dict[str, Any]) -> None:
        res = request.resource
        key = (res.group, res.version, res.plural)
        schema = self._schemas.get(key)
        if schema is None:
            return
        body = {k: v for k, v in obj.items() if k not in ('apiVersion', 'kind', 'metadata')}
        errors = sorted(jsonschema.Draft7Validator(schema).iter_errors(body), key=lambda e: list(e.path))
        if errors:
            details = '; '.join('%s: %s' % ('.'.join(str(p) for p in e.path) or '<root>', e.message) for e in errors)
            raise _invalid('%s %r is invalid: %s' % (res.plural, obj.get('metadata', {}).get('name'), details))

    # --- request handling ------------------------------------------------------------------
    def _current(self, request: kmock.Request) -> Optional[Dict[str, Any]]:
        key = (request.resource, request.namespace, request.name)
        if key in self._objects and not self._objects[key].deleted:
            return copy.deepcopy(dict(self._objects[key].raw))
        return None

    def _is_status(self, request: kmock.Request) -> bool:
        return getattr(request, 'subresource', None) == 'status' or str(request.url.path).endswith('/status')

    async def _handle(self, request: kmock.Request):
        self._serving.add(id(request))
        self._forget_served_requests()
        try:
            return await self._handle_request(request)
        finally:
            self._serving.discard(id(request))

    async def _handle_request(self, request: kmock.Request):
        if _is_eviction(request):
            async with self._write_lock:
                try:
                    return await self._evict(request)
                except k8s.KubernetesError as exc:
                    return await self._render_error(exc)
        if request.resource is not None and request.action in (
                enums.action.CREATE, enums.action.UPDATE, enums.action.DELETE):
            async with self._write_lock:
                return await self._handle_resource(request)
        return await self._handle_resource(request)

    async def _handle_resource(self, request: kmock.Request):  # noqa: C901 - one switch over the actions
        if request.resource is None:
            return await super()._handle(request)
        dry_run = request.params.get('dryRun') == 'All' and request.action in (
            enums.action.CREATE, enums.action.UPDATE, enums.action.DELETE)
        current = self._current(request) if dry_run and request.name is not None else None
        try:
            self._prepare(request)
            if dry_run:
                return self._dry_run(request, current)
        except k8s.KubernetesError as exc:
            return await self._render_error(exc)
        resp = await super()._handle(request)
        if request.action == enums.action.CREATE and resp.status == 200 and not resp.prepared:
            resp.set_status(201)
            if request.resource == CRD_RESOURCE and isinstance(request.data, dict):
                self.register_crd(request.data)
        return resp

    def _dry_run(self, request: kmock.Request, current: Optional[Dict[str, Any]]) -> aiohttp.web.Response:
        """Answer a `dryRun=All` request (already completed and validated by _prepare) without storing it."""
        if request.action == enums.action.CREATE:
            data = request.data if isinstance(request.data, dict) else {}
            md = data.get('metadata', {})
            key = (request.resource, request.namespace or md.get('namespace'), md.get('name'))
            if key in self._objects and not self._objects[key].deleted:
                raise k8s.KubernetesObjectConflictError()
            return aiohttp.web.json_response(data, status=201)
        if current is None:
            raise k8s.KubernetesObjectNotFoundError()
        if request.action == enums.action.DELETE:
            return aiohttp.web.json_response(current)
        data = request.data
        if isinstance(data, list):  # a JSON patch, rewritten by _prepare to one whole-object replace
            after = copy.deepcopy(data[0]['value'])
        else:
            after = _merge(current, data or {})
        # Nothing was written: the object keeps its resourceVersion.
        after.setdefault('metadata', {})['resourceVersion'] = current['metadata'].get('resourceVersion')
        return aiohttp.web.json_response(after)

    def _prepare(self, request: kmock.Request) -> None:
        """Validate and complete the request body before kmock stores it."""
        data = request.data
        action = request.action
        if request.method == enums.method.PUT and request.name is not None and isinstance(data, dict):
            current = self._current(request)
            if current is None:
                raise k8s.KubernetesObjectNotFoundError()
            self._check_rv(data, current)
            # kmock has no PUT: express the replacement as a merge patch that removes what is gone.
            replacement = self._complete_update(request, current, data)
            self._validate(request, replacement)
            patch = _replace_patch(current, replacement)
            object.__setattr__(request, 'data', patch)  # attrs frozen (slotted) instance
            object.__setattr__(request, 'action', enums.action.UPDATE)
            object.__setattr__(request, 'method', enums.method.PATCH)
            return
        if action == enums.action.CREATE and isinstance(data, dict):
            md = data.setdefault('metadata', {})
            if not md.get('name') and md.get('generateName'):
                md['name'] = md['generateName'] + uuid.uuid4().hex[:5]
            md.setdefault('uid', str(uuid.uuid4()))
            md.setdefault('creationTimestamp', _now())
            md['resourceVersion'] = str(next(_RV))
            md['generation'] = 1
            if request.namespace and not md.get('namespace'):
                md['namespace'] = request.namespace
            self._validate(request, data)
        elif action == enums.action.UPDATE and request.name is not None:
            current = self._current(request)
            if current is None:
                return  # kmock answers 404
            if isinstance(data, list):
                try:
                    after = jsonpatch.apply_patch(current, data, in_place=False)
                except jsonpatch.JsonPatchTestFailed as exc:
                    raise _invalid('the JSON patch test failed: %s' % exc)
                except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as exc:
                    raise _invalid('the JSON patch is invalid: %s' % exc)
                after = self._complete_update(request, current, after)
                self._validate(request, after)
                data[:] = [{'op': 'replace', 'path': '', 'value': after}]
                return
            if isinstance(data, dict):
                self._check_rv(data, current)
                merged = copy.deepcopy(data)
                merged.setdefault('metadata', {})
                scoped = self._scope(request, current, merged)
                after = jsonpatch.apply_patch(current, [], in_place=False)
                after = _merge(after, scoped)
                after = self._complete_update(request, current, after)
                self._validate(request, after)
                data.clear()
                data.update(_replace_patch(current, after))

    def _scope(self, request: kmock.Request, current: Dict[str, Any], patch: Dict[str, Any]) -> Dict[str, Any]:
        """The status subresource changes only status; the object leaves status alone."""
        res = request.resource
        key = (res.group, res.version, res.plural)
        if key not in self._status_sub:
            return patch
        if self._is_status(request):
            return {'status': patch.get('status')} if 'status' in patch else {}
        patch.pop('status', None)
        return patch

    @staticmethod
    def _check_rv(data: Dict[str, Any], current: Dict[str, Any]) -> None:
        wanted = (data.get('metadata') or {}).get('resourceVersion')
        actual = current.get('metadata', {}).get('resourceVersion')
        if wanted and wanted != actual:
            raise _invalid('Operation cannot be fulfilled on %s %r: the object has been modified; please apply your '
                           'changes to the latest version and try again' % (
                               current.get('kind', 'object'), current.get('metadata', {}).get('name')),
                           status=409, reason='Conflict')

    @staticmethod
    def _complete_update(request: kmock.Request, current: Dict[str, Any], after: Dict[str, Any]) -> Dict[str, Any]:
        after = copy.deepcopy(after)
        md = after.setdefault('metadata', {})
        cur_md = current.get('metadata', {})
        for key in ('uid', 'creationTimestamp', 'name', 'namespace'):
            if key in cur_md:
                md[key] = cur_md[key]
        md['resourceVersion'] = str(next(_RV))
        generation = int(cur_md.get('generation') or 1)
        if after.get('spec') != current.get('spec'):
            generation += 1
        md['generation'] = generation
        return after

    # --- eviction subresource ----------------------------------------------------------------
    async def _evict(self, request: kmock.Request) -> aiohttp.web.Response:
        """POST pods/<name>/eviction: check the PodDisruptionBudgets, then delete the pod (see module docstring)."""
        key = (request.resource, request.namespace, request.name)
        if key not in self._objects or self._objects[key].deleted:
            raise k8s.KubernetesError(status=404, reason='NotFound', message='pods "%s" not found' % request.name,
                                      details={'name': request.name, 'kind': 'pods'})
        body_name = ((request.data if isinstance(request.data, dict) else {}).get('metadata') or {}).get('name')
        if body_name and body_name != request.name:
            raise k8s.KubernetesError(status=400, reason='BadRequest', details={'name': request.name, 'kind': 'pods'},
                                      message='name in URL does not match name in Eviction object')
        pod = copy.deepcopy(dict(self._objects[key].raw))
        refusal = self._eviction_refusal(pod)
        if refusal:
            raise k8s.KubernetesError(status=429, reason='TooManyRequests',
                                      message="Cannot evict pod as it would violate the pod's disruption budget.",
                                      details={'causes': [{'reason': 'DisruptionBudget', 'message': refusal}]})
        if request.params.get('dryRun') != 'All':
            await self._delete_object(key)
        return aiohttp.web.json_response({'kind': 'Status', 'apiVersion': 'v1', 'metadata': {},
                                          'status': 'Success', 'code': 201}, status=201)

    def _live(self, resource: Any, namespace: Optional[str]) -> List[Dict[str, Any]]:
        return [dict(obj.raw) for (res, ns, _name), obj in self._objects.items()
                if res == resource and ns == namespace and not obj.deleted]

    def _eviction_refusal(self, pod: Dict[str, Any]) -> str:
        """'' if the pod may be evicted now, else the DisruptionBudget cause (500 for several budgets)."""
        md = pod.get('metadata') or {}
        if (pod.get('status') or {}).get('phase') in ('Pending', 'Succeeded', 'Failed') or md.get('deletionTimestamp'):
            return ''
        namespace = md.get('namespace')
        labels = md.get('labels') or {}
        pdbs = [p for p in self._live(PDB_RESOURCE, namespace) if selector_matches((p.get('spec') or {}).get('selector'), labels)]
        if not pdbs:
            return ''
        if len(pdbs) > 1:
            raise k8s.KubernetesError(status=500, reason='InternalError', details={'name': md.get('name'), 'kind': 'pods'},
                                      message='This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.')
        pdb = pdbs[0]
        spec = pdb.get('spec') or {}
        pods = [p for p in self._live(kmock.resource('', 'v1', 'pods'), namespace)
                if selector_matches(spec.get('selector'), (p.get('metadata') or {}).get('labels') or {})]
        healthy = sum(1 for p in pods if _pod_healthy(p))
        desired = self._desired_healthy(spec, pods, namespace)
        if _pod_healthy(pod):
            allowed = healthy - 1 >= desired
        else:
            allowed = healthy >= desired or spec.get('unhealthyPodEvictionPolicy') == 'AlwaysAllow'
        if allowed:
            return ''
        return 'The disruption budget %s needs %d healthy pods and has %d currently' % (pdb['metadata']['name'], desired, healthy)

    def _desired_healthy(self, spec: Dict[str, Any], pods: List[Dict[str, Any]], namespace: Optional[str]) -> int:
        min_available = spec.get('minAvailable')
        max_unavailable = spec.get('maxUnavailable')
        if max_unavailable is None and min_available is None:
            min_available = 1
        if max_unavailable is None and isinstance(min_available, int):
            return min_available
        expected = self._expected_pods(pods, namespace)
        if max_unavailable is None:
            return _scaled(min_available, expected)
        return max(0, expected - _scaled(max_unavailable, expected))

    def _expected_pods(self, pods: List[Dict[str, Any]], namespace: Optional[str]) -> int:
        """Sum of the controllers' spec.replicas (the disruption controller's scale); the pod count if one is missing."""
        controllers: Dict[Tuple[str, str], int] = {}
        for pod in pods:
            owner = next((r for r in (pod.get('metadata') or {}).get('ownerReferences') or [] if r.get('controller')), None)
            res = _SCALED_KINDS.get((owner or {}).get('kind'))
            key = (res, namespace, (owner or {}).get('name'))
            if res is None or key not in self._objects or self._objects[key].deleted:
                return len(pods)
            replicas = (self._objects[key].get('spec') or {}).get('replicas')
            controllers[(owner['kind'], owner['name'])] = 1 if replicas is None else int(replicas)
        return sum(controllers.values())

    async def _delete_object(self, key: Tuple[Any, Optional[str], Optional[str]]) -> None:
        """kmock's DELETE: deletionTimestamp first while finalizers remain, else gone (and announced to watchers)."""
        async with self._lock:
            obj = self._objects[key]
            meta = obj.get('metadata', {})
            if meta.get('deletionTimestamp'):
                return
            if meta.get('finalizers'):
                obj.patch({'metadata': {'deletionTimestamp': _now(), 'resourceVersion': str(next(_RV))}})
                await self._buses[key[0]].put({'type': 'MODIFIED', 'object': obj.raw})
            else:
                obj.delete()
                await self._buses[key[0]].put({'type': 'DELETED', 'object': obj.last.raw})

    # --- selectors -------------------------------------------------------------------------
    async def _serve_list(self, request: kmock.Request):
        result = await super()._serve_list(request)
        result['metadata'] = {'resourceVersion': str(next(_RV))}
        res = request.resource
        info = self.resources[res] if res in self.resources else None
        if info is not None and info.kind:
            result = {'apiVersion': '%s/%s' % (res.group, res.version) if res.group else res.version,
                      'kind': info.kind + 'List', **result}
        labels = request.params.get('labelSelector')
        fields = request.params.get('fieldSelector')
        if labels:
            result['items'] = [o for o in result['items'] if labels_match(o.get('metadata', {}).get('labels') or {}, labels)]
        if fields:
            result['items'] = [o for o in result['items'] if _field_match(o, fields)]
        return result


def _is_eviction(request: kmock.Request) -> bool:
    res = request.resource
    return (res is not None and res.group == '' and res.plural == 'pods' and request.name is not None
            and request.subresource == 'eviction' and request.method == enums.method.POST)


def _pod_healthy(pod: Dict[str, Any]) -> bool:
    """What the disruption controller counts as healthy: Ready condition True and not being deleted."""
    if (pod.get('metadata') or {}).get('deletionTimestamp'):
        return False
    return any(c.get('type') == 'Ready' and c.get('status') == 'True' for c in (pod.get('status') or {}).get('conditions') or [])


def _scaled(value: Any, total: int) -> int:
    """intstr.GetScaledValueFromIntOrPercent(value, total, roundUp=true)."""
    if isinstance(value, str) and value.endswith('%'):
        return int(math.ceil(int(value[:-1]) * total / 100.0))
    return int(value)


def _merge(base: Dict[str, Any], patch: Dict[str, Any]) -> Dict[str, Any]:
    """RFC 7386 merge patch."""
    out = dict(base)
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict):  # RFC 7386: a missing or non-object target merges as {} (nulls dropped)
            out[key] = _merge(out[key] if isinstance(out.get(key), dict) else {}, value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _replace_patch(current: Dict[str, Any], after: Dict[str, Any]) -> Dict[str, Any]:
    """A kmock merge patch that turns `current` into `after` (None deletes a key; lists are replaced)."""
    patch: Dict[str, Any] = {}
    for key in set(current) | set(after):
        if key not in after:
            patch[key] = None
        elif isinstance(after[key], dict) and isinstance(current.get(key), dict):
            sub = _replace_patch(current[key], after[key])
            if sub:
                patch[key] = sub
        elif current.get(key, object()) != after[key] or key not in current:
            patch[key] = after[key]
    return patch


class KubeServer:
    """The emulator on a background thread's event loop: usable from sync tests and subprocesses."""

    def __init__(self) -> None:
        self.url = ''
        self.emulator: Optional[FidelityEmulator] = None
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._stop: Optional[asyncio.Event] = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name='kube-emulator', daemon=True)
        self._error: Optional[BaseException] = None

    def start(self) -> 'KubeServer':
        self._thread.start()
        if not self._ready.wait(30) or self._error:
            raise RuntimeError('kube emulator did not start: %r' % self._error)
        return self

    def _run(self) -> None:
        self._loop = asyncio.new_event_loop()
        try:
            self._loop.run_until_complete(self._serve())
        except BaseException as exc:  # surfaced by start()
            self._error = exc
            self._ready.set()

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        async with FidelityEmulator() as emu, kmock.Server(emu) as srv:
            emu.resources.load_bundled()
            self.emulator = emu
            self.url = str(srv.url).rstrip('/')
            self._ready.set()
            await self._stop.wait()

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout=15)

    def call(self, fn, *args):
        """Run fn(*args) on the emulator's loop (kmock state is not thread-safe)."""
        result: Dict[str, Any] = {}
        done = threading.Event()

        def runner() -> None:
            try:
                result['value'] = fn(*args)
            except BaseException as exc:  # re-raised in the caller's thread
                result['error'] = exc
            done.set()

        self._loop.call_soon_threadsafe(runner)
        done.wait(30)
        if 'error' in result:
            raise result['error']
        return result.get('value')

    def write_kubeconfig(self, path: str) -> str:
        config = {
            'apiVersion': 'v1', 'kind': 'Config', 'current-context': 'emulator',
            'clusters': [{'name': 'emulator', 'cluster': {'server': self.url}}],
            'users': [{'name': 'tester', 'user': {'token': 'test-token'}}],
            'contexts': [{'name': 'emulator', 'context': {'cluster': 'emulator', 'user': 'tester', 'namespace': 'default'}}],
        }
        with open(path, 'w') as f:
            json.dump(config, f)
        return path


def load_yaml_documents(path: str) -> List[Dict[str, Any]]:
    import yaml
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def repo_path(*parts: str) -> str:
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), *parts)
