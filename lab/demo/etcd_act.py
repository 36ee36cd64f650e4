#!/usr/bin/env python
# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The etcd act of `make demo`: the 3 a.m. disaster, rehearsed.

Load keys -> a verified backup -> permanent loss of a majority (SIGKILL + data dir wiped) ->
steward.cluster.etcd_recover -> every key on every member -> recover again: nothing to do.
"""

from __future__ import annotations

import base64
import os
import shutil
import signal
from typing import Any, Dict, List

import requests

from lab import manager
from lab.demo.context import changes
from ansible_collections.steward.cluster.plugins.module_utils.etcd.member.process import read_pid_file

TITLE = 'back up etcd, lose a majority of its members for good, recover, verify every key'


def load(hosts: Dict[str, Dict], count: int) -> Dict[str, str]:
    data = {'/demo/key-%05d' % i: 'value-%d-%s' % (i, 'x' * 64) for i in range(count)}
    url = manager.client_url(next(iter(hosts.values()))) + '/v3/kv/put'
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
    """SIGKILL the member and wipe its data dir: the machine is gone."""
    pid = read_pid_file(host['etcd_pid_file'])   # etcd_process's record: the pid and its start time
    if pid is None:
        raise RuntimeError('no readable pid in %s' % host['etcd_pid_file'])
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    shutil.rmtree(host['etcd_data_dir'], ignore_errors=True)


def newest_snapshot(store: str) -> str:
    """'<name>, <size> KiB' of the newest full snapshot in a local store."""
    v2 = os.path.join(store, 'v2')
    fulls = sorted(n for n in os.listdir(v2) if n.startswith('Full-') and not n.endswith('.json'))
    if not fulls:
        raise SystemExit('no full snapshot in %s' % v2)
    return '%s, %d KiB' % (fulls[-1], os.path.getsize(os.path.join(v2, fulls[-1])) // 1024)


def run(ctx: Any) -> List[str]:
    data: Dict[str, str] = {}
    store_args = ('-e', 'etcd_backup_store=' + ctx.store)

    def fill() -> str:
        data.update(load(ctx.hosts, ctx.keys))
        return '%d keys written' % len(data)

    def backup() -> str:
        run = ctx.playbook('etcd_backup', *store_args)
        return 'verified full snapshot %s; %d old deleted by GC' % (
            newest_snapshot(ctx.store), run.report.get('deleted', '[]').count('Full-'))

    def lose() -> str:
        names = list(ctx.hosts)
        victims = names[len(names) - (len(names) // 2 + 1):]  # a majority, keeping the first member
        for name in victims:
            lose_for_good(ctx.hosts[name])
        return 'SIGKILL + data dir wiped on %s' % ', '.join(victims)

    def recover() -> str:
        run = ctx.playbook('etcd_recover', *store_args)
        return 'did %s in %.1f s (%s), quorum %s' % (
            run.report.get('did', '?'), run.seconds, changes(run.changed),
            'back' if run.report.get('has_quorum') == 'true' else 'NOT back')

    def verify() -> str:
        for url in ctx.endpoints:
            got = read_all(url)
            if got != data:
                missing = len(set(data) - set(got))
                raise SystemExit('verification failed on %s: %d keys missing or different' % (url, missing))
        return 'all %d keys on each of the %d members' % (len(data), len(ctx.hosts))

    def recover_again() -> str:
        run = ctx.playbook('etcd_recover', *store_args)
        if run.changed:
            raise SystemExit('a second etcd_recover on a healthy cluster changed %d things (log %s)'
                             % (run.changed, run.log))
        return 'did %s, 0 changes' % run.report.get('did', '?')

    return [
        ctx.step('load data', fill),
        ctx.step('backup (steward.cluster.etcd_backup)', backup),
        ctx.step('disaster: lose a majority for good', lose),
        ctx.step('recover (steward.cluster.etcd_recover)', recover),
        ctx.step('verify every key', verify),
        ctx.step('recover again: healthy, nothing to do', recover_again),
    ]
