# -*- coding: utf-8 -*-
"""Benchmark: seconds from `steward.cluster.etcd_recover` start to a healthy cluster with every key readable.

Two disasters on a lab of real etcd processes (its own loopback addresses, so a running `make lab`
is not disturbed):
  * "2 of 3 lost": SIGKILL + data dir wiped on two members (survivor -> force-new-cluster -> re-add);
  * "all lost":    every member killed and wiped; restore from the latest valid backup, re-add.
There is no runnable reference tool here (kubespray's recover-control-plane needs real hosts), so the
figures are printed alone, with the data size they were measured at.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, 'lab'))

import demo  # noqa: E402  (playbook, load, read_all, lose_for_good)
import lab  # noqa: E402
from summary_file import write_summary  # noqa: E402


def timed_recover(state: str, store: str, hosts, data) -> float:
    start = time.monotonic()
    demo.playbook(state, 'etcd_recover', '-e', 'etcd_backup_store=' + store)
    for url in demo.endpoints(hosts):
        if demo.read_all(url) != data:
            raise SystemExit('keys missing on %s after recovery' % url)
    return time.monotonic() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument('--keys', type=int, default=5000)
    parser.add_argument('--state', default=os.path.join(REPO, '.build', 'bench-lab'))
    parser.add_argument('--ip-base', default='127.0.0.61')
    parser.add_argument('--output', default=os.path.join(HERE, 'results', 'etcd_recover.json'))
    args = parser.parse_args()
    state = os.path.abspath(args.state)
    store = os.path.join(state, 'backups')
    results = {}
    try:
        lab.lab_up(state, 3, args.ip_base, echo=False)
        hosts = lab.read_inventory(state)
        data = demo.load(hosts, args.keys)
        demo.playbook(state, 'etcd_backup', '-e', 'etcd_backup_store=' + store)
        for name in list(hosts)[1:]:
            demo.lose_for_good(hosts[name])
        results['2_of_3_lost'] = timed_recover(state, store, hosts, data)
        demo.playbook(state, 'etcd_backup', '-e', 'etcd_backup_store=' + store)
        for name in hosts:
            demo.lose_for_good(hosts[name])
        results['all_lost_restore'] = timed_recover(state, store, hosts, data)
    finally:
        lab.lab_down(state, purge=True)
    print('etcd_recover, 3 members, %d keys (seconds from playbook start to every key readable on every member)'
          % args.keys)
    for name, secs in results.items():
        print('  %-18s %6.1f s' % (name, secs))
    write_summary(args.output, {'keys': args.keys, 'seconds': results})
    return 0


if __name__ == '__main__':
    sys.exit(main())
