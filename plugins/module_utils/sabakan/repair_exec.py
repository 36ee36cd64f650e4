# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Carrying out repair_run's decisions, once, for every shell (the controller's repair loop, `sabakan_repair`).

Commands run as CKE runs them (op/repair_execute.go, op/status.go): the argv list of the configuration with the
machine's address appended as the last argument, no shell, in a process group of its own that is killed at
the step's deadline (`common.commands.run_bounded`); `command_retries` more attempts `command_interval` seconds
apart; a health check is healthy when its trimmed output is exactly `true`.

What the shell owns comes in as a `Ports` object: saving an entry's status, Events, draining and uncordoning a
Node, sleeping (so a stopping controller can cut a retry wait short) and the clock. Each command's trimmed
output goes into an Event (a failure is a Warning naming the Node); the arguments are never shown (they may
hold a BMC password), only the program's name, and the output is cut to OUTPUT_LIMIT characters.
"""

from __future__ import annotations

import os
import random
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Sequence, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.common.commands import run_bounded
from ansible_collections.steward.cluster.plugins.module_utils.common.deadline import DeadlineExceeded
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.repair_config import RepairConfig, RepairOperation
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.repair_run import (
    DRAINING, FAILED, PROCESSING, SUCCEEDED, WAITING, WATCHING, Action, Decision, Entry, drain_backoff,
)

OUTPUT_LIMIT = 1024


@dataclass
class CommandResult:
    program: str               # basename of argv[0]: what an Event may show
    ok: bool                   # exit code 0 within the deadline
    output: str                # stdout and stderr, trimmed, at most OUTPUT_LIMIT characters (the end kept)
    seconds: float
    exit_code: Optional[int] = None
    timed_out: bool = False
    error: str = ''            # could not start / killed at the deadline

    def describe(self) -> str:
        if self.timed_out:
            head = '%s killed at its deadline after %.1fs' % (self.program, self.seconds)
        elif self.error:
            head = '%s could not run: %s' % (self.program, self.error)
        else:
            head = '%s exited %s after %.1fs' % (self.program, self.exit_code, self.seconds)
        return head + (': ' + self.output if self.output else '')


def _trim(text: str) -> str:
    text = (text or '').strip()
    return text if len(text) <= OUTPUT_LIMIT else '...' + text[-OUTPUT_LIMIT:]


def run_command(argv: Sequence[str], address: str, timeout: float) -> CommandResult:
    """One attempt: `argv + [address]`, killed with its process group at `timeout` seconds."""
    program = os.path.basename(argv[0])
    started = time.monotonic()
    try:
        done = run_bounded(list(argv) + [address], timeout, what=program)
    except DeadlineExceeded:
        return CommandResult(program, False, '', time.monotonic() - started, timed_out=True)
    except OSError as exc:
        return CommandResult(program, False, '', time.monotonic() - started, error=exc.strerror or str(exc))
    output = _trim('\n'.join(part for part in (done.stdout.strip(), done.stderr.strip()) if part))
    return CommandResult(program, done.returncode == 0, output, time.monotonic() - started,
                         exit_code=done.returncode)


def health_check(operation: RepairOperation, address: str) -> Tuple[Optional[bool], CommandResult]:
    """CKE's isRepairTargetHealthy: True when the command printed `true`; None when it failed or timed out."""
    result = run_command(operation.health_check_command, address, operation.command_timeout_seconds)
    if not result.ok:
        return None, result
    return result.output.strip() == 'true', result


class Ports:
    """What the shell does for repair_exec; every method is the shell's (Kubernetes, a file, Events, a log)."""

    def save(self, entry: Entry, fields: Dict[str, Any]) -> None:
        raise NotImplementedError

    def event(self, entry: Entry, reason: str, message: str, warning: bool = False) -> None:
        raise NotImplementedError

    def drain(self, entry: Entry, config: RepairConfig) -> Tuple[bool, bool, str]:
        """(drained, cordoned by this drain, message)."""
        raise NotImplementedError

    def uncordon(self, entry: Entry) -> str:
        raise NotImplementedError

    def sleep(self, seconds: float) -> bool:
        """Wait; False when the shell is stopping (then give up waiting)."""
        time.sleep(seconds)
        return True

    def clock(self) -> float:
        return time.time()


def _where(entry: Entry) -> str:
    return 'Node %s (%s)' % (entry.node, entry.address) if entry.node else 'machine %s (not a Node)' % entry.address


def apply(decision: Decision, config: RepairConfig, ports: Ports, *, cordoned: bool = False,
          jitter: Callable[[], float] = random.random) -> str:
    """Carry out one decision; returns the entry's status afterwards. `cordoned`: the entry's Node was cordoned
    by an earlier drain of this entry (so success uncordons it)."""
    entry = decision.entry
    action = decision.action
    if action == Action.UNCONFIGURED:
        return entry.status
    if action == Action.WAIT:
        return entry.status
    if action == Action.SUCCEED:
        return _succeed(entry, config, ports, cordoned)
    if action == Action.FAIL:
        return _fail(entry, ports, decision.step, decision.reason)
    if action == Action.DRAIN_TIMEOUT:
        return _back_off(entry, ports, decision.reason, jitter(), cordoned)
    step_index = decision.step
    if action == Action.DRAIN:
        ports.save(entry, {'status': PROCESSING, 'step': step_index, 'step_status': DRAINING,
                           'last_transition': ports.clock()})
        entry.step, entry.status = step_index, PROCESSING
        drained, by_us, message = ports.drain(entry, config)
        cordoned = cordoned or by_us
        if by_us:
            ports.save(entry, {'cordoned': True})
        if not drained:
            return _back_off(entry, ports, message, jitter(), cordoned)
        ports.event(entry, 'RepairDrained', 'step %d: %s' % (step_index, message))
    return _execute(entry, config, ports, step_index)


def _execute(entry: Entry, config: RepairConfig, ports: Ports, step_index: int) -> str:
    """CKE's repairExecuteCommand: status watching first (the watch starts now), then the command with retries;
    giving up fails the entry."""
    operation = config.operation_for(entry.machine_type, entry.operation)
    if not (operation is not None):
        raise AssertionError('operation is not None')
    step = operation.repair_steps[step_index]
    ports.save(entry, {'status': PROCESSING, 'step': step_index, 'step_status': WATCHING,
                       'last_transition': ports.clock(), 'message': ''})
    entry.status, entry.step, entry.step_status = PROCESSING, step_index, WATCHING
    attempts = step.command_retries + 1
    result = None
    for attempt in range(attempts):
        result = run_command(step.repair_command, entry.address, step.command_timeout_seconds)
        label = 'step %d repair command, attempt %d/%d: ' % (step_index, attempt + 1, attempts)
        if result.ok:
            ports.event(entry, 'RepairCommand', label + result.describe())
            return PROCESSING
        ports.event(entry, 'RepairCommandFailed', '%s: %s%s' % (_where(entry), label, result.describe()), warning=True)
        if attempt + 1 < attempts and step.command_interval and not ports.sleep(step.command_interval):
            break
    if not (result is not None):
        raise AssertionError('result is not None')
    return _fail(entry, ports, step_index, 'repair command of step %d failed: %s' % (step_index, result.describe()))


def _succeed(entry: Entry, config: RepairConfig, ports: Ports, cordoned: bool) -> str:
    """CKE's repairFinish(succeeded): success_command (its failure fails the entry), then the Node is uncordoned
    when a drain of this entry cordoned it."""
    operation = config.operation_for(entry.machine_type, entry.operation)
    if not (operation is not None):
        raise AssertionError('operation is not None')
    if operation.success_command:
        result = run_command(operation.success_command, entry.address, operation.success_command_timeout)
        if not result.ok:
            return _fail(entry, ports, entry.step, 'the machine is healthy but success_command failed: '
                         + result.describe())
        ports.event(entry, 'RepairSuccessCommand', result.describe())
    note = ''
    if cordoned and entry.node:
        note = '; ' + ports.uncordon(entry)
    message = 'the health check of %s printed true: repair succeeded at step %d%s' % (entry.address, entry.step, note)
    ports.save(entry, {'status': SUCCEEDED, 'last_transition': ports.clock(), 'message': message,
                       'cordoned': False if note else cordoned})
    entry.status = SUCCEEDED
    ports.event(entry, 'RepairSucceeded', message)
    return SUCCEEDED


def _fail(entry: Entry, ports: Ports, step_index: int, reason: str) -> str:
    message = 'repair of %s failed: %s' % (_where(entry), reason)
    if entry.node:
        message += '; the Node is left as it is (cordoned if a drain cordoned it): repair the machine by hand, ' \
                   'then delete this entry'
    ports.save(entry, {'status': FAILED, 'step': step_index, 'last_transition': ports.clock(), 'message': message})
    entry.status = FAILED
    ports.event(entry, 'RepairFailed', message, warning=True)
    return FAILED


def _back_off(entry: Entry, ports: Ports, reason: str, jitter: float, cordoned: bool) -> str:
    """CKE's repairDrainBackOff: the Node uncordoned, the entry waits a growing back-off and drains again."""
    note = ''
    if cordoned and entry.node:
        note = '; ' + ports.uncordon(entry)
    fields = drain_backoff(entry, ports.clock(), jitter)
    fields['message'] = 'drain of %s did not finish (%s)%s; retried after the back-off' % (_where(entry), reason, note)
    fields['cordoned'] = False if note else cordoned
    ports.save(entry, fields)
    entry.step_status = WAITING
    ports.event(entry, 'RepairDrainBackOff', fields['message'], warning=True)
    return PROCESSING


def health_checks(entries: Sequence[Entry], config: RepairConfig,
                  report: Optional[Callable[[Entry, CommandResult], None]] = None) -> Dict[str, Optional[bool]]:
    """The health check of every unfinished entry that has a procedure (CKE runs them all, every pass)."""
    verdicts: Dict[str, Optional[bool]] = {}
    for entry in entries:
        if entry.status in (SUCCEEDED, FAILED):
            continue
        operation = config.operation_for(entry.machine_type, entry.operation)
        if operation is None:
            continue
        verdict, result = health_check(operation, entry.address)
        verdicts[entry.name] = verdict
        if report is not None:
            report(entry, result)
    return verdicts
