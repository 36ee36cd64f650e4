"""What a `make demo` act gets: DemoContext (the lab, a step runner that prints the story, a playbook runner
that keeps the full output in .lab/demo/), and the small helpers acts share. See lab/demo/main.py."""

from __future__ import annotations

import dataclasses
import os
import re
import sys
import time
import traceback
from typing import Any, Callable, Dict, List, Optional, TextIO

from lab import manager  # (lab/manager.py: client_url, run_playbook)

# `key: value` lines of a playbook's final debug report (the YAML result format of the lab's ansible.cfg).
REPORT_LINE = re.compile(r'^\s+([a-z_]+): (\S.*)$', re.M)


class DemoFailed(Exception):
    """A step failed; the message says which and where its full log is."""


@dataclasses.dataclass
class PlaybookRun:
    name: str
    rc: int
    changed: int
    seconds: float
    log: str
    report: Dict[str, str]   # the scalar `key: value` lines the playbook printed (last one wins)


@dataclasses.dataclass
class DemoContext:
    """What an act gets: the lab, a step runner that prints the story, and a playbook runner that logs."""
    state: str
    members: int
    keys: int
    log_dir: str
    log: TextIO
    out: TextIO = sys.stdout
    hosts: Dict[str, Dict[str, Any]] = dataclasses.field(default_factory=dict)
    story: List[str] = dataclasses.field(default_factory=list)
    shared: Dict[str, Any] = dataclasses.field(default_factory=dict)   # what one act leaves for the next
    act: str = ''
    _runs: int = 0

    @property
    def endpoints(self) -> List[str]:
        return [manager.client_url(h) for h in self.hosts.values()]

    @property
    def store(self) -> str:
        """The backup store the etcd playbooks use (a directory in the lab's state)."""
        return os.path.join(self.state, 'backups')

    def write_log(self, text: str) -> None:
        self.log.write(text if text.endswith('\n') else text + '\n')
        self.log.flush()

    def log_path(self, name: str) -> str:
        """A file in the demo's log dir for an act's own logs (a controller's, a server's)."""
        return os.path.join(self.log_dir, name)

    def step(self, title: str, fn: Callable[[], Optional[str]]) -> str:
        """Run one step; print and return its story line (`fn` returns the figures)."""
        self.write_log('\n==> [%s] %s' % (self.act, title))
        start = time.monotonic()
        try:
            note = fn() or ''
        except BaseException as exc:
            took = time.monotonic() - start
            self.write_log(traceback.format_exc())
            line = '%6.1f s  %-10s %s: FAILED: %s' % (took, self.act, title, _one_line(exc))
            self.say(line)
            message = '%s / %s failed (%s); full log in %s' % (self.act, title, _one_line(exc), self.log.name)
            raise DemoFailed(message) from exc
        line = '%6.1f s  %-10s %s%s' % (time.monotonic() - start, self.act, title, (': ' + note) if note else '')
        self.say(line)
        return line

    def say(self, line: str) -> None:
        """One story line: printed, kept for story.txt and written to demo.log."""
        self.story.append(line)
        self.write_log('<== ' + line)
        self.out.write(line + '\n')
        self.out.flush()

    def playbook(self, name: str, *extra: str) -> PlaybookRun:
        """Run steward.cluster.<name> on the lab; its output goes to its own log file. Raises on failure."""
        self._runs += 1
        log = self.log_path('%02d-%s.log' % (self._runs, name))
        start = time.monotonic()
        result = manager.run_playbook(self.state, 'steward.cluster.' + name, list(extra), echo=False)
        with open(log, 'w') as f:
            f.write(result['output'])
        self.write_log('ansible-playbook steward.cluster.%s %s -> rc=%d, log %s'
                       % (name, ' '.join(extra), result['rc'], log))
        if result['rc'] != 0:
            failed = [line for line in result['output'].splitlines() if 'FAILED' in line or 'ERROR' in line]
            raise DemoFailed('steward.cluster.%s failed (rc=%d): %s; full log in %s'
                             % (name, result['rc'], failed[-1].strip() if failed else 'see the log', log))
        tail = result['output'][result['output'].rfind('TASK ['):]
        report = dict(REPORT_LINE.findall(tail))
        return PlaybookRun(name=name, rc=result['rc'], changed=result['changed'],
                           seconds=time.monotonic() - start, log=log, report=report)


def changes(count: int) -> str:
    return '%d change%s' % (count, '' if count == 1 else 's')


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return '%s%s' % (type(exc).__name__ + ': ' if not isinstance(exc, (DemoFailed, SystemExit)) else '',
                     text[0] if text else '')
