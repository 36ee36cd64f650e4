#!/usr/bin/env python
# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The controller act of `make demo`: continuous backups, a crash, a total loss, a restore.

The real controller (`python -m steward_controller`) runs against the lab's Kubernetes API
emulator (lab/kube/api.py) with the CRDs of controller/deploy/crds. An EtcdBackup backs the lab's
etcd up into .lab/continuous (full + delta snapshots); keys stream in while the controller is
SIGKILLed and restarted; then every member is lost for good, and steward.cluster.etcd_restore
rebuilds the cluster from the full snapshot plus every delta. Every key written before the last
delta must be back.
"""

from __future__ import annotations

import base64
import glob
import os
import signal
import subprocess
import threading
import time
from typing import Any, Callable, Dict, List

import requests
import yaml

from lab.paths import REPO
from lab import manager
from lab.demo.context import changes
from lab.demo.etcd_act import lose_for_good
from lab.kube.api import KubeServer

TITLE = 'continuous backups by the controller (full + delta snapshots), a SIGKILL, a total loss, a restore'

GROUP_PATH = '/apis/cluster.steward.io/v1alpha1/namespaces/demo/etcdbackups'
CRD_PATH = '/apis/apiextensions.k8s.io/v1/customresourcedefinitions'


class Api:
    """Just enough of a Kubernetes client for the demo (plain JSON over HTTP)."""

    def __init__(self, url: str) -> None:
        self.url = url

    def create(self, path: str, body: Dict[str, Any]) -> Dict[str, Any]:
        r = requests.post(self.url + path, json=body, timeout=10)
        r.raise_for_status()
        return r.json()

    def get(self, path: str) -> Dict[str, Any]:
        r = requests.get(self.url + path, timeout=10)
        r.raise_for_status()
        return r.json()


class Controller:
    def __init__(self, state: str, kube: KubeServer, identity: str, log_path: str) -> None:
        self.state = state
        self.log_path = log_path
        kubeconfig = kube.write_kubeconfig(os.path.join(state, 'kubeconfig.json'))
        env = dict(os.environ, KUBECONFIG=kubeconfig, STEWARD_NAMESPACE='steward-system', STEWARD_LOG_FORMAT='json',
                   PYTHONPATH=os.pathsep.join([manager.COLLECTIONS, os.path.join(REPO, 'controller')]))
        work = os.path.join(state, 'controller-work')
        os.makedirs(work, exist_ok=True)
        with open(self.log_path, 'ab') as log:
            self.proc = subprocess.Popen([manager.venv_python(), '-m', 'steward_controller', '--identity', identity,
                                          '--http-host', '127.0.0.1', '--http-port', '0', '--work-dir', work,
                                          '--lease-duration', '6', '--renew-deadline', '4', '--retry-period', '1'],
                                         env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()


def wait_for(predicate: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise SystemExit('demo: timed out after %ss waiting for %s' % (timeout, what))


def put(url: str, key: str, value: str) -> None:
    requests.post(url + '/v3/kv/put', json={'key': base64.b64encode(key.encode()).decode(),
                                            'value': base64.b64encode(value.encode()).decode()},
                  timeout=10).raise_for_status()


def revision(url: str) -> int:
    r = requests.post(url + '/v3/kv/range', json={'key': 'AA=='}, timeout=10)
    r.raise_for_status()
    return int(r.json()['header']['revision'])


def read_prefix(url: str, prefix: str) -> Dict[str, str]:
    end = prefix[:-1] + chr(ord(prefix[-1]) + 1)
    r = requests.post(url + '/v3/kv/range', json={'key': base64.b64encode(prefix.encode()).decode(),
                                                  'range_end': base64.b64encode(end.encode()).decode()}, timeout=30)
    r.raise_for_status()
    return {base64.b64decode(kv['key']).decode(): base64.b64decode(kv['value']).decode()
            for kv in r.json().get('kvs', [])}


def run(ctx: Any) -> List[str]:
    state = ctx.state
    hosts = ctx.hosts
    urls = [manager.client_url(h) for h in hosts.values()]
    store_root = os.path.join(state, 'continuous')
    act: Dict[str, Any] = {'written': {}, 'controllers': []}
    kube = KubeServer().start()
    api = Api(kube.url)

    def start() -> str:
        for path in sorted(glob.glob(os.path.join(REPO, 'controller', 'deploy', 'crds', '*.yaml'))):
            with open(path) as f:
                api.create(CRD_PATH, yaml.safe_load(f))
        act['controllers'].append(Controller(state, kube, 'replica-0', ctx.log_path('controller-replica-0.log')))
        api.create(GROUP_PATH, {
            'apiVersion': 'cluster.steward.io/v1alpha1', 'kind': 'EtcdBackup',
            'metadata': {'name': 'lab', 'namespace': 'demo'},
            'spec': {'etcd': {'endpoints': urls}, 'deltaSnapshotPeriod': '2s',
                     'store': {'provider': 'Local', 'path': state, 'prefix': 'continuous'}}})
        full = wait_for(lambda: (api.get(GROUP_PATH + '/lab').get('status') or {}).get('lastFullSnapshot'), 60,
                        'the first full snapshot')
        return 'controller on %s; EtcdBackup demo/lab: %s' % (kube.url, full['name'])

    def stream_and_crash() -> str:
        stop = threading.Event()

        def writer() -> None:
            i = 0
            while not stop.is_set():
                key = '/continuous/key-%05d' % i
                put(urls[0], key, 'v%d' % i)
                act['written'][key] = 'v%d' % i
                i += 1
                time.sleep(0.005)

        thread = threading.Thread(target=writer, daemon=True)
        thread.start()
        time.sleep(3)
        act['controllers'][-1].kill()  # SIGKILL with events buffered
        time.sleep(2)
        act['controllers'].append(Controller(state, kube, 'replica-1', ctx.log_path('controller-replica-1.log')))
        time.sleep(4)
        stop.set()
        thread.join(10)
        last = revision(urls[0])
        wait_for(lambda: ((api.get(GROUP_PATH + '/lab').get('status') or {}).get('lastDeltaSnapshot') or {})
                 .get('revision', 0) >= last, 60, 'deltas up to revision %d' % last)
        status = api.get(GROUP_PATH + '/lab')['status']
        deltas = len(glob.glob(os.path.join(store_root, 'v2', 'Incr-*[0-9]')))
        return '%d keys streamed; controller SIGKILLed and restarted; %d deltas, last %s' % (
            len(act['written']), deltas, status['lastDeltaSnapshot']['name'])

    def lose_everything() -> str:
        for controller in act['controllers']:
            controller.stop()
        for host in hosts.values():
            lose_for_good(host)
        return 'SIGKILL + data dir wiped on all %d members' % len(hosts)

    def verify() -> str:
        got = read_prefix(urls[0], '/continuous/')
        missing = [k for k in act['written'] if got.get(k) != act['written'][k]]
        if missing:
            raise SystemExit('demo: %d of %d streamed keys are missing after the restore (first: %s)' % (
                len(missing), len(act['written']), missing[0]))
        return 'all %d streamed keys are back (the newest came from delta snapshots)' % len(act['written'])

    def restore() -> str:
        run = ctx.playbook('etcd_restore', '-e', 'etcd_backup_store=' + store_root)
        return '%s; snapshot and deltas verified before any member was touched' % changes(run.changed)

    try:
        return [
            ctx.step('EtcdBackup: the controller takes a full snapshot', start),
            ctx.step('stream writes, SIGKILL the controller, restart it', stream_and_crash),
            ctx.step('disaster: lose every member', lose_everything),
            ctx.step('restore full + deltas (steward.cluster.etcd_restore)', restore),
            ctx.step('verify every streamed key', verify),
        ]
    finally:
        for controller in act['controllers']:
            controller.kill()
        kube.stop()
