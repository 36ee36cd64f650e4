"""RBAC as the API server evaluates it, for tests that compare what a loop calls with what it is granted (issue 19
§5: least privilege per loop). The calls come from the emulator's audit log (lab/kube/emulator.py `audit`: the
User-Agent says which process and loops made them); the grants from the manifests in controller/deploy.

`least_privilege(calls, grants, unused_ok)` returns (denied, unused): calls no rule allows, and rule entries
(group, resource, verb) no call used and `unused_ok` does not excuse with a reason (a rule for a path the test's
scenario does not reach, named with the test that reaches it) - both must be empty."""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Set, Tuple

from lab.kube.api import load_yaml_documents, repo_path

VERBS = {'POST': 'create', 'PUT': 'update', 'PATCH': 'patch'}


@dataclasses.dataclass(frozen=True)
class Call:
    verb: str
    group: str
    resource: str            # with its subresource: pods/eviction, machines/status
    namespace: Optional[str]
    name: Optional[str]

    def __str__(self) -> str:
        where = '%s/' % self.namespace if self.namespace else ''
        return '%s %s%s %s%s' % (self.verb, self.group + '/' if self.group else '', self.resource, where, self.name or '')


def parse_call(method: str, path: str, query: Mapping[str, str]) -> Optional[Call]:
    """A request as RBAC sees it; None for non-resource URLs (discovery: /api, /apis, /version)."""
    parts = [p for p in path.split('/') if p]
    if parts[:1] == ['api'] and len(parts) >= 3:
        group, rest = '', parts[2:]
    elif parts[:1] == ['apis'] and len(parts) >= 4:
        group, rest = parts[1], parts[3:]
    else:
        return None
    namespace = None
    if rest[:1] == ['namespaces'] and len(rest) >= 3:
        namespace, rest = rest[1], rest[2:]
    resource, name, sub = rest[0], (rest[1] if len(rest) > 1 else None), (rest[2] if len(rest) > 2 else None)
    if name is None and resource == 'namespaces' and namespace is not None:
        resource, name = 'namespaces', namespace   # GET /api/v1/namespaces/x
        namespace = None
    if method == 'GET':
        verb = 'watch' if query.get('watch') in ('true', '1') else ('get' if name else 'list')
    elif method == 'DELETE':
        verb = 'delete' if name else 'deletecollection'
    else:
        verb = VERBS.get(method, method.lower())
    return Call(verb, group, resource + ('/' + sub if sub else ''), namespace, name)


def calls_of(audit: Iterable[Tuple[str, str, str, Mapping[str, str]]], agents: Sequence[str]) -> Set[Call]:
    """The resource calls whose User-Agent starts with one of `agents`."""
    return {call for agent, method, path, query in audit if agent.startswith(tuple(agents))
            for call in [parse_call(method, path, query)] if call is not None}


@dataclasses.dataclass(frozen=True)
class Grant:
    group: str
    resource: str
    verb: str
    namespace: Optional[str]              # a Role's namespace; None: cluster-wide (ClusterRole + ClusterRoleBinding)
    names: Tuple[str, ...] = ()           # resourceNames

    def allows(self, call: Call) -> bool:
        if (self.group, self.resource) != (call.group, call.resource) or self.verb not in (call.verb, '*'):
            return False
        if self.namespace is not None and call.namespace != self.namespace:
            return False
        return not self.names or (call.name in self.names)

    def key(self) -> Tuple[str, str, str]:
        return (self.group, self.resource, self.verb)


def grants_from(files: Sequence[str], roles: Sequence[str], rename: Optional[Mapping[str, str]] = None) -> List[Grant]:
    """Every rule of the named ClusterRoles/Roles in `files` (paths under the repository), one Grant per group x
    resource x verb (a v1 List is expanded). `rename` maps a namespace or resource name of the manifests to the
    one a test uses (the deploy role sets them from its variables)."""
    rename = dict(rename or {})
    grants: List[Grant] = []
    found = set()
    for path in files:
        for doc in load_yaml_documents(repo_path(*path.split('/'))):
            for obj in (doc.get('items') or [] if doc.get('kind') == 'List' else [doc]):
                if obj.get('kind') not in ('ClusterRole', 'Role') or obj['metadata']['name'] not in roles:
                    continue
                found.add(obj['metadata']['name'])
                namespace = rename.get(obj['metadata'].get('namespace'), obj['metadata'].get('namespace')) \
                    if obj['kind'] == 'Role' else None
                for rule in obj.get('rules') or []:
                    for group in rule.get('apiGroups') or ['']:
                        for resource in rule['resources']:
                            for verb in rule['verbs']:
                                grants.append(Grant(group, resource, verb, namespace,
                                                    tuple(rename.get(n, n) for n in rule.get('resourceNames') or ())))
    missing = set(roles) - found
    assert not missing, 'roles not found in %s: %s' % (files, sorted(missing))
    return grants


def least_privilege(calls: Iterable[Call], grants: Sequence[Grant],
                    unused_ok: Mapping[Tuple[str, str, str], str]) -> Tuple[List[str], List[str]]:
    """(calls no grant allows, grants no call used and not excused); also a stale excuse (its grant was used, or
    it names no grant) counts as unused, so the list of excuses stays true."""
    calls = sorted(calls, key=str)
    denied = [str(c) for c in calls if not any(g.allows(c) for g in grants)]
    used = {g.key() for g in grants for c in calls if g.allows(c)}
    keys = {g.key() for g in grants}
    unused = ['%s/%s %s' % k for k in sorted(keys - used) if k not in unused_ok]
    unused += ['excused but used: %s/%s %s' % k for k in sorted(set(unused_ok) & used)]
    unused += ['excused but not granted: %s/%s %s' % k for k in sorted(set(unused_ok) - keys)]
    return denied, unused


def audited(server: Any) -> List[Tuple[str, str, str, Dict[str, str]]]:
    """Turn on the emulator's audit log (KubeServer); returns the list it fills."""
    log: List[Tuple[str, str, str, Dict[str, str]]] = []
    server.call(lambda: setattr(server.emulator, 'audit', log))
    return log
