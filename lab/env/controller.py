"""The real controller (`python -m steward_controller`) as a subprocess against the API emulator."""

from __future__ import annotations

import glob
import os
import signal
import subprocess
import sys
import time
from typing import Callable, Dict, List, Optional, Union

import requests

from lab.env.ports import free_port
from lab.kube.api import KubeServer, load_yaml_documents, repo_path

CRD_PATH = '/apis/apiextensions.k8s.io/v1/customresourcedefinitions'


def install_crds(client) -> List[str]:
    """Create every CRD of controller/deploy/crds in the emulator (as the deploy role does)."""
    names = []
    for path in sorted(glob.glob(repo_path('controller', 'deploy', 'crds', '*.yaml'))):
        for doc in load_yaml_documents(path):
            client.create(CRD_PATH, doc)
            names.append(doc['metadata']['name'])
    return names


def wait_for(predicate: Callable[[], object], timeout: float = 30.0, interval: float = 0.2,
             what: Union[str, Callable[[], str]] = 'condition'):
    """Poll until predicate() is truthy; returns its value. `what` may be a function, called at the timeout to
    say what was seen."""
    deadline = time.time() + timeout
    last: object = None
    while time.time() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError('timed out after %ss waiting for %s (last: %r)' % (timeout, what() if callable(what) else what, last))


class ControllerProcess:
    """One replica. `extra_env` reaches the process (e.g. AWS credentials, STEWARD_* settings); `program`, a
    script to run instead of `-m steward_controller` (one that registers a test driver, then runs main());
    `kube` is anything with write_kubeconfig(path) (the emulator, or a cuttable link in front of it)."""

    def __init__(self, kube: KubeServer, work_dir: str, identity: str = 'replica-0', args: Optional[List[str]] = None,
                 extra_env: Optional[Dict[str, str]] = None, program: Optional[str] = None):
        self.kube = kube
        self.program = program
        self.work_dir = work_dir
        self.identity = identity
        self.port = free_port()
        self.args = list(args or [])
        self.extra_env = dict(extra_env or {})
        self.log_path = os.path.join(work_dir, 'controller-%s.log' % identity)
        self.proc: Optional[subprocess.Popen] = None

    def start(self) -> 'ControllerProcess':
        os.makedirs(self.work_dir, exist_ok=True)
        kubeconfig = self.kube.write_kubeconfig(os.path.join(self.work_dir, 'kubeconfig.json'))
        env = dict(os.environ, KUBECONFIG=kubeconfig, STEWARD_NAMESPACE='steward-system', **self.extra_env)
        env['PYTHONPATH'] = os.pathsep.join([repo_path('.build', 'collections'), repo_path('controller'),
                                             env.get('PYTHONPATH', '')])
        program = [self.program] if self.program else ['-m', 'steward_controller']
        cmd = [sys.executable] + program + [
            '--identity', self.identity, '--http-host', '127.0.0.1', '--http-port', str(self.port), '--work-dir',
            self.work_dir, '--lease-duration', '6', '--renew-deadline', '4', '--retry-period', '1'] + self.args
        log = open(self.log_path, 'ab')
        self.proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        return self

    @property
    def url(self) -> str:
        return 'http://127.0.0.1:%d' % self.port

    def metrics(self) -> str:
        try:
            return requests.get(self.url + '/metrics', timeout=5).text
        except requests.RequestException:
            return ''

    def metric(self, name: str, labels: Optional[Dict[str, str]] = None) -> Optional[float]:
        """The value of one sample, or None when it is not exported (yet)."""
        from prometheus_client.parser import text_string_to_metric_families
        for family in text_string_to_metric_families(self.metrics()):
            for sample in family.samples:
                if sample.name == name and all(sample.labels.get(k) == v for k, v in (labels or {}).items()):
                    return sample.value
        return None

    def metric_total(self, name: str, labels: Optional[Dict[str, str]] = None) -> float:
        """The sum of every sample of `name` with these labels (0.0 when none is exported)."""
        from prometheus_client.parser import text_string_to_metric_families
        return sum(sample.value for family in text_string_to_metric_families(self.metrics()) for sample in family.samples
                   if sample.name == name and all(sample.labels.get(k) == v for k, v in (labels or {}).items()))

    def is_leader(self) -> bool:
        return self.metric('steward_controller_leader') == 1.0

    def log(self) -> str:
        try:
            with open(self.log_path, errors='replace') as f:
                return f.read()
        except OSError:
            return ''

    def kill(self) -> None:
        """SIGKILL: a crash, nothing released."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM: a clean shutdown (the leader lease is released)."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.proc.returncode
