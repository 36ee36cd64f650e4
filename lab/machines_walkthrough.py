#!/usr/bin/env python
# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The checks of the machines walk-through on `make lab` (docs/machines.md, "A pool on the lab, step by step"):
each waits, with a deadline, for what the step should lead to and prints what it saw; exit 1 with what it saw
last when that does not come. It reads the lab as any user would: boto3 with the environment of `.lab/aws.env`,
the kubernetes client with $KUBECONFIG (`.lab/kubeconfig`); it imports nothing of the collection.

    python lab/machines_walkthrough.py running 3            3 Running machines, 3 instances with the cluster tag
    python lab/machines_walkthrough.py replaced i-0abc...    the instance's machine replaced, 3 Running again
    python lab/machines_walkthrough.py frozen                Frozen=True, then nothing replaced past the health timeout
    python lab/machines_walkthrough.py healed                unfrozen, the same machines and instances Running
    python lab/machines_walkthrough.py instances 1           1 machine, 1 instance with the cluster tag
    python lab/machines_walkthrough.py gone                  no deployment, no machine, no instance with the tag

Options: --namespace (shoot--demo), --deployment (workers), --cluster-tag (kubernetes.io/cluster/demo),
--timeout (seconds, per check: 300), --hold (seconds `frozen` watches for replacements: 45, the walk-through's
30 s health timeout and a margin). `frozen` remembers the fleet in --state-file for `healed`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

import boto3
import kubernetes

GROUP, VERSION = 'machine.sapcloud.io', 'v1alpha1'
LIVE_STATES = ['pending', 'running', 'stopping', 'stopped']


class Lab:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.ec2 = boto3.client('ec2')                     # AWS_ENDPOINT_URL and the keys from .lab/aws.env
        kubernetes.config.load_kube_config()               # $KUBECONFIG
        self.custom = kubernetes.client.CustomObjectsApi()

    def machines(self) -> List[Dict[str, Any]]:
        return self.custom.list_namespaced_custom_object(GROUP, VERSION, self.args.namespace, 'machines')['items']

    def deployment(self) -> Optional[Dict[str, Any]]:
        try:
            return self.custom.get_namespaced_custom_object(GROUP, VERSION, self.args.namespace, 'machinedeployments',
                                                            self.args.deployment)
        except kubernetes.client.ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def instances(self) -> Dict[str, str]:
        """Instance id -> state, of the instances with the cluster tag that are not terminated."""
        out: Dict[str, str] = {}
        pages = self.ec2.get_paginator('describe_instances').paginate(Filters=[
            {'Name': 'tag-key', 'Values': [self.args.cluster_tag]}, {'Name': 'instance-state-name', 'Values': LIVE_STATES}])
        for page in pages:
            for reservation in page['Reservations']:
                for inst in reservation['Instances']:
                    out[inst['InstanceId']] = inst['State']['Name']
        return out


def phase(machine: Dict[str, Any]) -> str:
    return ((machine.get('status') or {}).get('currentStatus') or {}).get('phase') or 'Creating'


def frozen(md: Optional[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    return next((c for c in ((md or {}).get('status') or {}).get('conditions') or [] if c.get('type') == 'Frozen'), None)


def fleet(lab: Lab) -> Tuple[Dict[str, str], Dict[str, str]]:
    """({machine name: phase}, {instance id: state})."""
    return {m['metadata']['name']: phase(m) for m in lab.machines()}, lab.instances()


def instance_of(machine: Dict[str, Any]) -> str:
    return ((machine.get('spec') or {}).get('providerID') or '').rsplit('/', 1)[-1]


def wait(what: str, timeout: float, check: Callable[[], Tuple[bool, str]], interval: float = 2.0) -> str:
    deadline = time.monotonic() + timeout
    started = time.monotonic()
    seen = ''
    while True:
        ok, seen = check()
        if ok:
            print('%s: %s (after %.0f s)' % (what, seen, time.monotonic() - started))
            return seen
        if time.monotonic() >= deadline:
            sys.exit('%s: not within %.0f s; last seen: %s' % (what, timeout, seen))
        time.sleep(interval)


def running(lab: Lab, count: int, without: str = '') -> Callable[[], Tuple[bool, str]]:
    def check() -> Tuple[bool, str]:
        machines = lab.machines()
        instances = lab.instances()
        ids = {instance_of(m) for m in machines}
        ok = (len(machines) == count and all(phase(m) == 'Running' for m in machines)
              and set(instances) == ids and len(instances) == count and without not in ids)
        return ok, '%s; instances %s' % (sorted('%s %s' % (m['metadata']['name'], phase(m)) for m in machines),
                                         sorted('%s %s' % kv for kv in instances.items()))
    return check


def cmd_running(lab: Lab, count: int) -> None:
    wait('%d Running machines, %d instances with %s' % (count, count, lab.args.cluster_tag), lab.args.timeout, running(lab, count))


def cmd_replaced(lab: Lab, instance: str) -> None:
    machines = lab.machines()
    owner = {m['metadata']['name'] for m in machines if instance_of(m) == instance}
    steady = running(lab, len(machines), without=instance)

    def check() -> Tuple[bool, str]:
        ok, seen = steady()
        return ok and not owner & {m['metadata']['name'] for m in lab.machines()}, seen
    wait('the machine of %s (%s) replaced' % (instance, ', '.join(sorted(owner)) or 'already gone'), lab.args.timeout, check)


def cmd_frozen(lab: Lab) -> None:
    machines, instances = fleet(lab)

    def check() -> Tuple[bool, str]:
        cond = frozen(lab.deployment())
        return bool(cond and cond.get('status') == 'True'), json.dumps(cond) if cond else 'no Frozen condition'
    wait('the fleet frozen', lab.args.timeout, check)
    deadline = time.monotonic() + lab.args.hold
    while time.monotonic() < deadline:
        now_machines, now_instances = fleet(lab)
        bad = {n: p for n, p in now_machines.items() if p in ('Failed', 'Terminating')}
        if set(now_machines) != set(machines) or set(now_instances) != set(instances) or bad:
            sys.exit('machines replaced during the freeze: before %s %s, now %s %s' % (
                sorted(machines), sorted(instances), now_machines, sorted(now_instances)))
        time.sleep(2)
    print('nothing replaced in %.0f s: machines %s, instances %s' % (lab.args.hold, sorted(machines), sorted(instances)))
    with open(lab.args.state_file, 'w') as f:
        json.dump({'machines': sorted(machines), 'instances': sorted(instances)}, f)


def cmd_healed(lab: Lab) -> None:
    with open(lab.args.state_file) as f:
        before = json.load(f)

    def check() -> Tuple[bool, str]:
        machines, instances = fleet(lab)
        cond = frozen(lab.deployment())
        ok = cond is None and all(p == 'Running' for p in machines.values()) and sorted(machines) == before['machines'] \
            and sorted(instances) == before['instances']
        return ok, 'Frozen %s; machines %s; instances %s' % (cond and cond.get('reason'), machines, sorted(instances))
    wait('unfrozen with the same machines and instances', lab.args.timeout, check)


def cmd_instances(lab: Lab, count: int) -> None:
    def check() -> Tuple[bool, str]:
        machines, instances = fleet(lab)
        ok = len(instances) == count and len(machines) == count and all(p == 'Running' for p in machines.values())
        return ok, 'machines %s; instances %s' % (machines, sorted(instances))
    wait('%d machine(s) and instance(s) left' % count, lab.args.timeout, check)


def cmd_gone(lab: Lab) -> None:
    def check() -> Tuple[bool, str]:
        md = lab.deployment()
        machines, instances = fleet(lab)
        return md is None and not machines and not instances, 'deployment %s; machines %s; instances %s' % (
            'present' if md else 'gone', machines, sorted(instances))
    wait('no deployment, machine or instance with %s' % lab.args.cluster_tag, lab.args.timeout, check)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n', maxsplit=1)[0])
    parser.add_argument('check', choices=('running', 'replaced', 'frozen', 'healed', 'instances', 'gone'))
    parser.add_argument('value', nargs='?', help='a count (running, instances) or an instance id (replaced)')
    parser.add_argument('--namespace', default='shoot--demo')
    parser.add_argument('--deployment', default='workers')
    parser.add_argument('--cluster-tag', default='kubernetes.io/cluster/demo')
    parser.add_argument('--timeout', type=float, default=300.0)
    parser.add_argument('--hold', type=float, default=45.0)
    parser.add_argument('--state-file', default=os.path.join('.lab', 'walkthrough-fleet.json'))
    args = parser.parse_args(argv)
    if args.check in ('running', 'instances') and not (args.value or '').isdigit():
        parser.error('%s needs a count' % args.check)
    if args.check == 'replaced' and not (args.value or '').startswith('i-'):
        parser.error('replaced needs the id of the instance terminated (i-...)')
    lab = Lab(args)
    if args.check == 'running':
        cmd_running(lab, int(args.value))
    elif args.check == 'replaced':
        cmd_replaced(lab, args.value)
    elif args.check == 'frozen':
        cmd_frozen(lab)
    elif args.check == 'healed':
        cmd_healed(lab)
    elif args.check == 'instances':
        cmd_instances(lab, int(args.value))
    else:
        cmd_gone(lab)
    return 0


if __name__ == '__main__':
    sys.exit(main())
