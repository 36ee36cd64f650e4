# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A repair entry's life as CKE's (cybozu-go/cke docs/repair.md, server/strategy.go repairOps), as a pure planner.

State in, next action out, `now` passed in: `plan_pass` takes every entry (its status, step, step status and
times), CKE's `repair` configuration and the health-check results of this pass, and says for each entry what
to do next. The shells (the controller's repair loop, `sabakan_repair state=run`) run the commands, drain and
write the status; they decide nothing.

CKE's rules, kept:

* every unfinished entry whose machine's health check printed `true` finishes `succeeded` at once, whatever its
  step (a machine that became healthy on its own runs no more steps); this is not subject to the limits;
* otherwise entries already `processing` go before `queued` ones, API servers (control-plane nodes) first within
  each, oldest first; at most `max_concurrent_repairs` entries are repaired at a time, and at most one of them
  an API server; an entry waiting out a drain back-off neither acts nor takes a slot;
* a step: if `need_drain` and the machine is a Node, drain it first; then run `repair_command`; then watch for
  `watch_seconds`: healthy -> succeeded, not -> the next step at once; past the last step -> failed;
* a drain that fails or outlasts `eviction_timeout_seconds` uncordons the Node and waits a linear back-off
  (CKE: 300 s + a random part growing with each retry), then retries the whole drain, without limit.

Differences on purpose (docs/sabakan.md lists them): an entry whose machine type and operation match no
procedure takes no slot (CKE lets it hold one forever) and says why on the entry; a failed entry leaves its Node
cordoned (CKE uncordons it), so a machine nobody could repair takes no new Pods until a person looks at it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Dict, List, Mapping, Optional, Sequence

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.machines import parse_time
from ansible_collections.steward.cluster.plugins.module_utils.sabakan.repair_config import RepairConfig, RepairStep

QUEUED = 'queued'
PROCESSING = 'processing'
SUCCEEDED = 'succeeded'
FAILED = 'failed'
FINISHED = (SUCCEEDED, FAILED)
WAITING = 'waiting'       # step statuses (CKE's)
DRAINING = 'draining'
WATCHING = 'watching'
STEP_STATUSES = (WAITING, DRAINING, WATCHING)
DRAIN_BACKOFF_BASE_SECONDS = 300.0   # CKE op/reboot.go drainBackOffBaseSeconds
MAX_CONCURRENT_API_SERVER_REPAIRS = 1


class Action(Enum):
    SUCCEED = 'succeed'        # the machine is healthy: run success_command (if any), succeeded, uncordon
    FAIL = 'fail'              # no step left, no procedure, or a command failed: failed, the Node stays cordoned
    DRAIN = 'drain'            # cordon and evict the Node (step `step`), then EXECUTE
    EXECUTE = 'execute'        # run repair_command of step `step` (retries included), then watch
    DRAIN_TIMEOUT = 'drain-timeout'   # a drain outlasted eviction_timeout_seconds: uncordon, back off
    WAIT = 'wait'              # nothing this pass (limit, back-off, watching); `reason` says why
    UNCONFIGURED = 'unconfigured'   # no procedure for the machine type and operation: nothing runs


@dataclass
class Entry:
    """One repair entry as the planner sees it (the RepairEntry object or a queue-file entry, translated)."""

    name: str
    address: str
    machine_type: str
    operation: str
    status: str = QUEUED
    step: int = 0
    step_status: str = WAITING
    last_transition: float = 0.0          # seconds since the epoch
    drain_backoff_count: int = 0
    drain_backoff_expire: float = 0.0
    node: Optional[str] = None            # the machine's Node name; None: not in the cluster (no drain)
    api_server: bool = False              # a control-plane node
    created: float = 0.0                  # creation time (order)


@dataclass
class Decision:
    entry: Entry
    action: Action
    step: int = 0                          # the step the action is about
    reason: str = ''
    # WAIT because of a limit (max_concurrent_repairs, one API server, one repair per machine), not because of
    # time (watch, back-off)
    limited: bool = False

    def describe(self) -> str:
        text = '%s (%s): %s' % (self.entry.name, self.entry.address, self.action.value)
        if self.action in (Action.DRAIN, Action.EXECUTE):
            text += ' step %d' % self.step
        return text + (': ' + self.reason if self.reason else '')


@dataclass
class PassPlan:
    decisions: List[Decision] = field(default_factory=list)
    active: int = 0                        # entries holding a slot after this pass

    def of(self, action: Action) -> List[Decision]:
        return [d for d in self.decisions if d.action == action]


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _stamp(value: Any) -> float:
    """An RFC 3339 time as seconds since the epoch; 0 for none or one that does not parse (then it is "long ago")."""
    if not value:
        return 0.0
    try:
        return parse_time(value).timestamp()
    except (InvalidInput, TypeError, ValueError):
        return 0.0


def stored_entry(name: str, address: Any, machine_type: Any, operation: Any, status: Any, step: Any, step_status: Any,
                 last_transition: Any, backoff_count: Any, backoff_expire: Any, created: Any, *, node: Optional[str],
                 api_server: bool) -> Entry:
    """An Entry from what a store holds (a RepairEntry's status, a queue-file entry): times as RFC 3339 text,
    anything missing or malformed read as CKE's zero value, so a hand-edited entry never stops the planner."""
    return Entry(name=name, address=str(address or ''), machine_type=str(machine_type or ''),
                 operation=str(operation or ''), status=str(status or QUEUED), step=_count(step),
                 step_status=str(step_status or WAITING), last_transition=_stamp(last_transition),
                 drain_backoff_count=_count(backoff_count), drain_backoff_expire=_stamp(backoff_expire),
                 node=node, api_server=api_server, created=_stamp(created))


def current_step(config: RepairConfig, entry: Entry) -> Optional[RepairStep]:
    operation = config.operation_for(entry.machine_type, entry.operation)
    if operation is None or not 0 <= entry.step < len(operation.repair_steps):
        return None
    return operation.repair_steps[entry.step]


def _start_step(config: RepairConfig, entry: Entry, step_index: int, why: str = '') -> Decision:
    """The first action of step `step_index` (CKE: StepStatus waiting): drain or execute, or fail past the end."""
    operation = config.operation_for(entry.machine_type, entry.operation)
    if not (operation is not None):
        raise AssertionError('operation is not None')
    if step_index >= len(operation.repair_steps):
        return Decision(entry, Action.FAIL, step_index,
                        'the machine is not healthy after all %d repair step(s)' % len(operation.repair_steps))
    step = operation.repair_steps[step_index]
    if step.need_drain and entry.node:
        return Decision(entry, Action.DRAIN, step_index, why or 'need_drain: drain Node %s first' % entry.node)
    return Decision(entry, Action.EXECUTE, step_index, why)


def plan_pass(entries: Sequence[Entry], config: RepairConfig, healthy: Mapping[str, Optional[bool]], *,
              now: float) -> PassPlan:
    """What each unfinished entry does this pass. `healthy[name]` is the health check's verdict this pass (True:
    printed `true`; False: did not; None or missing: could not run)."""
    plan = PassPlan()
    candidates: List[Entry] = []
    for entry in entries:
        if entry.status in FINISHED:
            continue
        if config.operation_for(entry.machine_type, entry.operation) is None:
            plan.decisions.append(Decision(entry, Action.UNCONFIGURED, entry.step,
                                           'no repair procedure for machine type %r and operation %r'
                                           % (entry.machine_type, entry.operation)))
            continue
        if healthy.get(entry.name):
            plan.decisions.append(Decision(entry, Action.SUCCEED, entry.step, 'the health check printed true'))
            continue
        if entry.status == PROCESSING and entry.step_status == WAITING and entry.drain_backoff_expire > now:
            plan.decisions.append(Decision(entry, Action.WAIT, entry.step, 'drain back-off until %.0f (%.0fs left)'
                                           % (entry.drain_backoff_expire, entry.drain_backoff_expire - now)))
            continue
        candidates.append(entry)

    def order(e: Entry) -> Any:
        return (e.status != PROCESSING, not e.api_server, e.created, e.name)

    running = 0
    api_servers = 0
    busy = set()   # one machine, one repair at a time
    for entry in sorted(candidates, key=order):
        if running >= config.max_concurrent_repairs:
            plan.decisions.append(Decision(entry, Action.WAIT, entry.step, 'max_concurrent_repairs=%d entries are '
                                           'being repaired' % config.max_concurrent_repairs, limited=True))
            continue
        if entry.address in busy:
            plan.decisions.append(Decision(entry, Action.WAIT, entry.step,
                                           'another entry for %s is being repaired' % entry.address, limited=True))
            continue
        if entry.api_server and api_servers >= MAX_CONCURRENT_API_SERVER_REPAIRS:
            plan.decisions.append(Decision(entry, Action.WAIT, entry.step,
                                           'another API server is being repaired (one at a time)', limited=True))
            continue
        running += 1
        api_servers += int(entry.api_server)
        busy.add(entry.address)
        plan.decisions.append(_next(config, entry, now))
    plan.active = running
    return plan


def _next(config: RepairConfig, entry: Entry, now: float) -> Decision:
    step = current_step(config, entry)
    if step is None:   # CKE: ErrRepairStepOutOfRange (steps shortened meanwhile) is the end of the steps
        return _start_step(config, entry, entry.step)
    if entry.status == QUEUED or entry.step_status == WAITING:
        return _start_step(config, entry, entry.step)
    if entry.step_status == DRAINING:
        # The drain runs inside one pass; one left `draining` was cut short (restart): run it again, or give up
        # on it and back off once eviction_timeout_seconds have passed since it started.
        if now - entry.last_transition >= config.eviction_timeout_seconds:
            return Decision(entry, Action.DRAIN_TIMEOUT, entry.step, 'the drain of Node %s outlasted '
                            'eviction_timeout_seconds=%d' % (entry.node, config.eviction_timeout_seconds))
        return Decision(entry, Action.DRAIN, entry.step, 'drain interrupted: drain Node %s again' % entry.node)
    # WATCHING: not healthy yet.
    left = entry.last_transition + step.watch_seconds - now
    if left > 0:
        return Decision(entry, Action.WAIT, entry.step, 'watching the machine for %.0fs more (watch_seconds=%d)'
                        % (left, step.watch_seconds))
    return _start_step(config, entry, entry.step + 1)


def drain_backoff(entry: Entry, now: float, jitter: float) -> Dict[str, Any]:
    """CKE's repairDrainBackOff: back to `waiting`, one more back-off, expiring after 300 s plus a random part
    (`jitter` in [0, 1), the shell's random number) of 300 s times the back-off count."""
    count = entry.drain_backoff_count + 1
    expire = now + DRAIN_BACKOFF_BASE_SECONDS + jitter * DRAIN_BACKOFF_BASE_SECONDS * count
    return {'status': PROCESSING, 'step': entry.step, 'step_status': WAITING, 'last_transition': now,
            'drain_backoff_count': count, 'drain_backoff_expire': expire}


def finished_to_delete(entries: Sequence[Entry], retention: Optional[float], now: float) -> List[Entry]:
    """Finished entries older than `retention` seconds since they finished (their last transition); none when
    `retention` is None (CKE's rule: a person deletes finished entries)."""
    if retention is None:
        return []
    return [e for e in entries if e.status in FINISHED and e.last_transition and now - e.last_transition >= retention]
