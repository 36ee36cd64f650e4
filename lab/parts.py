# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The lab's cloud parts as background processes, next to its etcd members and sabakan (lab.py):

    kube        the Kubernetes API emulator (lab/kube/api.py) with every CRD of controller/deploy/crds;
                reached through <state>/kubeconfig
    ec2         EC2 and S3 with fidelity (lab/cloud/ec2_fidelity.py); endpoint and keys in <state>/aws.env
    nodes       the node emulator (lab/cloud/nodes.py): Nodes and Leases for running instances and claimed machines;
                faults through <state>/node-faults.json (`lab.py partition|heal`)
    pods        the pod runtime (lab/pods/runtime.py): StatefulSets whose images the lab knows (etcd) become pods
                running as real processes on pod IPs of 127.0.100.0/24; state in <state>/pods
    controller  steward-controller from the venv with every loop, --kubeconfig <state>/kubeconfig and aws.env;
                logs in <state>/controller.log
    prometheus  Debian's prometheus scraping the etcd members, the controller and itself, with the shipped rules
                (lab/prometheus.py); <state>/prometheus.yml, data in <state>/prometheus-data, URL in prometheus.url

Each part runs detached (its own session) on a free port and records `<part>.pid` as JSON: pid, the process's
start time (/proc/<pid>/stat) and argv. A part counts as running, and is ever signalled, only while all three
still match: a recycled pid or a pid file left by another program is never signalled. `up` is idempotent and
restarts a part whose command line changed (e.g. the API got a new URL); `down` stops them in reverse order.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

from lab.cloud.ec2_fidelity import LAB_ACCESS_KEY_ID, LAB_REGION, LAB_SECRET_ACCESS_KEY
from lab import prometheus
from lab.paths import REPO, module_argv, venv_python
from lab.provisioning.supervisor import cmdline  # the static-pod supervisor's: one reader of /proc/<pid>/cmdline in the lab

LAB_BUCKET = 'etcd-backups'   # made by `make lab` on its S3: the bucket docs/etcd-druid.md's Etcd names

PARTS = ('kube', 'ec2', 'nodes', 'pods', 'controller', 'prometheus')
CRDS_DIR = os.path.join(REPO, 'controller', 'deploy', 'crds')
LEADER_NAMESPACE = 'steward-system'


@dataclass(frozen=True)
class CloudSettings:
    """Where and how fast the parts run; `lab.py up` options map onto these."""
    host: str = '127.0.0.1'
    region: str = LAB_REGION
    status_delay: float = 1.0
    renew_interval: float = 10.0
    grace: float = 40.0
    delete_after: float = 60.0


def files(state_dir: str) -> Dict[str, str]:
    base = os.path.abspath(state_dir)
    names = {'kubeconfig': 'kubeconfig', 'aws_env': 'aws.env', 'controller_log': 'controller.log',
             'kube_url': 'kube.url', 'ec2_url': 'ec2.url', 'controller_url': 'controller.url',
             'work_dir': 'controller-work', 'prometheus_url': 'prometheus.url',
             'prometheus_config': 'prometheus.yml', 'prometheus_data': 'prometheus-data'}
    out = {key: os.path.join(base, name) for key, name in names.items()}
    for part in PARTS:
        out[part + '_pid'] = os.path.join(base, part + '.pid')
        out[part + '_log'] = out['controller_log'] if part == 'controller' else os.path.join(base, part + '.log')
    return out


# --- processes that are provably ours --------------------------------------------------------------------------
def _start_time(pid: int) -> Optional[str]:
    """Field 22 of /proc/<pid>/stat (clock ticks since boot): with the pid, it names one process for good."""
    fields = _stat(pid)
    return fields[19] if fields is not None and len(fields) > 19 and fields[0] != 'Z' else None


def read_record(path: str) -> Optional[Dict[str, Any]]:
    try:
        with open(path) as f:
            record = json.load(f)
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and isinstance(record.get('pid'), int) else None


def running(path: str) -> Optional[Dict[str, Any]]:
    """The record of the part whose pid file this is, while that very process runs; else None."""
    record = read_record(path)
    if record is None:
        return None
    pid = record['pid']
    if _start_time(pid) != record.get('start_time') or cmdline(pid) != record.get('argv'):
        return None
    return record


def start(path: str, argv: List[str], log_path: str, env: Optional[Dict[str, str]] = None,
          peers: Optional[Dict[str, Optional[str]]] = None) -> Dict[str, Any]:
    with open(os.devnull, 'rb') as stdin, open(log_path, 'ab') as log:
        proc = subprocess.Popen(argv, stdin=stdin, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                close_fds=True, cwd=REPO, env=env)
    deadline = time.monotonic() + 10
    record: Dict[str, Any] = {'pid': proc.pid, 'start_time': None, 'argv': argv, 'peers': peers}
    while time.monotonic() < deadline and proc.poll() is None:
        record['start_time'] = _start_time(proc.pid)
        if record['start_time'] and cmdline(proc.pid) == argv:  # exec done: /proc shows the new program
            break
        time.sleep(0.02)
    tmp = '%s.%d.tmp' % (path, os.getpid())
    with open(tmp, 'w') as f:
        json.dump(record, f)
    os.replace(tmp, path)
    return record


def stop(path: str, timeout: float = 15.0) -> bool:
    """SIGTERM (then SIGKILL) the part's process group if, and only if, it is provably the part; removes the
    pid file either way. True when something was stopped."""
    record = running(path)
    if record is not None:
        pid = record['pid']
        for sig, grace in ((signal.SIGTERM, timeout), (signal.SIGKILL, 10.0)):
            try:
                os.killpg(pid, sig)  # the part's own session: helpers it started go too
            except ProcessLookupError:
                break
            deadline = time.monotonic() + grace
            while time.monotonic() < deadline and _start_time(pid) == record['start_time']:
                time.sleep(0.05)
            if _start_time(pid) != record['start_time']:
                break
        try:
            os.waitpid(pid, os.WNOHANG)  # reap it when this process started it (tests)
        except ChildProcessError:
            pass
    if os.path.exists(path):
        os.unlink(path)
    return record is not None


def _stat(pid: int) -> Optional[List[str]]:
    try:
        with open('/proc/%d/stat' % pid) as f:
            text = f.read()
    except OSError:
        return None
    return text[text.rfind(')') + 2:].split()


def stop_remnants(record: Dict[str, Any]) -> List[int]:
    """SIGKILL what a part's main process left in its session when it died (a container's children: a kubelet
    ends them with the container; the lab's etcd-wrapper runs etcd as a child, which a `kill -9` of the container's
    pid left serving on the pod's ports). Only processes of the session the record's pid led that started after it;
    nothing while a process with that pid runs (the part itself, or by now another process)."""
    pid, started = record['pid'], int(record.get('start_time') or 0)
    if _start_time(pid) is not None:
        return []
    killed = []
    for entry in os.listdir('/proc'):
        if not entry.isdigit() or int(entry) == pid:
            continue
        fields = _stat(int(entry))
        if fields is None or len(fields) < 20 or fields[0] == 'Z' or int(fields[3]) != pid or \
                int(fields[19]) < started:
            continue
        try:
            os.kill(int(entry), signal.SIGKILL)
            killed.append(int(entry))
        except ProcessLookupError:
            pass
    return killed


def _wait_file(path: str, record: Dict[str, Any], log_path: str, what: str, timeout: float) -> str:
    """The text the part writes to `path` once it serves (the caller removed any old copy first)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = read_url(path)
        if text:
            return text
        if _start_time(record['pid']) != record['start_time']:
            break
        time.sleep(0.05)
    with open(log_path, errors='replace') as f:
        tail = f.read()[-3000:]
    raise RuntimeError('%s did not come up within %ss; last lines of %s:\n%s' % (what, timeout, log_path, tail))


def free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def read_url(path: str) -> Optional[str]:
    try:
        with open(path) as f:
            return f.read().strip() or None
    except OSError:
        return None


def aws_env(url: str, region: str) -> Dict[str, str]:
    return {'AWS_ENDPOINT_URL': url, 'AWS_ACCESS_KEY_ID': LAB_ACCESS_KEY_ID,
            'AWS_SECRET_ACCESS_KEY': LAB_SECRET_ACCESS_KEY, 'AWS_DEFAULT_REGION': region}


def ensure_bucket(url: str, bucket: str = LAB_BUCKET, timeout: float = 10.0) -> None:
    """Create the lab's backup bucket on its S3 (a path-style PUT; again is a no-op). druid and etcd-backup-restore
    never create the bucket a store names (the platform does), so without it a druid user's first `Etcd` would wait
    in `initialization failed: bucket does not exist`."""
    request = urllib.request.Request('%s/%s' % (url.rstrip('/'), bucket), method='PUT', data=b'')
    with urllib.request.urlopen(request, timeout=timeout) as answer:
        answer.read()


def write_aws_env(path: str, env: Dict[str, str]) -> None:
    tmp = '%s.%d.tmp' % (path, os.getpid())
    with open(tmp, 'w') as f:
        f.write('# steward.cluster lab: EC2 and S3 with fidelity (lab/cloud/ec2_fidelity.py); `. %s`\n' % path)
        for key in sorted(env):
            f.write('export %s=%s\n' % (key, env[key]))
    os.replace(tmp, path)


# --- the parts ------------------------------------------------------------------------------------------------
def _ensure(path: str, argv: List[str], log_path: str, env: Optional[Dict[str, str]] = None,
            peers: Optional[Dict[str, Optional[str]]] = None) -> Dict[str, Any]:
    """Keep the running part when its command line and the URLs it was started against (`peers`: what is not
    on its command line, e.g. the API behind a kubeconfig) are the ones wanted; else (re)start it. Returns the
    record with `started` telling which."""
    record = running(path)
    if record is not None and record['argv'] == argv and record.get('peers') == peers:
        return dict(record, started=False)
    stop(path)
    return dict(start(path, argv, log_path, env, peers), started=True)


def up(state_dir: str, settings: CloudSettings = CloudSettings(), parts: Optional[List[str]] = None,
       timeout: float = 120.0, etcd_urls: Optional[List[str]] = None) -> Dict[str, Dict[str, Any]]:
    """Start (or keep) the parts named (default all), in dependency order; {part: {'pid', 'url', 'started'}}.
    `etcd_urls`: the members' client URLs, for Prometheus to scrape."""
    wanted = list(PARTS if parts is None else parts)
    unknown = set(wanted) - set(PARTS)
    if unknown:
        raise ValueError('unknown lab parts: %s (known: %s)' % (', '.join(sorted(unknown)), ', '.join(PARTS)))
    state_dir = os.path.abspath(state_dir)
    os.makedirs(state_dir, exist_ok=True)
    f = files(state_dir)
    py = venv_python()
    result: Dict[str, Dict[str, Any]] = {}
    if 'kube' in wanted:
        argv = module_argv('lab.kube.api', 'serve', '--host', settings.host, '--port', '0', '--crds-dir', CRDS_DIR,
                           '--kubeconfig', f['kubeconfig'], '--url-file', f['kube_url'],
                           '--status-delay', str(settings.status_delay), '--pod-runtime', python=py)
        record = _ensure(f['kube_pid'], argv, f['kube_log'])
        if record['started']:
            _remove(f['kube_url'])
            _wait_file(f['kube_url'], record, f['kube_log'], 'the Kubernetes API emulator', timeout)
        result['kube'] = dict(record, url=read_url(f['kube_url']))
    if 'ec2' in wanted:
        argv = module_argv('lab.cloud.ec2_fidelity', 'serve', '--host', settings.host, '--port', '0',
                           '--url-file', f['ec2_url'], python=py)
        record = _ensure(f['ec2_pid'], argv, f['ec2_log'])
        if record['started']:
            _remove(f['ec2_url'])
            _wait_file(f['ec2_url'], record, f['ec2_log'], 'the EC2 server', timeout)
        url = read_url(f['ec2_url'])
        if url:
            ensure_bucket(url)
        write_aws_env(f['aws_env'], aws_env(url or '', settings.region))
        result['ec2'] = dict(record, url=url)
    kube_url, ec2_url = read_url(f['kube_url']), read_url(f['ec2_url'])
    if 'nodes' in wanted:
        if not kube_url:
            raise RuntimeError('the node emulator needs the Kubernetes API emulator (part kube)')
        argv = module_argv('lab.cloud.nodes', 'run', '--kube-url', kube_url, '--state-dir', state_dir,
                           '--region', settings.region, '--renew-interval', str(settings.renew_interval),
                           '--grace', str(settings.grace), '--delete-after', str(settings.delete_after), python=py)
        if ec2_url:
            argv += ['--ec2-url', ec2_url]
        result['nodes'] = _ensure(f['nodes_pid'], argv, f['nodes_log'])
    if 'pods' in wanted:
        if not kube_url:
            raise RuntimeError('the pod runtime needs the Kubernetes API emulator (part kube)')
        argv = module_argv('lab.pods.runtime', 'run', '--kube-url', kube_url, '--state-dir', state_dir, python=py)
        result['pods'] = _ensure(f['pods_pid'], argv, f['pods_log'])
    if 'controller' in wanted:
        if not kube_url:
            raise RuntimeError('the controller needs the Kubernetes API emulator (part kube)')
        result['controller'] = _controller(f, settings, kube_url, ec2_url)
        _wait_healthy(result['controller'], f['controller_log'], 'steward-controller', timeout)
    if 'prometheus' in wanted:
        result['prometheus'] = _prometheus(f, settings, etcd_urls or [], read_url(f['controller_url']), timeout)
    return result


def _prometheus(f: Dict[str, str], settings: CloudSettings, etcd_urls: List[str], controller_url: Optional[str],
                timeout: float) -> Dict[str, Any]:
    """Debian's prometheus on the port it had (else a free one); restarted when its configuration (targets)
    changed. Without the binary the lab runs on without it and says so (`note`)."""
    program = prometheus.binary()
    if program is None:
        _remove(f['prometheus_url'])
        return {'pid': None, 'url': None, 'started': False,
                'note': 'prometheus is not installed (Debian package prometheus, bindep.txt): not started'}
    url = read_url(f['prometheus_url']) if running(f['prometheus_pid']) else None
    port = url.rsplit(':', 1)[-1] if url else str(free_port(settings.host))
    address = '%s:%s' % (settings.host, port)
    os.makedirs(f['prometheus_data'], exist_ok=True)
    text = prometheus.write_config(f['prometheus_config'], prometheus.config(
        etcd_urls, controller_url, address, prometheus.rule_files()))
    argv = prometheus.argv(program, f['prometheus_config'], f['prometheus_data'], address)
    record = _ensure(f['prometheus_pid'], argv, f['prometheus_log'], peers={'config': text})
    url = 'http://' + address
    tmp = f['prometheus_url'] + '.tmp'
    with open(tmp, 'w') as out:
        out.write(url + '\n')
    os.replace(tmp, f['prometheus_url'])
    record = dict(record, url=url)
    _wait_healthy(record, f['prometheus_log'], 'prometheus', timeout, '/-/ready')
    return record


def _wait_healthy(record: Dict[str, Any], log_path: str, what: str, timeout: float, path: str = '/healthz') -> None:
    """Until the part's /healthz (or `path`) answers 2xx (the controller serves it once its loops are set up)."""
    deadline = time.monotonic() + timeout
    error = _probe(record['url'] + path)
    while error and time.monotonic() < deadline and _start_time(record['pid']) == record['start_time']:
        time.sleep(0.2)
        error = _probe(record['url'] + path)
    if error:
        with open(log_path, errors='replace') as f:
            tail = f.read()[-3000:]
        raise RuntimeError('%s is not healthy (%s); last lines of %s:\n%s' % (what, error, log_path, tail))


def _controller(f: Dict[str, str], settings: CloudSettings, kube_url: str, ec2_url: Optional[str]) -> Dict[str, Any]:
    record = running(f['controller_pid'])
    port = None
    if record is not None:
        url = read_url(f['controller_url']) or ''
        port = url.rsplit(':', 1)[-1] if url else None
    program = os.path.join(os.path.dirname(venv_python()), 'steward-controller')
    if not os.access(program, os.X_OK):
        raise RuntimeError('%s missing: run `make all` first' % program)
    port = port or str(free_port(settings.host))
    os.makedirs(f['work_dir'], exist_ok=True)
    # The console script run by the venv's python directly: /proc then shows exactly this argv (a shebang exec
    # would put the interpreter in front, and the record would never match).
    argv = [venv_python(), program, '--kubeconfig', f['kubeconfig'], '--namespace', LEADER_NAMESPACE, '--identity', 'lab',
            '--http-host', settings.host, '--http-port', port, '--work-dir', f['work_dir'], '--log-format', 'plain',
            # MCM's manifests unchanged: a MachineClass Secret without the opt-in label works on the lab (docs/lab.md)
            '--machine-secret-opt-in', 'false']
    env = dict(os.environ)
    if ec2_url:
        env.update(aws_env(ec2_url, settings.region))
    # the API's and EC2's URLs are not on its command line (kubeconfig, environment): a new one restarts it
    record = _ensure(f['controller_pid'], argv, f['controller_log'], env, {'kube': kube_url, 'ec2': ec2_url})
    url = 'http://%s:%s' % (settings.host, port)
    tmp = f['controller_url'] + '.tmp'
    with open(tmp, 'w') as out:
        out.write(url + '\n')
    os.replace(tmp, f['controller_url'])
    return dict(record, url=url)


def down(state_dir: str) -> List[str]:
    """Stop every part that is provably ours (controller first, the API last); the names stopped."""
    f = files(state_dir)
    stopped = [part for part in reversed(PARTS) if stop(f[part + '_pid'])]
    from lab.pods.runtime import stop_recorded  # pod processes a runtime that died left (lab/pods/runtime.py)
    stop_recorded(state_dir)
    for key in ('kube_url', 'ec2_url', 'controller_url', 'prometheus_url'):
        _remove(f[key])
    return stopped


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _probe(url: str) -> Optional[str]:
    """None when the URL answers 2xx, else what went wrong."""
    try:
        with urllib.request.urlopen(url, timeout=3) as answer:
            return None if answer.status < 300 else 'HTTP %s' % answer.status
    except Exception as exc:  # noqa: BLE001 - not answering is a status, not an error
        return str(exc)


def status(state_dir: str) -> Dict[str, Dict[str, Any]]:
    """{part: {'pid', 'url', 'healthy', 'error'?}} for the parts this state dir has ever run."""
    f = files(state_dir)
    out: Dict[str, Dict[str, Any]] = {}
    probes = {'kube': (f['kube_url'], '/version'), 'ec2': (f['ec2_url'], '/_lab/ec2'),
              'controller': (f['controller_url'], '/healthz'), 'prometheus': (f['prometheus_url'], '/-/ready')}
    for part in PARTS:
        if not os.path.exists(f[part + '_pid']):
            continue
        record = running(f[part + '_pid'])
        entry: Dict[str, Any] = {'pid': record['pid'] if record else None, 'url': None, 'healthy': record is not None}
        if record is None:
            entry['error'] = 'not running (see %s)' % f[part + '_log']
        elif part in probes:
            entry['url'] = read_url(probes[part][0])
            error = _probe(entry['url'] + probes[part][1]) if entry['url'] else 'no URL recorded'
            if error:
                entry['healthy'], entry['error'] = False, error
        out[part] = entry
    return out
