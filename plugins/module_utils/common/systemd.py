# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""`systemctl` for the units this collection manages (etcd.service, kubelet.service): one way to build the command,
bound it in time and read its answer.

By default the command runs through `commands.run_bounded` (a hung systemd - a stop job waiting on a unit that
will not die - ends at the deadline with DeadlineExceeded, an OSError, instead of holding the play). A module
passes Ansible's runner instead (`run=ansible_runner(module.run_command)`), so the command shows in its log as any
other; tests pass a fake with the same shape as `subprocess.run`: argv in, CompletedProcess out.
"""

from __future__ import annotations

import subprocess
from typing import Any, Callable, List, Optional

from ansible_collections.steward.cluster.plugins.module_utils.common.commands import run_bounded

SYSTEMCTL_TIMEOUT = 120.0   # systemd's own default stop timeout is 90s: a stop job gets it, and some slack
Runner = Callable[[List[str]], 'subprocess.CompletedProcess[str]']


def systemctl(unit: str, *verbs: str, run: Optional[Runner] = None,
              timeout: float = SYSTEMCTL_TIMEOUT) -> 'subprocess.CompletedProcess[str]':
    """Run `systemctl <verbs...> <unit>` (no unit: '' for daemon-reload) and return its CompletedProcess, whatever
    the exit code (`is-active` answers with it); OSError when it cannot run or outlasts `timeout`."""
    argv = ['systemctl'] + list(verbs) + ([unit] if unit else [])
    if run is not None:
        return run(argv)
    return run_bounded(argv, timeout, ' '.join(argv))


def ansible_runner(run_command: Callable[..., Any]) -> Runner:
    """An AnsibleModule's `run_command` as a Runner."""
    def run(argv: List[str]) -> 'subprocess.CompletedProcess[str]':
        rc, out, err = run_command(argv)
        return subprocess.CompletedProcess(argv, rc, out, err)
    return run


def answer(done: 'subprocess.CompletedProcess[str]') -> str:
    """What systemctl said about a failure (stderr, else stdout), for an error message."""
    return ((done.stderr or done.stdout) or '').strip()
