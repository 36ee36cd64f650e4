#!/usr/bin/env python
# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The local lab: an etcd cluster on loopback, laid out as if on N hosts.

Members etcd1..N listen on 127.0.0.11, .12, ... with the standard ports 2379/2380 and are provisioned
by the real `ansible-playbook steward.cluster.etcd_cluster` with the collection's own role (process
service manager). Everything lives in the state dir: inventory.yml, ansible.cfg, one dir per member.

    python lab/lab.py up --members 3 --state .lab [--ip-base 127.0.0.11]
    ANSIBLE_CONFIG=.lab/ansible.cfg .venv/bin/ansible-playbook steward.cluster.<playbook>
    python lab/lab.py status --state .lab
    python lab/lab.py down --state .lab [--purge]

Importable: lab_up(), lab_down(), lab_status(), read_inventory() are reused by the demo script.
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
import urllib.request
from typing import Any, Dict, List, Optional

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COLLECTIONS = os.path.join(REPO, '.build', 'collections')
if COLLECTIONS not in sys.path:
    sys.path.insert(0, COLLECTIONS)

from ansible_collections.steward.cluster.plugins.module_utils.etcd.process import (  # noqa: E402
    ProcessSpec, running_pid, stop_process)

ETCD_BINARY = os.path.join(REPO, '.build', 'etcd-3.5', 'etcd')
DEFAULT_IP_BASE = '127.0.0.11'
RECAP = re.compile(r'^(\S+)\s*:\s*ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)', re.M)


def venv_python() -> str:
    candidate = os.path.join(REPO, '.venv', 'bin', 'python')
    return candidate if os.path.exists(candidate) else sys.executable


def member_ips(ip_base: str, members: int) -> List[str]:
    """etcd1 gets ip_base, etcd2 the next address, ...; only loopback addresses (no real hosts touched)."""
    first = ipaddress.ip_address(ip_base)
    ips = [str(first + i) for i in range(members)]
    if not all(ipaddress.ip_address(ip).is_loopback for ip in ips):
        raise ValueError('lab addresses must be loopback (127.0.0.0/8): %s..%s' % (ips[0], ips[-1]))
    return ips


def build_inventory(state_dir: str, members: int, ip_base: str, binary: str = ETCD_BINARY) -> Dict[str, Any]:
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
    return {'etcd': {'hosts': hosts, 'vars': {'ansible_python_interpreter': venv_python()}}}


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


def lab_up(state_dir: str, members: int = 3, ip_base: str = DEFAULT_IP_BASE, echo: bool = True) -> Dict[str, Any]:
    """Write inventory + ansible.cfg and provision the cluster with the real playbook. Idempotent."""
    state_dir = os.path.abspath(state_dir)
    if not os.access(ETCD_BINARY, os.X_OK):
        raise RuntimeError('%s missing: run `make all` first' % ETCD_BINARY)
    existing = read_inventory(state_dir)
    if existing and len(existing) != members:
        raise RuntimeError('the lab in %s has %d members, not %d: run `lab.py down --purge` first'
                           % (state_dir, len(existing), members))
    write_config(state_dir, build_inventory(state_dir, members, ip_base))
    result = run_playbook(state_dir, echo=echo)
    if result['rc'] != 0:
        detail = 'see the output above' if echo else result['output'][-4000:]
        raise RuntimeError('ansible-playbook steward.cluster.etcd_cluster failed (rc=%d): %s' % (result['rc'], detail))
    return result


def member_status(hostvars: Dict[str, Any]) -> Dict[str, Any]:
    spec = ProcessSpec(pid_file=hostvars['etcd_pid_file'], binary=hostvars['etcd_binary'],
                       config_file=os.path.join(hostvars['etcd_config_dir'], 'etcd.conf.yml'))
    status: Dict[str, Any] = {'client_url': client_url(hostvars), 'pid': running_pid(spec), 'healthy': False}
    try:
        with urllib.request.urlopen(status['client_url'] + '/health', timeout=2) as resp:
            status['healthy'] = json.loads(resp.read().decode()).get('health') == 'true'
    except Exception as e:  # not answering is a status, not an error
        status['error'] = str(e)
    return status


def lab_status(state_dir: str) -> Dict[str, Dict[str, Any]]:
    return {name: member_status(hv) for name, hv in read_inventory(state_dir).items()}


def lab_down(state_dir: str, purge: bool = False) -> List[str]:
    """Stop every member from its pid file (SIGTERM, then SIGKILL); with purge also delete the state dir."""
    stopped = []
    for name, hv in read_inventory(state_dir).items():
        spec = ProcessSpec(pid_file=hv['etcd_pid_file'], binary=hv['etcd_binary'],
                           config_file=os.path.join(hv['etcd_config_dir'], 'etcd.conf.yml'))
        pid = running_pid(spec)
        if pid is not None:
            stop_process(pid, stop_timeout=10)
            stopped.append(name)
        if os.path.exists(spec.pid_file):
            os.unlink(spec.pid_file)
    if purge and os.path.isdir(state_dir):
        shutil.rmtree(state_dir)
    return stopped


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n', 1)[0])
    sub = parser.add_subparsers(dest='command', required=True)
    up = sub.add_parser('up', help='bring up (or converge) the lab cluster')
    up.add_argument('--members', type=int, default=3)
    up.add_argument('--ip-base', default=DEFAULT_IP_BASE)
    down = sub.add_parser('down', help='stop every member')
    down.add_argument('--purge', action='store_true', help='also remove the state dir')
    sub.add_parser('status', help='print members and health')
    for p in (up, down, sub.choices['status']):
        p.add_argument('--state', default=os.path.join(REPO, '.lab'))
    args = parser.parse_args(argv)
    try:
        if args.command == 'up':
            result = lab_up(args.state, args.members, args.ip_base)
            print('lab up: %d members, %d changes; ANSIBLE_CONFIG=%s' % (
                args.members, result['changed'], os.path.join(os.path.abspath(args.state), 'ansible.cfg')))
        elif args.command == 'down':
            stopped = lab_down(args.state, args.purge)
            print('lab down: stopped %s%s' % (', '.join(stopped) or 'nothing', ' (state removed)' if args.purge else ''))
        else:
            status = lab_status(args.state)
            if not status:
                print('no lab in %s' % args.state)
                return 1
            for name, st in status.items():
                print('%-8s %-24s pid=%-8s %s' % (name, st['client_url'], st['pid'] or '-',
                                                  'healthy' if st['healthy'] else 'UNHEALTHY ' + st.get('error', '')))
            return 0 if all(st['healthy'] for st in status.values()) else 1
    except (RuntimeError, ValueError) as e:
        print('lab: %s' % e, file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
