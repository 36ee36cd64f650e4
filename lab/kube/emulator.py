"""The lab's Kubernetes API emulator: kmock's KubernetesEmulator with the fidelity the collection relies on
(served over HTTP by lab/kube/api.py; used by `make lab`, `make demo` and the tests).

Added on top of kmock 0.8 (each is what a real kube-apiserver does):
* metadata.uid / creationTimestamp / resourceVersion / generation (generation moves on spec changes);
* 201 on create, 409 AlreadyExists on a duplicate name;
* optimistic concurrency: a merge patch that carries metadata.resourceVersion is refused with 409
  Conflict when the object has moved on; a failed JSON-patch `test` op answers 422, not 500;
* labelSelector (the full syntax: =, ==, !=, in, notin, exists, !exists, gt, lt) and fieldSelector (the field
  labels each kind supports) on lists and watches, parsed by the emulator's own code (kube_selectors.py, never
  the engine's); a selector that does not parse answers 400 BadRequest. A watch with a selector sees an object
  enter (ADDED) and leave (DELETED) its view when labels change, as from the API server's watch cache;
  `watch=True` (what the official Python client sends) is a watch, as Go's ParseBool reads it;
* writes are refused as the API server refuses them (kube_rules.py): invalid names, labels, annotation keys,
  annotations over 256 KiB in total, unparsable `spec.selector`s and negative replicas (422 Invalid with causes),
  non-string label or annotation values (400); Deployments, StatefulSets, ReplicaSets and ReplicationControllers
  get spec.replicas 1 when it is not set;
* the `scale` subresource (GET, PATCH, PUT; an autoscaling/v1 Scale in and out) of Deployments, StatefulSets,
  ReplicaSets, ReplicationControllers and custom resources whose CRD declares `subresources.scale`;
* a status mover in place of the workload controllers: `status_delay` seconds after a write to a Deployment,
  StatefulSet or ReplicaSet its status follows spec.replicas, unless annotated
  `lab.steward.io/hold-status: "true"` (kube_workloads.py);
* CustomResourceDefinitions: creating one serves its resource, and custom objects are validated
  against the CRD's openAPIV3Schema (422 Invalid with the field path) like the API server does, including its
  CEL rules (`x-kubernetes-validations`, transition rules with `oldSelf` on updates; lab/kube/cel.py) and on writes
  through the `scale` subresource; a CRD with a rule outside cel.py's subset is refused (422) before it is stored;
* PATCH on the `status` subresource changes only status; PATCH on the object leaves status alone
  when the CRD declares the status subresource;
* PUT (replace) on named objects, with the same resourceVersion check;
* an update that changes nothing is answered with the stored object and not written: resourceVersion stays,
  watchers see no event (kubernetes.core's apply sends such patches on every idempotent run);
* Namespaces: kmock 0.8 parses `/api/v1/namespaces[/<name>[/status|/finalize]]` as a namespace prefix
  without a resource (POST answers 500, GET of one namespace misses); those paths address the
  cluster-scoped `namespaces` resource, as on a real server (see `_parse_path`);
* `?dryRun=All` on create, patch, replace and delete (server-side dry run, what `kubectl --dry-run=server`
  and kubernetes.core's check mode send): the request is validated and answered with the object it would
  produce, and nothing is stored or announced to watchers;
* lists carry `kind: <Kind>List` and `apiVersion` (kubernetes.core reads `kind` of a list response);
* fieldSelector on `spec.nodeName` and `status.phase` is what `kubectl drain` lists a node's pods with (an unset
  field compares as "", so `spec.nodeName=` selects unscheduled pods);
* the pod `eviction` subresource (`POST /api/v1/namespaces/<ns>/pods/<name>/eviction`, a policy/v1 Eviction;
  kmock routes a POST to a named object to no action, so `_handle` serves it before kmock). 404 if the pod
  does not exist, 400 if the body names another pod, 500 if several PodDisruptionBudgets select the pod (as
  the API server). Pending/Succeeded/Failed or already deleting pods are evicted without a budget check.
  Otherwise each policy/v1 PDB of the pod's namespace whose `spec.selector` (matchLabels, matchExpressions)
  selects the pod must allow it (the budget arithmetic is in kube_eviction.py). Refused: 429 TooManyRequests
  "Cannot evict pod as it would violate the pod's disruption budget." with a DisruptionBudget cause; allowed: the
  pod is deleted like a DELETE (deletionTimestamp first if it has finalizers) and the answer is 201 Status
  Success. `?dryRun=All` checks without deleting. A test plays the ReplicaSet by creating the replacement pods
  itself.
"""

from __future__ import annotations

import asyncio
import copy
import itertools
import json
import random
import time
import uuid
from typing import Any, Dict, List, Optional, Tuple

import aiohttp.web
import jsonpatch
import jsonschema
import kmock
from kmock._internal import enums, k8s, parsing  # private modules: kmock is pinned (0.8)

from lab.kube import cel as kube_cel
from lab.kube import eviction as kube_eviction
from lab.kube.discovery import STRATEGIC_MERGE_PATCH, fixed_resource_list, openapi_v2, strategic_merge
from lab.kube.index import IndexedObjects, objects_for
from lab.kube.objects import fold_string_data, merge, now, replace_patch, structural
from lab.kube.rules import RequestRefused, bad_request, check_write, invalid, replicas_causes
from lab.kube.selectors import SelectorError, parse_field_selector, parse_label_selector
from lab.kube import protobuf as kube_protobuf
from lab.kube import tables as kube_tables
from lab.kube.tokenreview import is_token_review, token_review
from lab.kube.workloads import (BUILTIN_SCALE, BUILTIN_SCALED, DEFAULT_STATUS_DELAY, MOVED_KINDS, ScalePaths,
                                crd_scale_paths, default_replicas, moved_status, scale_of, with_replicas)
from lab.pods.spec import managed as runs_pods

_RV = itertools.count(1)
# The API server's generated-name suffix (k8s.io/apimachinery utilrand.String: 5 of these 27 characters) and its
# retries on a taken name (RetryGenerateName, GA in Kubernetes 1.32: up to 8 names in all before a 409). The lab
# used 5 hex digits and no retry: among 2,000 machines of one set about two creates met a taken name.
NAME_ALPHABET = 'bcdfghjklmnpqrstvwxz2456789'
NAME_SUFFIX = 5
NAME_ATTEMPTS = 8
_NAMESPACE_SUBRESOURCES = ('status', 'finalize')


HEALTH_PATHS = ('/readyz', '/livez', '/healthz')


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


def _guess_k8s(k8s_path: parsing.ParsedPath, method: enums.method, query: Dict[str, str]) -> Optional[enums.action]:
    """kmock's action guess, with `watch` read as Go's strconv.ParseBool reads it: the official Python client
    sends `watch=True`, which kmock (expecting `true`) would serve as a plain list."""
    if str(query.get('watch', '')) in ('1', 't', 'T', 'TRUE', 'true', 'True'):
        query = dict(query, watch='true')
    return _KMOCK_GUESS_K8S(k8s_path, method, query)


_KMOCK_GUESS_K8S = getattr(parsing.guess_k8s, 'kmock_original', parsing.guess_k8s)
_guess_k8s.kmock_original = _KMOCK_GUESS_K8S  # type: ignore[attr-defined]
parsing.guess_k8s = _guess_k8s
CRD_RESOURCE = kmock.resource('apiextensions.k8s.io', 'v1', 'customresourcedefinitions')
Key = Tuple[Any, Optional[str], Optional[str]]


def _invalid(message: str, status: int = 422, reason: str = 'Invalid') -> k8s.KubernetesError:
    return k8s.KubernetesError(status=status, reason=reason, message=message, details={})


class FidelityEmulator(kmock.KubernetesEmulator):
    """kmock's emulator plus the API server behaviour listed in the module docstring.

    Settable after construction: `status_delay` (seconds; None turns the status mover off), `history_limit`
    (versions kept per object, None: all, as kmock) and `request_log_limit` (requests kept for assertions,
    None: all) — a long-running lab bounds the last two so that lease renewals do not grow memory forever.
    """

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        self._printer_columns: Dict[Tuple[str, str, str], List[Dict[str, Any]]] = {}   # CRD versions' columns
        self._objects = IndexedObjects()       # lists by resource (kube_index.py); `list_index = False`: kmock's scan
        self.list_index = True
        self._schemas: Dict[Tuple[str, str, str], Any] = {}
        self._cel: Dict[Tuple[str, str, str], kube_cel.Validator] = {}
        self._status_sub: set = set()
        self._scale_sub: Dict[Tuple[str, str, str], ScalePaths] = {}
        # A write's checks (resourceVersion, name taken) and the write itself are one step, as in etcd;
        # otherwise two compare-and-swap writers could both pass the check while a third holds kmock's lock.
        self._write_lock = asyncio.Lock()
        self.status_delay: Optional[float] = DEFAULT_STATUS_DELAY
        # True when the lab's pod runtime (lab/pods/runtime.py) runs: it writes the status of the StatefulSets whose
        # pods it runs, from their real pods, and the status mover leaves those alone.
        self.pod_runtime = False
        self.history_limit: Optional[int] = None
        self.request_log_limit: Optional[int] = None
        self._serving: set = set()   # ids of the requests being served (see _forget_served_requests)
        self.name_rng = random.Random()      # generateName suffixes (a test may seed it)
        self._mover_due: Dict[Key, float] = {}
        self._mover_timers: Dict[Key, asyncio.TimerHandle] = {}
        # (User-Agent, method, path, query) of every request while a list is set: an audit log as the API server
        # writes one, for tests that compare what a client calls with the RBAC it is granted.
        self.audit: Optional[List[Tuple[str, str, str, Dict[str, str]]]] = None

    # --- CRDs ------------------------------------------------------------------------------
    def register_crd(self, crd: Dict[str, Any]) -> None:
        spec = crd['spec']
        names = spec['names']
        for version in spec.get('versions', []):
            res = kmock.resource(spec['group'], version['name'], names['plural'])
            subresources = version.get('subresources') or {}
            self.resources[res] = kmock.ResourceInfo(
                kind=names['kind'], singular=names.get('singular'), namespaced=spec.get('scope') == 'Namespaced',
                verbs={'create', 'delete', 'get', 'list', 'patch', 'update', 'watch', 'deletecollection'},
                shortnames=set(names.get('shortNames', [])), subresources=set(subresources))
            schema = (version.get('schema') or {}).get('openAPIV3Schema')
            key = (spec['group'], version['name'], names['plural'])
            if schema:
                self._schemas[key] = structural(schema)
                rules = kube_cel.validator(schema)
                if rules is not None:
                    self._cel[key] = rules
            self._printer_columns[key] = version.get('additionalPrinterColumns') or []
            if 'status' in subresources:
                self._status_sub.add(key)
            if 'scale' in subresources:
                self._scale_sub[key] = crd_scale_paths(subresources['scale'] or {})

    def _kind(self, res: Any) -> str:
        info = self.resources[res] if res in self.resources else None
        return (info.kind if info is not None and info.kind else res.plural) or ''

    def _validate(self, request: kmock.Request, obj: Dict[str, Any], old: Optional[Dict[str, Any]] = None) -> None:
        """The API server's checks on a write: metadata and spec rules for every kind, the CRD's schema and then
        its CEL rules for custom resources (`old`: the stored object of an update, for transition rules).
        Raises RequestRefused (422 / 400)."""
        res = request.resource
        info = self.resources[res] if res in self.resources else None
        check_write(res.plural, self._kind(res), res.group, obj, bool(info is not None and info.namespaced))
        if res == CRD_RESOURCE:
            self._check_crd_rules(obj)
        self._validate_custom(res, obj, old)

    def _check_crd_rules(self, crd: Dict[str, Any]) -> None:
        """A CRD whose CEL rules the lab cannot evaluate is refused before it is stored (a real API server would
        serve it): otherwise its objects would pass rules nobody checked."""
        versions = (crd.get('spec') or {}).get('versions') or []
        for index, version in enumerate(versions if isinstance(versions, list) else []):
            try:
                kube_cel.validator(((version or {}).get('schema') or {}).get('openAPIV3Schema'))
            except kube_cel.CelUnsupported as exc:
                raise invalid('CustomResourceDefinition', (crd.get('metadata') or {}).get('name'), CRD_RESOURCE.group, [
                    ('FieldValueInvalid', 'spec.versions[%d].schema.openAPIV3Schema' % index,
                     'the lab emulator cannot evaluate this CEL rule: %s' % exc)])

    def _validate_custom(self, res: Any, obj: Dict[str, Any], old: Optional[Dict[str, Any]]) -> None:
        key = (res.group, res.version, res.plural)
        schema = self._schemas.get(key)
        if schema is None:
            return
        name = obj.get('metadata', {}).get('name')
        body = {k: v for k, v in obj.items() if k not in ('apiVersion', 'kind', 'metadata')}
        errors = sorted(jsonschema.Draft7Validator(schema).iter_errors(body), key=lambda e: list(e.path))
        if errors:
            raise invalid(self._kind(res), name, res.group, [
                ('FieldValueInvalid', '.'.join(str(p) for p in e.path) or '<root>', e.message) for e in errors])
        rules = self._cel.get(key)
        causes = rules.causes(obj, old) if rules is not None else []
        if causes:
            raise invalid(self._kind(res), name, res.group, [
                ('FieldValueInvalid', field, 'Invalid value: "%s": %s' % (kube_cel.type_name(value), message))
                for field, message, value in causes])

    # --- request handling ------------------------------------------------------------------
    def _current(self, request: kmock.Request) -> Optional[Dict[str, Any]]:
        return self._lookup((request.resource, request.namespace, request.name))

    def _generated_name(self, request: kmock.Request, prefix: str, namespace: Optional[str]) -> str:
        """A name from `generateName` as the API server makes one: a free one within NAME_ATTEMPTS, else the last
        (its create then answers 409 AlreadyExists, as there)."""
        name = ''
        for _attempt in range(NAME_ATTEMPTS):
            name = prefix + ''.join(self.name_rng.choice(NAME_ALPHABET) for _i in range(NAME_SUFFIX))
            key = (request.resource, namespace, name)
            if key not in self._objects or self._objects[key].deleted:
                break
        return name

    def _lookup(self, key: Key) -> Optional[Dict[str, Any]]:
        if key in self._objects and not self._objects[key].deleted:
            return copy.deepcopy(dict(self._objects[key].raw))
        return None

    def _is_status(self, request: kmock.Request) -> bool:
        return getattr(request, 'subresource', None) == 'status' or str(request.url.path).endswith('/status')

    async def __call__(self, raw_request: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        """kubectl's typed clients write protobuf (lab/kube/protobuf.py); kmock reads JSON (and fails on a body
        that is not UTF-8): such a body is decoded here, before kmock parses the request, into the JSON the same
        command would send; a kind without a schema is answered 415, a broken body 400."""
        if kube_protobuf.is_protobuf(raw_request.headers.get('Content-Type', '')):
            try:
                decoded = kube_protobuf.decode(await raw_request.read())
            except kube_protobuf.ProtobufError as exc:
                status, reason = (415, 'UnsupportedMediaType') if exc.unsupported else (400, 'BadRequest')
                return aiohttp.web.json_response({'kind': 'Status', 'apiVersion': 'v1', 'metadata': {},
                                                  'status': 'Failure', 'message': str(exc), 'reason': reason,
                                                  'code': status}, status=status)
            # the body kmock reads (aiohttp caches it here; a request cannot be cloned once read)
            raw_request._read_bytes = json.dumps(decoded).encode('utf-8')  # pylint: disable=protected-access
        if raw_request.query.get('watch', '').lower() in ('1', 't', 'true'):
            _json_stream(raw_request)
        return await super().__call__(raw_request)

    async def _handle(self, request: kmock.Request):
        if self.audit is not None:
            self.audit.append((request.headers.get('User-Agent', ''), str(request.method).upper().rsplit('.', maxsplit=1)[-1],
                               request.url.path, dict(request.params)))
        self._serving.add(id(request))
        self._forget_served_requests()
        try:
            return await self._handle_request(request)
        finally:
            self._serving.discard(id(request))

    def _forget_served_requests(self) -> None:
        """Keep kmock's request log short.

        kmock 0.8 appends every request to a log and finds the reaction for a new one by scanning, for each
        reaction, the whole log for that request (`request in payload._source`): each request costs time in
        proportion to the log, so a log of even a few hundred requests makes every request slow (a 100-node
        maintenance test went from 60 s to a timeout). A request only has to be in the log until kmock has
        matched it, i.e. while it is being served; `request_log_limit` keeps that many finished ones besides
        (for a test that wants to look), 0 by default. Trimmed on every request: with up to 64 finished ones
        left in, a Machine create or status patch took 6.8 ms (the machines benchmark's API server was busy
        matching most of the time), with none 1.2 ms."""
        log = self._requests
        keep = self.request_log_limit or 0
        if len(log) > len(self._serving) + keep:
            finished = [r for r in log if id(r) not in self._serving]
            dropped = {id(r) for r in finished[:len(finished) - keep]}
            log[:] = [r for r in log if id(r) not in dropped]

    async def _handle_request(self, request: kmock.Request):
        path = str(request.url.path)
        if path in HEALTH_PATHS and request.method == enums.method.GET:
            # an API server's health endpoints answer plain `ok` (upgrade gates read /readyz)
            return aiohttp.web.Response(text='ok', content_type='text/plain')
        if path == '/openapi/v2':  # discovery.py: the empty document kubectl validates against
            body, content_type = openapi_v2(request.headers.get('Accept', ''))
            return aiohttp.web.Response(body=body, headers={'Content-Type': content_type})
        if is_token_review(request):
            return await token_review(self, request)
        try:
            if _is_eviction(request):
                async with self._write_lock:
                    return await self._evict(request)
            if request.resource is not None and request.subresource == 'scale' and request.name is not None:
                if request.method == enums.method.GET:
                    return await self._scale(request)
                async with self._write_lock:
                    return await self._scale(request)
            if request.resource is not None and request.action in (enums.action.LIST, enums.action.WATCH):
                self._selectors(request)  # 400 before anything is listed or streamed
        except RequestRefused as exc:
            return await self._render_error(k8s.KubernetesError(status=exc.status, reason=exc.reason,
                                                                message=exc.message, details=exc.details))
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
            unchanged = self._prepare(request)
            if dry_run:
                return self._dry_run(request, current)
        except RequestRefused as exc:
            return await self._render_error(k8s.KubernetesError(status=exc.status, reason=exc.reason,
                                                                message=exc.message, details=exc.details))
        except k8s.KubernetesError as exc:
            return await self._render_error(exc)
        if unchanged is not None:  # as the API server: a write that changes nothing is not stored or announced
            return aiohttp.web.json_response(unchanged)
        resp = await super()._handle(request)
        if request.action in (enums.action.LIST, enums.action.FETCH) and resp.status == 200 and \
                kube_tables.wants_table(request.headers.get('Accept', '')):
            return self._as_table(request, resp)
        if request.action == enums.action.CREATE and resp.status == 200 and not resp.prepared:
            resp.set_status(201)
            if request.resource == CRD_RESOURCE and isinstance(request.data, dict):
                self.register_crd(request.data)
        if request.action in (enums.action.CREATE, enums.action.UPDATE) and resp.status < 300:
            md = (request.data.get('metadata') or {}) if isinstance(request.data, dict) else {}
            key = (request.resource, request.namespace or md.get('namespace'), request.name or md.get('name'))
            self._after_write(key)
        return resp

    def _as_table(self, request: kmock.Request, resp: Any) -> aiohttp.web.Response:
        """The answer as the meta.k8s.io/v1 Table kubectl asked for (lab/kube/tables.py)."""
        try:
            body = json.loads(resp.body)
        except (TypeError, ValueError):
            return resp
        answer = kube_tables.table(body, self._table_columns(request), time.time(),
                                   request.params.get('includeObject') or 'Metadata')
        return aiohttp.web.json_response(answer)

    def _table_columns(self, request: kmock.Request) -> List[Any]:
        """A CRD's printer columns, the API server's columns of a built-in kind, or NAME and AGE."""
        res = request.resource
        key = (res.group or '', res.version or '', res.plural or '')
        if key in self._printer_columns:
            return kube_tables.crd_columns(self._printer_columns[key])
        return kube_tables.BUILTIN.get((res.group or '', res.plural or '')) or kube_tables.default_columns()

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
            raise _not_found(request)
        if request.action == enums.action.DELETE:
            return aiohttp.web.json_response(current)
        data = request.data
        if isinstance(data, list):  # a JSON patch, rewritten by _prepare to one whole-object replace
            after = copy.deepcopy(data[0]['value'])
        else:
            after = merge(current, data or {})
        # Nothing was written: the object keeps its resourceVersion.
        after.setdefault('metadata', {})['resourceVersion'] = current['metadata'].get('resourceVersion')
        return aiohttp.web.json_response(after)

    def _prepare(self, request: kmock.Request) -> Optional[Dict[str, Any]]:
        """Validate and complete the request body before kmock stores it. Returns the stored object when an
        update would change nothing but its resourceVersion (then nothing is written)."""
        data = request.data
        action = request.action
        if request.method == enums.method.PUT and request.name is not None and isinstance(data, dict):
            current = self._current(request)
            if current is None:
                raise _not_found(request)
            self._check_rv(data, current)
            # kmock has no PUT: express the replacement as a merge patch that removes what is gone.
            replacement = self._complete_update(request, current, data)
            self._validate(request, replacement, current)
            patch = replace_patch(current, replacement)
            object.__setattr__(request, 'data', patch)  # attrs frozen (slotted) instance
            object.__setattr__(request, 'action', enums.action.UPDATE)
            object.__setattr__(request, 'method', enums.method.PATCH)
            return _unchanged(current, replacement)
        if action == enums.action.CREATE and isinstance(data, dict):
            md = data.setdefault('metadata', {})
            if not md.get('name') and md.get('generateName'):
                md['name'] = self._generated_name(request, md['generateName'], md.get('namespace') or request.namespace)
            md.setdefault('uid', str(uuid.uuid4()))
            md.setdefault('creationTimestamp', now())
            md['resourceVersion'] = str(next(_RV))
            md['generation'] = 1
            if request.namespace and not md.get('namespace'):
                md['namespace'] = request.namespace
            if request.namespace and md.get('namespace') != request.namespace:
                raise bad_request('the namespace of the provided object does not match the namespace sent on the '
                                  'request')
            default_replicas(request.resource.group, request.resource.plural, data)
            fold_string_data(request.resource.group, request.resource.plural, data)
            self._validate(request, data)
        elif action == enums.action.UPDATE and request.name is not None:
            current = self._current(request)
            if current is None:
                return None  # kmock answers 404
            if isinstance(data, list):
                try:
                    after = jsonpatch.apply_patch(current, data, in_place=False)
                except jsonpatch.JsonPatchTestFailed as exc:
                    raise _invalid('the JSON patch test failed: %s' % exc)
                except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as exc:
                    raise _invalid('the JSON patch is invalid: %s' % exc)
                after = self._complete_update(request, current, after)
                self._validate(request, after, current)
                data[:] = [{'op': 'replace', 'path': '', 'value': after}]
                return _unchanged(current, after)
            if isinstance(data, dict):
                self._check_rv(data, current)
                merged = copy.deepcopy(data)
                merged.setdefault('metadata', {})
                scoped = self._scope(request, current, merged)
                after = jsonpatch.apply_patch(current, [], in_place=False)
                strategic = STRATEGIC_MERGE_PATCH in request.headers.get('Content-Type', '')
                after = strategic_merge(after, scoped) if strategic else merge(after, scoped)
                after = self._complete_update(request, current, after)
                self._validate(request, after, current)
                data.clear()
                data.update(replace_patch(current, after))
                return _unchanged(current, after)
        return None

    def _scope(self, request: kmock.Request, current: Dict[str, Any], patch: Dict[str, Any]) -> Dict[str, Any]:
        """The status subresource changes only status (every kind); the object leaves status alone when a CRD
        declares the status subresource (built-in kinds stay lenient: tests set pod and node status directly)."""
        res = request.resource
        key = (res.group, res.version, res.plural)
        if self._is_status(request):
            return {'status': patch.get('status')} if 'status' in patch else {}
        if key in self._status_sub:
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
        default_replicas(request.resource.group, request.resource.plural, after)
        fold_string_data(request.resource.group, request.resource.plural, after)
        generation = int(cur_md.get('generation') or 1)
        if after.get('spec') != current.get('spec'):
            generation += 1
        md['generation'] = generation
        return after

    async def _store(self, key: Key, current: Dict[str, Any], after: Dict[str, Any]) -> Dict[str, Any]:
        """Write `after` over `current` (both whole objects) as kmock's UPDATE does, and tell the watchers."""
        async with self._lock:
            obj = self._objects[key]
            obj.patch(replace_patch(current, after))
            await self._buses[key[0]].put({'type': 'MODIFIED', 'object': obj.raw})
            self._trim(key)
            return copy.deepcopy(dict(obj.raw))

    def _trim(self, key: Key) -> None:
        limit = self.history_limit
        if limit is not None and limit > 0 and key in self._objects:
            history = self._objects[key].history
            if len(history) > limit:
                del history[:len(history) - limit]

    def _after_write(self, key: Key) -> None:
        self._trim(key)
        res = key[0]
        if (res.group, res.plural) in MOVED_KINDS and self.status_delay is not None:
            if self.pod_runtime and res.plural == 'statefulsets' and runs_pods(self._lookup(key) or {}):
                return
            self._schedule_status(key, self.status_delay)

    # --- scale subresource and status mover --------------------------------------------------
    def _scale_paths(self, res: Any) -> Optional[ScalePaths]:
        if (res.group, res.plural) in BUILTIN_SCALED and res.version == 'v1':
            return BUILTIN_SCALE
        return self._scale_sub.get((res.group, res.version, res.plural))

    async def _scale(self, request: kmock.Request) -> aiohttp.web.Response:
        """GET / PATCH / PUT .../<name>/scale: an autoscaling/v1 Scale in and out (see kube_workloads.py)."""
        res = request.resource
        paths = self._scale_paths(res)
        if paths is None:
            raise k8s.KubernetesError(status=404, reason='NotFound', message='the server could not find the '
                                      'requested resource', details={'kind': res.plural})
        key = (res, request.namespace, request.name)
        current = self._lookup(key)
        if current is None:
            raise k8s.KubernetesError(status=404, reason='NotFound', details={'name': request.name, 'kind': res.plural},
                                      message='%s "%s" not found' % (res.plural, request.name))
        scale = scale_of(current, paths)
        if request.method == enums.method.GET:
            return aiohttp.web.json_response(scale)
        body = request.data
        if request.method == enums.method.PUT:
            if not isinstance(body, dict):
                raise bad_request('the body of a scale update must be an autoscaling/v1 Scale object')
            self._check_rv(body, current)
            wanted = body
        elif isinstance(body, list):
            try:
                wanted = jsonpatch.apply_patch(scale, body, in_place=False)
            except jsonpatch.JsonPatchTestFailed as exc:
                raise _invalid('the JSON patch test failed: %s' % exc)
            except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as exc:
                raise _invalid('the JSON patch is invalid: %s' % exc)
        elif isinstance(body, dict):
            self._check_rv(body, current)
            wanted = merge(scale, body)
        else:
            raise bad_request('the body of a scale patch must be a JSON object or a JSON patch')
        replicas = (wanted.get('spec') or {}).get('replicas', 0)
        causes = replicas_causes(replicas, 'spec.replicas')
        if causes:
            raise invalid('Scale', request.name, 'autoscaling', causes)
        after = with_replicas(current, paths, int(replicas))
        self._validate_custom(res, after, current)   # the API server validates the object a scale write makes
        if request.params.get('dryRun') == 'All':
            return aiohttp.web.json_response(scale_of(after, paths))
        if after != current:
            stored = await self._store(key, current, self._complete_update(request, current, after))
            self._after_write(key)
            return aiohttp.web.json_response(scale_of(stored, paths))
        return aiohttp.web.json_response(scale)

    def _schedule_status(self, key: Key, delay: float) -> None:
        loop = asyncio.get_running_loop()
        self._mover_due[key] = loop.time() + delay
        if key not in self._mover_timers:
            self._mover_timers[key] = loop.call_later(delay, lambda: asyncio.ensure_future(self._move_status(key)))

    async def _move_status(self, key: Key) -> None:
        """The workload controllers' status write, `status_delay` after the last write to the object."""
        self._mover_timers.pop(key, None)
        remaining = self._mover_due.get(key, 0) - asyncio.get_running_loop().time()
        if remaining > 0.001:  # written again since: wait for the full delay after the last write
            self._schedule_status(key, remaining)
            return
        self._mover_due.pop(key, None)
        async with self._write_lock:
            current = self._lookup(key)
            if current is None:
                return
            status = moved_status(key[0].plural, current, now())
            if status is None:
                return
            after = dict(current, status=status)
            after['metadata'] = dict(current['metadata'], resourceVersion=str(next(_RV)))
            await self._store(key, current, after)

    def stop_status_mover(self) -> None:
        for handle in self._mover_timers.values():
            handle.cancel()
        self._mover_timers.clear()

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
        try:
            refusal = kube_eviction.refusal(pod, self._live, self._lookup_parts)
        except kube_eviction.SeveralBudgets:
            raise k8s.KubernetesError(status=500, reason='InternalError', details={'name': request.name, 'kind': 'pods'},
                                      message='This pod has more than one PodDisruptionBudget, which the eviction '
                                              'subresource does not support.')
        if refusal:
            raise k8s.KubernetesError(status=429, reason='TooManyRequests',
                                      message="Cannot evict pod as it would violate the pod's disruption budget.",
                                      details={'causes': [{'reason': 'DisruptionBudget', 'message': refusal}]})
        if request.params.get('dryRun') != 'All':
            await self._delete_object(key)
        return aiohttp.web.json_response({'kind': 'Status', 'apiVersion': 'v1', 'metadata': {},
                                          'status': 'Success', 'code': 201}, status=201)

    def _live(self, resource: Tuple[str, str, str], namespace: Optional[str]) -> List[Dict[str, Any]]:
        return [dict(obj.raw) for obj in objects_for(self._objects, kmock.resource(*resource), namespace, None, True)
                if not obj.deleted]

    def _lookup_parts(self, resource: Tuple[str, str, str], namespace: Optional[str],
                      name: str) -> Optional[Dict[str, Any]]:
        return self._lookup((kmock.resource(*resource), namespace, name))

    async def _delete_object(self, key: Key) -> None:
        """kmock's DELETE: deletionTimestamp first while finalizers remain, else gone (and announced to watchers)."""
        async with self._lock:
            obj = self._objects[key]
            meta = obj.get('metadata', {})
            if meta.get('deletionTimestamp'):
                return
            if meta.get('finalizers'):
                obj.patch({'metadata': {'deletionTimestamp': now(), 'resourceVersion': str(next(_RV))}})
                await self._buses[key[0]].put({'type': 'MODIFIED', 'object': obj.raw})
            else:
                obj.delete()
                await self._buses[key[0]].put({'type': 'DELETED', 'object': obj.last.raw})

    # --- selectors -------------------------------------------------------------------------
    @staticmethod
    def _selectors(request: kmock.Request):
        """The request's label and field selectors, parsed; RequestRefused 400 when one does not parse."""
        try:
            return (parse_label_selector(request.params.get('labelSelector')),
                    parse_field_selector(request.params.get('fieldSelector'), request.resource.plural))
        except SelectorError as exc:
            raise bad_request(str(exc))

    # --- lists and watches by resource (kube_index.py) -------------------------------------------
    def _KubernetesEmulator__get_objs(self, request: kmock.Request, strict: bool) -> List[Any]:  # pylint: disable=invalid-name
        """kmock's private object picker for lists and watches (name-mangled in KubernetesEmulator), by the index."""
        if not self.list_index:
            return kmock.KubernetesEmulator._KubernetesEmulator__get_objs(self, request, strict)  # pylint: disable=no-member
        return objects_for(self._objects, request.resource, request.namespace, request.name, strict)

    async def _serve_version(self, request: kmock.Request):
        """/api/v1 and /apis/<group>/<version> as the API server lists them (discovery.py)."""
        return fixed_resource_list(await super()._serve_version(request))

    def _get_resources(self) -> List[Any]:
        if not self.list_index:
            return super()._get_resources()
        return list(set(super(kmock.KubernetesEmulator, self)._get_resources()) | set(self._objects.resources()))

    # --- one object by its key ---------------------------------------------------------------
    # kmock finds the object of a GET/PATCH/DELETE by checking every stored object against the request
    # (k8s.py __get_objs): 20 ms per request at 1,000 objects, the lab's 500 nodes and their Leases. The key
    # is known, so these look it up directly (the answers are the same).
    def _keyed(self, request: kmock.Request, namespace: Optional[str], name: Optional[str]) -> Any:
        key = (request.resource, namespace, name)
        return self._objects[key] if key in self._objects else None

    async def _serve_fetch(self, request: kmock.Request):
        obj = self._keyed(request, request.namespace, request.name)
        if obj is None or obj.deleted:
            raise _not_found(request)
        return obj.raw

    async def _serve_create(self, request: kmock.Request):
        md = request.data.get('metadata', {}) if isinstance(request.data, dict) else {}
        obj = self._keyed(request, request.namespace or md.get('namespace'), request.name or md.get('name'))
        if obj is None:  # not stored by kmock's _handle: cannot happen, as in kmock
            raise _not_found(request)
        return obj.raw

    async def _serve_update(self, request: kmock.Request):
        obj = self._keyed(request, request.namespace, request.name)
        if obj is None:
            raise _not_found(request)
        return obj.last.raw  # just soft-deleted (finalizers removed): the last state, as kmock answers

    async def _serve_delete(self, request: kmock.Request):
        obj = self._keyed(request, request.namespace, request.name)
        if obj is None:
            raise _not_found(request)
        return obj.last.raw

    async def _serve_list(self, request: kmock.Request):
        result = await super()._serve_list(request)
        result['metadata'] = {'resourceVersion': str(next(_RV))}
        res = request.resource
        info = self.resources[res] if res in self.resources else None
        if info is not None and info.kind:
            result = {'apiVersion': '%s/%s' % (res.group, res.version) if res.group else res.version,
                      'kind': info.kind + 'List', **result}
        labels, fields = self._selectors(request)
        result['items'] = [o for o in result['items']
                           if labels.matches((o.get('metadata') or {}).get('labels')) and fields.matches(o)]
        return result

    async def _serve_watch(self, request: kmock.Request):
        """kmock's watch, filtered by the selectors (_watch_in_view); each event's object a one-row Table when the
        client asked for Tables (`kubectl get -w`), as the API server answers: the column definitions in the first
        event only."""
        if not kube_tables.wants_table(request.headers.get('Accept', '')):
            async for item in self._watch_in_view(request):
                yield item
            return
        columns, first = self._table_columns(request), True
        include = request.params.get('includeObject') or 'Metadata'
        async for item in self._watch_in_view(request):
            obj = item.get('object') if isinstance(item, dict) else None
            if isinstance(obj, dict) and obj.get('kind') != 'Status':
                table = kube_tables.table(obj, columns, time.time(), include)
                if not first:
                    table['columnDefinitions'] = []
                first = False
                item = dict(item, object=table)
            yield item

    async def _watch_in_view(self, request: kmock.Request):
        """kmock's watch, filtered by the selectors: an object that starts (stops) matching is ADDED (DELETED).

        kmock starts every watch with the objects there as ADDED. That is the API server's answer to a watch without
        a resourceVersion (or "0"); a watch from a list's resourceVersion (client-go, kopf and `kubectl get -w`
        list first, then watch from there) gets the changes after it only: an object whose resourceVersion is not
        newer is not sent again, but it is in the client's view (a later change is MODIFIED, not ADDED). Not as the
        API server: an object changed between the list and the watch comes as ADDED (kmock sends its state, not its
        history), and one deleted in between is not reported."""
        labels, fields = self._selectors(request)
        since = _since(request.params.get('resourceVersion'))
        in_view: set = set()
        async for item in super()._serve_watch(request):
            obj = item.get('object') if isinstance(item, dict) else None
            if not isinstance(obj, dict):
                yield item
                continue
            md = obj.get('metadata') or {}
            key = (md.get('namespace'), md.get('name'))
            matches = labels.matches(md.get('labels')) and fields.matches(obj)
            seen = key in in_view
            version = _since(md.get('resourceVersion'))
            if since is not None and item.get('type') == 'ADDED' and version is not None and version <= since:
                if matches:
                    in_view.add(key)
                continue
            if item.get('type') == 'DELETED':
                in_view.discard(key)
                if seen:
                    yield item
            elif matches:
                in_view.add(key)
                yield item if seen or item.get('type') != 'MODIFIED' else {'type': 'ADDED', 'object': obj}
            elif seen:
                in_view.discard(key)
                yield {'type': 'DELETED', 'object': obj}


def _since(resource_version: Any) -> Optional[int]:
    """A resourceVersion as the emulator's counter (one sequence for every object), or None for "" and "0" (any
    version: the watch starts with the objects there) and for what is not one of ours."""
    try:
        value = int(resource_version)
    except (TypeError, ValueError):
        return None
    return value if value > 0 else None


def _json_stream(raw_request: aiohttp.web.BaseRequest) -> None:
    """A watch streams JSON events: kmock's stream goes out as aiohttp's default application/octet-stream, for
    which client-go has no stream decoder (`kubectl get -w` and the wait of `kubectl delete` failed with "no
    stream serializers registered for application/octet-stream"). The content type is set as the response is
    prepared (aiohttp's per-request prepare hook; kmock prepares the stream itself)."""
    original = raw_request._prepare_hook  # pylint: disable=protected-access

    async def hook(response: aiohttp.web.StreamResponse) -> None:
        if response.content_type == 'application/octet-stream':
            response.content_type = 'application/json'
        await original(response)
    raw_request._prepare_hook = hook  # pylint: disable=protected-access


def _not_found(request: kmock.Request) -> k8s.KubernetesError:
    """404 as the API server words it (`deployments.apps "x" not found`, reason NotFound): kubectl prints it and
    clients match on the reason."""
    res = request.resource
    plural = '%s.%s' % (res.plural, res.group) if res is not None and res.group else getattr(res, 'plural', '')
    return k8s.KubernetesError(status=404, reason='NotFound', message='%s "%s" not found' % (plural, request.name),
                               details={'name': request.name, 'group': getattr(res, 'group', ''),
                                        'kind': getattr(res, 'plural', '')})


def _unchanged(current: Dict[str, Any], after: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """`current` when `after` differs from it only in resourceVersion, else None."""
    def strip(obj: Dict[str, Any]) -> Dict[str, Any]:
        return dict(obj, metadata={k: v for k, v in (obj.get('metadata') or {}).items() if k != 'resourceVersion'})
    return current if strip(current) == strip(after) else None


def _is_eviction(request: kmock.Request) -> bool:
    res = request.resource
    return (res is not None and res.group == '' and res.plural == 'pods' and request.name is not None
            and request.subresource == 'eviction' and request.method == enums.method.POST)
