# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The live node-local load balancer: validate a rendered config with `haproxy -c` before it replaces the live
one, replace it atomically, and reload HAProxy through its master CLI socket without dropping connections.

A reload in master-worker mode starts a new worker with the new config and lets the old worker finish the
connections it holds (up to `hard-stop-after`); the listening sockets stay open throughout. An invalid config
never reaches the live path (the users' complaint 7: a reload that takes the node's apiserver access down), and
a reload the master reports as failed is an error, with the previous worker still serving.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import tempfile
import time
from typing import Any, Dict, List, Optional, Sequence

from ansible_collections.steward.cluster.plugins.module_utils.common.commands import run_bounded
from ansible_collections.steward.cluster.plugins.module_utils.common.deadline import DeadlineExceeded
from ansible_collections.steward.cluster.plugins.module_utils.provisioning import layout
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.errors import (
    LoadBalancerConfigInvalid, NotReady, ProvisioningError,
)
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.files import Root

DEFAULT_VALIDATE_COMMAND = ('haproxy', '-c', '-f', '{config}')
SBIN_DIRS = '/usr/local/sbin:/usr/sbin:/sbin'
_MASTER = re.compile(r'^(\d+)\s+master\s+(\d+)\s+\[failed:\s*(\d+)\]', re.M)
_WORKER = re.compile(r'^(\d+)\s+worker\s', re.M)


def validate(config: bytes, command: Sequence[str] = DEFAULT_VALIDATE_COMMAND, timeout: float = 30.0) -> str:
    """Run the validation command on `config` in a private temporary file; haproxy's output when valid,
    LoadBalancerConfigInvalid (with that output) when not. `{config}` in the command is the file's path."""
    if not any('{config}' in part for part in command):
        raise ProvisioningError('lb_validate_command must contain {config}: %s' % ' '.join(command))
    # haproxy lives in /usr/sbin, which a minimal PATH (cron, env -i) leaves out: look there too, as Ansible's
    # get_bin_path does.
    program = shutil.which(command[0], path=os.pathsep.join([os.environ.get('PATH', ''), SBIN_DIRS]))
    if program is None:
        raise ProvisioningError('%s not found: the load balancer config cannot be validated before it replaces the '
                                'live one (install haproxy on the node, or set lb_validate_command)' % command[0])
    fd, path = tempfile.mkstemp(prefix='steward-haproxy-', suffix='.cfg')
    try:
        with os.fdopen(fd, 'wb') as f:
            f.write(config)
        argv = [program] + [part.replace('{config}', path) for part in command[1:]]
        try:
            proc = run_bounded(argv, timeout, ' '.join(argv[:2]))
        except DeadlineExceeded as exc:   # it and its process group were killed
            raise LoadBalancerConfigInvalid(str(exc), layout.LB_CONFIG) from None
        output = (proc.stdout + proc.stderr).replace(path, '<config>').strip()
        if proc.returncode != 0:
            raise LoadBalancerConfigInvalid('haproxy -c rejected the rendered config; the live config was not '
                                            'touched: %s' % output[-2000:], layout.LB_CONFIG, output)
        return output
    finally:
        os.unlink(path)


# --- the master CLI ---------------------------------------------------------------------------
def master_command(socket_path: str, command: str, timeout: float = 5.0) -> str:
    """One command on HAProxy's master CLI; raises OSError when nobody listens."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(socket_path)
        sock.sendall(command.encode() + b';quit\n')
        chunks: List[bytes] = []
        try:
            while True:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
        except socket.timeout:
            pass   # `reload` answers nothing on 2.6 and the master may close late: what we have is the answer
    return b''.join(chunks).decode('utf-8', 'replace')


def processes(socket_path: str, timeout: float = 5.0) -> Optional[Dict[str, Any]]:
    """{'master': pid, 'reloads': n, 'failed': n, 'workers': [pids]} from `show proc`, or None when not running."""
    try:
        text = master_command(socket_path, 'show proc', timeout)
    except OSError:
        return None
    master = _MASTER.search(text)
    if not master:
        return None
    return {'master': int(master.group(1)), 'reloads': int(master.group(2)), 'failed': int(master.group(3)),
            'workers': [int(p) for p in _WORKER.findall(text)]}


def reload(socket_path: str, timeout: float = 30.0, sleep: Any = time.sleep) -> Dict[str, Any]:
    """Reload through the master: done when the master counts one more reload and a new worker serves.
    {'reloaded': False, 'running': False} when HAProxy is not running (it reads the file when it starts)."""
    before = processes(socket_path)
    if before is None:
        return {'reloaded': False, 'running': False}
    try:
        master_command(socket_path, 'reload', timeout=2.0)
    except OSError as exc:
        raise ProvisioningError('cannot reload haproxy through %s: %s' % (socket_path, exc), socket_path) from exc
    deadline = time.monotonic() + timeout
    while True:
        now = processes(socket_path)
        if now is not None and now['failed'] > before['failed']:
            raise ProvisioningError('haproxy reported the reload as failed (the previous worker keeps serving); see '
                                    'its log', socket_path)
        if now is not None and now['reloads'] > before['reloads'] and set(now['workers']) - set(before['workers']):
            return {'reloaded': True, 'running': True, 'workers': now['workers']}
        if time.monotonic() > deadline:
            raise NotReady('haproxy did not finish its reload within %ss' % timeout, socket_path)
        sleep(0.1)


def ensure_config(root: Root, content: bytes, *, check_mode: bool, validate_command: Optional[Sequence[str]],
                  reload_timeout: float = 30.0) -> Dict[str, Any]:
    """Make the live config `content`: validated first (unless `validate_command` is None), replaced atomically,
    HAProxy reloaded when it runs. Same decision in check mode (validation included); only the writes are skipped."""
    live = root.read(layout.LB_CONFIG)
    result: Dict[str, Any] = {'changed': False, 'validated': False, 'reloaded': False, 'running': None,
                              'before': live, 'after': content}
    if live == content and root.mode(layout.LB_CONFIG) == 0o644:
        return result
    if validate_command is not None:
        validate(content, validate_command)
        result['validated'] = True
    result['changed'] = True
    if check_mode:
        return result
    root.write(layout.LB_CONFIG, content, 0o644)
    outcome = reload(layout.host_path(root.root, layout.LB_MASTER_SOCKET), reload_timeout)
    result.update(reloaded=outcome['reloaded'], running=outcome['running'])
    return result
