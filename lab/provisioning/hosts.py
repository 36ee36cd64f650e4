#!/usr/bin/env python
# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The lab's provisioning hosts: cp1-cp3 (group control_plane) and w1, w2 (group workers), each a root prefix
<state>/hosts/<host>/ on its own loopback address (127.0.0.21-25 by default; the lab's etcd keeps 127.0.0.11-13),
with a static-pod supervisor (lab/provisioning/supervisor.py) standing in for each host's kubelet and a Kubernetes API
emulator (lab/kube/api.py) for the Nodes. Nothing is provisioned here: steward.cluster.cluster_genesis and
steward.cluster.node_join do that.

    python lab/hosts.py up --state .lab        # roots, inventory groups, supervisors, API emulator
    python lab/hosts.py reboot --state .lab    # SIGKILL every host process, start the supervisors again (no API)
    python lab/hosts.py status --state .lab
    python lab/hosts.py down --state .lab [--purge]

The inventory is <state>/hosts.yml (and the groups are merged into the lab inventory by lab/lab.py); the API's
kubeconfig is <state>/hosts-kubeconfig. Tests use the same functions with their own state dir and a free
loopback range (`free_ip_base`).
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import random
import signal
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

from lab.env.ports import port_free
from lab.paths import REPO, module_argv, runs_module, venv_python
from lab.provisioning import kubelet as lab_kubelet
from lab.provisioning.supervisor import alive, cmdline  # (the /proc checks the kubelet stand-in uses too)

SUPERVISOR = 'lab.provisioning.supervisor'  # run as `python -m lab.provisioning.supervisor`
HOSTS_MODULE = 'lab.provisioning.hosts'     # this module; `api` serves the API emulator in the background
HOSTS: Tuple[Tuple[str, str], ...] = (('cp1', 'control_plane'), ('cp2', 'control_plane'), ('cp3', 'control_plane'),
                                      ('w1', 'workers'), ('w2', 'workers'))
DEFAULT_IP_BASE = '127.0.0.21'
# The kubelet version a fresh lab host's kubelet install names (the provisioning default, kubernetes_version).
DEFAULT_KUBELET_VERSION = 'v1.31.4'
KUBELET_PATH = 'usr/bin/kubelet'   # below the host root: /usr/bin/kubelet, the kubelet unit's ExecStart
# Ports the hosts listen on (etcd client/peer/metrics, the apiserver load balancer): checked free by free_ip_base.
PORTS = (2379, 2380, 2381, 6553)


def host_ips(ip_base: str, count: int) -> List[str]:
    first = ipaddress.ip_address(ip_base)
    ips = [str(first + i) for i in range(count)]
    if not all(ipaddress.ip_address(ip).is_loopback for ip in ips):
        raise ValueError('lab host addresses must be loopback (127.0.0.0/8): %s..%s' % (ips[0], ips[-1]))
    return ips


def free_ip_base(count: int, attempts: int = 50) -> str:
    """A random loopback range 127.x.y.1.. whose host ports are free (tests run in parallel with the lab)."""
    rng = random.SystemRandom()
    for _attempt in range(attempts):
        base = '127.%d.%d.1' % (rng.randint(64, 250), rng.randint(0, 250))
        if all(port_free(ip, port) for ip in host_ips(base, count) for port in PORTS):
            return base
    raise RuntimeError('no free loopback range found for %d hosts' % count)


def root_of(state_dir: str, host: str) -> str:
    return os.path.join(os.path.abspath(state_dir), 'hosts', host)


def kubeconfig_path(state_dir: str) -> str:
    return os.path.join(os.path.abspath(state_dir), 'hosts-kubeconfig')


def groups(state_dir: str, ip_base: str = DEFAULT_IP_BASE,
           hosts: Sequence[Tuple[str, str]] = HOSTS) -> Dict[str, Any]:
    """Inventory groups `control_plane` and `workers`: local connection, each host rooted below the state dir and
    listening on its own loopback address (also for its node-local listeners)."""
    out: Dict[str, Any] = {'control_plane': {'hosts': {}}, 'workers': {'hosts': {}}}
    for (name, group), ip in zip(hosts, host_ips(ip_base, len(hosts))):
        out[group]['hosts'][name] = {
            'ansible_host': ip,
            'ansible_connection': 'local',
            'ansible_python_interpreter': venv_python(),
            'provisioning_root': root_of(state_dir, name),
            'provisioning_local_address': ip,
            'provisioning_kubeconfig': kubeconfig_path(state_dir),
            # steward.cluster.cluster_upgrade "installs" a kubelet by rewriting the host's stub (lab/provisioning/kubelet.py)
            'cluster_upgrade_kubelet_install_command': [venv_python(), os.path.join(REPO, 'lab', 'provisioning',
                                                                                    'kubelet.py'),
                                                        '--path', '{binary}', '--version', '{version}'],
        }
    return out


def add_to_inventory(inventory: Dict[str, Any], state_dir: str, ip_base: str = DEFAULT_IP_BASE) -> Dict[str, Any]:
    """The lab inventory gains the provisioning groups (lab/lab.py calls this when it writes its inventory)."""
    inventory.update(groups(state_dir, ip_base))
    return inventory


def write_inventory(state_dir: str, ip_base: str = DEFAULT_IP_BASE,
                    hosts: Sequence[Tuple[str, str]] = HOSTS) -> str:
    os.makedirs(os.path.abspath(state_dir), exist_ok=True)
    path = os.path.join(os.path.abspath(state_dir), 'hosts.yml')
    with open(path, 'w') as f:
        f.write('# steward.cluster lab provisioning hosts (written by lab/hosts.py)\n')
        json.dump(groups(state_dir, ip_base, hosts), f, indent=2)
        f.write('\n')
    return path


def read_hosts(state_dir: str) -> Dict[str, Dict[str, Any]]:
    """{host: vars} from <state>/hosts.yml; {} when there is none."""
    path = os.path.join(os.path.abspath(state_dir), 'hosts.yml')
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        text = f.read()
    data = json.loads(text[text.index('{'):])
    return {name: hv for group in data.values() for name, hv in (group.get('hosts') or {}).items()}


# --- processes ------------------------------------------------------------------------------------
def _pid(path: str) -> Optional[int]:
    try:
        with open(path) as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def supervisor_pid(root: str) -> Optional[int]:
    """The pid of the supervisor of `root`, verified by its command line (a recycled pid is not ours)."""
    pid = _pid(os.path.join(root, 'run', 'steward-supervisor.pid'))
    if pid is None or not alive(pid):
        return None
    argv = cmdline(pid)
    return pid if runs_module(argv, SUPERVISOR) and os.path.abspath(root) in argv else None


def pod_pids(root: str) -> Dict[str, int]:
    """{pod: pid} of the pods the supervisor of `root` started that still run (verified: they run below root)."""
    run = os.path.join(root, 'run', 'pods')
    out = {}
    for name in sorted(os.listdir(run)) if os.path.isdir(run) else []:
        if name.endswith('.pid'):
            pid = _pid(os.path.join(run, name))
            if pid and alive(pid) and any(os.path.abspath(root) in arg for arg in cmdline(pid)):
                out[name[:-4]] = pid
    return out


def install_kubelet_stub(root: str, version: str = DEFAULT_KUBELET_VERSION, force: bool = False) -> str:
    """The host's kubelet install: a stub answering `--version` (kept when there is one, unless `force`)."""
    path = os.path.join(root, KUBELET_PATH)
    if force or not os.path.exists(path):
        lab_kubelet.install(path, version)
    return path


def start_supervisor(root: str, kubeconfig: Optional[str] = None, interval: float = 0.5) -> int:
    pid = supervisor_pid(root)
    if pid is not None:
        return pid
    os.makedirs(os.path.join(root, 'run'), exist_ok=True)
    os.makedirs(os.path.join(root, 'var', 'log'), exist_ok=True)
    cmd = module_argv(SUPERVISOR, '--root', os.path.abspath(root), '--interval', str(interval))
    if kubeconfig:
        cmd += ['--kubeconfig', kubeconfig]
    with open(os.path.join(root, 'var', 'log', 'supervisor.log'), 'ab') as log, open(os.devnull, 'rb') as stdin:
        proc = subprocess.Popen(cmd, stdin=stdin, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                close_fds=True, cwd=REPO)
    with open(os.path.join(root, 'run', 'steward-supervisor.pid'), 'w') as f:
        f.write('%d\n' % proc.pid)
    return proc.pid


def _kill_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)    # every process we start leads its own session: the group is exactly its tree
    except ProcessLookupError:
        pass


def _wait_gone(pids: Sequence[int], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(alive(p) for p in pids):
            return True
        time.sleep(0.05)
    return not any(alive(p) for p in pids)


def kill_host(root: str) -> List[int]:
    """A power cut: SIGKILL the supervisor and every pod it started (pid files verified by command line)."""
    pids = [p for p in [supervisor_pid(root)] + list(pod_pids(root).values()) if p]
    for pid in pids:
        _kill_group(pid, signal.SIGKILL)
    _wait_gone(pids, 10)
    return pids


def stop_host(root: str, timeout: float = 30.0) -> bool:
    """SIGTERM the supervisor (it stops its pods first); SIGKILL whatever is left after `timeout`."""
    pid = supervisor_pid(root)
    if pid is not None:
        os.kill(pid, signal.SIGTERM)
        if not _wait_gone([pid], timeout):
            _kill_group(pid, signal.SIGKILL)
    leftovers = list(pod_pids(root).values())
    for pod in leftovers:
        _kill_group(pod, signal.SIGKILL)
    _wait_gone(leftovers, 10)
    return pid is not None


# --- the API emulator ------------------------------------------------------------------------------
def api_files(state_dir: str) -> Dict[str, str]:
    base = os.path.abspath(state_dir)
    return {'pid': os.path.join(base, 'hosts-api.pid'), 'log': os.path.join(base, 'hosts-api.log'),
            'kubeconfig': kubeconfig_path(state_dir)}


def api_pid(state_dir: str) -> Optional[int]:
    pid = _pid(api_files(state_dir)['pid'])
    if pid is None or not alive(pid):
        return None
    return pid if runs_module(cmdline(pid), HOSTS_MODULE) and 'api' in cmdline(pid) else None


def start_api(state_dir: str, timeout: float = 30.0) -> str:
    """The emulator as a background process; returns its kubeconfig path once it answers."""
    files = api_files(state_dir)
    if api_pid(state_dir) is None:
        if os.path.exists(files['kubeconfig']):
            os.unlink(files['kubeconfig'])
        cmd = module_argv(HOSTS_MODULE, 'api', '--state', os.path.abspath(state_dir))
        with open(files['log'], 'ab') as log, open(os.devnull, 'rb') as stdin:
            proc = subprocess.Popen(cmd, stdin=stdin, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                    close_fds=True, cwd=REPO)
        with open(files['pid'], 'w') as f:
            f.write('%d\n' % proc.pid)
    deadline = time.monotonic() + timeout
    while not os.path.exists(files['kubeconfig']):
        if time.monotonic() > deadline:
            raise RuntimeError('the API emulator did not start within %ss; see %s' % (timeout, files['log']))
        time.sleep(0.1)
    return files['kubeconfig']


def stop_api(state_dir: str) -> bool:
    pid = api_pid(state_dir)
    if pid is not None:
        os.kill(pid, signal.SIGTERM)
        if not _wait_gone([pid], 15):
            _kill_group(pid, signal.SIGKILL)
    return pid is not None


def serve_api(state_dir: str) -> int:
    """Run the emulator until SIGTERM (the `api` command)."""
    from lab.kube.api import KubeServer  # the lab's emulator; imported here so `up`/`down` need no aiohttp
    server = KubeServer().start()
    done = {'stop': False}
    signal.signal(signal.SIGTERM, lambda *_: done.update(stop=True))
    path = kubeconfig_path(state_dir)
    server.write_kubeconfig(path + '.tmp')
    os.replace(path + '.tmp', path)
    print('lab hosts API emulator listening on %s' % server.url, flush=True)
    while not done['stop']:
        time.sleep(0.2)
    server.stop()
    return 0


# --- the whole set ----------------------------------------------------------------------------------
def hosts_up(state_dir: str, ip_base: str = DEFAULT_IP_BASE, hosts: Sequence[Tuple[str, str]] = HOSTS,
             api: bool = True, kubelet_version: Optional[str] = None) -> Dict[str, Any]:
    """Roots, inventory, the API emulator and one supervisor per host; idempotent. With `kubelet_version` each
    host gets a kubelet install naming it (a stub, kept when there is one: the command line's `up` does this); without,
    the roots stay empty until provisioned."""
    write_inventory(state_dir, ip_base, hosts)
    kubeconfig = start_api(state_dir) if api else None
    pids = {}
    for name, _group in hosts:
        root = root_of(state_dir, name)
        os.makedirs(root, exist_ok=True)
        if kubelet_version:
            install_kubelet_stub(root, kubelet_version)
        pids[name] = start_supervisor(root, kubeconfig)
    return {'inventory': os.path.join(os.path.abspath(state_dir), 'hosts.yml'), 'kubeconfig': kubeconfig,
            'supervisors': pids}


def reboot(state_dir: str, api: bool = False) -> Dict[str, List[int]]:
    """Every host loses power at once (the API emulator too, and it comes back empty), then the hosts come back
    with nothing but their disks. The supervisors keep their kubeconfig, as kubelets do: they register their Nodes
    once an API answers again (`api`, or a later start_api)."""
    had_api = api_pid(state_dir) is not None or os.path.exists(kubeconfig_path(state_dir))
    killed = {name: kill_host(root_of(state_dir, name)) for name in read_hosts(state_dir)}
    stop_api(state_dir)
    if os.path.exists(kubeconfig_path(state_dir)):
        os.unlink(kubeconfig_path(state_dir))
    if api:
        start_api(state_dir)
    for name in read_hosts(state_dir):
        start_supervisor(root_of(state_dir, name), kubeconfig_path(state_dir) if had_api or api else None)
    return killed


def hosts_down(state_dir: str, purge: bool = False) -> List[str]:
    stopped = [name for name in read_hosts(state_dir) if stop_host(root_of(state_dir, name))]
    if stop_api(state_dir):
        stopped.append('api')
    if purge:
        import shutil
        shutil.rmtree(os.path.join(os.path.abspath(state_dir), 'hosts'), ignore_errors=True)
        for path in list(api_files(state_dir).values()) + [os.path.join(os.path.abspath(state_dir), 'hosts.yml')]:
            if os.path.exists(path):
                os.unlink(path)
    return stopped


def hosts_status(state_dir: str) -> Dict[str, Dict[str, Any]]:
    out = {}
    for name in read_hosts(state_dir):
        root = root_of(state_dir, name)
        out[name] = {'supervisor': supervisor_pid(root), 'pods': pod_pids(root)}
    return out


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n', 1)[0])
    sub = parser.add_subparsers(dest='command', required=True)
    for name, text in (('up', 'roots, inventory, supervisors and the API emulator'), ('down', 'stop everything'),
                       ('reboot', 'SIGKILL every host process, start the supervisors again'),
                       ('status', 'supervisors and pods'), ('api', '(internal) serve the API emulator')):
        p = sub.add_parser(name, help=text)
        p.add_argument('--state', default=os.path.join(REPO, '.lab'))
    sub.choices['up'].add_argument('--ip-base', default=DEFAULT_IP_BASE)
    sub.choices['up'].add_argument('--kubelet-version', default=DEFAULT_KUBELET_VERSION,
                                   help='the version each host\'s kubelet install names (a stub; kept when present)')
    sub.choices['down'].add_argument('--purge', action='store_true')
    sub.choices['reboot'].add_argument('--with-api', action='store_true', help='start the API emulator again too')
    args = parser.parse_args(argv)
    if args.command == 'api':
        return serve_api(args.state)
    if args.command == 'up':
        result = hosts_up(args.state, args.ip_base, kubelet_version=args.kubelet_version)
        print('lab hosts up: %s; inventory %s; kubeconfig %s'
              % (', '.join(result['supervisors']), result['inventory'], result['kubeconfig']))
    elif args.command == 'down':
        print('lab hosts down: stopped %s' % (', '.join(hosts_down(args.state, args.purge)) or 'nothing'))
    elif args.command == 'reboot':
        killed = reboot(args.state, args.with_api)
        print('lab hosts rebooted: %s' % ', '.join('%s (%d processes)' % (n, len(p)) for n, p in killed.items()))
    else:
        status = hosts_status(args.state)
        if not status:
            print('no lab hosts in %s' % args.state)
            return 1
        for name, st in status.items():
            print('%-5s supervisor=%-8s pods: %s' % (name, st['supervisor'] or '-',
                                                     ', '.join('%s=%d' % kv for kv in st['pods'].items()) or '-'))
    return 0


if __name__ == '__main__':
    sys.exit(main())
