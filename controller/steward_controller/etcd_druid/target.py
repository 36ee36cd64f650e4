# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The `etcd` loop's API side: read one Etcd's objects, apply the planner's action. Every write of the loop is here.

Only objects that are ours (components.is_ours: this Etcd's owner reference and druid's labels; pods: is_our_pod) are
ever patched or deleted. A same-named object that is not ours is a ComponentConflict: reported, never touched.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.druid import client_tls as ct
from ansible_collections.steward.cluster.plugins.module_utils.druid import components as c
from ansible_collections.steward.cluster.plugins.module_utils.druid import plan as p
from ansible_collections.steward.cluster.plugins.module_utils.druid import recovery as r
from ansible_collections.steward.cluster.plugins.module_utils.druid import scale_down as sd
from ansible_collections.steward.cluster.plugins.module_utils.druid.errors import DruidError
from ansible_collections.steward.cluster.plugins.module_utils.druid.spec import EtcdSpec
from ansible_collections.steward.cluster.plugins.module_utils.druid.status import Observed
from ansible_collections.steward.cluster.plugins.module_utils.kube.client import KubeClient, api_path
from ansible_collections.steward.cluster.plugins.module_utils.kube.errors import NotFound
from ansible_collections.steward.cluster.plugins.module_utils.kube.lease import format_micro
from ansible_collections.steward.cluster.plugins.module_utils.kube.selectors import label_selector_string

# Components read one by one (GET by name); Leases are listed once by label.
SINGLE = ('serviceaccount', 'role', 'rolebinding', 'configmap', 'peer-service', 'client-service', 'poddisruptionbudget')


class ComponentConflict(DruidError):
    """An object of a component's name exists and is not this Etcd's: nothing is written over it."""


class SourceNotSaved(DruidError):
    """A recovery's source member did not save its data to the store; the step is retried next pass."""


class SnapshotNotRequested(DruidError):
    """No member pod has an address to ask for the pre-update full snapshot; asked again next pass."""


def path_of(component: str, namespace: str, name: Optional[str] = None) -> str:
    api_version, _kind, plural = c.KINDS[component]
    return api_path(api_version, plural, namespace, name)


def ours_selector(spec: EtcdSpec) -> str:
    return label_selector_string({'matchLabels': {c.LABEL_MANAGED_BY: c.MANAGED_BY, c.LABEL_PART_OF: spec.name}})


def read(client: KubeClient, spec: EtcdSpec) -> Tuple[Observed, Dict[Tuple[str, str], Any]]:
    """(what the status and planner see, our existing components by (component, name)); foreign objects are left
    out (and a foreign one in a component's place is found again by `apply`, which refuses it)."""
    ns = spec.namespace
    existing: Dict[Tuple[str, str], Any] = {}
    sts = client.get_or_none(path_of('statefulset', ns, c.statefulset_name(spec)))
    sts = sts if c.is_ours(spec, sts) else None
    existing[('statefulset', spec.name)] = sts
    names = {'serviceaccount': spec.name, 'role': c.role_name(spec), 'rolebinding': c.role_name(spec),
             'configmap': c.configmap_name(spec), 'peer-service': c.peer_service_name(spec),
             'client-service': c.client_service_name(spec), 'poddisruptionbudget': spec.name}
    for component in SINGLE:
        obj = client.get_or_none(path_of(component, ns, names[component]))
        existing[(component, names[component])] = obj if c.is_ours(spec, obj) else None
    member_leases: Dict[str, Any] = {}
    snapshot_leases: Dict[str, Any] = {}
    for lease in client.list(path_of('member-lease', ns), label_selector=ours_selector(spec)):
        if not c.is_ours(spec, lease):
            continue
        name = lease['metadata']['name']
        component = (lease['metadata'].get('labels') or {}).get(c.LABEL_COMPONENT)
        if component == c.COMPONENT_LABEL['snapshot-lease']:
            kind = name[len(spec.name) + 1:]
            snapshot_leases[kind] = lease
            existing[('snapshot-lease', name)] = lease
        elif component == c.COMPONENT_LABEL['member-lease'] and c.ordinal_of(name) >= 0:
            member_leases[name] = lease
            existing[('member-lease', name)] = lease
    selector = label_selector_string({'matchLabels': c.pod_selector(spec)})
    pods = {pod['metadata']['name']: pod for pod in client.list(api_path('v1', 'pods', ns), label_selector=selector)
            if c.is_our_pod(spec, pod)}
    pvcs = {pvc['metadata']['name']: pvc for pvc in client.list(
        api_path('v1', 'persistentvolumeclaims', ns), label_selector='%s=%s' % (c.LABEL_INSTANCE, spec.name))}
    return Observed(statefulset=sts, pods=pods, member_leases=member_leases, snapshot_leases=snapshot_leases,
                    pvcs=pvcs), existing


def apply_object(client: KubeClient, spec: EtcdSpec, component: str, obj: Mapping[str, Any]) -> str:
    """Create `obj`, or merge-patch ours; 'created' / 'patched'. ComponentConflict when the name is taken by an
    object that is not ours."""
    name = obj['metadata']['name']
    path = path_of(component, spec.namespace, name)
    current = client.get_or_none(path)
    if current is None:
        client.create(path_of(component, spec.namespace), obj)
        return 'created'
    if not c.is_ours(spec, current):
        raise ComponentConflict('%s %s/%s exists and is not owned by Etcd %s (owner reference and labels '
                                '%s=%s, %s=%s): left untouched' % (
                                    c.KINDS[component][1], spec.namespace, name, spec.name, c.LABEL_MANAGED_BY,
                                    c.MANAGED_BY, c.LABEL_PART_OF, spec.name))
    if component == 'statefulset':
        patch = c.statefulset_patch(obj)
    else:
        patch = {k: v for k, v in obj.items() if k not in ('apiVersion', 'kind')}
    client.merge_patch(path, patch)
    return 'patched'


def delete_ours(client: KubeClient, spec: EtcdSpec, component: str, name: str) -> bool:
    """Delete one component when it is ours; False when it is gone or not ours."""
    path = path_of(component, spec.namespace, name)
    current = client.get_or_none(path)
    if current is None or not c.is_ours(spec, current):
        return False
    client.delete(path)
    return True


def execute(client: KubeClient, spec: EtcdSpec, action: p.Action, desired: Mapping[Tuple[str, str], Any],
            observed: Observed, save_source: Optional[Callable[[str], str]] = None,
            request_snapshot: Optional[Callable[[List[Tuple[str, str]]], None]] = None,
            remove_members: Optional[Callable[[Tuple[str, ...], Callable[[str, str], bool]], List[str]]] = None
            ) -> List[str]:
    """Do what `action` says; the objects written, as 'Kind name' lines (for the log). `save_source(client URL)`
    saves one member's data to the Etcd's store (a recovery's SaveSource; the loop's, it holds the store);
    `request_snapshot([(pod, URL of its /snapshot/full)])` starts a TakeSnapshot's request (the loop's: it waits for
    the answer beside the passes); `remove_members(client URLs, mark)` takes one removal step of an overdue
    scale-down through etcd (the loop's), `mark(Lease name, member ID)` marking a member Lease removed."""
    done: List[str] = []
    sts_key = ('statefulset', spec.name)
    if isinstance(action, p.ApplyComponents):
        for key in action.keys:
            done.append('%s %s %s' % (c.KINDS[key[0]][1], key[1], apply_object(client, spec, key[0], desired[key])))
    elif isinstance(action, p.CreateStatefulSet):
        done.append('StatefulSet %s %s' % (spec.name, apply_object(client, spec, 'statefulset', desired[sts_key])))
    elif isinstance(action, p.UpdateStatefulSet):
        sts = desired[sts_key]
        if action.template:   # the change's start: a full snapshot verified after it is what the restarts need
            meta = dict(sts['metadata'], annotations=dict(sts['metadata'].get('annotations') or {}, **{
                p.UPDATE_SNAPSHOT: p.update_snapshot_annotation(action.template, action.at)}))
            sts = dict(sts, metadata=meta)
        done.append('StatefulSet %s %s' % (spec.name, apply_object(client, spec, 'statefulset', sts)))
    elif isinstance(action, p.TakeSnapshot):
        done.extend(_take_snapshot(client, spec, action, observed, request_snapshot))
    elif isinstance(action, (p.ScaleUp, p.ScaleDown)):
        sts = desired[sts_key]
        patch: Dict[str, Any] = {'spec': {'replicas': action.to}}
        if isinstance(action, p.ScaleUp) and action.multi_node:
            patch['metadata'] = {'annotations': {c.SCALED_TO_MULTI_NODE: ''}}
        current = observed.statefulset
        if current is None or not c.is_ours(spec, current):
            raise ComponentConflict('StatefulSet %s/%s is not this Etcd\'s' % (spec.namespace, spec.name))
        if isinstance(action, p.ScaleUp) and action.with_template:
            patch = c.statefulset_patch(sts)   # a wake from 0 onto the template changed while hibernated
        client.merge_patch(path_of('statefulset', spec.namespace, spec.name), patch)
        done.append('StatefulSet %s replicas %d' % (sts['metadata']['name'], action.to))
    elif isinstance(action, (p.RestartMember, p.DeletePod)):
        pod = observed.pods.get(action.pod)
        if pod is None or not c.is_our_pod(spec, pod):
            raise ComponentConflict('pod %s/%s is not a member pod of Etcd %s' % (spec.namespace, action.pod, spec.name))
        client.delete(api_path('v1', 'pods', spec.namespace, action.pod))
        done.append('Pod %s deleted' % action.pod)
    elif isinstance(action, p.MarkLeaving):
        # a new mark drops an older REMOVED (another scale-down's); clearing drops both
        marks = {sd.LEAVING: str(action.to) if action.to is not None else None, sd.REMOVED: None,
                 sd.LEAVING_SINCE: format_micro(action.at) if action.to is not None else None}
        for name in action.names:
            if name not in observed.member_leases:
                raise ComponentConflict('Lease %s/%s is not a member Lease of Etcd %s' % (spec.namespace, name, spec.name))
            client.merge_patch(path_of('member-lease', spec.namespace, name), {'metadata': {'annotations': marks}})
            done.append('Lease %s %s' % (name, 'leaving (replicas %d)' % action.to if action.to is not None
                                         else 'leaving mark cleared'))
    elif isinstance(action, p.RemoveMembers):
        done.extend(_remove_members(client, spec, action, observed, remove_members))
    elif isinstance(action, p.DeleteLeases):
        for name in action.names:
            if delete_ours(client, spec, 'member-lease', name):
                done.append('Lease %s deleted' % name)
    elif isinstance(action, r.Step):
        done.extend(_recovery_step(client, spec, action, observed, save_source))
    return done


class RemovalRefused(DruidError):
    """The loop's own removal step of an overdue scale-down did nothing: unsafe, not provable, or etcd unreachable
    (the reason names which); tried again next pass."""


def _remove_members(client: KubeClient, spec: EtcdSpec, action: p.RemoveMembers, observed: Observed,
                    remove_members: Optional[Callable[[Tuple[str, ...], Callable[[str, str], bool]], List[str]]]
                    ) -> List[str]:
    """One removal step of an overdue scale-down: through the members' client URLs (every pod with an address; https
    with `spec.etcd.clientUrlTls`: the loop connects with the Etcd's client TLS Secrets), marking each member Lease
    whose member etcd no longer lists (only Leases that are ours)."""
    pods = sorted(observed.pods.items(), key=lambda item: c.ordinal_of(item[0]))
    urls = ct.member_client_urls(spec, ((pod.get('status') or {}).get('podIP') for _name, pod in pods
                                        if c.is_our_pod(spec, pod)))
    if not urls or remove_members is None:
        raise RemovalRefused('no member pod has an address to reach etcd through')

    def mark(name: str, member_id: str) -> bool:
        lease = observed.member_leases.get(name)
        if lease is None or not c.is_ours(spec, lease):
            return False
        client.merge_patch(path_of('member-lease', spec.namespace, name),
                           {'metadata': {'annotations': {sd.REMOVED: member_id}}})
        return True
    return remove_members(urls, mark)


def _take_snapshot(client: KubeClient, spec: EtcdSpec, action: p.TakeSnapshot, observed: Observed,
                   request_snapshot: Optional[Callable[[List[Tuple[str, str]]], None]]) -> List[str]:
    """Record the request on the StatefulSet, then hand the member programs' URLs to the loop."""
    current = observed.statefulset
    if current is None or not c.is_ours(spec, current):
        raise ComponentConflict('StatefulSet %s/%s is not this Etcd\'s' % (spec.namespace, spec.name))
    urls = [(name, 'http://%s:%d/snapshot/full' % ((observed.pods[name].get('status') or {}).get('podIP'),
                                                   spec.backup.port))
            for name in action.pods if name in observed.pods and c.is_our_pod(spec, observed.pods[name])
            and (observed.pods[name].get('status') or {}).get('podIP')]
    if not urls or request_snapshot is None:
        raise SnapshotNotRequested('no member pod of %s has an address to ask for a full snapshot' % ', '.join(
            action.pods or ('Etcd %s' % spec.name,)))
    client.merge_patch(path_of('statefulset', spec.namespace, spec.name), {'metadata': {'annotations': {
        p.UPDATE_SNAPSHOT: p.update_snapshot_annotation(action.template, action.requested_at)}}})
    request_snapshot(urls)
    return ['StatefulSet %s: %s recorded; full snapshot asked of %s' % (spec.name, p.UPDATE_SNAPSHOT, urls[0][0])]


def _replicas(client: KubeClient, spec: EtcdSpec, observed: Observed, to: int,
              annotations: Optional[Dict[str, Any]] = None) -> str:
    current = observed.statefulset
    if current is None or not c.is_ours(spec, current):
        raise ComponentConflict('StatefulSet %s/%s is not this Etcd\'s' % (spec.namespace, spec.name))
    patch: Dict[str, Any] = {'spec': {'replicas': to}}
    if annotations:
        patch['metadata'] = {'annotations': annotations}
    client.merge_patch(path_of('statefulset', spec.namespace, spec.name), patch)
    return 'StatefulSet %s replicas %d' % (spec.name, to)


def _recovery_step(client: KubeClient, spec: EtcdSpec, action: r.Step, observed: Observed,
                   save_source: Optional[Callable[[str], str]]) -> List[str]:
    """One step of a quorum-loss recovery (druid/recovery.py). Never deletes a PVC."""
    if isinstance(action, r.SaveSource):
        pod = observed.pods.get(action.pod)
        if pod is None or not c.is_our_pod(spec, pod):
            raise ComponentConflict('pod %s/%s is not a member pod of Etcd %s' % (spec.namespace, action.pod, spec.name))
        ip = (pod.get('status') or {}).get('podIP')
        if not ip or save_source is None:
            raise SourceNotSaved('pod %s has no address to read its data from' % action.pod)
        return [save_source(ct.member_client_urls(spec, (ip,))[0])]
    if isinstance(action, r.StopMembers):
        return [_replicas(client, spec, observed, 0)]
    if isinstance(action, r.RecreateLeases):
        done = []
        for name in action.delete:
            if delete_ours(client, spec, 'member-lease', name):
                done.append('Lease %s deleted' % name)
        for name in action.create:
            lease = c.member_lease(spec, name)
            if name == action.first:
                lease['metadata'].setdefault('annotations', {}).update(
                    r.restore_marker_patch(action.state)['metadata']['annotations'])
            done.append('Lease %s %s' % (name, apply_object(client, spec, 'member-lease', lease)))
        return done
    if isinstance(action, r.StartFirstMember):
        return [_replicas(client, spec, observed, 1)]
    if isinstance(action, r.RejoinMembers):
        done = []
        if action.first:
            lease_path = path_of('member-lease', spec.namespace, action.first)
            current = client.get_or_none(lease_path)
            if current is not None and c.is_ours(spec, current):
                client.merge_patch(lease_path, r.restore_marker_patch(None))
                done.append('Lease %s: %s removed' % (action.first, r.RESTORE_MARKER))
        for name in action.learners:
            lease = c.member_lease(spec, name, learner=True)
            done.append('Lease %s %s' % (name, apply_object(client, spec, 'member-lease', lease)))
        done.append(_replicas(client, spec, observed, action.to, {c.SCALED_TO_MULTI_NODE: ''}))
        return done
    return []   # RecoveryStarted, Recovered, Aborted: the loop records the state and posts the Event


def delete_all(client: KubeClient, spec: EtcdSpec) -> List[str]:
    """ETCD-14: every managed component of this Etcd (ours only); PVCs stay (they hold the data). The StatefulSet
    first, so no pod is started against a half-deleted configuration."""
    gone: List[str] = []
    if delete_ours(client, spec, 'statefulset', spec.name):
        gone.append('StatefulSet %s' % spec.name)
    for component, name in (('poddisruptionbudget', spec.name), ('client-service', c.client_service_name(spec)),
                            ('peer-service', c.peer_service_name(spec)), ('configmap', c.configmap_name(spec)),
                            ('rolebinding', c.role_name(spec)), ('role', c.role_name(spec)),
                            ('serviceaccount', spec.name)):
        if delete_ours(client, spec, component, name):
            gone.append('%s %s' % (c.KINDS[component][1], name))
    for lease in client.list(path_of('member-lease', spec.namespace), label_selector=ours_selector(spec)):
        if c.is_ours(spec, lease):
            try:
                client.delete(path_of('member-lease', spec.namespace, lease['metadata']['name']), missing_ok=False)
                gone.append('Lease %s' % lease['metadata']['name'])
            except NotFound:
                pass
    return gone
