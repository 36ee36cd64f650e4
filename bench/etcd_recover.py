# -*- coding: utf-8 -*-
"""Benchmark: seconds from `steward.cluster.etcd_recover` start to a healthy cluster with every key readable,
for both disasters, next to the floor, with the playbook's own per-step table.

On a lab of real etcd processes (its own loopback addresses, so a running `make lab` is not disturbed):
  * "2 of 3 lost": SIGKILL + data dir wiped on two members (survivor -> force-new-cluster -> re-add two);
  * "all lost":    every member killed and wiped; the newest backup restored on every host, all started.
The floor is the same engine without Ansible (engine_recovery): every host's facts, the plan, the restore when
it says so, then every host's part (recovery_steps.recover_host) at once, in threads - the survivor restarted
with force-new-cluster, each joiner added as a learner, started and promoted in its turn, the second add sent
the moment etcd allows it (its leader must have seen the first joiner for 5 s); for the total loss, the
snapshot restored into every data dir at once and every member started together.
With --reference COLLECTIONS_DIR (a directory holding ansible_collections/steward/cluster of another
version, e.g. `git archive <commit>`), that version's playbook runs interleaved with ours (ours,
reference, ours, ...) and the medians are compared.

    python bench/etcd_recover.py --keys 3000 --runs 3 [--reference /tmp/old-collections]
Writes bench/results/etcd_recover.json.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import random
import re
import resource
import statistics
import sys
import tempfile
import time
from typing import Dict, List, Optional

import _env  # noqa: E402,F401  (first: the venv, the collection link, the etcd binaries; see bench/_env.py)

import yaml  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
from lab.demo import etcd_act  # noqa: E402  (load, read_all, lose_for_good)
from lab import manager as lab  # noqa: E402 - the lab manager (bench/ keeps its names: only import lines change here)
from summary_file import write_summary  # noqa: E402

from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.client import EtcdConnection  # noqa: E402
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.cluster import wait_until_healthy  # noqa: E402
from ansible_collections.steward.cluster.plugins.module_utils.etcd.member.local_member import inspect_member  # noqa: E402
from ansible_collections.steward.cluster.plugins.module_utils.etcd.member.process import ProcessSpec  # noqa: E402
from ansible_collections.steward.cluster.plugins.module_utils.etcd.recovery.recovery import plan_recovery  # noqa: E402
from ansible_collections.steward.cluster.plugins.module_utils.etcd.recovery.recovery_steps import (  # noqa: E402
    MemberSetup, cluster_endpoints, recover_host)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.member.service import ProcessService  # noqa: E402
from ansible_collections.steward.cluster.plugins.module_utils.etcd.recovery.restore import (  # noqa: E402
    restore_member,
    select_snapshot,
)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.stores import open_store  # noqa: E402

# a row of the playbook's table: `- diagnose   1.2 s`, or a host's own step `- '  etcd2: start   0.4 s'`
STEP = re.compile(r"^\s+- '?( {0,2}\S.*?)\s+(\d+\.\d) s'?$", re.M)


def config_path(host: Dict) -> str:
    return os.path.join(host['etcd_config_dir'], 'etcd.conf.yml')


def spec_of(host: Dict, wait: bool = True) -> ProcessSpec:
    return ProcessSpec(pid_file=host['etcd_pid_file'], binary=host['etcd_binary'], config_file=config_path(host),
                       log_file=host['etcd_log_file'], wait=wait, wait_url=lab.client_url(host), wait_timeout=60,
                       stop_timeout=2)


def setup_of(name: str, host: Dict) -> MemberSetup:
    """The member as the role wrote it (its config and restart fingerprint as they are)."""
    with open(config_path(host)) as f:
        config = yaml.safe_load(f)
    fingerprint_path = config_path(host) + '.restart-sha256'
    with open(fingerprint_path) as f:
        fingerprint = f.read().strip()
    return MemberSetup(name=name, client_url=lab.client_url(host), peer_url='http://%s:2380' % host['ansible_host'],
                       data_dir=host['etcd_data_dir'], config_file=config_path(host), config=config,
                       fingerprint_path=fingerprint_path, fingerprint=fingerprint)


def engine_recovery(hosts: Dict[str, Dict], store_dir: str) -> float:
    """The playbook's steps done by the engine alone, without Ansible: every host's facts, the plan, the restore
    when it says so, then every host's part (recovery_steps.recover_host) at once, until every member is healthy."""
    began = time.monotonic()
    facts = [dict(inspect_member(EtcdConnection(endpoints=(lab.client_url(h),)), name=name,
                                 data_dir=h['etcd_data_dir'], client_url=lab.client_url(h),
                                 peer_url='http://%s:2380' % h['ansible_host'], pid_file=h['etcd_pid_file']),
                  member_name=name) for name, h in hosts.items()]
    plan = plan_recovery(facts, store_configured=True).to_dict()
    if plan['action'] == 'restore_snapshot':
        store = open_store(store_dir)
        snapshot = select_snapshot(store)

        def restore(name: str) -> None:
            host = hosts[name]
            restore_member(store, snapshot, name=name, data_dir=host['etcd_data_dir'],
                           initial_cluster=plan['initial_cluster'][name], initial_cluster_token='floor-%d' % began,
                           now=time.time(), force=True, initial_advertise_peer_urls=['http://%s:2380' % host['ansible_host']])

        with concurrent.futures.ThreadPoolExecutor(len(hosts)) as pool:
            list(pool.map(restore, hosts))

    def part(name: str) -> None:
        conn = EtcdConnection(endpoints=tuple(cluster_endpoints(plan)))
        recover_host(plan, name, setup_of(name, hosts[name]), ProcessService(spec_of(hosts[name])), conn,
                     now=time.time())

    with concurrent.futures.ThreadPoolExecutor(len(hosts)) as pool:
        list(pool.map(part, hosts))
    info, why = wait_until_healthy(EtcdConnection(endpoints=tuple(lab.client_url(h) for h in hosts.values())), 60)
    if why:
        raise SystemExit('the engine alone did not recover: %s' % why)
    return time.monotonic() - began


def timed_playbook(state: str, store: str, hosts: Dict[str, Dict], data: Dict[str, str],
                   collections: Optional[str]) -> Dict:
    ours = lab.COLLECTIONS
    lab.COLLECTIONS = collections or ours  # run_playbook passes it as ANSIBLE_COLLECTIONS_PATH
    try:
        start = time.monotonic()
        result = lab.run_playbook(state, 'steward.cluster.etcd_recover', ['-e', 'etcd_backup_store=' + store],
                                  echo=False)
        seconds = time.monotonic() - start
    finally:
        lab.COLLECTIONS = ours
    if result['rc'] != 0:
        raise SystemExit('etcd_recover failed (rc=%d):\n%s' % (result['rc'], result['output'][-4000:]))
    for url in [lab.client_url(h) for h in hosts.values()]:
        if etcd_act.read_all(url) != data:
            raise SystemExit('keys missing on %s after recovery' % url)
    steps = STEP.findall(result['output'][result['output'].rfind('Where the seconds went'):]) \
        if 'Where the seconds went' in result['output'] else []
    return {'seconds': seconds, 'steps': [(name, float(s)) for name, s in steps]}


def disaster(hosts: Dict[str, Dict], which: str) -> None:
    victims = list(hosts)[1:] if which == 'two' else list(hosts)
    for name in victims:
        etcd_act.lose_for_good(hosts[name])


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or '').split('\n\n', 1)[0])
    parser.add_argument('--keys', type=int, default=3000)
    parser.add_argument('--runs', type=int, default=3, help='runs of each path (and of the reference)')
    parser.add_argument('--state', default=os.path.join(REPO, '.build', 'bench-lab'))
    parser.add_argument('--ip-base', default='127.0.0.61')
    parser.add_argument('--reference', help='a collections dir with another version of steward.cluster')
    parser.add_argument('--output', default=os.path.join(HERE, 'results', 'etcd_recover.json'))
    # smoke: a fresh state dir and a random loopback range, so it runs next to the lab and other tests
    args = _env.parse_args(parser, 'etcd_recover', {
        'keys': 50, 'runs': 1, 'state': lambda: os.path.join(tempfile.mkdtemp(prefix='steward-bench-recover-'), 'lab'),
        'ip_base': lambda: '127.%d.%d.11' % (random.randint(100, 250), random.randint(0, 250))})
    _env.announce(args)
    state = os.path.abspath(args.state)
    store = os.path.join(state, 'backups')
    results: Dict[str, Dict[str, List]] = {}
    tables: Dict[str, List] = {}
    try:
        lab.lab_up(state, 3, args.ip_base, echo=False, sabakan=False, only=['etcd'])
        hosts = lab.read_inventory(state)
        data = etcd_act.load(hosts, args.keys)
        backup = lab.run_playbook(state, 'steward.cluster.etcd_backup', ['-e', 'etcd_backup_store=' + store], echo=False)
        if backup['rc'] != 0:
            raise SystemExit(backup['output'][-3000:])
        contenders = [('ours', None)] + ([('reference', os.path.abspath(args.reference))] if args.reference else [])
        for run in range(args.runs):
            order = contenders if run % 2 == 0 else list(reversed(contenders))
            for path, which in (('2_of_3_lost', 'two'), ('all_lost_restore', 'all')):
                for who, collections in order:
                    disaster(hosts, which)
                    timed = timed_playbook(state, store, hosts, data, collections)
                    results.setdefault(path, {}).setdefault(who, []).append(timed['seconds'])
                    if who == 'ours':
                        tables[path] = timed['steps']
                    print('run %d %-17s %-9s %6.1f s' % (run + 1, path, who, timed['seconds']), flush=True)
                disaster(hosts, which)
                floor = engine_recovery(hosts, store)
                results[path].setdefault('floor', []).append(floor)
                print('run %d %-17s %-9s %6.1f s' % (run + 1, path, 'floor', floor), flush=True)
                for url in [lab.client_url(h) for h in hosts.values()]:
                    if etcd_act.read_all(url) != data:
                        raise SystemExit('keys missing on %s after the floor run' % url)
    finally:
        lab.lab_down(state, purge=True)
    medians = {path: {who: statistics.median(v) for who, v in by.items()} for path, by in results.items()}
    print('\netcd_recover, 3 members, %d keys: seconds from playbook start to every key readable on every member '
          '(median of %d)' % (args.keys, args.runs))
    for path, by in medians.items():
        line = '  %-17s ours %5.1f s   floor %5.1f s (x%.1f)' % (path, by['ours'], by['floor'], by['ours'] / by['floor'])
        if 'reference' in by:
            line += '   reference %5.1f s (ours/reference %.2f)' % (by['reference'], by['ours'] / by['reference'])
        print(line)
        for name, secs in tables.get(path, []):
            print('      %-34s %5.1f s' % (name, secs))
    # the largest process the runs started and waited for (ansible-playbook, its workers, the modules; etcd's
    # members are detached and not counted)
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024.0
    print('peak RSS of the largest process of the runs (ansible-playbook or a module): %.0f MiB; load average %.1f'
          % (rss, os.getloadavg()[0]))
    write_summary(args.output, {'keys': args.keys, 'runs': results, 'medians': medians, 'steps': tables,
                                'rss_peak_mib_largest_process': rss, 'load_average': os.getloadavg()})
    return 0


if __name__ == '__main__':
    sys.exit(main())
