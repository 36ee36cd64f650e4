# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Running a tool (etcdutl, etcdctl, haproxy -c) within a deadline.

`subprocess.run(timeout=...)` kills the tool it started, then waits for its output pipes to close: a wrapper script
whose child still holds them (`sh -c 'sleep 600'`, a tool that forks a helper) keeps the caller waiting long past
the timeout. Here the tool starts in a process group of its own, and at the deadline the whole group is killed
(SIGKILL: a tool past its deadline gets no grace to ignore a TERM) before the pipes are drained; the error names
the tool and the time spent.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from typing import Mapping, Optional, Sequence

from ansible_collections.steward.cluster.plugins.module_utils.common.deadline import DeadlineExceeded

# After the group is killed, its pipes close at once; this only bounds a reader stuck on something else.
DRAIN_SECONDS = 5.0


def run_bounded(argv: Sequence[str], timeout: float, what: Optional[str] = None,
                env: Optional[Mapping[str, str]] = None) -> 'subprocess.CompletedProcess[str]':
    """Run `argv` (text output captured, stdin closed) and return its CompletedProcess, whatever its exit code;
    DeadlineExceeded (naming `what`, default the tool and its first argument) when it has not finished after
    `timeout` seconds - by then it and every process it started in its group are gone. OSError when it cannot
    be started."""
    what = what or ' '.join([os.path.basename(argv[0])] + list(argv[1:2]))
    started = time.monotonic()
    with subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, env=dict(env) if env is not None else None, start_new_session=True) as proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            try:
                proc.communicate(timeout=DRAIN_SECONDS)
            except subprocess.TimeoutExpired:
                pass
            raise DeadlineExceeded(what, None, timeout, time.monotonic() - started,
                                   'killed it and its process group %d' % proc.pid) from None
        except BaseException:
            _kill_group(proc)
            raise
    return subprocess.CompletedProcess(list(argv), proc.returncode, out, err)


def _kill_group(proc: 'subprocess.Popen[str]') -> None:
    """The tool was started as the leader of its own group: the group's id is its pid (ours, provably)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.kill()
    try:
        proc.wait(timeout=DRAIN_SECONDS)
    except subprocess.TimeoutExpired:
        pass
