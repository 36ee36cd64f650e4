"""Server-side printing: `meta.k8s.io/v1` Tables for `kubectl get`.

kubectl asks every GET and LIST for a Table (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io, ...`) and
prints the columns the API server chose. An emulator that answers plain objects leaves kubectl its fallback of
NAME and AGE only: `kubectl get etcd` without druid's READY, QUORATE, ALL MEMBERS READY, BACKUP READY columns,
`kubectl get pods` without READY and STATUS, `kubectl get events` without a message. Here:

* custom resources: the CRD's `additionalPrinterColumns` (JSONPath over the object, as the apiextensions server
  evaluates them; a CRD without any gets Age), `type: date` cells as the server writes them (a relative age);
* built-in kinds a user of this lab lists (pods, StatefulSets, Deployments, Services, Endpoints, PVCs, Leases,
  Nodes, Namespaces, Secrets, ConfigMaps, Events, PodDisruptionBudgets, ServiceAccounts): the columns and
  cells of the API server's printers (k8s.io/kubernetes/pkg/printers/internalversion), the `-o wide` ones with
  priority 1;
* anything else: Name and Created At, the API server's default table.

Rows carry the object as `PartialObjectMetadata` (kubectl's default, enough for `--show-labels` and `-L`), the
whole object with `includeObject=Object`, none with `includeObject=None`. Watches are not converted (kubectl falls
back to its own printing for their events). JSONPath: the subset printer columns use (`.a.b`, `[n]`, `[*]`,
`[?(@.k=="v")]`, `['key']`).
"""

from __future__ import annotations

import datetime
import json
import re
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

Cell = Any
Column = Tuple[str, str, int, Callable[[Mapping[str, Any], float], Cell]]   # name, type, priority, cell of an object


def wants_table(accept: str) -> bool:
    return 'as=Table' in (accept or '')


# --- values ------------------------------------------------------------------------------------------------------
def _seconds(stamp: Any) -> Optional[float]:
    if not isinstance(stamp, str) or not stamp:
        return None
    try:
        return datetime.datetime.strptime(stamp[:19], '%Y-%m-%dT%H:%M:%S').replace(
            tzinfo=datetime.timezone.utc).timestamp()
    except ValueError:
        return None


def human_duration(seconds: float) -> str:
    """k8s.io/apimachinery/pkg/util/duration.HumanDuration: what kubectl shows in AGE."""
    s = int(max(seconds, 0))
    if s < 120:
        return '%ds' % s
    m = s // 60
    if m < 10:
        return '%dm%ds' % (m, s % 60) if s % 60 else '%dm' % m
    if m < 180:
        return '%dm' % m
    h = m // 60
    if h < 8:
        return '%dh%dm' % (h, m % 60) if m % 60 else '%dh' % h
    if h < 48:
        return '%dh' % h
    if h < 24 * 8:
        return '%dd%dh' % (h // 24, h % 24) if h % 24 else '%dd' % (h // 24)
    if h < 24 * 365 * 2:
        return '%dd' % (h // 24)
    years, days = h // (24 * 365), (h // 24) % 365
    return '%dy%dd' % (years, days) if years < 8 else '%dy' % years


def age(stamp: Any, now: float) -> str:
    at = _seconds(stamp)
    return '<unknown>' if at is None else human_duration(now - at)


def _get(obj: Any, *path: Any, default: Any = None) -> Any:
    for key in path:
        if isinstance(obj, Mapping):
            obj = obj.get(key)
        elif isinstance(obj, list) and isinstance(key, int) and -len(obj) <= key < len(obj):
            obj = obj[key]
        else:
            return default
        if obj is None:
            return default
    return obj


# --- JSONPath (the subset printer columns use) ----------------------------------------------------------------------
_TOKEN = re.compile(r"""\.([A-Za-z0-9_\-]+)|\[\?\(@\.([A-Za-z0-9_.\-]+)\s*==\s*["']([^"']*)["']\)\]|\[(\*|-?\d+)\]|\[['"]([^'"]+)['"]\]""")


def jsonpath(obj: Any, path: str) -> List[Any]:
    """The values `path` selects in `obj` (a list: filters and `[*]` select several); [] when nothing matches."""
    text = path.strip()
    if text.startswith('{') and text.endswith('}'):
        text = text[1:-1]
    if text.startswith('$'):
        text = text[1:]
    nodes, pos = [obj], 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if not match:
            return []
        field, filter_key, filter_value, index, quoted = match.groups()
        pos = match.end()
        following: List[Any] = []
        for node in nodes:
            if field is not None or quoted is not None:
                if isinstance(node, Mapping) and (field or quoted) in node:
                    following.append(node[field or quoted])
            elif filter_key is not None:
                for item in node if isinstance(node, list) else []:
                    if str(_get(item, *filter_key.split('.'), default='\0')) == filter_value:
                        following.append(item)
            elif index == '*':
                following.extend(node if isinstance(node, list) else list(node.values()) if isinstance(node, Mapping)
                                 else [])
            elif isinstance(node, list) and -len(node) <= int(index) < len(node):
                following.append(node[int(index)])
        nodes = following
    return nodes


def _cell_of_results(values: Sequence[Any], kind: str, now: float) -> Cell:
    if not values:
        return None
    if kind == 'date':
        return age(values[0], now) if len(values) == 1 else None
    if len(values) == 1:
        value = values[0]
        return value if isinstance(value, (str, int, float, bool)) else _text(value)
    return ','.join(_text(v) for v in values)


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return 'true' if value else 'false'
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(',', ':'), sort_keys=True)
    return str(value)


def crd_columns(printer_columns: Optional[Sequence[Mapping[str, Any]]]) -> List[Column]:
    """The columns of a CRD version: its additionalPrinterColumns, else Age (the apiextensions default)."""
    wanted = list(printer_columns or ()) or [{'name': 'Age', 'type': 'date', 'jsonPath': '.metadata.creationTimestamp'}]
    out: List[Column] = [_name_column()]
    for col in wanted:
        kind, path = col.get('type') or 'string', col.get('jsonPath') or ''
        out.append((col.get('name') or path, kind, int(col.get('priority') or 0),
                    lambda obj, now, path=path, kind=kind: _cell_of_results(jsonpath(obj, path), kind, now)))
    return out


# --- the API server's printers for built-in kinds ------------------------------------------------------------------
def _name_column() -> Column:
    return ('Name', 'string', 0, lambda obj, now: _get(obj, 'metadata', 'name', default=''))


def _age_column() -> Column:
    return ('Age', 'string', 0, lambda obj, now: age(_get(obj, 'metadata', 'creationTimestamp'), now))


def _pod_ready(pod: Mapping[str, Any], now: float) -> str:
    statuses = _get(pod, 'status', 'containerStatuses', default=[]) or []
    total = len(_get(pod, 'spec', 'containers', default=[]) or []) or len(statuses)
    return '%d/%d' % (sum(1 for s in statuses if s.get('ready')), total)


def _pod_status(pod: Mapping[str, Any], now: float) -> str:
    # the API server sets phase Pending on create; the emulator leaves status to the pod runtime
    reason = _get(pod, 'status', 'reason') or _get(pod, 'status', 'phase') or 'Pending'
    for status in reversed(_get(pod, 'status', 'containerStatuses', default=[]) or []):
        waiting = _get(status, 'state', 'waiting', 'reason')
        terminated = _get(status, 'state', 'terminated')
        if waiting:
            reason = waiting
        elif terminated:
            reason = terminated.get('reason') or ('Signal:%s' % terminated['signal'] if terminated.get('signal')
                                                  else 'ExitCode:%s' % terminated.get('exitCode'))
    if _get(pod, 'metadata', 'deletionTimestamp'):
        reason = 'Terminating'
    return reason


def _pod_restarts(pod: Mapping[str, Any], now: float) -> str:
    statuses = _get(pod, 'status', 'containerStatuses', default=[]) or []
    count = sum(int(s.get('restartCount') or 0) for s in statuses)
    last = max((_seconds(_get(s, 'lastState', 'terminated', 'finishedAt')) or 0 for s in statuses), default=0)
    return '%d (%s ago)' % (count, human_duration(now - last)) if count and last else str(count)


def _ports(service: Mapping[str, Any], now: float) -> str:
    ports = _get(service, 'spec', 'ports', default=[]) or []
    return ','.join('%s/%s' % (p.get('port'), p.get('protocol') or 'TCP') for p in ports) or '<none>'


def _claim_status(claim: Mapping[str, Any], now: float) -> str:
    return 'Terminating' if _get(claim, 'metadata', 'deletionTimestamp') else \
        _get(claim, 'status', 'phase', default='Pending')


def _endpoints(endpoints: Mapping[str, Any], now: float) -> str:
    found = ['%s:%s' % (a.get('ip'), p.get('port')) for subset in _get(endpoints, 'subsets', default=[]) or []
             for a in subset.get('addresses') or [] for p in subset.get('ports') or [{}]]
    return (','.join(found[:3]) + (' + %d more...' % (len(found) - 3) if len(found) > 3 else '')) or '<none>'


def _node_status(node: Mapping[str, Any], now: float) -> str:
    ready = [c for c in _get(node, 'status', 'conditions', default=[]) or [] if c.get('type') == 'Ready']
    text = 'Ready' if ready and ready[0].get('status') == 'True' else 'NotReady' if ready else 'Unknown'
    return text + (',SchedulingDisabled' if _get(node, 'spec', 'unschedulable') else '')


def _node_roles(node: Mapping[str, Any], now: float) -> str:
    labels = _get(node, 'metadata', 'labels', default={}) or {}
    roles = sorted(k.split('/', 1)[1] for k in labels if k.startswith('node-role.kubernetes.io/') and '/' in k)
    return ','.join(r for r in roles if r) or '<none>'


def _event_object(event: Mapping[str, Any], now: float) -> str:
    ref = event.get('involvedObject') or event.get('regarding') or {}
    return '%s/%s' % ((ref.get('kind') or '').lower(), ref.get('name') or '')


def _event_last_seen(event: Mapping[str, Any], now: float) -> str:
    return age(event.get('lastTimestamp') or event.get('eventTime') or event.get('firstTimestamp')
               or _get(event, 'metadata', 'creationTimestamp'), now)


def _replicas(ready_key: str) -> Callable[[Mapping[str, Any], float], str]:
    return lambda obj, now: '%d/%d' % (int(_get(obj, 'status', ready_key, default=0) or 0),
                                       int(_get(obj, 'spec', 'replicas', default=0) or 0))


def _value(*path: Any, default: Any = '<none>') -> Callable[[Mapping[str, Any], float], Cell]:
    return lambda obj, now: _get(obj, *path, default=default)


def _count(*path: Any) -> Callable[[Mapping[str, Any], float], int]:
    return lambda obj, now: len(_get(obj, *path, default={}) or {})


def _joined(*path: Any) -> Callable[[Mapping[str, Any], float], str]:
    return lambda obj, now: ','.join(str(x) for x in (_get(obj, *path, default=[]) or [])) or '<none>'


def _images(obj: Mapping[str, Any], now: float) -> str:
    return ','.join(c.get('image') or '' for c in _get(obj, 'spec', 'template', 'spec', 'containers', default=[]) or [])


def _containers(obj: Mapping[str, Any], now: float) -> str:
    return ','.join(c.get('name') or '' for c in _get(obj, 'spec', 'template', 'spec', 'containers', default=[]) or [])


def _cols(*extra: Tuple[str, str, int, Callable[[Mapping[str, Any], float], Cell]], with_age: bool = True) -> List[Column]:
    out = [_name_column()] + [c for c in extra if c[2] == 0]
    if with_age:
        out.append(_age_column())
    return out + [c for c in extra if c[2] != 0]


BUILTIN: Dict[Tuple[str, str], List[Column]] = {
    ('', 'pods'): _cols(('Ready', 'string', 0, _pod_ready), ('Status', 'string', 0, _pod_status),
                        ('Restarts', 'string', 0, _pod_restarts), ('IP', 'string', 1, _value('status', 'podIP')),
                        ('Node', 'string', 1, _value('spec', 'nodeName')),
                        ('Nominated Node', 'string', 1, _value('status', 'nominatedNodeName')),
                        ('Readiness Gates', 'string', 1, lambda obj, now: '<none>')),
    ('apps', 'statefulsets'): _cols(('Ready', 'string', 0, _replicas('readyReplicas')),
                                    ('Containers', 'string', 1, _containers), ('Images', 'string', 1, _images)),
    ('apps', 'deployments'): _cols(('Ready', 'string', 0, _replicas('readyReplicas')),
                                   ('Up-to-date', 'integer', 0, _value('status', 'updatedReplicas', default=0)),
                                   ('Available', 'integer', 0, _value('status', 'availableReplicas', default=0)),
                                   ('Containers', 'string', 1, _containers), ('Images', 'string', 1, _images)),
    ('', 'services'): _cols(('Type', 'string', 0, _value('spec', 'type', default='ClusterIP')),
                            ('Cluster-IP', 'string', 0, _value('spec', 'clusterIP')),
                            ('External-IP', 'string', 0, _joined('spec', 'externalIPs')),
                            ('Port(s)', 'string', 0, _ports), ('Selector', 'string', 1, lambda obj, now: ','.join(
                                '%s=%s' % kv for kv in sorted((_get(obj, 'spec', 'selector', default={}) or {}).items()))
                                or '<none>')),
    ('', 'endpoints'): _cols(('Endpoints', 'string', 0, _endpoints)),
    ('', 'persistentvolumeclaims'): _cols(('Status', 'string', 0, _claim_status),
                                          ('Volume', 'string', 0, _value('spec', 'volumeName', default='')),
                                          ('Capacity', 'string', 0, _value('status', 'capacity', 'storage', default='')),
                                          ('Access Modes', 'string', 0, _joined('spec', 'accessModes')),
                                          ('StorageClass', 'string', 0, _value('spec', 'storageClassName'))),
    ('coordination.k8s.io', 'leases'): _cols(('Holder', 'string', 0, _value('spec', 'holderIdentity', default=''))),
    ('', 'nodes'): _cols(('Status', 'string', 0, _node_status), ('Roles', 'string', 0, _node_roles),
                         ('Version', 'string', 0, _value('status', 'nodeInfo', 'kubeletVersion', default='')),
                         ('Internal-IP', 'string', 1, lambda obj, now: next(
                             (a.get('address') for a in _get(obj, 'status', 'addresses', default=[]) or []
                              if a.get('type') == 'InternalIP'), '<none>'))),
    ('', 'namespaces'): _cols(('Status', 'string', 0, lambda obj, now: 'Terminating' if _get(
        obj, 'metadata', 'deletionTimestamp') else _get(obj, 'status', 'phase', default='Active'))),
    ('', 'secrets'): _cols(('Type', 'string', 0, _value('type', default='Opaque')), ('Data', 'integer', 0, _count('data'))),
    ('', 'configmaps'): _cols(('Data', 'integer', 0, lambda obj, now: len(obj.get('data') or {})
                               + len(obj.get('binaryData') or {}))),
    ('', 'serviceaccounts'): _cols(('Secrets', 'integer', 0, lambda obj, now: len(obj.get('secrets') or []))),
    ('policy', 'poddisruptionbudgets'): _cols(('Min Available', 'string', 0, _value('spec', 'minAvailable', default='N/A')),
                                              ('Max Unavailable', 'string', 0, _value('spec', 'maxUnavailable', default='N/A')),
                                              ('Allowed Disruptions', 'integer', 0,
                                               _value('status', 'disruptionsAllowed', default=0))),
    ('', 'events'): [('Last Seen', 'string', 0, _event_last_seen), ('Type', 'string', 0, _value('type', default='')),
                     ('Reason', 'string', 0, _value('reason', default='')), ('Object', 'string', 0, _event_object),
                     ('Message', 'string', 0, _value('message', default='')),
                     ('Name', 'string', 1, lambda obj, now: _get(obj, 'metadata', 'name', default=''))],
}


def default_columns() -> List[Column]:
    """The API server's default table for kinds without a printer: Name and Created At (the timestamp itself)."""
    return [_name_column(), ('Created At', 'date', 0, lambda obj, now: _get(obj, 'metadata', 'creationTimestamp'))]


def table(body: Mapping[str, Any], columns: Sequence[Column], now: float, include: str = 'Metadata') -> Dict[str, Any]:
    """A Table of a list answer (`items`) or of one object, with `columns`."""
    items = body.get('items') if isinstance(body.get('items'), list) else [body]
    rows = []
    for obj in items:
        row: Dict[str, Any] = {'cells': [col[3](obj, now) for col in columns]}
        if include == 'Object':
            row['object'] = obj
        elif include != 'None':
            row['object'] = {'kind': 'PartialObjectMetadata', 'apiVersion': 'meta.k8s.io/v1',
                             'metadata': obj.get('metadata') or {}}
        rows.append(row)
    meta = {k: v for k, v in (body.get('metadata') or {}).items()
            if k in ('resourceVersion', 'continue')} if 'items' in body else {}
    return {'kind': 'Table', 'apiVersion': 'meta.k8s.io/v1', 'metadata': meta,
            'columnDefinitions': [{'name': name, 'type': kind,
                                   'format': 'name' if name == 'Name' else '', 'description': name,
                                   'priority': priority} for name, kind, priority, _cell in columns],
            'rows': rows}
