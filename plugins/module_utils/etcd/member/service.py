# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""How one member is stopped and started: a detached process this collection started (process.py, for
hosts without systemd), or a systemd unit (the role's `etcd_service_manager: systemd`). Recovery
(recovery_steps.py) drives either through the same three calls, so both paths take the same steps and
wait the same way: health polled at sub-second intervals, never a fixed sleep.
"""

from __future__ import annotations

import dataclasses
import subprocess
import time
from typing import Callable, Optional

from ansible_collections.steward.cluster.plugins.module_utils.common.systemd import Runner, answer, systemctl
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import EtcdUnavailable
from ansible_collections.steward.cluster.plugins.module_utils.etcd.member.process import (
    ProcessError,
    ProcessSpec,
    answers,
    running_pid,
    start_process,
    stop_running,
    wait_ready,
)

POLL = 0.1
ANSWER_TIMEOUT = 0.15  # the member's own URL, from its host: one that answers at all does so in milliseconds


class ProcessService:
    """A member run as `etcd --config-file` with a pid file (process.py identifies it before any signal)."""

    def __init__(self, spec: ProcessSpec):
        self.spec = spec

    def describe(self) -> str:
        return 'process (pid file %s)' % self.spec.pid_file

    def running(self) -> bool:
        return running_pid(self.spec) is not None

    def serving(self) -> bool:
        """It answers clients (/health or /version) now."""
        return answers(self.spec, ANSWER_TIMEOUT) is not None

    def stop(self) -> Optional[str]:
        """Stop it when it runs; the signal that ended it, or None when it was not running."""
        return stop_running(self.spec)

    def start(self, wait: bool) -> None:
        """Start it; with `wait`, until it answers /health (or /version, for a learner) within wait_timeout."""
        start_process(dataclasses.replace(self.spec, wait=wait))

    def wait(self, timeout: float) -> None:
        pid = running_pid(self.spec)
        if pid is None:
            raise ProcessError('etcd is not running (pid file %s)' % self.spec.pid_file)
        wait_ready(dataclasses.replace(self.spec, wait_timeout=int(max(timeout, 1))), pid)


class SystemdService:
    """A member run by the systemd unit `unit` (the role's etcd.service.j2, Type=notify)."""

    def __init__(self, unit: str, spec: ProcessSpec, run: Optional[Runner] = None):
        self.unit = unit
        self.spec = spec  # for the health URL and TLS files only
        self._run = run

    def describe(self) -> str:
        return 'systemd unit %s' % self.unit

    def _systemctl(self, *args: str) -> subprocess.CompletedProcess:
        try:
            return systemctl(self.unit, *args, run=self._run)
        except OSError as exc:   # not there, or past common/systemd.SYSTEMCTL_TIMEOUT (DeadlineExceeded)
            raise ProcessError('systemctl %s %s failed: %s' % (' '.join(args), self.unit, exc)) from exc

    def running(self) -> bool:
        return self._systemctl('is-active', '--quiet').returncode == 0

    def serving(self) -> bool:
        return answers(self.spec, ANSWER_TIMEOUT) is not None

    def stop(self) -> Optional[str]:
        if not self.running():
            return None
        done = self._systemctl('stop')
        if done.returncode != 0:
            raise ProcessError('systemctl stop %s failed: %s' % (self.unit, answer(done)))
        return 'systemctl stop'

    def start(self, wait: bool) -> None:
        """`systemctl start` (`--no-block` without `wait`: members of a restored cluster start together and
        a Type=notify unit is only ready once they have quorum), then poll health like a process."""
        done = self._systemctl('start', *(() if wait else ('--no-block',)))
        if done.returncode != 0:
            raise ProcessError('systemctl start %s failed: %s; see journalctl -u %s' % (
                self.unit, answer(done), self.unit))
        if wait:
            self.wait(self.spec.wait_timeout)

    def wait(self, timeout: float, clock: Callable[[], float] = time.monotonic,
             sleep: Callable[[float], None] = time.sleep) -> None:
        deadline = clock() + timeout
        base = str(self.spec.wait_url).rstrip('/')
        while not self.serving():
            if self._systemctl('is-failed', '--quiet').returncode == 0:
                raise ProcessError('systemd unit %s failed while waiting for %s; see journalctl -u %s' % (
                    self.unit, base, self.unit))
            if clock() > deadline:
                raise EtcdUnavailable('%s did not answer /health or /version within %ss; see journalctl -u %s' % (
                    base, timeout, self.unit))
            sleep(POLL)
