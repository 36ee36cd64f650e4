"""`make demo`: rehearse the 3 a.m. disaster on the local lab, end to end, with real processes.

lab up -> load data -> backup -> permanent loss of 2 of 3 members (SIGKILL + data dir wiped)
-> steward.cluster.etcd_recover -> verify every key;
then continuous backups: the controller (against the lab's Kubernetes API emulator) takes full and
delta snapshots while keys stream in and the controller is SIGKILLed; every member is lost; the
etcd_restore playbook brings back every key from the full snapshot plus the deltas;
then the inventory-driven cluster: steward.cluster.sabakan_sync generates a cluster.yml from the
lab's sabakan, and keeps it right as a control plane machine fails, a worker retires and is
replaced -> timeline -> lab down.
"""

from __future__ import annotations

import argparse
import base64
import os
import shutil
import signal
import sys
import time
from typing import Callable, Dict, List, Tuple

import requests

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import lab  # noqa: E402  (lab/lab.py: lab_up, lab_down, read_inventory)
import controller_act  # noqa: E402  (lab/controller_act.py: continuous backups by the controller)
import sabakan_act  # noqa: E402  (lab/sabakan_act.py: the sabakan part of the demo)
import provisioning_act  # noqa: E402  (lab/provisioning_act.py: genesis, join, power cut, remove)


class Timeline:
    def __init__(self) -> None:
        self.steps: List[Tuple[str, float, str]] = []

    def run(self, title: str, fn: Callable[[], str]) -> None:
        print('==> %s' % title, flush=True)
        start = time.monotonic()
        note = fn() or ''
        took = time.monotonic() - start
        self.steps.append((title, took, note))
        print('    done in %.1f s%s' % (took, (': ' + note) if note else ''), flush=True)

    def print(self) -> None:
        print('\nTimeline')
        total = 0.0
        for title, took, note in self.steps:
            total += took
            print('  %6.1f s  %-48s %s' % (took, title, note))
        print('  %6.1f s  total' % total)


def playbook(state: str, name: str, *extra: str) -> str:
    """Run steward.cluster.<name> on the lab; keep its log; fail loudly."""
    result = lab.run_playbook(state, 'steward.cluster.' + name, list(extra), echo=False)
    log = os.path.join(state, 'demo-%s-%d.log' % (name, int(time.time() * 1000)))
    with open(log, 'w') as f:
        f.write(result['output'])
    if result['rc'] != 0:
        print(result['output'][-8000:])
        raise SystemExit('%s failed (rc=%d); full log in %s' % (name, result['rc'], log))
    return 'changed=%d' % result['changed']


def endpoints(hosts: Dict[str, Dict]) -> List[str]:
    return [lab.client_url(h) for h in hosts.values()]


def load(hosts: Dict[str, Dict], count: int) -> Dict[str, str]:
    data = {'/demo/key-%05d' % i: 'value-%d-%s' % (i, 'x' * 64) for i in range(count)}
    url = endpoints(hosts)[0] + '/v3/kv/put'
    with requests.Session() as s:
        for k, v in data.items():
            s.post(url, json={'key': base64.b64encode(k.encode()).decode(),
                              'value': base64.b64encode(v.encode()).decode()}, timeout=10).raise_for_status()
    return data


def read_all(url: str) -> Dict[str, str]:
    r = requests.post(url + '/v3/kv/range', json={'key': base64.b64encode(b'/demo/').decode(),
                                                  'range_end': base64.b64encode(b'/demo0').decode()}, timeout=30)
    r.raise_for_status()
    return {base64.b64decode(kv['key']).decode(): base64.b64decode(kv['value']).decode()
            for kv in r.json().get('kvs', [])}


def lose_for_good(host: Dict) -> None:
    with open(host['etcd_pid_file']) as f:
        pid = int(f.read().strip())
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    shutil.rmtree(host['etcd_data_dir'], ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument('--state', default=os.path.join(REPO, '.lab'))
    parser.add_argument('--members', type=int, default=3)
    parser.add_argument('--keys', type=int, default=2000)
    parser.add_argument('--keep', action='store_true', help='leave the lab running at the end')
    args = parser.parse_args()
    state = os.path.abspath(args.state)
    store = os.path.join(state, 'backups')
    timeline = Timeline()
    data: Dict[str, str] = {}
    hosts: Dict[str, Dict] = {}

    def up() -> str:
        lab.lab_up(state, args.members)
        hosts.update(lab.read_inventory(state))
        return '%d members: %s' % (len(hosts), ', '.join(endpoints(hosts)))

    def fill() -> str:
        data.update(load(hosts, args.keys))
        return '%d keys' % len(data)

    def lose() -> str:
        names = list(hosts)
        victims = names[len(names) - (len(names) // 2 + 1):]  # a majority, keeping the first member
        for name in victims:
            lose_for_good(hosts[name])
        return 'SIGKILL + data dir wiped on %s' % ', '.join(victims)

    def verify() -> str:
        for url in endpoints(hosts):
            got = read_all(url)
            if got != data:
                missing = len(set(data) - set(got))
                raise SystemExit('verification failed on %s: %d keys missing or different' % (url, missing))
        return 'all %d keys on every member' % len(data)

    try:
        timeline.run('lab up (etcd role, %d members on loopback)' % args.members, up)
        timeline.run('load data', fill)
        timeline.run('backup (steward.cluster.etcd_backup)',
                     lambda: playbook(state, 'etcd_backup', '-e', 'etcd_backup_store=' + store))
        timeline.run('disaster: lose a majority for good', lose)
        timeline.run('recover (steward.cluster.etcd_recover)',
                     lambda: playbook(state, 'etcd_recover', '-e', 'etcd_backup_store=' + store))
        timeline.run('verify every key', verify)
        timeline.run('recover again: healthy, nothing to do',
                     lambda: playbook(state, 'etcd_recover', '-e', 'etcd_backup_store=' + store))
        controller_act.run(state, timeline, playbook, lose_for_good)
        sabakan_act.run(state, timeline, playbook)
        provisioning_act.run(state, timeline, playbook)
    finally:
        if not args.keep:
            timeline.run('lab down', lambda: 'stopped ' + ', '.join(lab.lab_down(state, purge=False)))
    timeline.print()
    return 0


if __name__ == '__main__':
    sys.exit(main())
