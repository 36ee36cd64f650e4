# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The plan of a Kubernetes upgrade, from what is installed to the target, as pure data.

Order (each wave finishes before the next starts, so the skew policy of versions.py holds at every moment, not
only at the end):

  first, when the last hop's minor wants a newer etcd than a control-plane node runs (ETCD_FOR_MINOR, kubeadm's
  table): etcd, one member at a time, by the etcd upgrade engine (etcd/upgrade: its pre-flight, the verified
  snapshot gate, followers first and the leader last; the playbook runs `steward.cluster.etcd_upgrade`'s plays on
  the image named by this plan's `etcd` step). etcd first because a newer etcd serves every older apiserver of the
  table, while a new apiserver may use what an old etcd lacks; kubeadm's `upgrade apply` does etcd first too;
  per hop (one minor at a time; a patch upgrade is one hop):
    0. kubelets and kube-proxy that would fall more than the allowed minors behind the hop's apiserver move first,
       to the oldest apiserver's version (only on chains of several minors);
    1. kube-apiserver, one control-plane node at a time;
    2. kube-controller-manager and kube-scheduler, one control-plane node at a time (only once every apiserver
       runs the hop's version: they reach any apiserver through the load balancer, and must not be newer);
  then, after the last hop:
    3. kube-proxy (the DaemonSet, when there is one);
    4. kubelets of the control-plane nodes, one at a time, each drained first;
    5. kubelets of the workers, in batches of at most `max_unavailable` (and of what maxMaintenance and the
       PodDisruptionBudgets allow, batches.py), each node drained first;
    6. cloud pools (workers that are machines of a MachineDeployment named in `machine_deployments`), one pool at a
       time: a new MachineClass naming the target kubelet, the MachineDeployment pointed at it, and the machines
       controller's rolling update (maxSurge/maxUnavailable) replaces the machines (pools.py). A pool's nodes are
       never in the kubelet steps: they are replaced, not upgraded where they stand. On chains of several minors a
       pool that would fall too far behind rolls in wave 0 of a hop, like a kubelet.

kubeadm upgrades the three control-plane components of one node together and the kubelet right after, so a new
controller-manager or kubelet briefly talks to an old apiserver; this order does not, and drains each node once.

The plan is computed again at every step from what is installed, so a run that stopped anywhere continues where it
stopped; what was done is simply no longer in the plan.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.etcd.upgrade.versions import (
    format_version, image_version as etcd_image_version, split_image,
)
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.errors import Refused
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.upgrade.batches import Limits
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.upgrade.batches import batches as worker_batches
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.upgrade.versions import (
    APISERVER_HA_SKEW, COMPONENT_SKEW, Version, kubelet_skew, parse,
)

APISERVER = 'kube-apiserver'
COMPONENTS = 'controller-manager-scheduler'   # kube-controller-manager and kube-scheduler, one step per node
KUBE_PROXY = 'kube-proxy'
KUBELET = 'kubelet'
MACHINE_DEPLOYMENT = 'machine-deployment'   # a cloud pool: a MachineDeployment rolled onto a new MachineClass
ETCD = 'etcd'             # run by steward.cluster.etcd_upgrade (the etcd engine), not by a stage of this module
KINDS = (APISERVER, COMPONENTS, KUBE_PROXY, KUBELET, MACHINE_DEPLOYMENT)
ETCD_WAVE = (-1, 0)       # before every wave of every hop
CONTROL_PLANE_COMPONENTS = ('kube-apiserver', 'kube-controller-manager', 'kube-scheduler')

# The etcd release kubeadm installs with each Kubernetes minor, as a minimum: an older etcd is upgraded first (the
# plan's etcd step). Source: kubeadm's `SupportedEtcdVersion` map in kubernetes/kubernetes
# cmd/kubeadm/app/constants/constants.go, as each minor's first release (vX.Y.0) ships it. kubeadm raises the map in
# later patch releases (release-1.32's constants.go reads 29-32: "3.5.24-0" with DefaultEtcdVersion "3.5.16-0";
# release-1.34's 31-33: "3.5.24-0", 34: "3.6.5-0", earlier 34: "3.6.4-0"; kubeadm's etcd-bump guide moved 30-33 from
# "3.5.17-0" to "3.5.21-0"), so these are floors, not what the newest kubeadm would install; name a newer image
# with the module's `etcd_image` (playbook: cluster_upgrade_etcd_image). A minor not listed asks for nothing.
ETCD_FOR_MINOR: Dict[Tuple[int, int], Tuple[int, int, int]] = {
    (1, 31): (3, 5, 15),
    (1, 32): (3, 5, 16),
    (1, 33): (3, 5, 21),
    (1, 34): (3, 6, 4),
}


@dataclasses.dataclass(frozen=True)
class NodeInstalled:
    """One node as found. The control-plane components are None on a worker; None on a control-plane node (or a
    kubelet of None) means the version could not be read."""
    name: str
    control_plane: bool
    kubelet: Optional[Version]
    apiserver: Optional[Version] = None
    controller_manager: Optional[Version] = None
    scheduler: Optional[Version] = None
    etcd: Optional[Tuple[int, int, int]] = None   # from the etcd manifest's image tag; None: no etcd of ours here
    etcd_image: Optional[str] = None              # that image, whole (its repository names the etcd step's image)
    pool: Optional[str] = None                    # `namespace/name` of the MachineDeployment whose machine it is


@dataclasses.dataclass(frozen=True)
class PoolInstalled:
    """A cloud pool as found: a MachineDeployment named in `machine_deployments`, the kubelet version its current
    MachineClass names (pools.VERSION_LABEL; None: the class names none, e.g. the pool's first class), the Nodes of
    its machines (also in Installed.nodes, with `pool` set) and whether its rollout is complete (the controller saw
    the generation; every machine updated and available, no old one left: MCM's DeploymentComplete)."""
    key: str                                # namespace/name
    class_name: str
    class_version: Optional[Version]
    nodes: Tuple[str, ...]
    complete: bool


@dataclasses.dataclass(frozen=True)
class Installed:
    nodes: Tuple[NodeInstalled, ...]        # control plane in its order, then the workers in theirs
    kube_proxy: Optional[Version] = None    # the kube-proxy DaemonSet's image tag; None when there is none
    pools: Tuple[PoolInstalled, ...] = ()   # cloud pools (their nodes are in `nodes` too)

    def node(self, name: str) -> Optional[NodeInstalled]:
        return next((n for n in self.nodes if n.name == name), None)

    @property
    def control_plane(self) -> List[NodeInstalled]:
        return [n for n in self.nodes if n.control_plane]

    @property
    def workers(self) -> List[NodeInstalled]:
        return [n for n in self.nodes if not n.control_plane]


@dataclasses.dataclass(frozen=True)
class Refusal:
    """Why the plan cannot be run: `rule` is a stable word (docs/upgrades.md lists each with its fix)."""
    rule: str
    message: str
    node: Optional[str] = None

    def as_dict(self) -> Dict[str, Any]:
        return {'rule': self.rule, 'node': self.node, 'message': self.message}


@dataclasses.dataclass(frozen=True)
class Step:
    """One step: `kind` on `nodes` (several only for a batch of worker kubelets) to `version`. `wave` orders the
    steps: every step of a lower wave is done before one of a higher wave starts; within a wave the playbook
    goes one node (or one batch) at a time."""
    wave: Tuple[int, int]
    kind: str
    nodes: Tuple[str, ...]
    version: Version
    drain: bool = False
    image: Optional[str] = None             # the etcd step: the etcd image every member moves to
    pool: Optional[str] = None              # a machine-deployment step: namespace/name of the MachineDeployment
    batch: Optional[int] = None             # the workers' kubelets after the last hop: the batch number, from 1

    def as_dict(self) -> Dict[str, Any]:
        out = {'kind': self.kind, 'nodes': list(self.nodes), 'version': str(self.version), 'drain': self.drain,
               'hop': self.wave[0]}
        if self.image is not None:
            out['image'] = self.image
        if self.pool is not None:
            out['pool'] = self.pool
        if self.batch is not None:
            out['batch'] = self.batch
        return out


@dataclasses.dataclass(frozen=True)
class Plan:
    target: Version
    hops: Tuple[Version, ...]               # the apiserver versions passed through; the last is the target
    steps: Tuple[Step, ...]
    refusals: Tuple[Refusal, ...]
    current: Optional[Version] = None       # the oldest apiserver now
    batches: Optional[Dict[str, Any]] = None   # what bounded the workers' batches (batches.batches' info)

    @property
    def done(self) -> bool:
        return not self.steps and not self.refusals

    @property
    def etcd(self) -> Optional[Step]:
        """The etcd step (etcd first), when the target wants a newer etcd than a member runs."""
        return next((s for s in self.steps if s.kind == ETCD), None)

    @property
    def pools(self) -> List[str]:
        """The MachineDeployments (namespace/name) with a step to do, in the plan's order."""
        return list(dict.fromkeys(s.pool for s in self.steps if s.kind == MACHINE_DEPLOYMENT and s.pool))

    def node_steps(self, node: str, kinds: Iterable[str]) -> List[Step]:
        kinds = tuple(kinds)
        return [s for s in self.steps if node in s.nodes and s.kind in kinds]

    def blockers(self, step: Step) -> List[Step]:
        """The steps of earlier waves still to do: `step` may not start before they are done."""
        return [s for s in self.steps if s.wave < step.wave]

    def as_dict(self) -> Dict[str, Any]:
        return {'target': str(self.target), 'current': str(self.current) if self.current else None,
                'hops': [str(h) for h in self.hops], 'steps': [s.as_dict() for s in self.steps],
                'refusals': [r.as_dict() for r in self.refusals], 'done': self.done,
                'etcd': self.etcd.as_dict() if self.etcd else None, 'pools': self.pools,
                'batches': self.batches}

    def check(self) -> None:
        """Raise UpgradeRefused when there is any refusal (nothing has been changed)."""
        if self.refusals:
            raise UpgradeRefused(self.refusals)


class UpgradeRefused(Refused):
    """The plan refuses: `refusals` holds every reason (rule, node, message); `rule` is the first one's."""

    def __init__(self, refusals: Sequence[Refusal]):
        first = refusals[0]
        super().__init__('cluster upgrade refused, nothing was changed: %s'
                         % '; '.join('%s (%s)' % (r.message, r.rule) for r in refusals), first.rule, first.node)
        self.refusals = tuple(refusals)

    def result(self) -> Dict[str, Any]:
        return dict(super().result(), refusals=[r.as_dict() for r in self.refusals])


# --- the skew policy over a state -------------------------------------------------------------------------------
def skew_violations(installed: Installed) -> List[Refusal]:
    """Every place where `installed` breaks the version skew policy (versions.py). Empty for a cluster in policy;
    the plan refuses to start from a state outside it, and tests check it at every moment of a run."""
    apis = [n.apiserver for n in installed.control_plane if n.apiserver is not None]
    if not apis:
        return []
    oldest, newest = min(apis), max(apis)
    out: List[Refusal] = []
    if newest.minors_after(oldest) > APISERVER_HA_SKEW:
        out.append(Refusal('apiserver-skew', 'kube-apiservers run %s and %s, more than %d minor apart'
                           % (oldest, newest, APISERVER_HA_SKEW)))
    for node in installed.control_plane:
        for what, version in (('kube-controller-manager', node.controller_manager),
                              ('kube-scheduler', node.scheduler)):
            if version is None:
                continue
            if version.minors_after(oldest) > 0:
                out.append(Refusal('component-newer-than-apiserver', '%s on %s runs %s, newer than kube-apiserver %s'
                                   % (what, node.name, version, oldest), node.name))
            elif newest.minors_after(version) > COMPONENT_SKEW:
                out.append(Refusal('component-too-old', '%s on %s runs %s, more than %d minor behind kube-apiserver '
                                   '%s' % (what, node.name, version, COMPONENT_SKEW, newest), node.name))
    lag = kubelet_skew(newest.minor)
    agents = [('kubelet', n.name, n.kubelet) for n in installed.nodes]
    if installed.kube_proxy is not None:
        agents.append(('kube-proxy', None, installed.kube_proxy))
    for pool in installed.pools:
        # the kubelet a pool's class names is what its next machine runs: never newer than the oldest apiserver
        if pool.class_version is not None and pool.class_version.minors_after(oldest) > 0:
            out.append(Refusal('kubelet-newer-than-apiserver', 'MachineClass %s/%s of the MachineDeployment %s names '
                               'kubelet %s, newer than kube-apiserver %s' % (
                                   pool.key.split('/')[0], pool.class_name, pool.key, pool.class_version, oldest)))
    for what, name, version in agents:
        if version is None:
            continue
        where = ' on %s' % name if name else ''
        if version.minors_after(oldest) > 0:
            out.append(Refusal('%s-newer-than-apiserver' % what, '%s%s runs %s, newer than kube-apiserver %s'
                               % (what, where, version, oldest), name))
        elif newest.minors_after(version) > lag:
            out.append(Refusal('%s-too-old' % what, '%s%s runs %s, more than %d minors behind kube-apiserver %s'
                               % (what, where, version, lag, newest), name))
    return out


# --- the plan -------------------------------------------------------------------------------------------------
def _unknown(installed: Installed) -> List[Refusal]:
    out = []
    for node in installed.nodes:
        missing = [what for what, v in (('kubelet', node.kubelet),) if v is None]
        if node.control_plane:
            missing += [what for what, v in zip(CONTROL_PLANE_COMPONENTS,
                                                (node.apiserver, node.controller_manager, node.scheduler)) if v is None]
        if missing:
            out.append(Refusal('unknown-version', 'the version of %s on %s cannot be read (an image without a tag, '
                               'a missing manifest, or no kubelet answer)' % (', '.join(missing), node.name), node.name))
    return out


def _downgrades(installed: Installed, target: Version) -> List[Refusal]:
    out = []
    for node in installed.nodes:
        for what, version in (('kube-apiserver', node.apiserver), ('kube-controller-manager', node.controller_manager),
                              ('kube-scheduler', node.scheduler), ('kubelet', node.kubelet)):
            if version is not None and version > target:
                message = '%s on %s runs %s, newer than the target %s' % (what, node.name, version, target)
                out.append(Refusal('downgrade', message, node.name))
    if installed.kube_proxy is not None and installed.kube_proxy > target:
        out.append(Refusal('downgrade', 'kube-proxy runs %s, newer than the target %s' % (installed.kube_proxy, target)))
    for pool in installed.pools:
        if pool.class_version is not None and pool.class_version > target:
            out.append(Refusal('downgrade', 'the MachineClass %s of the MachineDeployment %s names kubelet %s, newer '
                               'than the target %s' % (pool.class_name, pool.key, pool.class_version, target)))
    return out


def _chain(oldest: Version, newest: Version, target: Version,
           via: Sequence[Version]) -> Tuple[List[Version], List[Refusal]]:
    refusals = []
    for v in via:   # one the apiservers have passed already is left out: a resumed chain names it still
        if v >= target:
            refusals.append(Refusal('via-out-of-range', 'the intermediate version %s is not older than the target %s'
                                    % (v, target)))
    chain = sorted({v for v in via if oldest < v < target}) + [target]
    minors = [(v.major, v.minor) for v in chain]
    if len(set(minors)) != len(minors):
        refusals.append(Refusal('via-same-minor', 'name one version per minor to pass through, got %s'
                                % ', '.join(str(v) for v in chain)))
    previous = oldest
    for v in chain:
        if v.major != previous.major:
            refusals.append(Refusal('major-version', 'a move from %s to %s changes the major version' % (previous, v)))
        elif v.minors_after(previous) > 1:
            missing = ', '.join('v%d.%d' % (v.major, m) for m in range(previous.minor + 1, v.minor))
            refusals.append(Refusal('skips-minor', 'the control plane moves one minor at a time: from %s to %s skips '
                                    '%s; name a release of each in cluster_upgrade_via (e.g. v%d.%d.0 or its newest '
                                    'patch)' % (previous, v, missing, v.major, previous.minor + 1)))
        previous = v
    if newest > chain[0]:
        refusals.append(Refusal('apiserver-beyond-hop', 'a kube-apiserver already runs %s, beyond the first hop %s: '
                                'name %s as the target or in cluster_upgrade_via' % (newest, chain[0], newest)))
    return chain, refusals


def etcd_wanted(chain: Sequence[Version], etcd_image: Optional[str] = None) -> Optional[Tuple[int, int, int]]:
    """The etcd version the chain's minors want: `etcd_image`'s tag when one is named (the operator's choice, like
    kubeadm's `etcd.local.imageTag`), else the newest ETCD_FOR_MINOR row of the chain's minors; None: nothing."""
    if etcd_image is not None:
        return etcd_image_version(etcd_image)
    needed = [ETCD_FOR_MINOR[(v.major, v.minor)] for v in chain if (v.major, v.minor) in ETCD_FOR_MINOR]
    return max(needed) if needed else None


def _etcd_step(installed: Installed, chain: Sequence[Version],
               etcd_image: Optional[str]) -> Tuple[Optional[Step], List[Refusal]]:
    """The etcd step, when a control-plane node's etcd is older than what the chain wants: every such node, to one
    image (the named one, else the installed repository with kubeadm's `X.Y.Z-0` tag). The etcd engine plans its own
    order and pre-flight over the whole cluster; this only says that, and to what."""
    wanted = etcd_wanted(chain, etcd_image)
    if wanted is None:
        return None, []
    behind = [n for n in installed.control_plane if n.etcd is not None and n.etcd < wanted]
    if not behind:
        return None, []
    image = etcd_image
    if image is None:
        parts = split_image(behind[0].etcd_image)
        if parts is None:
            return None, [Refusal('unknown-version', 'the etcd image of %s (%r) names no repository to upgrade from: '
                                  'name cluster_upgrade_etcd_image' % (behind[0].name, behind[0].etcd_image),
                                  behind[0].name)]
        image = '%s:%s-0' % (parts[0], format_version(wanted))
    return Step(ETCD_WAVE, ETCD, tuple(n.name for n in behind), chain[-1], image=image), []


def plan_upgrade(installed: Installed, target: Version, via: Sequence[Version] = (), max_unavailable: int = 1,
                 etcd_check: bool = True, etcd_image: Optional[str] = None, batching: Optional[Limits] = None,
                 in_flight: Sequence[str] = ()) -> Plan:
    """The plan from `installed` to `target` (see the module docstring for the order; `installed.pools` are the cloud
    pools, rolled onto a new MachineClass in wave 6, never in the kubelet steps). Refusals are collected, not
    raised: `Plan.check()` raises them; check mode shows them with the plan. `etcd_check: False` plans no etcd step;
    `etcd_image` (its tag names the version) replaces kubeadm's table as what etcd must reach. `batching` bounds the
    workers' batches beyond `max_unavailable` (maxMaintenance, PodDisruptionBudgets: batches.py); `in_flight` names
    the workers under way, batched first."""
    if not installed.control_plane:
        return Plan(target, (target,), (), (Refusal('no-control-plane', 'no control-plane node was found'),))
    refusals = _unknown(installed)
    if refusals:
        return Plan(target, (target,), (), tuple(refusals))
    apis = [n.apiserver for n in installed.control_plane]
    newest = max(apis)
    # A hop is finished when the controller-managers and schedulers reached it too: a run that stopped between the
    # apiservers and them continues that hop (so they never fall two minors behind the next one).
    oldest = min(apis + [min(n.controller_manager, n.scheduler) for n in installed.control_plane])
    refusals += skew_violations(installed)
    refusals += _downgrades(installed, target)
    chain, chain_refusals = _chain(oldest, newest, target, via)
    refusals += chain_refusals
    etcd_step = None
    if etcd_check:
        etcd_step, etcd_refusals = _etcd_step(installed, chain, etcd_image)
        refusals += etcd_refusals
    if refusals:
        return Plan(target, tuple(chain), (), tuple(refusals), min(apis))

    api = {n.name: n.apiserver for n in installed.control_plane}
    comp = {n.name: min(n.controller_manager, n.scheduler) for n in installed.control_plane}
    kubelets = {n.name: n.kubelet for n in installed.nodes}
    proxy = installed.kube_proxy
    steps: List[Step] = [etcd_step] if etcd_step else []
    cps = [n.name for n in installed.control_plane]
    workers = [n.name for n in installed.workers if n.pool is None]
    for hop, version in enumerate(chain):
        floor = min(api.values())
        lag = kubelet_skew(version.minor)
        behind = [name for name in cps + workers if version.minors_after(kubelets[name]) > lag]
        for name in behind:
            steps.append(Step((hop, 0), KUBELET, (name,), floor, drain=True))
            kubelets[name] = floor
        for pool in installed.pools:
            if any(version.minors_after(kubelets[name]) > lag for name in pool.nodes if name in kubelets):
                steps.append(Step((hop, 0), MACHINE_DEPLOYMENT, pool.nodes, floor, pool=pool.key))
                kubelets.update((name, floor) for name in pool.nodes)
        if proxy is not None and version.minors_after(proxy) > lag:
            steps.append(Step((hop, 0), KUBE_PROXY, (), floor))
            proxy = floor
        for name in cps:
            if api[name] < version:
                steps.append(Step((hop, 1), APISERVER, (name,), version))
                api[name] = version
        for name in cps:
            if comp[name] < version:
                steps.append(Step((hop, 2), COMPONENTS, (name,), version))
                comp[name] = version
    last = len(chain) - 1
    if proxy is not None and proxy < target:
        steps.append(Step((last, 3), KUBE_PROXY, (), target))
    for name in cps:
        if kubelets[name] < target:
            steps.append(Step((last, 4), KUBELET, (name,), target, drain=True))
    pending = [name for name in workers if kubelets[name] < target]
    groups, info = worker_batches(pending, batching or Limits(max_unavailable), in_flight)
    for number, group in enumerate(groups, 1):
        steps.append(Step((last, 5), KUBELET, group, target, drain=True, batch=number))
    for pool in installed.pools:
        # a pool is done when no node of it runs an older kubelet and, once its class names the target, its rollout
        # is complete (while old machines are being deleted and new ones not yet joined, every Node present may
        # already be new)
        behind = [name for name in pool.nodes if kubelets.get(name) is not None and kubelets[name] < target]
        if behind or (pool.class_version == target and not pool.complete):
            steps.append(Step((last, 6), MACHINE_DEPLOYMENT, pool.nodes, target, pool=pool.key))
    return Plan(target, tuple(chain), tuple(steps), (), min(apis), batches=info if pending else None)


def etcd_version_of(tag_version: Optional[str]) -> Optional[Tuple[int, int, int]]:
    """`3.5.16-0` (registry.k8s.io/etcd's tags) -> (3, 5, 16)."""
    version = parse((tag_version or '').split('-', 1)[0])
    return (version.major, version.minor, version.patch) if version else None
