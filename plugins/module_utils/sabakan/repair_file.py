# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""`sabakan_repair state=run|absent` over the repair queue file: the same planner (repair_run) and runner
(repair_exec) as the controller, with the queue file as the store.

An entry in the file carries CKE's RepairQueueEntry fields (`index`, `address`, `machine_type`, `operation`,
`status`, `step`, `step_status`, `last_transition_time`, `drain_backoff_count`, `drain_backoff_expire`,
`nodename`) plus `cordoned` and `message`. Every status change is written to the file at once (atomically), so a
play stopped half-way leaves the entry where it was, and the next run picks it up from there.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Set, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput, about_option
from ansible_collections.steward.cluster.plugins.module_utils.kube.errors import KubeError
from ansible_collections.steward.cluster.plugins.module_utils.sabakan import repair_exec, repair_run
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.errors import OptionError, RepairNotFinished
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.files import (
    RepairQueue, apply_file_update, dump_yaml, load_cluster_file, load_repair_queue, parse_mode, plan_file_update,
)
from ansible_collections.steward.cluster.plugins.module_utils.kube.conditions import rfc3339
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.repair_config import RepairConfig, load_repair_config


def file_entry(item: Mapping[str, Any], node: Optional[str], api_server: bool) -> repair_run.Entry:
    return repair_run.stored_entry(
        str(item.get('index')), item.get('address'), item.get('machine_type'), item.get('operation'),
        item.get('status'), item.get('step'), item.get('step_status'), item.get('last_transition_time'),
        item.get('drain_backoff_count'), item.get('drain_backoff_expire'), item.get('created'), node=node,
        api_server=api_server)


def _file_fields(fields: Mapping[str, Any]) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    for key, value in fields.items():
        if key == 'last_transition':
            out['last_transition_time'] = rfc3339(value)
        elif key == 'drain_backoff_expire':
            out['drain_backoff_expire'] = rfc3339(value) if value else None
        elif key == 'node':
            out['nodename'] = value
        else:
            out[key] = value
    return out


class FilePorts(repair_exec.Ports):
    """Status into the queue file (written at each change), Events into a list the module returns, drains
    through the Kubernetes API when a client is given."""

    def __init__(self, queue: RepairQueue, path: str, mode: Optional[int], kube: Any = None,
                 clock: Callable[[], float] = time.time, sleep: Callable[[float], None] = time.sleep) -> None:
        self.queue = queue
        self.path = path
        self.mode = mode
        self.kube = kube
        self.events: List[Dict[str, Any]] = []
        self.changed = False
        self._clock = clock
        self._sleep = sleep

    def item(self, entry: repair_run.Entry) -> Dict[str, Any]:
        return next(i for i in self.queue.entries if str(i.get('index')) == entry.name)

    def save(self, entry: repair_run.Entry, fields: Dict[str, Any]) -> None:
        self.item(entry).update(_file_fields(fields))
        apply_file_update(plan_file_update(self.path, dump_yaml(self.queue.as_document()), self.mode, 'repair queue'))
        self.changed = True

    def event(self, entry: repair_run.Entry, reason: str, message: str, warning: bool = False) -> None:
        self.events.append({'index': int(entry.name), 'reason': reason, 'message': message,
                            'type': 'Warning' if warning else 'Normal'})

    def drain(self, entry: repair_run.Entry, config: RepairConfig) -> Tuple[bool, bool, str]:
        from ansible_collections.steward.cluster.plugins.module_utils.kube.drain import DrainError, drain
        if not (entry.node and self.kube is not None):
            raise AssertionError('entry.node and self.kube is not None')
        try:
            result = drain(self.kube, entry.node, timeout=float(config.eviction_timeout_seconds),
                           eviction_timeout=float(config.evict_retries * config.evict_interval),
                           protected_namespaces=(), force=False, clock=self._clock, sleep=self._sleep)
        except DrainError as exc:
            return False, bool(exc.result and exc.result.cordoned), str(exc)
        except KubeError as exc:
            return False, False, 'Kubernetes API: %s' % exc
        return True, result.cordoned, result.message

    def uncordon(self, entry: repair_run.Entry) -> str:
        from ansible_collections.steward.cluster.plugins.module_utils.kube.drain import DrainError, uncordon
        if not (entry.node and self.kube is not None):
            raise AssertionError('entry.node and self.kube is not None')
        try:
            uncordon(self.kube, entry.node)
        except (DrainError, KubeError) as exc:
            return 'could not uncordon Node %s: %s' % (entry.node, exc)
        return 'Node %s uncordoned' % entry.node

    def sleep(self, seconds: float) -> bool:
        self._sleep(seconds)
        return True

    def clock(self) -> float:
        return self._clock()


def pick(queue: RepairQueue, index: Optional[int]) -> Dict[str, Any]:
    """The entry `index`, or the oldest unfinished one; OptionError naming `index` when there is none."""
    if index is not None:
        for item in queue.entries:
            if item.get('index') == index:
                return item
        raise OptionError('index', 'exists', 'no entry with index %d in the repair queue' % index, index)
    for item in queue.entries:
        if item.get('status', repair_run.QUEUED) not in repair_run.FINISHED:
            return item
    raise OptionError('index', 'exists', 'no unfinished entry in the repair queue to run')


def to_delete(queue: RepairQueue, index: Optional[int]) -> List[Dict[str, Any]]:
    """state=absent: the finished entries (or the one `index`, which must be finished: a running repair is not
    dropped from under its drain)."""
    if index is None:
        return [i for i in queue.entries if i.get('status') in repair_run.FINISHED]
    item = pick(queue, index)
    if item.get('status') not in repair_run.FINISHED:
        raise OptionError('index', 'finished', 'entry %d is %s, not finished (succeeded or failed); it can be deleted '
                          'once it has finished' % (index, item.get('status', repair_run.QUEUED)), index)
    return [item]


def entries_of(queue: RepairQueue, nodes: Mapping[str, str], api_servers: Set[str]) -> List[repair_run.Entry]:
    return [file_entry(i, nodes.get(str(i.get('address'))), str(i.get('address')) in api_servers) for i in queue.entries]


def next_decision(queue: RepairQueue, item: Mapping[str, Any], config: RepairConfig, nodes: Mapping[str, str],
                  api_servers: Set[str], healthy: Mapping[str, Optional[bool]], now: float) -> repair_run.Decision:
    plan = repair_run.plan_pass(entries_of(queue, nodes, api_servers), config, healthy, now=now)
    name = str(item.get('index'))
    for decision in plan.decisions:
        if decision.entry.name == name:
            return decision
    raise OptionError('index', 'finished', 'entry %s has already finished (%s)' % (name, item.get('status')), name)


def run_to_end(queue: RepairQueue, item: Dict[str, Any], config: RepairConfig, ports: FilePorts,
               nodes: Mapping[str, str], api_servers: Set[str], *, timeout: float, poll: float) -> repair_run.Decision:
    """Pass after pass, for the one entry, until it has finished; OptionError when a limit holds it (another
    repair runs) or `timeout` runs out (the file keeps where it is: run again to continue)."""
    deadline = ports.clock() + timeout
    node = nodes.get(str(item.get('address')))
    if (item.get('nodename') or None) != node:   # CKE's nodename: refreshed each run (machines join and leave)
        ports.save(file_entry(item, node, False), {'node': node or ''})
    while True:
        entry = file_entry(item, nodes.get(str(item.get('address'))), str(item.get('address')) in api_servers)
        operation = config.operation_for(entry.machine_type, entry.operation)
        healthy: Dict[str, Optional[bool]] = {}
        if operation is not None:
            healthy[entry.name] = repair_exec.health_check(operation, entry.address)[0]
        decision = next_decision(queue, item, config, nodes, api_servers, healthy, ports.clock())
        if decision.action == repair_run.Action.UNCONFIGURED:
            raise OptionError('repair', 'procedure', decision.reason + ' in repair.repair_procedures')
        if decision.limited:
            raise RepairNotFinished('entry %s waits: %s' % (entry.name, decision.reason))
        status = repair_exec.apply(decision, config, ports, cordoned=bool(item.get('cordoned')))
        if status in repair_run.FINISHED:
            return decision
        left = deadline - ports.clock()
        if left <= 0:
            raise RepairNotFinished('entry %s is still %s at step %d after run_timeout=%gs; run again to continue '
                                    'from there' % (entry.name, item.get('status'), item.get('step') or 0, timeout))
        if decision.action == repair_run.Action.WAIT:
            ports.sleep(min(poll, left))


KUBE_OPTIONS = ('kubeconfig', 'context', 'host', 'api_key')


def wants_kube(params: Mapping[str, Any]) -> bool:
    """A Kubernetes API is named (kubernetes.core's options: `kubeconfig`, or `host`)."""
    return bool(params.get('kubeconfig') or params.get('host'))


def kube_client(params: Mapping[str, Any]) -> Any:
    """A Kubernetes client for kubernetes.core's connection options of the module (`kubeconfig`, `context`, `host`,
    `api_key`; `validate_certs` and `ca_path`, alias `ca_cert`, serve both the sabakan and the Kubernetes API);
    OptionError naming `kubeconfig` when they do not make a usable client."""
    from ansible_collections.steward.cluster.plugins.module_utils.kube.args import client_from_params
    settings = {name: params.get(name) for name in KUBE_OPTIONS}
    settings.update(validate_certs=params.get('validate_certs', True), ca_cert=params.get('ca_path'))
    try:
        return client_from_params(settings)    # a bad host, api_key or ca file: InvalidInput naming that option
    except KubeError as exc:
        raise OptionError('kubeconfig', 'kubeconfig', 'not a usable kubeconfig: %s' % exc) from None


def cluster_view(cluster: Optional[Mapping[str, Any]], params: Mapping[str, Any], item: Mapping[str, Any],
                 config: RepairConfig) -> Tuple[Any, Dict[str, str], Set[str]]:
    """(Kubernetes client or None, address -> Node name, API server addresses) for state=run. Without a
    kubeconfig no machine counts as a Node, so a step that needs a drain on a cluster node is refused
    (OptionError naming kubeconfig) before anything runs: skipping the drain would repair under the Pods."""
    members = {str(n.get('address')): n for n in (cluster or {}).get('nodes') or [] if isinstance(n, Mapping)}
    api_servers = {a for a, n in members.items() if n.get('control_plane')}
    address = str(item.get('address') or '')
    if not wants_kube(params):
        operation = config.operation_for(str(item.get('machine_type') or ''), str(item.get('operation') or ''))
        if address in members and operation is not None and any(s.need_drain for s in operation.repair_steps):
            raise OptionError('kubeconfig', 'required', 'required: %s is a node of cluster_file and a repair step of '
                              'operation %r has need_drain' % (address, operation.operation))
        return None, {}, api_servers
    from ansible_collections.steward.cluster.plugins.module_utils.kube.client import api_path
    from ansible_collections.steward.cluster.plugins.module_utils.sabakan.kube_nodes import NodeIndex, node_name
    kube = kube_client(params)
    try:
        index = NodeIndex(kube.list(api_path('v1', 'nodes')))
    except (KubeError, InvalidInput) as exc:
        raise OptionError('kubeconfig', 'reachable', 'cannot list the Nodes: %s' % exc) from None
    node = index.match(members.get(address) or {'address': address})
    return kube, ({address: node_name(node)} if node is not None else {}), api_servers


def run_or_delete(params: Mapping[str, Any], check_mode: bool) -> Dict[str, Any]:
    """`sabakan_repair` state=run (drive one entry to the end, or in check mode say its next action) and state=absent
    (delete finished entries) over the queue file; the module's result."""
    path = params['queue_file']
    mode = parse_mode(params['mode'])
    config = load_repair_config(params['repair']) if params['repair'] is not None else None
    with about_option('queue_file'):
        queue = load_repair_queue(path)
    if params['state'] == 'absent':
        doomed = to_delete(queue, params['index'])
        if doomed and not check_mode:
            queue.entries = [e for e in queue.entries if all(e is not d for d in doomed)]
            apply_file_update(plan_file_update(path, dump_yaml(queue.as_document()), mode, 'repair queue'))
        return dict(changed=bool(doomed), deleted=doomed, queue_length=len(queue.entries) - (len(doomed) if check_mode else 0))
    if config is None:
        raise OptionError('repair', 'required', "required with state=run: CKE's repair configuration")
    with about_option('cluster_file'):
        cluster = load_cluster_file(params['cluster_file']) if params['cluster_file'] else None
    item = pick(queue, params['index'])
    kube, nodes, api_servers = cluster_view(cluster, params, item, config)
    if item.get('status') in ('succeeded', 'failed'):
        return dict(changed=False, entry=item, events=[], next_action={}, queue_length=len(queue.entries))
    ports = FilePorts(queue, path, mode, kube)
    if check_mode:   # changed: the run would act (drain, run a command, finish the entry)
        decision = next_decision(queue, item, config, nodes, api_servers, {}, ports.clock())
        ports.changed = decision.action.value not in ('wait', 'unconfigured')
    else:
        decision = run_to_end(queue, item, config, ports, nodes, api_servers,
                              timeout=params['run_timeout'], poll=params['poll_interval'])
    return dict(changed=ports.changed, entry=item, events=ports.events, queue_length=len(queue.entries),
                next_action={'action': decision.action.value, 'step': decision.step, 'reason': decision.reason})
