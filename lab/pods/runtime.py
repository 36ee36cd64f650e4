"""The lab's pod runtime: the StatefulSet controller, a kubelet and the endpoints controller for the pods the lab can
run, against the lab's Kubernetes API emulator (lab part `pods`, see docs/lab.md).

Every `--interval` seconds it lists the emulator's StatefulSets, pods, PVCs, Services, ConfigMaps and Secrets and:
* takes the StatefulSets whose pod template has a container image the lab knows (lab/pods/images.py): creates their
  PVCs and pods in ordinal order, scales down from the highest ordinal, rolls a changed template, writes their
  status (spec.py says how), and deletes the pods of a set that is gone;
* gives each of its pods an IP of `--pod-cidr` (default 127.0.100.0/24, beside the lab's etcd members on
  127.0.0.11...), reserved per pod name for as long as the set wants the pod, so a recreated pod keeps its address
  as it would keep its DNS name;
* runs each container of its pods as a process (its own session, stdout/stderr in
  `<state>/pods/logs/<ns>/<pod>/<container>.log`): args and env values expanded and rewritten (spec.Rewriter),
  PVCs as directories `<state>/pods/pvc/<ns>/<claim>`, configMap and secret volumes written to
  `<state>/pods/volumes/<ns>/<pod uid>/<volume>`, emptyDir there too. A process that exits is started again per
  restartPolicy (Always for a StatefulSet) after a back-off (1 s, doubling to 10 s; CrashLoopBackOff meanwhile), with
  restartCount one higher;
* runs readiness probes (httpGet, tcpSocket, exec against the pod IP) and writes pod status: podIP, phase,
  conditions, containerStatuses with `containerID: lab://<pid>`;
* stops a pod's containers as a kubelet does, all at once, each after its own preStop hook (httpGet against the pod
  IP, or sleep; other handlers are logged and skipped): SIGTERM once the hook returned, SIGKILL at the end of the
  pod's terminationGracePeriodSeconds (default 30) counted from the start, hooks included, and at least 2 s after
  SIGTERM. The hooks and the grace are kept in the container's record, so a pod whose object is already gone from
  the API (the emulator deletes a pod at once) is still stopped by its own rules;
* writes Endpoints and an EndpointSlice for each Service that selects its pods;
* removes a deleted PVC's directory, and lets the PVC go (drops the kubernetes.io/pvc-protection finalizer), once
  no pod uses it; until then the PVC stays with its deletionTimestamp, as Kubernetes keeps it Terminating.

A pod's processes are provably the runtime's: each has a record `<state>/pods/run/<ns>/<pod>/<container>.json`
(pid, start time, argv: lab/parts.py's records), and a process is signalled only while all three match. A runtime
that starts again adopts the processes its records name. SIGTERM stops every pod process, then the runtime.

    python -m lab.pods.runtime run --kube-url http://127.0.0.1:PORT --state-dir .lab [--pod-cidr 127.0.100.0/24]
"""

from __future__ import annotations

import argparse
import base64
import datetime
import importlib.util
import ipaddress
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

import requests

from lab import parts
from lab.paths import venv_python
from lab.pods import images, spec as podspec

DEFAULT_POD_CIDR = '127.0.100.0/24'
BACKOFF_START, BACKOFF_MAX = 1.0, 10.0
# A running pod's configMap and secret volumes follow their objects this often (a kubelet's sync period is a minute,
# plus its cache's TTL: the lab is quicker, so a test need not wait a minute to see a rotated certificate)
VOLUME_REFRESH = 5.0
DEFAULT_GRACE = 30.0        # a pod's terminationGracePeriodSeconds when it sets none (Kubernetes' default)
MIN_KILL_GRACE = 2.0        # seconds between SIGTERM and SIGKILL when the hooks used up the grace (a kubelet's)
STS_PATH = '/apis/apps/v1/statefulsets'
JSON_PATCH = {'Content-Type': 'application/json-patch+json'}


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ')


def ns_path(kind_path: str, namespace: str, name: str = '') -> str:
    """`/api/v1/pods` + ns + name -> `/api/v1/namespaces/<ns>/pods/<name>`."""
    prefix, plural = kind_path.rsplit('/', 1)
    return '%s/namespaces/%s/%s%s' % (prefix, namespace, plural, '/' + name if name else '')


class Container:
    """What the runtime remembers of one container between passes (restart counts survive in the record)."""

    def __init__(self) -> None:
        self.restarts = 0
        self.backoff = BACKOFF_START
        self.next_start = 0.0
        self.last_state: Dict[str, Any] = {}
        self.waiting: Optional[Tuple[str, str]] = None
        self.ready = False
        self.probe_due = 0.0
        self.successes = 0
        self.failures = 0
        self.started_at = ''


def _same_content(path: str, data: bytes) -> bool:
    try:
        with open(path, 'rb') as f:
            return f.read() == data
    except OSError:
        return False


class Runtime:
    def __init__(self, kube_url: str, state_dir: str, pod_cidr: str = DEFAULT_POD_CIDR, interval: float = 0.5) -> None:
        self.kube = kube_url.rstrip('/')
        self.base = os.path.join(os.path.abspath(state_dir), 'pods')
        self.interval = interval
        self.network = ipaddress.ip_network(pod_cidr)
        if not self.network.is_loopback:
            raise ValueError('--pod-cidr must be a loopback network (127.0.0.0/8): %s' % pod_cidr)
        self.http = requests.Session()
        self.containers: Dict[Tuple[str, str], Container] = {}   # (pod uid, container name)
        self.exit_codes: Dict[int, int] = {}
        self.refreshed: Dict[str, float] = {}   # pod uid -> monotonic time of its volumes' last refresh
        self.stopping = threading.Event()
        for sub in ('pvc', 'volumes', 'run', 'logs'):
            os.makedirs(os.path.join(self.base, sub), mode=0o700, exist_ok=True)
        # what a pod's programs reach the API with (in a cluster: the service account), unless the pod sets KUBECONFIG
        self.kubeconfig = os.path.join(self.base, 'kubeconfig')
        self._write_json(self.kubeconfig, {
            'apiVersion': 'v1', 'kind': 'Config', 'current-context': 'lab',
            'clusters': [{'name': 'lab', 'cluster': {'server': self.kube}}],
            'users': [{'name': 'pod', 'user': {'token': 'lab-pod'}}],
            'contexts': [{'name': 'lab', 'context': {'cluster': 'lab', 'user': 'pod'}}]})
        self.ips_path = os.path.join(self.base, 'ips.json')
        self.ips: Dict[str, Dict[str, str]] = self._load_json(self.ips_path) or {}

    # --- API -------------------------------------------------------------------------------------------------
    def _list(self, path: str) -> List[Dict[str, Any]]:
        answer = self.http.get(self.kube + path, timeout=10)
        answer.raise_for_status()
        return answer.json().get('items') or []

    def _call(self, method: str, path: str, body: Any = None, headers: Optional[Dict[str, str]] = None) -> Optional[Dict]:
        answer = self.http.request(method, self.kube + path, data=json.dumps(body) if body is not None else None,
                                   headers=headers or {'Content-Type': 'application/json'}, timeout=10)
        if answer.status_code == 404 or answer.status_code == 409:
            return None
        if answer.status_code >= 400:
            self.say('%s %s: HTTP %s %s' % (method, path, answer.status_code, answer.text[:300]))
            return None
        return answer.json() if answer.content else {}

    def say(self, message: str) -> None:
        print('%s %s' % (now(), message), flush=True)

    # --- one pass ----------------------------------------------------------------------------------------------
    def sync(self) -> None:
        self._reap()
        all_sets = self._list(STS_PATH)
        sets = [s for s in all_sets if podspec.managed(s)]
        pods = [p for p in self._list('/api/v1/pods') if podspec.MANAGED_BY in ((p['metadata'].get('annotations')) or {})]
        pvcs = self._list('/api/v1/persistentvolumeclaims')
        set_uids = {s['metadata'].get('uid') for s in all_sets}
        live: List[Dict[str, Any]] = []
        for pod in pods:
            owners = [o.get('uid') for o in pod['metadata'].get('ownerReferences') or [] if o.get('kind') == 'StatefulSet']
            if owners and not set_uids.intersection(owners):  # its set is gone: garbage-collect, as Kubernetes does
                self._call('DELETE', ns_path('/api/v1/pods', pod['metadata']['namespace'], pod['metadata']['name']))
            elif not pod['metadata'].get('deletionTimestamp'):
                live.append(pod)
        self._stop_orphans({p['metadata'].get('uid') for p in live})
        for key in [k for k in self.containers if k[0] not in {p['metadata'].get('uid') for p in live}]:
            del self.containers[key]
        for uid in set(self.refreshed) - {p['metadata'].get('uid') for p in live}:
            del self.refreshed[uid]
        self._reserve_ips(sets, live)
        for sts in sets:
            self._sync_set(sts, live, pvcs)
        if not sets and not live and not any(podspec.MANAGED_BY in (c['metadata'].get('annotations') or {})
                                             for c in pvcs):
            return   # nothing of the runtime's: no more requests this pass (the lab's API serves everyone)
        pods = [p for p in self._list('/api/v1/pods') if podspec.MANAGED_BY in ((p['metadata'].get('annotations')) or {})
                and not p['metadata'].get('deletionTimestamp')]
        volumes = (self._index(self._list('/api/v1/configmaps')), self._index(self._list('/api/v1/secrets')))
        for pod in pods:
            self._sync_pod(pod, volumes)
        pods = [p for p in self._list('/api/v1/pods') if podspec.MANAGED_BY in ((p['metadata'].get('annotations')) or {})
                and not p['metadata'].get('deletionTimestamp')]
        for sts in sets:
            self._write_set_status(sts, pods)
        self._sync_endpoints(pods)
        self._sync_pvcs(self._list('/api/v1/persistentvolumeclaims'), pods)

    @staticmethod
    def _index(items: List[Dict[str, Any]]) -> Dict[Tuple[str, str], Dict[str, Any]]:
        return {(i['metadata'].get('namespace'), i['metadata']['name']): i for i in items}

    def _reap(self) -> None:
        """Collect the exit codes of the runtime's children (else they stay zombies)."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            self.exit_codes[pid] = os.waitstatus_to_exitcode(status)

    # --- StatefulSets --------------------------------------------------------------------------------------
    def _sync_set(self, sts: Dict[str, Any], live: List[Dict[str, Any]], pvcs: List[Dict[str, Any]]) -> None:
        md = sts['metadata']
        ns, name = md.get('namespace', 'default'), md['name']
        mine = {}
        for pod in live:
            if pod['metadata'].get('namespace') == ns and any(
                    o.get('uid') == md.get('uid') for o in pod['metadata'].get('ownerReferences') or []):
                ordinal = podspec.ordinal_of(pod['metadata']['name'], name)
                if ordinal is not None:
                    mine[ordinal] = pod
        claims = {(c['metadata'].get('namespace'), c['metadata']['name']): c for c in pvcs}
        for action, ordinal in podspec.sts_actions(sts, mine):
            if action == 'delete':
                self.say('statefulset %s/%s: deleting pod %s-%d' % (ns, name, name, ordinal))
                # as a kubelet does: the containers stop before the pod object goes, so nothing that watches the
                # API (a scale to 0 waiting for "no pod") sees the pod gone while its processes still run
                self._stop_orphans(set(), only=(ns, '%s-%d' % (name, ordinal)))
                self._call('DELETE', ns_path('/api/v1/pods', ns, '%s-%d' % (name, ordinal)))
                continue
            for template in (sts.get('spec') or {}).get('volumeClaimTemplates') or []:
                claim = podspec.pvc_for(sts, template, ordinal)
                existing = claims.get((ns, claim['metadata']['name']))
                if existing is not None and existing['metadata'].get('deletionTimestamp'):
                    return  # Terminating: the pod waits for it to go, as in Kubernetes
                if existing is None:
                    self._call('POST', ns_path('/api/v1/persistentvolumeclaims', ns), claim)
            self.say('statefulset %s/%s: creating pod %s-%d' % (ns, name, name, ordinal))
            self._call('POST', ns_path('/api/v1/pods', ns), podspec.pod_for(sts, ordinal))

    def _write_set_status(self, sts: Dict[str, Any], pods: List[Dict[str, Any]]) -> None:
        md = sts['metadata']
        mine = [p for p in pods if p['metadata'].get('namespace') == md.get('namespace') and any(
            o.get('uid') == md.get('uid') for o in p['metadata'].get('ownerReferences') or [])]
        current = self._call('GET', ns_path(STS_PATH, md.get('namespace', 'default'), md['name']))
        if current is None:
            return
        status = podspec.sts_status(current, mine)
        if current.get('status') != status:
            self._call('PATCH', ns_path(STS_PATH, md.get('namespace', 'default'), md['name']),
                       [{'op': 'add', 'path': '/status', 'value': status}], JSON_PATCH)

    # --- pod IPs -------------------------------------------------------------------------------------------
    def _reserve_ips(self, sets: List[Dict[str, Any]], live: List[Dict[str, Any]]) -> None:
        wanted: Dict[str, str] = {}   # ns/pod -> subdomain
        for sts in sets:
            md, spec = sts['metadata'], sts.get('spec') or {}
            for ordinal in range(int(spec.get('replicas') if spec.get('replicas') is not None else 1)):
                wanted['%s/%s-%d' % (md.get('namespace', 'default'), md['name'], ordinal)] = spec.get('serviceName') or ''
        for pod in live:
            key = '%s/%s' % (pod['metadata']['namespace'], pod['metadata']['name'])
            wanted.setdefault(key, (pod.get('spec') or {}).get('subdomain') or '')
        changed = False
        for key in [k for k in self.ips if k not in wanted]:
            del self.ips[key]
            changed = True
        taken = {v['ip'] for v in self.ips.values()}
        free = (str(ip) for ip in self.network.hosts() if str(ip) not in taken)
        for key, subdomain in sorted(wanted.items()):
            if key not in self.ips:
                ip = next(free, None)
                if ip is None:
                    self.say('no pod IP left in %s for %s' % (self.network, key))
                    continue
                self.ips[key] = {'ip': ip, 'subdomain': subdomain}
                changed = True
            elif self.ips[key].get('subdomain') != subdomain:
                self.ips[key]['subdomain'] = subdomain
                changed = True
        if changed:
            self._write_json(self.ips_path, self.ips)

    def hosts(self, namespace: str, pod: Optional[Dict[str, Any]] = None) -> Dict[str, str]:
        """DNS name -> pod IP, as seen from a pod of `namespace` (short forms only for the same namespace), plus the
        pod's `spec.hostAliases` (an alias of 127.0.0.1 or ::1 is the pod's own IP: its loopback, as druid's
        `<name>-local` alias is meant)."""
        out: Dict[str, str] = {}
        if pod is not None:
            own = self.ips.get('%s/%s' % (namespace, pod['metadata']['name']), {}).get('ip', '127.0.0.1')
            for alias in (pod.get('spec') or {}).get('hostAliases') or []:
                for hostname in alias.get('hostnames') or []:
                    out[hostname] = own if alias.get('ip') in ('127.0.0.1', '::1') else alias.get('ip', '')
        for key, entry in self.ips.items():
            ns, name = key.split('/', 1)
            if not entry.get('subdomain'):
                continue
            names = podspec.dns_names(name, entry['subdomain'], ns)
            for dns in names if ns == namespace else names[:3]:
                out[dns] = entry['ip']
        return out

    # --- pods ----------------------------------------------------------------------------------------------
    def _pod_dir(self, sub: str, pod: Dict[str, Any]) -> str:
        md = pod['metadata']
        return os.path.join(self.base, sub, md['namespace'], md['name'])

    def _record(self, pod: Dict[str, Any], container: str) -> str:
        return os.path.join(self._pod_dir('run', pod), container + '.json')

    def _volumes(self, pod: Dict[str, Any], container: Dict[str, Any]) -> Tuple[Dict[str, str], List[Tuple]]:
        """mountPath -> host directory for each of the container's mounts, and the volumes whose files are to be
        written there ((directory, volume) pairs). Raises images.UnknownImage for a volume the lab cannot provide."""
        md = pod['metadata']
        ns = md['namespace']
        by_name = {v['name']: v for v in (pod.get('spec') or {}).get('volumes') or []}
        mounts: Dict[str, str] = {}
        files: List[Tuple] = []
        for mount in container.get('volumeMounts') or []:
            volume = by_name.get(mount.get('name'))
            if volume is None:
                raise images.UnknownImage('CreateContainerConfigError', 'volume %r is not in the pod' % mount.get('name'))
            if 'persistentVolumeClaim' in volume:
                host = os.path.join(self.base, 'pvc', ns, volume['persistentVolumeClaim']['claimName'])
            elif 'configMap' in volume or 'secret' in volume or 'emptyDir' in volume:
                host = os.path.join(self.base, 'volumes', ns, md.get('uid', md['name']), volume['name'])
                files.append((host, volume))
            else:
                raise images.UnknownImage('LabVolumeUnsupported', 'volume %r: the lab provides persistentVolumeClaim, '
                                          'configMap, secret and emptyDir volumes' % volume['name'])
            os.makedirs(host, mode=0o700, exist_ok=True)
            if mount.get('subPath') and 'persistentVolumeClaim' in volume:
                os.makedirs(os.path.join(host, mount['subPath']), mode=0o700, exist_ok=True)
            mounts[mount['mountPath']] = os.path.join(host, mount['subPath']) if mount.get('subPath') else host
        return mounts, files

    def _write_volume(self, host: str, volume: Dict[str, Any], ns: str, volumes: Tuple[Dict, Dict],
                      rewrite: podspec.Rewriter) -> None:
        if 'configMap' in volume:
            self._write_files(host, volume['configMap'], volumes[0].get((ns, volume['configMap'].get('name'))),
                              False, ns, volume['name'], rewrite)
        elif 'secret' in volume:
            self._write_files(host, volume['secret'], volumes[1].get((ns, volume['secret'].get('secretName'))),
                              True, ns, volume['name'], rewrite)

    def _write_files(self, host: str, source: Dict[str, Any], obj: Optional[Dict[str, Any]], secret: bool, ns: str,
                     volume: str, rewrite: podspec.Rewriter) -> None:
        """The keys of a configMap (text rewritten for this machine: a config file names peers and mount paths)
        or a secret (verbatim) as files, 0600."""
        if obj is None:
            if source.get('optional'):
                return
            raise images.UnknownImage('CreateContainerConfigError', '%s %r of volume %r not found in %s' % (
                'secret' if secret else 'configmap', source.get('secretName' if secret else 'name'), volume, ns))
        data: Dict[str, bytes] = {}
        for key, value in (obj.get('data') or {}).items():
            data[key] = base64.b64decode(value) if secret else rewrite(str(value)).encode()
        for key, value in (obj.get('stringData') or {}).items():
            data[key] = str(value).encode()
        for key, value in (obj.get('binaryData') or {}).items():
            data[key] = base64.b64decode(value)
        items = source.get('items') or [{'key': k, 'path': k} for k in data]
        for item in items:
            if item['key'] not in data:
                continue
            path = os.path.join(host, item.get('path') or item['key'])
            os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
            if _same_content(path, data[item['key']]):
                continue
            with open(path + '.tmp', 'wb') as f:
                f.write(data[item['key']])
            os.chmod(path + '.tmp', 0o600)
            os.replace(path + '.tmp', path)

    def _env(self, pod: Dict[str, Any], container: Dict[str, Any], ip: str, volumes: Tuple[Dict, Dict]) -> Dict[str, str]:
        md = pod['metadata']
        env: Dict[str, str] = {}
        for source in container.get('envFrom') or []:
            ref = source.get('configMapRef') or source.get('secretRef')
            obj = (volumes[0] if 'configMapRef' in source else volumes[1]).get((md['namespace'], (ref or {}).get('name')))
            for key, value in ((obj or {}).get('data') or {}).items():
                decoded = base64.b64decode(value).decode() if 'secretRef' in source else str(value)
                env[source.get('prefix', '') + key] = decoded
        fields = {'metadata.name': md['name'], 'metadata.namespace': md['namespace'], 'metadata.uid': md.get('uid', ''),
                  'status.podIP': ip, 'status.hostIP': '127.0.0.1', 'spec.nodeName': 'lab',
                  'spec.serviceAccountName': (pod.get('spec') or {}).get('serviceAccountName', 'default')}
        for item in container.get('env') or []:
            if 'value' in item:
                env[item['name']] = podspec.expand_vars(str(item['value']), env)
                continue
            ref = item.get('valueFrom') or {}
            if 'fieldRef' in ref:
                env[item['name']] = fields.get(ref['fieldRef'].get('fieldPath', ''), '')
            elif 'configMapKeyRef' in ref or 'secretKeyRef' in ref:
                key_ref = ref.get('configMapKeyRef') or ref.get('secretKeyRef')
                obj = (volumes[0] if 'configMapKeyRef' in ref else volumes[1]).get((md['namespace'], key_ref.get('name')))
                value = ((obj or {}).get('data') or {}).get(key_ref.get('key'))
                if value is None:
                    if key_ref.get('optional'):
                        continue
                    raise images.UnknownImage('CreateContainerConfigError', 'env %s: key %r of %r not found' % (
                        item['name'], key_ref.get('key'), key_ref.get('name')))
                env[item['name']] = base64.b64decode(value).decode() if 'secretKeyRef' in ref else str(value)
        return env

    def _argv(self, pod: Dict[str, Any], container: Dict[str, Any], volumes: Tuple[Dict, Dict]) -> Tuple[List[str], Dict[str, str]]:
        """The container's process: argv and environment, rewritten for this machine. UnknownImage when it cannot
        run here."""
        program = images.program(str(container.get('image', '')))
        ip = self.ips.get('%s/%s' % (pod['metadata']['namespace'], pod['metadata']['name']), {}).get('ip')
        if not ip:
            raise images.UnknownImage('LabNoPodIP', 'no pod IP left in %s' % self.network)
        rewrite = self._write_volumes(pod, container, volumes, ip)
        env = self._env(pod, container, ip, volumes)
        command = [podspec.expand_vars(str(a), env) for a in container.get('command') or []]
        args = [podspec.expand_vars(str(a), env) for a in container.get('args') or []]
        prefix = list(program.prefix)
        script = program.script
        if program.etcd:
            if command and os.path.basename(command[0]) != 'etcd':
                raise images.UnknownImage('LabCommandUnknown', 'container %r: the lab runs etcd images with etcd '
                                          'itself as the command, not %r' % (container['name'], command[0]))
            args = command[1:] + args
            if args and args[0] == 'start-etcd' and importlib.util.find_spec('lab.etcd_wrapper') is not None:
                work = os.path.join(self.base, 'volumes', pod['metadata']['namespace'], pod['metadata'].get('uid', ''),
                                    '_etcd_wrapper_' + container['name'])
                prefix = [venv_python(), '-m', 'lab.etcd_wrapper']
                args += ['--etcd-binary', program.prefix[0], '--pod-ip', ip, '--work-dir', work]
            elif args and not args[0].startswith('-'):
                raise images.UnknownImage('LabCommandUnknown', 'container %r: %r is no etcd flag: the lab runs etcd '
                                          'with etcd flags, or etcd-wrapper\'s start-etcd through lab/etcd_wrapper.py'
                                          % (container['name'], args[0]))
        elif not prefix:   # the controller image: the command names the program
            if not command:
                raise images.UnknownImage('LabCommandUnknown', 'container %r: the controller image needs a command '
                                          '(%s)' % (container['name'], ', '.join(images.CONSOLE_SCRIPTS)))
            script = os.path.basename(command[0])
            prefix = images.script_argv(script)
            args = command[1:] + args
        else:
            args = command + args
        for flag in images.LAB_ARGS.get(script, []):
            if not any(a.split('=', 1)[0] == flag.split('=', 1)[0] for a in args):
                args.append(flag.format(pod_ip=ip))
        out_env = {'PATH': os.environ.get('PATH', '/usr/bin:/bin'), 'HOSTNAME': pod['metadata']['name'],
                   'KUBECONFIG': self.kubeconfig}
        out_env.update({k: rewrite(v) for k, v in env.items()})
        return prefix + [rewrite(a) for a in args], out_env

    def _sync_pod(self, pod: Dict[str, Any], volumes: Tuple[Dict, Dict]) -> None:
        md = pod['metadata']
        uid = md.get('uid', '')
        ip = self.ips.get('%s/%s' % (md['namespace'], md['name']), {}).get('ip')
        policy = (pod.get('spec') or {}).get('restartPolicy', 'Always')
        statuses = []
        for container in (pod.get('spec') or {}).get('containers') or []:
            state = self.containers.setdefault((uid, container['name']), Container())
            record_path = self._record(pod, container['name'])
            record = parts.running(record_path)
            if record is not None and (record.get('peers') or {}).get('uid') != uid:
                parts.stop(record_path)   # a process of an earlier pod of this name
                record = None
            if record is not None and not state.started_at:   # adopted from an earlier run of the runtime
                state.restarts = int((record.get('peers') or {}).get('restarts') or 0)
                state.started_at = now()
            if record is None:
                self._exited(record_path, state, policy)
                if time.monotonic() >= state.next_start:
                    record = self._start(pod, container, volumes, record_path, state, ip)
            if record is not None and state.waiting is None:
                self._probe(pod, container, state, ip)
            statuses.append(self._container_status(container, state, record))
        if ip and time.monotonic() - self.refreshed.setdefault(uid, time.monotonic()) >= VOLUME_REFRESH:
            self.refreshed[uid] = time.monotonic()
            self._refresh_volumes(pod, volumes, ip)
        self._write_pod_status(pod, ip, statuses)

    def _write_volumes(self, pod: Dict[str, Any], container: Dict[str, Any], volumes: Tuple[Dict, Dict], ip: str,
                       keep: frozenset = frozenset()) -> podspec.Rewriter:
        """The container's configMap and secret volumes written (but those named in `keep`); the Rewriter of its
        args and env (its mounts and this machine's names). Raises images.UnknownImage as _volumes does."""
        mounts, files = self._volumes(pod, container)
        rewrite = podspec.Rewriter(self.hosts(pod['metadata']['namespace'], pod), mounts, ip)
        for host, volume in files:
            if volume['name'] not in keep:
                self._write_volume(host, volume, pod['metadata']['namespace'], volumes, rewrite)
        return rewrite

    def _refresh_volumes(self, pod: Dict[str, Any], volumes: Tuple[Dict, Dict], ip: str) -> None:
        """A running pod's configMap and secret volumes follow their objects, as a kubelet refreshes them: a changed
        key's file is replaced (atomically), an unchanged one is left alone. Not a volume a container mounts with
        subPath (a kubelet never updates those), and not one whose object is gone or unreadable (a kubelet keeps the
        last files then)."""
        for container in (pod.get('spec') or {}).get('containers') or []:
            sub_path = frozenset(m.get('name') for m in container.get('volumeMounts') or [] if m.get('subPath'))
            try:
                self._write_volumes(pod, container, volumes, ip, keep=sub_path)
            except (images.UnknownImage, OSError, ValueError):
                continue   # a kubelet keeps the last files; the container's next start says what is wrong

    def _exited(self, record_path: str, state: Container, policy: str) -> None:
        """The container's process is gone: note how it ended, once, and when it may start again."""
        old = parts.read_record(record_path)
        if old is None:
            return
        left = parts.stop_remnants(old)   # as a kubelet: the container ends with its main process
        if left:
            self.say('container of pid %d exited: killed what it left running: %s' % (old['pid'], left))
        code = self.exit_codes.pop(old['pid'], None)
        if code is not None and code < 0:
            code = 128 - code   # killed by a signal: 128 + its number, as a container runtime reports it
        state.last_state = {'terminated': {'exitCode': code if code is not None else 137,
                                           'reason': 'Completed' if code == 0 else 'Error' if code is not None else 'Unknown',
                                           'startedAt': state.started_at, 'finishedAt': now(),
                                           'containerID': 'lab://%d' % old['pid']}}
        state.ready = False
        state.successes = state.failures = 0
        os.unlink(record_path)
        if policy == 'Never' or (policy == 'OnFailure' and code == 0):
            state.waiting = ('Completed', 'the container exited; restartPolicy %s' % policy)
            state.next_start = float('inf')
            return
        state.restarts += 1
        state.next_start = time.monotonic() + state.backoff
        state.waiting = ('CrashLoopBackOff', 'back-off %gs restarting failed container' % state.backoff)
        state.backoff = min(state.backoff * 2, BACKOFF_MAX)

    def _start(self, pod: Dict[str, Any], container: Dict[str, Any], volumes: Tuple[Dict, Dict], record_path: str,
               state: Container, ip: Optional[str] = None) -> Optional[Dict[str, Any]]:
        try:
            argv, env = self._argv(pod, container, volumes)
        except images.UnknownImage as exc:
            if state.waiting != (exc.reason, exc.message):
                self.say('pod %s/%s container %s: %s' % (pod['metadata']['namespace'], pod['metadata']['name'],
                                                         container['name'], exc.message))
            state.waiting = (exc.reason, exc.message)
            state.next_start = time.monotonic() + BACKOFF_START
            return None
        log_dir = self._pod_dir('logs', pod)
        os.makedirs(log_dir, mode=0o700, exist_ok=True)
        os.makedirs(os.path.dirname(record_path), mode=0o700, exist_ok=True)
        record = parts.start(record_path, argv, os.path.join(log_dir, container['name'] + '.log'), env,
                             dict(stop_rules(pod, container, ip), uid=pod['metadata'].get('uid', ''),
                                  restarts=str(state.restarts)))
        self.say('pod %s/%s container %s: started pid %d: %s' % (pod['metadata']['namespace'], pod['metadata']['name'],
                                                                 container['name'], record['pid'], ' '.join(argv)))
        state.waiting = None
        state.started_at = now()
        state.probe_due = time.monotonic() + float((container.get('readinessProbe') or {}).get('initialDelaySeconds', 0))
        return record

    def _probe(self, pod: Dict[str, Any], container: Dict[str, Any], state: Container, ip: Optional[str]) -> None:
        probe = container.get('readinessProbe')
        if not probe:
            state.ready = True
            return
        if time.monotonic() < state.probe_due:
            return
        state.probe_due = time.monotonic() + float(probe.get('periodSeconds', 10))
        ok = probe_once(probe, ip or '127.0.0.1', container, float(probe.get('timeoutSeconds', 1)),
                        lambda: podspec.Rewriter(self.hosts(pod['metadata']['namespace'], pod),
                                                 self._volumes(pod, container)[0], ip or ''))
        if ok:
            state.successes, state.failures = state.successes + 1, 0
            if state.successes >= int(probe.get('successThreshold', 1)):
                state.ready = True
        else:
            state.successes, state.failures = 0, state.failures + 1
            if state.failures >= int(probe.get('failureThreshold', 3)):
                state.ready = False

    @staticmethod
    def _container_status(container: Dict[str, Any], state: Container, record: Optional[Dict[str, Any]]) -> Dict[str, Any]:
        status: Dict[str, Any] = {'name': container['name'], 'image': container.get('image', ''),
                                  'imageID': container.get('image', ''), 'restartCount': state.restarts,
                                  'ready': bool(record is not None and state.ready), 'started': record is not None,
                                  'lastState': state.last_state}
        if record is not None:
            status['containerID'] = 'lab://%d' % record['pid']
            status['state'] = {'running': {'startedAt': state.started_at}}
        elif state.waiting is not None:
            status['state'] = {'waiting': {'reason': state.waiting[0], 'message': state.waiting[1]}}
        else:
            status['state'] = {'waiting': {'reason': 'ContainerCreating'}}
        return status

    def _write_pod_status(self, pod: Dict[str, Any], ip: Optional[str], statuses: List[Dict[str, Any]]) -> None:
        old = pod.get('status') or {}
        running = bool(statuses) and all('running' in s['state'] for s in statuses)
        ready = running and all(s['ready'] for s in statuses)
        previous = {c.get('type'): c for c in old.get('conditions') or []}

        def condition(kind: str, value: bool) -> Dict[str, Any]:
            text = 'True' if value else 'False'
            prior = previous.get(kind) or {}
            return {'type': kind, 'status': text, 'lastProbeTime': None,
                    'lastTransitionTime': prior.get('lastTransitionTime') if prior.get('status') == text else now()}
        status = {'phase': 'Running' if running else 'Pending', 'hostIP': '127.0.0.1',
                  'startTime': old.get('startTime') or now(), 'containerStatuses': statuses,
                  'conditions': [condition('PodScheduled', True), condition('Initialized', True),
                                 condition('ContainersReady', ready), condition('Ready', ready)]}
        if ip:
            status['podIP'], status['podIPs'] = ip, [{'ip': ip}]
        if status != old:
            md = pod['metadata']
            self._call('PATCH', ns_path('/api/v1/pods', md['namespace'], md['name']),
                       [{'op': 'add', 'path': '/status', 'value': status}], JSON_PATCH)

    def _stop_orphans(self, live_uids: set, only: Optional[Tuple[str, str]] = None) -> None:
        """Stop the processes of pods that are gone (deleted, or replaced by a new pod of the same name); with
        `only` (namespace, pod name), just that pod's. Each pod as a kubelet stops it (stop_pod)."""
        run = os.path.join(self.base, 'run')
        for ns in os.listdir(run):
            for pod in os.listdir(os.path.join(run, ns)):
                if only is not None and (ns, pod) != only:
                    continue
                pod_dir = os.path.join(run, ns, pod)
                uids, going = set(), []
                for name in os.listdir(pod_dir):
                    record = parts.read_record(os.path.join(pod_dir, name))
                    uid = ((record or {}).get('peers') or {}).get('uid')
                    if uid in live_uids:
                        continue
                    going.append(os.path.join(pod_dir, name))
                    uids.add(uid)
                for path, record in stop_pod(going, lambda text, pod=pod, ns=ns: self.say('pod %s/%s %s' % (ns, pod, text))):
                    uid = ((record or {}).get('peers') or {}).get('uid')
                    self.say('pod %s/%s (uid %s) is gone: stopped pid %s' % (ns, pod, uid, record['pid']))
                for uid in uids:
                    shutil.rmtree(os.path.join(self.base, 'volumes', ns, uid or '-'), ignore_errors=True)
                    for key in [k for k in self.containers if k[0] == uid]:
                        del self.containers[key]
                if not os.listdir(pod_dir):
                    os.rmdir(pod_dir)

    def stop_all(self) -> None:
        stop_recorded(os.path.dirname(self.base))
        self._stop_orphans(set())

    # --- Services and PVCs ---------------------------------------------------------------------------------
    def _sync_endpoints(self, pods: List[Dict[str, Any]]) -> None:
        all_endpoints = self._index(self._list('/api/v1/endpoints'))
        slices = self._index(self._list('/apis/discovery.k8s.io/v1/endpointslices'))
        for service in self._list('/api/v1/services'):
            md = service['metadata']
            selector = (service.get('spec') or {}).get('selector')
            chosen = [p for p in pods if p['metadata']['namespace'] == md.get('namespace')
                      and podspec.selects(selector, p['metadata'].get('labels'))]
            existing = all_endpoints.get((md.get('namespace'), md['name']))
            if not chosen and (existing is None or podspec.MANAGED_BY not in (existing['metadata'].get('annotations') or {})):
                continue   # not a Service of the runtime's pods
            endpoints, endpoint_slice = podspec.endpoints_for(service, chosen)
            self._put(existing, '/api/v1/endpoints', endpoints, ('subsets',))
            self._put(slices.get((md.get('namespace'), endpoint_slice['metadata']['name'])),
                      '/apis/discovery.k8s.io/v1/endpointslices', endpoint_slice, ('endpoints', 'ports'))

    def _put(self, existing: Optional[Dict[str, Any]], kind_path: str, wanted: Dict[str, Any], keys: Tuple[str, ...]) -> None:
        md = wanted['metadata']
        if existing is None:
            self._call('POST', ns_path(kind_path, md['namespace']), wanted)
        elif any(existing.get(k) != wanted.get(k) for k in keys):
            self._call('PATCH', ns_path(kind_path, md['namespace'], md['name']),
                       [{'op': 'add', 'path': '/' + k, 'value': wanted[k]} for k in keys], JSON_PATCH)

    def _sync_pvcs(self, pvcs: List[Dict[str, Any]], pods: List[Dict[str, Any]]) -> None:
        in_use = {(p['metadata']['namespace'], v['persistentVolumeClaim']['claimName'])
                  for p in pods for v in (p.get('spec') or {}).get('volumes') or [] if 'persistentVolumeClaim' in v}
        for pvc in pvcs:
            md = pvc['metadata']
            if podspec.MANAGED_BY not in (md.get('annotations') or {}):
                continue
            key = (md['namespace'], md['name'])
            path = os.path.join(self.base, 'pvc', md['namespace'], md['name'])
            if md.get('deletionTimestamp'):
                if key in in_use:
                    continue
                shutil.rmtree(path, ignore_errors=True)
                self.say('pvc %s/%s deleted: removed %s' % (md['namespace'], md['name'], path))
                finalizers = [f for f in md.get('finalizers') or [] if f != podspec.PVC_PROTECTION]
                self._call('PATCH', ns_path('/api/v1/persistentvolumeclaims', md['namespace'], md['name']),
                           {'metadata': {'finalizers': finalizers or None}}, {'Content-Type': 'application/merge-patch+json'})
                continue
            os.makedirs(path, mode=0o700, exist_ok=True)
            if (pvc.get('status') or {}).get('phase') != 'Bound':
                capacity = (((pvc.get('spec') or {}).get('resources') or {}).get('requests') or {}).get('storage', '1Gi')
                self._call('PATCH', ns_path('/api/v1/persistentvolumeclaims', md['namespace'], md['name']),
                           [{'op': 'add', 'path': '/status', 'value': {
                               'phase': 'Bound', 'accessModes': (pvc.get('spec') or {}).get('accessModes') or [],
                               'capacity': {'storage': capacity}}}], JSON_PATCH)

    # --- files ---------------------------------------------------------------------------------------------
    @staticmethod
    def _load_json(path: str) -> Any:
        try:
            with open(path) as f:
                return json.load(f)
        except (OSError, ValueError):
            return None

    @staticmethod
    def _write_json(path: str, value: Any) -> None:
        with open(path + '.tmp', 'w') as f:
            json.dump(value, f, indent=1, sort_keys=True)
        os.replace(path + '.tmp', path)

    def run(self) -> int:
        self.say('pod runtime: API %s, pod IPs %s, state %s' % (self.kube, self.network, self.base))
        while not self.stopping.is_set():
            try:
                self.sync()
            except (requests.RequestException, ValueError, KeyError) as exc:
                self.say('pass failed: %r' % exc)
            self.stopping.wait(self.interval)
        self.stop_all()
        return 0


def stop_rules(pod: Dict[str, Any], container: Dict[str, Any], ip: Optional[str]) -> Dict[str, str]:
    """What stopping this container takes, kept in its record (the pod object may be gone by then): the pod's
    terminationGracePeriodSeconds and the container's preStop hook with the pod IP and the container's ports."""
    grace = (pod.get('spec') or {}).get('terminationGracePeriodSeconds')
    rules = {'grace': str(float(grace) if isinstance(grace, (int, float)) and grace >= 0 else DEFAULT_GRACE)}
    hook = (container.get('lifecycle') or {}).get('preStop')
    if hook:
        rules['preStop'] = json.dumps({'hook': hook, 'ip': ip or '127.0.0.1', 'ports': container.get('ports') or []},
                                      sort_keys=True)
    return rules


def container_port(value: Any, ports: List[Dict[str, Any]]) -> int:
    """A probe's or hook's port: a number, or the name of one of the container's ports."""
    if isinstance(value, int) or str(value).isdigit():
        return int(value)
    for cport in ports:
        if cport.get('name') == value:
            return int(cport['containerPort'])
    raise ValueError('no container port named %r' % value)


def run_pre_stop(rules: Dict[str, Any], deadline: float) -> str:
    """One container's preStop hook, before `deadline` (time.monotonic()): what happened, for the log. httpGet
    (any answer counts: a kubelet only logs a failed hook and stops the container anyway) and sleep run; exec and
    tcpSocket are not run here (said in the answer)."""
    spec = json.loads(rules['preStop'])
    hook, left = spec['hook'], max(0.0, deadline - time.monotonic())
    started = time.monotonic()
    if 'httpGet' in hook:
        get = hook['httpGet']
        try:
            url = '%s://%s:%d%s' % (str(get.get('scheme', 'HTTP')).lower(), get.get('host') or spec['ip'],
                                    container_port(get['port'], spec['ports']), get.get('path', '/'))
            headers = {h['name']: h['value'] for h in get.get('httpHeaders') or []}
            answer = requests.get(url, timeout=left or 0.001, headers=headers, verify=False, allow_redirects=False)
            return 'preStop GET %s: HTTP %d after %.1fs' % (url, answer.status_code, time.monotonic() - started)
        except (requests.RequestException, ValueError) as exc:
            return 'preStop hook failed after %.1fs (FailedPreStopHook): %s' % (time.monotonic() - started, exc)
    if 'sleep' in hook:
        time.sleep(min(left, float((hook['sleep'] or {}).get('seconds') or 0)))
        return 'preStop sleep %.1fs' % (time.monotonic() - started)
    return 'preStop %s not run by the lab' % ', '.join(sorted(hook))


def stop_pod(paths: List[str], say: Callable[[str], None]) -> List[Tuple[str, Dict[str, Any]]]:
    """Stop one pod's containers (their records `paths`) as a kubelet does: all at once, each running its preStop
    hook first, then SIGTERM, then SIGKILL at the end of the pod's grace (from the start, hooks included; at least
    MIN_KILL_GRACE after SIGTERM). Records of processes that no longer run are removed. The (path, record) pairs of
    the processes stopped."""
    records = {path: parts.running(path) for path in paths}
    for path in [p for p, r in records.items() if r is None and os.path.exists(p)]:
        os.unlink(path)
    running = {p: r for p, r in records.items() if r is not None}
    grace = max([float((r.get('peers') or {}).get('grace') or DEFAULT_GRACE) for r in running.values()] or [0.0])
    deadline = time.monotonic() + grace
    stopped: List[Tuple[str, Dict[str, Any]]] = []

    def one(path: str, record: Dict[str, Any]) -> None:
        rules = record.get('peers') or {}
        name = os.path.basename(path)[:-len('.json')]
        if rules.get('preStop'):
            say('container %s: %s' % (name, run_pre_stop(rules, deadline)))
        if parts.stop(path, max(MIN_KILL_GRACE, deadline - time.monotonic())):
            stopped.append((path, record))
    threads = [threading.Thread(target=one, args=item, daemon=True) for item in sorted(running.items())]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sorted(stopped, key=lambda item: item[0])


def stop_recorded(state_dir: str) -> List[str]:
    """Stop every pod process the records under `<state_dir>/pods/run` name, all at once (SIGTERM, then SIGKILL
    after 8 s; only while pid, start time and argv match), and remove their records; the records stopped. The runtime
    does this on SIGTERM; `lab.py down` does it again after stopping the runtime, for processes a runtime that died
    left behind."""
    run = os.path.join(os.path.abspath(state_dir), 'pods', 'run')
    records = [os.path.join(root, name) for root, _dirs, names in os.walk(run) for name in names if name.endswith('.json')]
    stopped: List[str] = []

    def stop(path: str) -> None:
        if parts.stop(path, 8.0):
            stopped.append(path)
    threads = [threading.Thread(target=stop, args=(path,)) for path in records]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return stopped


def probe_once(probe: Dict[str, Any], ip: str, container: Dict[str, Any], timeout: float, rewriter: Any) -> bool:
    """One readiness probe against the pod's IP: httpGet (2xx/3xx), tcpSocket (connects) or exec (exit 0; the
    command rewritten as the container's args, by the Rewriter `rewriter()` makes)."""
    def port_of(value: Any) -> int:
        return container_port(value, container.get('ports') or [])
    try:
        if 'httpGet' in probe:
            get = probe['httpGet']
            url = '%s://%s:%d%s' % (str(get.get('scheme', 'HTTP')).lower(), get.get('host') or ip, port_of(get['port']),
                                    get.get('path', '/'))
            headers = {h['name']: h['value'] for h in get.get('httpHeaders') or []}
            answer = requests.get(url, timeout=timeout, headers=headers, verify=False, allow_redirects=False)
            return 200 <= answer.status_code < 400
        if 'tcpSocket' in probe:
            sock = probe['tcpSocket']
            with socket.create_connection((sock.get('host') or ip, port_of(sock['port'])), timeout=timeout):
                return True
        if 'exec' in probe:
            rewrite = rewriter()
            command = [rewrite(str(a)) for a in probe['exec'].get('command') or []]
            return subprocess.run(command, capture_output=True, timeout=timeout, check=False).returncode == 0
    except (requests.RequestException, OSError, ValueError, subprocess.SubprocessError, images.UnknownImage):
        return False
    return False


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n', 1)[0])
    sub = parser.add_subparsers(dest='command', required=True)
    run = sub.add_parser('run', help='run the pod runtime until SIGTERM')
    run.add_argument('--kube-url', required=True)
    run.add_argument('--state-dir', required=True, help='pods live in STATE_DIR/pods')
    run.add_argument('--pod-cidr', default=DEFAULT_POD_CIDR, help='loopback network of the pod IPs')
    run.add_argument('--interval', type=float, default=0.5)
    args = parser.parse_args(argv)
    runtime = Runtime(args.kube_url, args.state_dir, args.pod_cidr, args.interval)
    signal.signal(signal.SIGTERM, lambda signum, frame: runtime.stopping.set())
    signal.signal(signal.SIGINT, lambda signum, frame: runtime.stopping.set())
    return runtime.run()


if __name__ == '__main__':
    sys.exit(main())
