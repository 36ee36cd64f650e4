#!/usr/bin/env python
# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The lab's kubelets and node lifecycle controller: Nodes and node Leases for the machines of the lab's cloud.

Targets (one inventory every `renew_interval`):
* every EC2 instance the lab's EC2 reports (one filtered, paginated DescribeInstances): a running one has a
  kubelet; a stopping/stopped/shutting-down one has none (its Lease stops); a terminated one (or one EC2 no longer
  lists) is gone. Node name = PrivateDnsName, providerID `aws:///<region>/<instance-id>`;
* every claimed sabakan machine: a `coordination.k8s.io/v1` Lease `sabakan-claim-<serial>` (any namespace) with
  label `machine.steward.io/sabakan-serial: <serial>` and annotation `machine.steward.io/sabakan-address: <ipv4>`
  (the claim contract of the machines area). Node name = the address (as CKE names nodes), providerID
  `sabakan:///<serial>`. A released claim means the machine left the cluster: gone.

As a kubelet: register the Node (labels kubernetes.io/hostname, node.kubernetes.io/instance-type,
topology.kubernetes.io/region and /zone, os and arch; capacity from the instance type; addresses), post Ready=True
with the other standard conditions False, and renew the Lease in `kube-node-lease` every `renew_interval`.
As the node lifecycle controller: a Node whose Lease was last renewed more than `grace` seconds ago gets Ready
(and the pressure conditions) `Unknown` with reason `NodeStatusUnknown` and the `node.kubernetes.io/unreachable`
taints; when renewals resume the kubelet posts Ready=True and the taints go. As the cloud node lifecycle
controller: a Node whose machine is gone is deleted `delete_after` seconds after that was first seen (with its
Lease), never one whose instance still exists. Only Nodes this emulator registered (annotation
`lab.steward.io/node-emulator`) are ever touched.

Faults: `partition(names)` / `heal(names)` write `node-faults.json` in the state dir, which a running emulator
re-reads every pass (so `python lab/lab.py partition|heal --state .lab` reaches the lab's emulator process). A
partitioned kubelet neither registers, renews nor posts status. `all` partitions every node, new ones too.

This is a test double: it imports nothing from the collection, talks to EC2 with boto3 (User-Agent
`steward-lab/nodes`: not lagged, throttled or counted by the fidelity layer) and to the API with plain HTTP.

    python -m lab.cloud.nodes run --kube-url URL [--ec2-url URL] --state-dir .lab [--renew-interval 10 --grace 40 ...]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import logging
import os
import signal
import sys
import threading
import time
from collections import Counter
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple
from urllib.parse import quote

import requests

from lab.cloud.ec2_fidelity import LAB_ACCESS_KEY_ID, LAB_AGENT, LAB_REGION, LAB_SECRET_ACCESS_KEY
from lab.cloud.node_objects import (CLAIM_PREFIX, EC2_STATES, LEASE_NAMESPACE, MARKER, SERIAL_LABEL, UNREACHABLE, Target,
                                    ec2_targets, is_ready, lease_object, micro_time, node_object, parse_time,
                                    ready_conditions, rfc3339, sabakan_targets, taints_without_unreachable,
                                    unknown_conditions)

LOG = logging.getLogger('lab.nodes')
FAULTS_FILE = 'node-faults.json'
NODES = '/api/v1/nodes'
LEASES = '/apis/coordination.k8s.io/v1/namespaces/%s/leases' % LEASE_NAMESPACE


# --- faults file ----------------------------------------------------------------------------------------------
def faults_path(state_dir: str) -> str:
    return os.path.join(os.path.abspath(state_dir), FAULTS_FILE)


def read_faults(state_dir: str) -> Dict[str, Any]:
    """{'all': bool, 'nodes': [names]}; no file means no faults."""
    try:
        with open(faults_path(state_dir)) as f:
            data = json.load(f)
    except FileNotFoundError:
        return {'all': False, 'nodes': []}
    except (OSError, ValueError) as exc:
        raise ValueError('%s is not a faults file: %s' % (faults_path(state_dir), exc))
    return {'all': bool(data.get('all')), 'nodes': sorted(set(data.get('nodes') or []))}


def _write_faults(state_dir: str, faults: Dict[str, Any]) -> Dict[str, Any]:
    os.makedirs(os.path.abspath(state_dir), exist_ok=True)
    path = faults_path(state_dir)
    tmp = '%s.%d.tmp' % (path, os.getpid())
    with open(tmp, 'w') as f:
        json.dump(faults, f, sort_keys=True)
    os.replace(tmp, path)
    return faults


def partition(state_dir: str, names: Optional[Iterable[str]] = None) -> Dict[str, Any]:
    """Cut these nodes (None: all, new ones included) off the API server; adds to what is already cut off."""
    faults = read_faults(state_dir)
    if names is None:
        faults['all'] = True
    else:
        faults['nodes'] = sorted(set(faults['nodes']) | set(names))
    return _write_faults(state_dir, faults)


def heal(state_dir: str, names: Optional[Iterable[str]] = None) -> Dict[str, Any]:
    """Reconnect these nodes (None: every node, and `all` is lifted)."""
    faults = read_faults(state_dir)
    if names is None:
        faults = {'all': False, 'nodes': []}
    else:
        faults['nodes'] = sorted(set(faults['nodes']) - set(names))
    return _write_faults(state_dir, faults)


# --- the API, plainly ---------------------------------------------------------------------------------------------
class ApiError(Exception):
    def __init__(self, method: str, path: str, status: int, text: str) -> None:
        super().__init__('%s %s: HTTP %s %s' % (method, path, status, text[:300]))
        self.status = status


class Api:
    """JSON over HTTP to the Kubernetes API (no client library: a test double shares no code with its subject)."""

    def __init__(self, url: str, token: Optional[str] = None, timeout: float = 10.0) -> None:
        self.url = url.rstrip('/')
        self.timeout = timeout
        self.session = requests.Session()
        if token:
            self.session.headers['Authorization'] = 'Bearer ' + token

    def call(self, method: str, path: str, body: Any = None, params: Optional[Dict[str, str]] = None,
             content_type: str = 'application/json') -> Any:
        data = None if body is None else json.dumps(body)
        answer = self.session.request(method, self.url + path, data=data, params=params, timeout=self.timeout,
                                      headers={'Content-Type': content_type, 'Accept': 'application/json'})
        if answer.status_code >= 300:
            raise ApiError(method, path, answer.status_code, answer.text)
        return answer.json() if answer.content else None

    def items(self, path: str, params: Optional[Dict[str, str]] = None) -> List[Dict[str, Any]]:
        return (self.call('GET', path, params=params) or {}).get('items') or []

    def merge_patch(self, path: str, body: Dict[str, Any]) -> Dict[str, Any]:
        return self.call('PATCH', path, body, content_type='application/merge-patch+json')

    def close(self) -> None:
        self.session.close()


# --- the emulator -------------------------------------------------------------------------------------------------
class NodeEmulator:
    """Kubelets for the lab's machines plus the node lifecycle controllers (see the module docstring).

    Runs in threads (`start()` / `stop()`) or in the foreground (`run_forever()`); `pass_once()` is one pass.
    Timings are seconds: `renew_interval` (Lease renewals and inventory; kubelet default 10), `grace` (Ready turns
    Unknown that long after the last renewal; node-monitor-grace-period 40), `delete_after` (a gone machine's Node
    is deleted; 60). The inventory runs in its own thread, so a slow cloud listing never delays a renewal, and a
    pass writes with `workers` concurrent requests. `stats` counts what it did (passes, inventory calls,
    registrations, renewals, unknowns, deletions); `last_pass_seconds` is how long the last pass took.
    """

    def __init__(self, kube_url: str, ec2_url: Optional[str] = None, region: str = LAB_REGION,
                 renew_interval: float = 10.0, grace: float = 40.0, delete_after: float = 60.0,
                 state_dir: Optional[str] = None, sabakan: bool = True, kube_token: Optional[str] = None,
                 access_key_id: str = LAB_ACCESS_KEY_ID, secret_access_key: str = LAB_SECRET_ACCESS_KEY,
                 clock: Callable[[], float] = time.time, workers: int = 8) -> None:
        for name, value in (('renew_interval', renew_interval), ('grace', grace), ('delete_after', delete_after)):
            if not value > 0:
                raise ValueError('%s must be a positive number of seconds, got %r' % (name, value))
        if state_dir is None:
            import tempfile
            state_dir = tempfile.mkdtemp(prefix='steward-nodes-')
        self.kube_url, self._kube_token = kube_url, kube_token
        self._local = threading.local()
        self._apis: List[Api] = []
        self.ec2_url, self.region, self.sabakan = ec2_url, region, sabakan
        self.renew_interval, self.grace, self.delete_after = float(renew_interval), float(grace), float(delete_after)
        # Passes run at a fixed rate; a Lease is renewed at the pass nearest to renew_interval after the last
        # renewal (so on average exactly every renew_interval), and Ready turns Unknown within a tick of the grace.
        self.tick = max(0.05, min(self.renew_interval / 4.0, self.grace / 4.0, 5.0))
        self.state_dir = os.path.abspath(state_dir)
        self.clock = clock
        self._keys = (access_key_id, secret_access_key)
        self._ec2: Any = None
        self._details: Dict[str, Dict[str, Any]] = {}  # instance id -> what DescribeInstances said (names, type)
        # (targets, {'aws': listed?, 'sabakan': listed?}): replaced as a whole by the inventory thread
        self._inventory_state: Tuple[Dict[str, Target], Dict[str, bool]] = ({}, {'aws': False, 'sabakan': False})
        self._inventoried = threading.Event()
        self._renewed: Dict[str, float] = {}
        self._gone_since: Dict[str, float] = {}
        self._faults: Dict[str, Any] = {'all': False, 'nodes': []}
        self._warned: set = set()
        self._lock = threading.Lock()
        self.stats: Counter = Counter()
        self.last_pass_seconds = 0.0
        self._pool = concurrent.futures.ThreadPoolExecutor(max(1, workers), thread_name_prefix='node-emulator')
        self._stop = threading.Event()
        self._threads: List[threading.Thread] = []

    @property
    def targets(self) -> Dict[str, Target]:
        return self._inventory_state[0]

    @property
    def api(self) -> Api:
        """This thread's connection to the API (requests sessions are not shared between threads)."""
        api = getattr(self._local, 'api', None)
        if api is None:
            api = self._local.api = Api(self.kube_url, self._kube_token)
            with self._lock:
                self._apis.append(api)
        return api

    def _count(self, key: str) -> None:
        with self._lock:
            self.stats[key] += 1

    # --- running --------------------------------------------------------------------------------
    def start(self) -> 'NodeEmulator':
        thread = threading.Thread(target=self.run_forever, name='node-emulator', daemon=True)
        self._threads.append(thread)
        thread.start()
        return self

    def request_stop(self) -> None:
        """Ask the loops to end after the current pass (safe from a signal handler)."""
        self._stop.set()

    def stop(self, timeout: float = 30.0) -> None:
        self.request_stop()
        for thread in self._threads:
            thread.join(timeout)
        self._pool.shutdown(wait=True, cancel_futures=True)
        for api in self._apis:
            api.close()

    def run_forever(self) -> None:
        inventory = threading.Thread(target=self._inventory_loop, name='node-emulator-inventory', daemon=True)
        self._threads.append(inventory)
        inventory.start()
        self._inventoried.wait(self.renew_interval)
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                self.pass_once()
            except (requests.RequestException, ApiError, ValueError) as exc:  # the API may be down for a while
                LOG.warning('pass failed: %s', exc)
            except RuntimeError:  # the pool was shut down under a pass: stop() was called
                if not self._stop.is_set():
                    raise
            self.last_pass_seconds = time.monotonic() - started
            self._count('passes')
            self._stop.wait(max(0.0, self.tick - self.last_pass_seconds))

    def _inventory_loop(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            self.inventory()
            self._inventoried.set()
            self._stop.wait(max(0.0, self.renew_interval - (time.monotonic() - started)))

    def partition(self, names: Optional[Iterable[str]] = None) -> None:
        self._faults = partition(self.state_dir, names)

    def heal(self, names: Optional[Iterable[str]] = None) -> None:
        self._faults = heal(self.state_dir, names)

    def cut_off(self, name: str) -> bool:
        return bool(self._faults['all']) or name in self._faults['nodes']

    # --- one pass -------------------------------------------------------------------------------
    def pass_once(self) -> None:
        """Kubelets renew and post, then the lifecycle controllers look at every Node this emulator owns."""
        now = self.clock()
        try:
            self._faults = read_faults(self.state_dir)
        except ValueError as exc:
            LOG.warning('%s; keeping the faults read before', exc)
        nodes = {n['metadata']['name']: n for n in self.api.items(NODES)
                 if MARKER in ((n.get('metadata') or {}).get('annotations') or {})}
        leases = {lease['metadata']['name']: lease for lease in self.api.items(LEASES)}
        self._run([(self._kubelet, (t, nodes.get(t.name), leases.get(t.name), now)) for t in self.targets.values()
                   if t.alive and not self.cut_off(t.name)])
        # then the controllers, which see the renewals just made (the lists above were read before them)
        self._run([(self._lifecycle, (name, node, leases.get(name), now)) for name, node in nodes.items()])

    def _run(self, work: List[Tuple[Callable[..., None], Tuple[Any, ...]]]) -> None:
        if self._stop.is_set():  # stopping: the pool may be shut down already
            return
        for future in [self._pool.submit(fn, *args) for fn, args in work]:
            try:
                future.result()
            except (requests.RequestException, ApiError) as exc:  # one node's write: the next pass retries
                LOG.warning('%s', exc)

    def inventory(self) -> None:
        """The cloud's machines and the sabakan claims; a listing that fails keeps what the last one found."""
        old_targets, old_listed = self._inventory_state
        targets: Dict[str, Target] = {}
        listed = dict(old_listed)
        if self.ec2_url:
            try:
                targets.update(ec2_targets(self._instances(), self.region))
                listed['aws'] = True
            except Exception as exc:  # noqa: BLE001 - botocore raises many kinds; the cloud may be down
                LOG.warning('listing EC2 instances failed: %s; keeping the last inventory', exc)
                listed['aws'] = False
                targets.update({n: t for n, t in old_targets.items() if t.provider_id.startswith('aws:')})
        if self.sabakan:
            try:
                claims = self.api.items('/apis/coordination.k8s.io/v1/leases', {'labelSelector': SERIAL_LABEL})
                for name, target in sabakan_targets(c for c in claims
                                                    if c['metadata']['name'].startswith(CLAIM_PREFIX)).items():
                    targets.setdefault(name, target)
                listed['sabakan'] = True
            except (requests.RequestException, ApiError) as exc:
                LOG.warning('listing sabakan claims failed: %s; keeping the last inventory', exc)
                listed['sabakan'] = False
                targets.update({n: t for n, t in old_targets.items() if t.provider_id.startswith('sabakan:')})
        self._inventory_state = (targets, listed)

    def _instances(self) -> List[Dict[str, Any]]:
        """Every instance in the shape DescribeInstances gives. One paginated DescribeInstanceStatus (every
        state) per inventory, and DescribeInstances only for instances not seen before: moto spends ~7 ms of
        CPU per instance serializing DescribeInstances (3.5 s a listing at 500 instances), ~10x less here."""
        if self._ec2 is None:
            import boto3
            from botocore.config import Config
            self._ec2 = boto3.client('ec2', endpoint_url=self.ec2_url, region_name=self.region,
                                     aws_access_key_id=self._keys[0], aws_secret_access_key=self._keys[1],
                                     config=Config(user_agent_extra=LAB_AGENT + 'nodes',
                                                   retries={'total_max_attempts': 2}))
        self._count('describe_instance_status')
        pages = self._ec2.get_paginator('describe_instance_status').paginate(
            IncludeAllInstances=True, PaginationConfig={'PageSize': 1000})
        statuses = {s['InstanceId']: s for page in pages for s in page['InstanceStatuses']}
        new = sorted(set(statuses) - set(self._details))
        for chunk in range(0, len(new), 200):
            self._count('describe_instances')
            for page in self._ec2.get_paginator('describe_instances').paginate(InstanceIds=new[chunk:chunk + 200]):
                for reservation in page['Reservations']:
                    for inst in reservation['Instances']:
                        self._details[inst['InstanceId']] = inst
        for gone in set(self._details) - set(statuses):
            del self._details[gone]
        return [dict(self._details[i], State=s['InstanceState'],
                     Placement={'AvailabilityZone': s.get('AvailabilityZone', '')})
                for i, s in statuses.items() if i in self._details and s['InstanceState']['Name'] in EC2_STATES]

    # --- kubelet ----------------------------------------------------------------------------------
    def _kubelet(self, target: Target, node: Optional[Dict[str, Any]], lease: Optional[Dict[str, Any]],
                 now: float) -> None:
        if node is None:
            node = self._register(target, now)
            if node is None:
                return
        elif is_ready(node) != 'True' or len(taints_without_unreachable(node)) != len((node.get('spec') or {}).get(
                'taints') or []):
            self._post_ready(node, now)
        if node is not None and ((node.get('status') or {}).get('nodeInfo') or {}).get('kubeletVersion') \
                != target.kubelet_version:
            # updated where it stands (an in-place update): the kubelet came back at another version
            self.api.merge_patch('%s/%s/status' % (NODES, quote(target.name)), {'status': {'nodeInfo': {
                'kubeletVersion': target.kubelet_version, 'kubeProxyVersion': target.kubelet_version}}})
            LOG.info('node %s: kubelet %s', target.name, target.kubelet_version)
        if lease is None:
            self._create_lease(node, now)
        elif now - self._renewed.get(target.name, 0.0) >= self.renew_interval - self.tick / 2:
            self.api.merge_patch('%s/%s' % (LEASES, quote(target.name)), {'spec': {'renewTime': micro_time(now)}})
            self._renewed[target.name] = now
            self._count('renewals')

    def _register(self, target: Target, now: float) -> Optional[Dict[str, Any]]:
        try:
            node = self.api.call('POST', NODES, node_object(target, now))
        except ApiError as exc:
            if exc.status == 409:  # someone else's Node of that name: never touched
                if target.name not in self._warned:
                    LOG.warning('a Node %s exists that this emulator did not register: left alone', target.name)
                    self._warned.add(target.name)
                return None
            raise
        LOG.info('registered node %s (%s)', target.name, target.provider_id)
        self._count('registrations')
        return node

    def _create_lease(self, node: Dict[str, Any], now: float) -> None:
        try:
            self.api.call('POST', LEASES, lease_object(node, now, int(max(1, round(self.grace)))))
        except ApiError as exc:
            if exc.status != 409:
                raise
            self.api.merge_patch('%s/%s' % (LEASES, quote(node['metadata']['name'])),
                                 {'spec': {'renewTime': micro_time(now)}})
        self._renewed[node['metadata']['name']] = now
        self._count('renewals')

    def _post_ready(self, node: Dict[str, Any], now: float) -> None:
        """The kubelet reaches the API again: Ready=True; the lifecycle controller lifts the unreachable taints."""
        name = node['metadata']['name']
        if is_ready(node) != 'True':
            previous = (node.get('status') or {}).get('conditions') or []
            node = self.api.merge_patch('%s/%s/status' % (NODES, quote(name)),
                                        {'status': {'conditions': ready_conditions(now, previous)}})
            LOG.info('node %s is Ready', name)
            self._count('ready')
        taints = taints_without_unreachable(node)
        if len(taints) != len((node.get('spec') or {}).get('taints') or []):
            self._patch_taints(node, taints)

    def _patch_taints(self, node: Dict[str, Any], taints: List[Dict[str, Any]]) -> None:
        """Compare-and-swap on the node's resourceVersion: others' taints are never lost (a conflict waits a pass)."""
        md = node['metadata']
        try:
            self.api.merge_patch('%s/%s' % (NODES, quote(md['name'])),
                                 {'metadata': {'resourceVersion': md.get('resourceVersion')},
                                  'spec': {'taints': taints or None}})
        except ApiError as exc:
            if exc.status != 409:
                raise

    # --- node lifecycle controllers ---------------------------------------------------------------------
    def _lifecycle(self, name: str, node: Dict[str, Any], lease: Optional[Dict[str, Any]], now: float) -> None:
        seen = [parse_time(((lease or {}).get('spec') or {}).get('renewTime')), self._renewed.get(name)]
        last = max([t for t in seen if t is not None], default=parse_time(node['metadata'].get('creationTimestamp')))
        if last is not None and now - last > self.grace:
            self._mark_unknown(node, now)
        if self._gone(name, node):
            since = self._gone_since.setdefault(name, now)
            if now - since >= self.delete_after:
                self._delete(name)
        else:
            self._gone_since.pop(name, None)

    def _gone(self, name: str, node: Dict[str, Any]) -> bool:
        """Positive evidence only: the machine is terminated, or a listing that answered no longer has it."""
        targets, listed = self._inventory_state
        target = targets.get(name)
        if target is not None:
            return target.gone
        kind = (node.get('spec') or {}).get('providerID', '').split(':', 1)[0]
        return listed.get(kind, False)

    def _mark_unknown(self, node: Dict[str, Any], now: float) -> None:
        """Ready (and the pressure conditions) Unknown, then the unreachable taints; each only when missing."""
        name = node['metadata']['name']
        if is_ready(node) != 'Unknown':
            previous = (node.get('status') or {}).get('conditions') or []
            node = self.api.merge_patch('%s/%s/status' % (NODES, quote(name)),
                                        {'status': {'conditions': unknown_conditions(now, previous)}})
            LOG.info('node %s: no lease renewal for more than %ss, Ready is Unknown', name, self.grace)
            self._count('unknown')
        kept = taints_without_unreachable(node)
        if len(kept) + 2 != len((node.get('spec') or {}).get('taints') or []):
            self._patch_taints(node, kept + [{'key': UNREACHABLE, 'effect': effect, 'timeAdded': rfc3339(now)}
                                             for effect in ('NoSchedule', 'NoExecute')])

    def _delete(self, name: str) -> None:
        for path in ('%s/%s' % (NODES, quote(name)), '%s/%s' % (LEASES, quote(name))):
            try:
                self.api.call('DELETE', path)
            except ApiError as exc:
                if exc.status != 404:
                    raise
        self._gone_since.pop(name, None)
        self._renewed.pop(name, None)
        LOG.info('deleted node %s: its machine is gone', name)
        self._count('deleted')


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n', 1)[0])
    sub = parser.add_subparsers(dest='command', required=True)
    run = sub.add_parser('run', help='run the node emulator in the foreground until SIGTERM')
    run.add_argument('--kube-url', required=True)
    run.add_argument('--kube-token')
    run.add_argument('--ec2-url', help='the lab EC2 endpoint (none: no EC2 instances)')
    run.add_argument('--region', default=LAB_REGION)
    run.add_argument('--state-dir', required=True, help='where node-faults.json lives')
    run.add_argument('--renew-interval', type=float, default=10.0)
    run.add_argument('--grace', type=float, default=40.0)
    run.add_argument('--delete-after', type=float, default=60.0)
    run.add_argument('--no-sabakan', action='store_true', help='ignore sabakan claims')
    run.add_argument('--pid-file')
    for name in ('partition', 'heal'):
        cmd = sub.add_parser(name, help='%s nodes of a running emulator (through its state dir)' % name)
        cmd.add_argument('--state-dir', required=True)
        group = cmd.add_mutually_exclusive_group(required=True)
        group.add_argument('--all', action='store_true')
        group.add_argument('--nodes', help='comma-separated node names')
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format='%(asctime)s %(levelname)s %(name)s: %(message)s')
    if args.command in ('partition', 'heal'):
        names = None if args.all else [n.strip() for n in args.nodes.split(',') if n.strip()]
        faults = (partition if args.command == 'partition' else heal)(args.state_dir, names)
        print(json.dumps(faults, sort_keys=True))
        return 0
    emulator = NodeEmulator(args.kube_url, args.ec2_url, args.region, args.renew_interval, args.grace,
                            args.delete_after, args.state_dir, sabakan=not args.no_sabakan, kube_token=args.kube_token)
    if args.pid_file:
        with open(args.pid_file, 'w') as f:
            f.write('%d\n' % os.getpid())
    signal.signal(signal.SIGTERM, lambda signum, frame: emulator.request_stop())
    LOG.info('node emulator: kube %s, ec2 %s, renew %ss, grace %ss, delete after %ss', args.kube_url,
             args.ec2_url or '-', args.renew_interval, args.grace, args.delete_after)
    emulator.run_forever()
    emulator.stop()
    return 0


if __name__ == '__main__':
    sys.exit(main())
