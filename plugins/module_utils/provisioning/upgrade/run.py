# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One node's step of a plan, acting through `ops` (host.py's `HostOps` for the module; a test may pass its own).

A step starts only when every step of an earlier wave is done (plan.Plan.blockers), whoever runs it: running the
kubelet play before the apiservers moved is refused (`order`), not done. Every wait is a deadline.

kubelet step, resumable at any point (record.py holds the phase on the Node):
  record `draining` -> drain (cordon once, evictions through the Eviction API, PodDisruptionBudgets respected)
  -> record `drained` -> install the target kubelet when the binary names another version -> restart the kubelet
  -> record `kubelet` -> wait until the Node reports the version and Ready -> uncordon (unless it was cordoned
  before the upgrade) -> record `done`. A second run finds `drained` or later and does not drain again; a run that
  died while draining drains again, which evicts only the pods still there.
control-plane steps (kube-apiserver; kube-controller-manager + kube-scheduler): the certificates the step's pods
  read that end within the window are renewed first (renewal.py), then each manifest's image is rewritten (and its
  inputs digest with it), then the gate.
  With `ops.maintenance` (bare-metal workers walked through the node-maintenance state machine by the
  maintenance_window playbook) the step runs only while the node is `in-maintenance`: the profile decided when the
  node may go (approval, maxMaintenance, stagger, time windows) and usually drained and cordoned it; the drain here
  then evicts nothing new and, the node being cordoned before, it is not uncordoned here (the profile's way back
  does that).

machine-deployment step (a cloud pool, pools.py), resumable the same way without a record: the new MachineClass
and the deployment's template say how far it got. Create the class naming the version (unless it exists) -> point
the MachineDeployment at it (unless it does) -> wait until the rollout is complete and every Node of its machines
reports the kubelet. The machines controller drains and replaces the machines (its maxSurge / maxUnavailable); a
second run finds the class in place and only waits.
"""

from __future__ import annotations

import datetime
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.maintenance.constants import IN_MAINTENANCE, STATE_LABEL
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.errors import NotReady, Refused
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.upgrade import pools
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.upgrade import record as records
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.upgrade.installed import (
    node_kubelet_version, node_ready,
)
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.upgrade.plan import (
    APISERVER, COMPONENTS, ETCD, KINDS, KUBE_PROXY, MACHINE_DEPLOYMENT, Plan, Step,
)
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.upgrade.versions import (
    Version, image_version,
)

POLL_START, POLL_MAX = 0.2, 2.0


def pending_step(plan: Plan, kind: str, node: Optional[str]) -> Optional[Step]:
    """This node's first step of `kind` (kube-proxy: the cluster's), refused with `order` while an earlier wave
    is not done; None when there is nothing to do."""
    steps = [s for s in plan.steps if s.kind == kind and (
        kind == KUBE_PROXY or (s.pool == node if kind == MACHINE_DEPLOYMENT else node in s.nodes))]
    if not steps:
        return None
    step = steps[0]
    blockers = plan.blockers(step)
    if blockers:
        first = blockers[0]
        if first.kind == ETCD:
            where = ', '.join(first.nodes)
            raise Refused('%s on %s waits for etcd on %s to move to %s first (steward.cluster.etcd_upgrade with '
                          'etcd_upgrade_image=%s; the playbook runs it)'
                          % (kind, node or 'the cluster', where, first.image, first.image), 'order', node)
        raise Refused('%s on %s waits for %s on %s (to %s) first: the version skew policy orders the waves; run the '
                      'playbook, which keeps that order' % (kind, node or 'the cluster', first.kind,
                                                            ', '.join(first.nodes) or 'the cluster', first.version),
                      'order', node)
    return step


def _wait(what: str, ready: Callable[[], Tuple[bool, str]], timeout: float, clock: Callable[[], float],
          sleep: Callable[[float], None], where: str) -> None:
    deadline = clock() + timeout
    pause = POLL_START
    while True:
        ok, state = ready()
        if ok:
            return
        if clock() >= deadline:
            raise NotReady('%s not within %ss (last seen: %s); what was written stays, run again once it is fixed'
                           % (what, timeout, state), where)
        sleep(min(pause, max(0.0, deadline - clock())))
        pause = min(pause * 2, POLL_MAX)


def _component_ready(ops: Any, component: str, version: Version) -> Tuple[bool, str]:
    image, ready = ops.reported(component)
    if image_version(image) != version or not ready:
        return False, '%s reports %s%s' % (component, image or 'no pod', '' if ready else ', not Ready')
    return True, ''


def _utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def _renew(ops: Any, kind: str, check_mode: bool, now: datetime.datetime, result: Dict[str, Any]) -> None:
    """Certificates renewed on the way (renewal.py): those of the pods this step restarts that end within the
    window, written before the manifest changes, so the restarted pod starts with them. `result['certificates']`
    lists them; an ops without renewal (a test's) renews nothing."""
    due = ops.certificates_due(kind, now) if hasattr(ops, 'certificates_due') else []
    result['certificates'] = [d.as_dict() for d in due]
    result['actions'] += ['%s on %s' % (d.message, ops.node_name) for d in due]
    if due and not check_mode:
        ops.renew_certificates(due, now)


def run_step(plan: Plan, kind: str, ops: Any, *, check_mode: bool, timeout: float = 300.0,
             clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
             now: Optional[datetime.datetime] = None) -> Dict[str, Any]:
    """Run this node's (`ops.node_name`) pending step of `kind`; the result lists what was (or would be) done.
    `now` (aware; default the clock) decides which certificates are due."""
    if kind not in KINDS:
        raise ValueError(kind)
    node = ops.node_name
    step = pending_step(plan, kind, node)
    result: Dict[str, Any] = {'changed': False, 'step': step.as_dict() if step else None, 'actions': [],
                              'drain': None}
    if step is None:
        result['msg'] = 'nothing to do for %s on %s' % (kind, node)
        return result
    result['changed'] = True
    if kind == APISERVER:
        _renew(ops, kind, check_mode, now or _utcnow(), result)
        _control_plane(ops, ('kube-apiserver',), step.version, check_mode, timeout, clock, sleep, result,
                       apiserver=True)
    elif kind == COMPONENTS:
        _renew(ops, kind, check_mode, now or _utcnow(), result)
        _control_plane(ops, ('kube-controller-manager', 'kube-scheduler'), step.version, check_mode, timeout, clock,
                       sleep, result)
    elif kind == KUBE_PROXY:
        result['actions'].append('set the kube-proxy DaemonSet to %s' % step.version)
        if not check_mode:
            ops.set_kube_proxy(step.version)
            _wait('kube-proxy rolled out at %s' % step.version, lambda: ops.kube_proxy_rolled(step.version),
                  timeout, clock, sleep, 'kube-proxy')
    elif kind == MACHINE_DEPLOYMENT:
        _pool(ops, step, check_mode, timeout, clock, sleep, result)
    else:
        _kubelet(ops, step, check_mode, timeout, clock, sleep, result)
    result['msg'] = '; '.join(result['actions'])
    return result


def _control_plane(ops: Any, components: Tuple[str, ...], version: Version, check_mode: bool, timeout: float,
                   clock: Callable[[], float], sleep: Callable[[float], None], result: Dict[str, Any],
                   apiserver: bool = False) -> None:
    for component in components:
        result['actions'].append('rewrite the %s manifest on %s to %s' % (component, ops.node_name, version))
    if check_mode:
        return
    for component in components:
        ops.set_image(component, version)
    for component in components:
        _wait('%s on %s reporting %s and Ready' % (component, ops.node_name, version),
              lambda c=component: _component_ready(ops, c, version), timeout, clock, sleep, ops.node_name)
    if apiserver:
        _wait('kube-apiserver /readyz answering ok', lambda: (ops.apiserver_ready(), 'not ready'), timeout, clock, sleep,
              ops.node_name)
    result['actions'].append('gated: %s on %s report %s' % (', '.join(components), ops.node_name, version))


def _pool(ops: Any, step: Step, check_mode: bool, timeout: float, clock: Callable[[], float],
          sleep: Callable[[float], None], result: Dict[str, Any]) -> None:
    version = step.version
    body = ops.wanted_class(version)
    name = body['metadata']['name']
    existing = ops.get_class(name)
    named = (((existing or {}).get('metadata') or {}).get('labels') or {}).get(pools.VERSION_LABEL)
    if existing is not None and named != str(version):
        raise Refused('the MachineClass %s/%s exists and names kubelet %s, not %s (label %s): it is not the upgrade\'s; '
                      'rename or delete it; nothing was changed' % (ops.namespace, name, named, version,
                                                                    pools.VERSION_LABEL), 'machine-class-conflict',
                      ops.key)
    result['machine_class'] = name
    if existing is None:
        result['actions'].append('create the MachineClass %s/%s naming kubelet %s' % (ops.namespace, name, version))
    else:
        result['actions'].append('the MachineClass %s/%s names kubelet %s already' % (ops.namespace, name, version))
    pointed = pools.template_class(ops.deployment()) == name
    if pointed:
        result['actions'].append('the MachineDeployment %s names it already: wait for its rollout' % ops.key)
    else:
        result['actions'].append('point the MachineDeployment %s at it (the machines controller replaces the '
                                 'machines, maxSurge/maxUnavailable of its strategy)' % ops.key)
    result['actions'].append('wait until the rollout is complete and every Node of %s reports kubelet %s'
                             % (ops.key, version))
    if check_mode:
        return
    if existing is None:
        ops.create_class(body)
    if not pointed:
        ops.point_at(name)
    _wait('MachineDeployment %s rolled out on %s' % (ops.key, name), lambda: ops.rolled(name, version), timeout, clock,
          sleep, ops.key)


def in_maintenance(node: Dict[str, Any]) -> bool:
    """The node-maintenance state machine has the node `in-maintenance` (its state label, maintenance/constants)."""
    return ((node.get('metadata') or {}).get('labels') or {}).get(STATE_LABEL) == IN_MAINTENANCE


def _kubelet(ops: Any, step: Step, check_mode: bool, timeout: float, clock: Callable[[], float],
             sleep: Callable[[float], None], result: Dict[str, Any]) -> None:
    node, version = ops.node_name, str(step.version)
    if getattr(ops, 'maintenance', False) and not check_mode and not in_maintenance(ops.get_node()):
        raise Refused('the kubelet of %s is upgraded inside a node-maintenance window (maintenance: true) and the '
                      'node is not in-maintenance (label %s): run it through the steward.cluster.maintenance_window '
                      'playbook (cluster_upgrade_worker_maintenance); nothing was changed' % (node, STATE_LABEL),
                      'not-in-maintenance', node)
    current = records.read(ops.get_node())
    mine = current if current is not None and current.version == version else None
    before = mine.unschedulable_before if mine else ops.unschedulable()
    drain_needed = not records.drained_for(mine, version)
    result['record'] = mine.value() if mine else None
    if drain_needed:
        result['actions'].append('drain %s' % node)
    else:
        result['actions'].append('%s was drained for %s already (phase %s): not drained again'
                                 % (node, version, mine.phase))
    install = ops.kubelet_binary_version() != step.version
    if install and not ops.can_install():
        raise Refused('the kubelet on %s must be replaced by %s and no kubelet_install_command is set (for example '
                      '[apt-get, install, -y, "kubelet={semver}-1.1"]); nothing was changed' % (node, version),
                      'kubelet-install', node)
    if install:
        result['actions'].append('install kubelet %s on %s' % (version, node))
    result['actions'].append('restart the kubelet on %s and wait for the Node to report %s' % (node, version))
    if not before:
        result['actions'].append('uncordon %s' % node)
    if check_mode:
        return
    if drain_needed:
        ops.annotate(records.Record(version, 'draining', before))
        drained = ops.drain()
        result['drain'] = drained
        ops.annotate(records.Record(version, 'drained', before))
    if install:
        ops.install_kubelet(step.version)
        if ops.kubelet_binary_version() != step.version:
            raise NotReady('the kubelet install on %s did not install %s (the binary says %s); the node stays '
                           'drained' % (node, version, ops.kubelet_binary_version()), node)
    if node_kubelet_version(ops.get_node()) != step.version:
        ops.restart_kubelet()
    if mine is None or not mine.at_least('kubelet'):
        ops.annotate(records.Record(version, 'kubelet', before))

    def reported() -> Tuple[bool, str]:
        obj = ops.get_node()
        seen = node_kubelet_version(obj)
        return (seen == step.version and node_ready(obj),
                'kubeletVersion %s%s' % (seen, '' if node_ready(obj) else ', not Ready'))

    _wait('Node %s reporting kubelet %s and Ready' % (node, version), reported, timeout, clock, sleep, node)
    if not before:
        ops.uncordon()
    ops.annotate(records.Record(version, 'done', before))


def status(plan: Plan, nodes: Dict[str, Any]) -> Dict[str, Any]:
    """The run's state for check mode and reports: each Node's record, and the plan's next wave."""
    recorded = {}
    for name, obj in nodes.items():
        rec = records.read(obj)
        if rec is not None:
            recorded[name] = {'version': rec.version, 'phase': rec.phase,
                              'unschedulable_before': rec.unschedulable_before}
    nxt: List[Dict[str, Any]] = []
    if plan.steps:
        wave = plan.steps[0].wave
        nxt = [s.as_dict() for s in plan.steps if s.wave == wave]
    # The workers' batches still to run, each node with its recorded phase (none: not started), and the nodes whose
    # record says done for the target: what a resumed run skips, what it finishes first (batches.py), what is left.
    target = str(plan.target)
    left = [{'batch': s.batch, 'nodes': {n: (recorded.get(n) or {}).get('phase') if (recorded.get(n) or {}).get(
        'version') == target else None for n in s.nodes}} for s in plan.steps if s.batch is not None]
    done = sorted(n for n, r in recorded.items() if r['version'] == target and r['phase'] == 'done')
    return {'records': recorded, 'next': nxt, 'batches': left, 'done': done}
