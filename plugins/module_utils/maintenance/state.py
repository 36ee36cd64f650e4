# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One reconciliation of one node: `reconcile(node, config, now, env) -> ReconcileResult`.

Per attached profile (label `cloud.sap/maintenance-profile`, `A--B`, none: `default`), in label order:

1. after a state change (data Previous != Current) run the state's `enter` trigger chain;
2. send the state's notifications whose schedule is due;
3. evaluate every transition of the state (see evaluation); take the first that passes: run the
   after-transition hooks of its checks (stagger takes its lease), then its trigger chain on a copy of
   the node, then set the profile's state and transition time. A failing hook or trigger aborts the
   transition (the node keeps its state and none of that chain's node changes) and is reported.

Then the node label `cloud.sap/maintenance-state` becomes the most critical state of the profiles and
the data annotation is rewritten; the result holds the merge patch for both (only changed keys).
Profiles fail independently: an error in one (unreadable chain result, failed trigger) does not stop
the others (upstream drops the whole reconcile); an unreadable data annotation stops everything and
leaves the node alone (upstream does the same).

**Races: the gate and commit contract.** Many nodes are reconciled at the same time (kopf workers,
several replicas). Checks that read other nodes or cluster-wide leases (maxMaintenance, stagger,
nodeCount, clusterSemver, anyLabel, affinity: `cluster_scoped`) would let every racing node see the
same free slot. So a transition whose check chain contains one is only a candidate after the first
evaluation; the engine then

* enters `env.gate()` - a context manager the caller provides that excludes every other gated
  section across the controller: a process-wide lock plus a cluster-wide mutex (a Lease via
  `kube.lease.LeaseMutex`) when replicas run concurrently; its time limit must cover the trigger
  chains of gated transitions (keep `drain` off transitions gated by maxMaintenance/stagger, or make
  the mutex renew itself);
* reads the cluster again through `env.fresh_nodes()` (a direct API list, not an informer cache:
  it must show every write committed inside earlier gates; defaults to `env.nodes`);
* evaluates that profile's transitions again on the fresh list, takes the one that passes (hooks,
  triggers), and
* calls `env.commit(node_name, patch)` **before leaving the gate**: the caller writes the node there
  (a merge patch of `metadata.labels`/`metadata.annotations`, no resourceVersion precondition, since
  the cordon/drain triggers write the node themselves). If commit raises, the result reports it
  with `committed=False` and the caller should retry.

If entering the gate raises (a mutex timeout), the cluster-scoped transitions wait for the next
reconcile and everything else (notifications sent, node-local transitions) is still committed.
Without gated candidates the engine still calls `env.commit` (outside any gate) when something
changed. With `env.commit=None` nothing is written and the caller applies `result.patch` itself -
only safe when nothing races (one-shot Ansible runs, tests).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import enum
from typing import Any, Dict, List, Optional, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.maintenance.config import Config, Instance, Profile
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.constants import (
    DATA_ANNOTATION, PROFILE_LABEL, STATE_LABEL)
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.data import NodeData, format_data, parse_data
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.environment import ClusterView, Environment, name_of
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.errors import DataError
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.evaluation import (
    ChainEvaluation, any_in_maintenance, attached_profiles, choose, evaluate_transitions, last_profile, maintain_profiles,
    make_params, node_state, plugin_failure)
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.gotime import seconds_to_ns
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.schedules import ScheduleInput


@dataclasses.dataclass
class TransitionRecord:
    profile: str
    source: str
    target: str
    gated: bool


@dataclasses.dataclass
class NotificationRecord:
    profile: str
    instance: str
    state: str


class ErrorKind(enum.Enum):
    """What failed in a reconcile; callers file errors by this, never by their text."""
    DATA = 'data'                   # the data annotation cannot be read: the node is left alone
    CHECK = 'check'                 # a check chain could not be evaluated
    TRIGGER = 'trigger'             # an enter chain, a trigger or a check's transition hook failed: no transition
    NOTIFICATION = 'notification'   # a notification was not sent (retried next reconcile)
    GATE = 'gate'                   # env.gate() could not be entered: cluster-scoped transitions wait
    COMMIT = 'commit'               # env.commit failed: nothing of this reconcile was persisted


@dataclasses.dataclass(frozen=True)
class ReconcileError:
    """One failure of a reconcile: `kind` to act on, `message` for people (it names the profile, the
    instance and the reason), `cause` the exception the environment raised (gate, commit), if any."""
    kind: ErrorKind
    message: str
    profile: str = ''
    cause: Optional[BaseException] = dataclasses.field(default=None, compare=False, repr=False)

    def __str__(self) -> str:
        return self.message


@dataclasses.dataclass
class ProfileOutcome:
    name: str
    start: str                              # state at the start of the reconcile
    state: str                              # state now
    evaluations: List[ChainEvaluation]
    error: str = ''


@dataclasses.dataclass
class ReconcileResult:
    node: str
    state: str                              # the new cloud.sap/maintenance-state
    patch: Dict[str, Any]                   # merge patch ({} when nothing changed); None values delete keys
    committed: bool                         # env.commit wrote the patch
    gated: bool                             # a cluster-scoped transition was decided inside the gate
    transitions: List[TransitionRecord]
    notifications: List[NotificationRecord]
    errors: List[ReconcileError]
    profiles: List[ProfileOutcome]
    requeue_after: float
    data: Optional[NodeData] = None

    def summary(self) -> Dict[str, Any]:
        """JSON-safe digest for logs, events and CR status."""
        return {'node': self.node, 'state': self.state, 'committed': self.committed, 'gated': self.gated,
                'transitions': [dataclasses.asdict(t) for t in self.transitions],
                'notifications': [dataclasses.asdict(n) for n in self.notifications], 'errors': [e.message for e in self.errors],
                'profiles': [{'name': p.name, 'start': p.start, 'state': p.state, 'error': p.error,
                              'transitions': [e.as_dict() for e in p.evaluations]} for p in self.profiles]}


def metadata_patch(before: Dict[str, Any], after: Dict[str, Any]) -> Dict[str, Any]:
    """Merge patch of labels and annotations: changed or new keys with their value, removed ones as None."""
    patch: Dict[str, Any] = {}
    for section in ('labels', 'annotations'):
        old = (before.get('metadata') or {}).get(section) or {}
        new = (after.get('metadata') or {}).get(section) or {}
        changes = {k: v for k, v in new.items() if old.get(k) != v or k not in old}
        changes.update({k: None for k in old if k not in new})
        if changes:
            patch.setdefault('metadata', {})[section] = changes
    return patch


class _Reconcile:
    def __init__(self, node: Dict[str, Any], config: Config, now: float, env: Environment):
        self.node = node
        self.config = config
        self.now = now
        self.now_ns = seconds_to_ns(now)
        self.env = env
        self.name = name_of(node)
        # The working copy: own metadata, labels and annotations (what checks may set up and finish writes);
        # the rest is shared with `node`, read-only here: triggers write into a deep copy (run_triggers). A deep
        # copy of every node was a third of a steady pass.
        self.working = dict(node)
        meta = self.working['metadata'] = dict(node.get('metadata') or {})
        meta['labels'] = dict(meta.get('labels') or {})
        meta['annotations'] = dict(meta.get('annotations') or {})
        self.errors: List[ReconcileError] = []
        self.transitions: List[TransitionRecord] = []
        self.notifications: List[NotificationRecord] = []
        self.outcomes: Dict[str, ProfileOutcome] = {}
        self.cluster = ClusterView(env.nodes, env.nodes_in_maintenance)
        self.raw: Optional[str] = meta['annotations'].get(DATA_ANNOTATION)
        self.data = NodeData()            # read in run()
        self.original = NodeData()
        self.profiles: List[Profile] = []
        self.last = ''

    def result(self, state: str, patch: Dict[str, Any], committed: bool, gated: bool, data: Optional[NodeData]) -> ReconcileResult:
        return ReconcileResult(self.name, state, patch, committed, gated, self.transitions, self.notifications, self.errors,
                               list(self.outcomes.values()), self.config.requeue, data)

    def fail(self, kind: ErrorKind, message: str, profile: str = '', cause: Optional[BaseException] = None) -> None:
        self.errors.append(ReconcileError(kind, message, profile, cause))

    def params(self, profile: Profile, state: str, cluster: ClusterView):
        entry = self.data.profiles[profile.name]
        return make_params(self.working, profile, entry, state, any_in_maintenance(self.data, self.profiles), self.now,
                           self.env, self.last, cluster)

    def run_triggers(self, chain: Tuple[Instance, ...], params) -> Dict[str, Any]:
        """Run a trigger chain on a copy of the working node; the copy if all succeed, else PluginError."""
        candidate = copy.deepcopy(self.working)
        scoped = dataclasses.replace(params, node=candidate)
        for instance in chain:
            try:
                instance.plugin.trigger(scoped)  # type: ignore[attr-defined]
            except Exception as exc:  # reported; the transition does not happen
                raise _ChainFailed('trigger %s (%s) failed: %s' % (instance.name, instance.type, plugin_failure(exc))) from None
        return candidate

    def notify(self, profile: Profile, state: str, previous: str) -> None:
        entry = self.data.profiles[profile.name]
        for instance in profile.chains(state).notify:
            last = self.data.notifications.get(instance.name)
            due = instance.schedule is not None and instance.schedule.should_notify(
                ScheduleInput(state, previous, self.now, last, entry.transition))
            if not due:
                continue
            try:
                instance.plugin.notify(self.params(profile, state, self.cluster))  # type: ignore[attr-defined]
            except Exception as exc:  # a failed notification is retried next reconcile, it never blocks
                self.fail(ErrorKind.NOTIFICATION, 'profile %s: notification %s (%s) failed: %s'
                          % (profile.name, instance.name, instance.type, plugin_failure(exc)), profile.name)
                continue
            self.data.notifications[instance.name] = self.now_ns
            self.notifications.append(NotificationRecord(profile.name, instance.name, state))

    def decide(self, profile: Profile, state: str, cluster: ClusterView) -> Tuple[List[ChainEvaluation], Optional[int]]:
        transitions = list(profile.chains(state).transitions)
        evaluations = evaluate_transitions(transitions, self.params(profile, state, cluster))
        for evaluation in evaluations:
            if evaluation.error:
                self.fail(ErrorKind.CHECK, 'profile %s: transition %s -> %s: %s' % (profile.name, state, evaluation.next, evaluation.error),
                          profile.name)
        return evaluations, choose(evaluations)

    def take(self, profile: Profile, state: str, index: int, evaluation: ChainEvaluation, cluster: ClusterView, gated: bool) -> None:
        transition = profile.chains(state).transitions[index]
        params = self.params(profile, state, cluster)
        try:
            for instance in transition.check.instances:
                result = evaluation.results.get(instance.name)
                if result is not None and result.passed:
                    try:
                        instance.plugin.on_transition(params, result)  # type: ignore[attr-defined]
                    except Exception as exc:
                        raise _ChainFailed('check %s (%s) could not complete the transition: %s'
                                           % (instance.name, instance.type, plugin_failure(exc))) from None
            self.working = self.run_triggers(transition.trigger, params)
        except _ChainFailed as exc:
            evaluation.error = str(exc)
            self.fail(ErrorKind.TRIGGER, 'profile %s: transition %s -> %s aborted: %s' % (profile.name, state, transition.next, exc),
                      profile.name)
            return
        entry = self.data.profiles[profile.name]
        entry.current, entry.transition = transition.next, self.now_ns
        self.transitions.append(TransitionRecord(profile.name, state, transition.next, gated))

    def first_pass(self, profile: Profile) -> Optional[Tuple[Profile, str]]:
        """Enter, notify, decide; take node-local transitions at once, return cluster-scoped ones for the gate."""
        entry = self.data.profiles[profile.name]
        state, previous = entry.current, entry.previous
        outcome = ProfileOutcome(profile.name, state, state, [])
        self.outcomes[profile.name] = outcome
        chains = profile.chains(state)
        if previous != state and chains.enter:
            try:
                self.working = self.run_triggers(chains.enter, self.params(profile, state, self.cluster))
            except _ChainFailed as exc:
                outcome.error = 'entering %s: %s' % (state, exc)
                self.fail(ErrorKind.TRIGGER, 'profile %s: entering %s: %s' % (profile.name, state, exc), profile.name)
                return None   # Previous stays, so entering is tried again next time
        self.notify(profile, state, previous)
        entry.previous = state
        outcome.evaluations, index = self.decide(profile, state, self.cluster)
        if index is None:
            return None
        if profile.chains(state).transitions[index].check.cluster_scoped:
            return profile, state
        self.take(profile, state, index, outcome.evaluations[index], self.cluster, False)
        outcome.state = self.data.profiles[profile.name].current
        return None

    def gated_pass(self, deferred: List[Tuple[Profile, str]]) -> None:
        fresh = ClusterView(self.env.fresh_nodes or self.env.nodes)
        for profile, state in deferred:
            outcome = self.outcomes[profile.name]
            outcome.evaluations, index = self.decide(profile, state, fresh)
            if index is not None:
                self.take(profile, state, index, outcome.evaluations[index], fresh, True)
            outcome.state = self.data.profiles[profile.name].current

    def finish(self, gated: bool) -> ReconcileResult:
        state = node_state(self.data, self.profiles)
        self.working['metadata']['labels'][STATE_LABEL] = state
        annotations = self.working['metadata']['annotations']
        if not (self.data == self.original and self.original.version == 2 and self.raw):
            annotations[DATA_ANNOTATION] = format_data(self.data)
        patch = metadata_patch(self.node, self.working)
        committed = False
        if patch and self.env.commit is not None:
            try:
                self.env.commit(self.name, patch)
                committed = True
            except Exception as exc:  # the caller retries; nothing of this reconcile is persisted
                self.fail(ErrorKind.COMMIT, 'commit of node %s failed: %s: %s' % (self.name, type(exc).__name__, exc), cause=exc)
        return self.result(state, patch, committed, gated, self.data)

    def run(self) -> ReconcileResult:
        labels = (self.node.get('metadata') or {}).get('labels') or {}
        try:
            self.data = parse_data(self.raw, labels)
        except DataError as exc:
            self.fail(ErrorKind.DATA, 'node %s: %s; leaving the node alone' % (self.name, exc), cause=exc)
            return self.result(labels.get(STATE_LABEL, ''), {}, False, False, None)
        self.original = self.data.copy()
        profile_label = labels.get(PROFILE_LABEL, '')
        maintain_profiles(self.data, profile_label, self.config, self.now_ns)
        self.profiles = attached_profiles(profile_label, self.config)
        self.last = last_profile(self.data)
        deferred = [d for d in (self.first_pass(p) for p in self.profiles) if d is not None]
        if not deferred:
            return self.finish(False)
        with contextlib.ExitStack() as stack:
            try:
                stack.enter_context(self.env.gate())
            except Exception as exc:  # e.g. the cluster-wide mutex timed out: keep what was done outside the gate
                for profile, _start in deferred:
                    self.outcomes[profile.name].error = 'not decided: the gate could not be entered'
                self.fail(ErrorKind.GATE, 'gate: %s: %s; cluster-scoped transitions wait for the next reconcile'
                          % (type(exc).__name__, exc), cause=exc)
                return self.finish(False)
            self.gated_pass(deferred)
            return self.finish(True)


class _ChainFailed(Exception):
    pass


def reconcile(node: Dict[str, Any], config: Config, now: float, env: Optional[Environment] = None) -> ReconcileResult:
    """Reconcile one Node object (a dict as the API returns it; not modified). See the module docstring."""
    return _Reconcile(node, config, now, env or Environment()).run()
