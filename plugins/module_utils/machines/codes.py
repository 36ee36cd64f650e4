# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Driver error codes and what each means for the next step: the one table.

The codes are MCM's (gRPC numbering, `docs/development/machine_error_codes.md`), so a driver ported from
MCM returns the same numbers. MCM decides the next step in several places (a switch in the create error
handler, another in the creation flow, a third in the deletion flow); here every (call, code) pair has one
row in NEXT_STEP and callers dispatch on the typed `Next` it returns.

THROTTLED is ours: MCM's AWS driver maps `RequestLimitExceeded` to INTERNAL and then waits 3 minutes;
throttling is a pacing signal, retried after a short jittered backoff while the shared token bucket slows
every caller of that account/region down.
"""

from __future__ import annotations

import enum
import random
from typing import Any, Dict, Optional, Tuple


class Code(enum.IntEnum):
    OK = 0
    CANCELED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8
    PRECONDITION_FAILED = 9
    ABORTED = 10
    OUT_OF_RANGE = 11
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14
    UNAUTHENTICATED = 16
    UNINITIALIZED = 17
    THROTTLED = 100          # ours (see the module docstring); never a number MCM sends

    @property
    def mcm_name(self) -> str:
        """The name MCM writes into lastOperation.errorCode (codes.Code.String())."""
        return MCM_NAMES.get(self, self.name)


MCM_NAMES = {Code.OK: 'OK', Code.CANCELED: 'Canceled', Code.UNKNOWN: 'Unknown', Code.INVALID_ARGUMENT: 'InvalidArgument',
             Code.DEADLINE_EXCEEDED: 'DeadlineExceeded', Code.NOT_FOUND: 'NotFound', Code.ALREADY_EXISTS: 'AlreadyExists',
             Code.PERMISSION_DENIED: 'PermissionDenied', Code.RESOURCE_EXHAUSTED: 'ResourceExhausted',
             Code.PRECONDITION_FAILED: 'FailedPrecondition', Code.ABORTED: 'Aborted', Code.OUT_OF_RANGE: 'OutOfRange',
             Code.UNIMPLEMENTED: 'Unimplemented', Code.INTERNAL: 'Internal', Code.UNAVAILABLE: 'Unavailable',
             Code.UNAUTHENTICATED: 'Unauthenticated', Code.UNINITIALIZED: 'Uninitialized', Code.THROTTLED: 'Throttled'}


class Call(str, enum.Enum):
    CREATE = 'CreateMachine'
    INITIALIZE = 'InitializeMachine'
    DELETE = 'DeleteMachine'
    STATUS = 'GetMachineStatus'
    LIST = 'ListMachines'
    VOLUMES = 'GetVolumeIDs'
    UPDATE = 'UpdateMachine'        # MCM's hot-update proposal: update the machine where it stands


class Retry(str, enum.Enum):
    """When to look again (MCM's retry periods; durations in config.Settings)."""
    CONFLICT = 'conflict'               # 200 ms: someone wrote in between
    SHORT = 'short'                     # 5 s
    MEDIUM = 'medium'                   # 3 min
    LONG = 'long'                       # 10 min
    RESOURCE_EXHAUSTED = 'exhausted'    # --resource-exhausted-retry (10 min)
    THROTTLED = 'throttled'             # jittered short backoff


class Next(str, enum.Enum):
    """What a call's outcome means for the machine."""
    PROCEED = 'proceed'                 # success: go on with the flow
    CREATE = 'create'                   # GetMachineStatus NotFound: the VM does not exist, create it
    INITIALIZE = 'initialize'           # the VM exists but needs InitializeMachine
    SKIP = 'skip'                       # optional call not supported / nothing to do: continue as on success
    DONE = 'done'                       # DeleteMachine of a VM already gone: deletion succeeded
    SEVERAL_VMS = 'several-vms'         # several VMs for one machine: surface, never create more (orphans / humans)
    RETRY = 'retry'                     # failed this time; retry after `retry`
    FAIL = 'fail'                       # will not work without a change (bad spec, permissions): retried slowly


_AUTO = {Code.UNKNOWN, Code.DEADLINE_EXCEEDED, Code.ABORTED, Code.UNAVAILABLE, Code.THROTTLED}
# Per call: codes retried automatically beyond _AUTO (MCM's error-code table, "Auto-Retry" column).
_EXTRA_AUTO = {Call.STATUS: {Code.OUT_OF_RANGE}, Call.INITIALIZE: {Code.INTERNAL, Code.UNINITIALIZED}}


def _retry_class(code: Code) -> Retry:
    """MCM's machineCreateErrorHandler: resource exhaustion waits long, transient codes short, the rest medium."""
    if code == Code.THROTTLED:
        return Retry.THROTTLED
    if code == Code.RESOURCE_EXHAUSTED:
        return Retry.RESOURCE_EXHAUSTED
    if code in (Code.UNKNOWN, Code.DEADLINE_EXCEEDED, Code.ABORTED, Code.UNAVAILABLE):
        return Retry.SHORT
    return Retry.MEDIUM


def _build() -> Dict[Tuple[Call, Code], Tuple[Next, Retry]]:
    table: Dict[Tuple[Call, Code], Tuple[Next, Retry]] = {}
    for call in Call:
        for code in Code:
            if code == Code.OK:
                row = (Next.PROCEED, Retry.SHORT)
            elif code in _AUTO or code in _EXTRA_AUTO.get(call, ()):
                row = (Next.RETRY, _retry_class(code))
            else:
                row = (Next.FAIL, _retry_class(code))
            table[(call, code)] = row
    # The rows that change behaviour (MCM: NotFound, OutOfRange, Unimplemented, Uninitialized).
    table[(Call.STATUS, Code.NOT_FOUND)] = (Next.CREATE, Retry.SHORT)
    table[(Call.STATUS, Code.UNIMPLEMENTED)] = (Next.CREATE, Retry.SHORT)     # no status call: create is idempotent
    table[(Call.STATUS, Code.UNINITIALIZED)] = (Next.INITIALIZE, Retry.SHORT)
    table[(Call.STATUS, Code.OUT_OF_RANGE)] = (Next.SEVERAL_VMS, Retry.MEDIUM)
    table[(Call.INITIALIZE, Code.UNIMPLEMENTED)] = (Next.SKIP, Retry.SHORT)
    table[(Call.INITIALIZE, Code.NOT_FOUND)] = (Next.SKIP, Retry.SHORT)
    table[(Call.INITIALIZE, Code.UNINITIALIZED)] = (Next.RETRY, Retry.SHORT)
    table[(Call.INITIALIZE, Code.INTERNAL)] = (Next.RETRY, Retry.SHORT)
    table[(Call.DELETE, Code.NOT_FOUND)] = (Next.DONE, Retry.SHORT)
    table[(Call.LIST, Code.UNIMPLEMENTED)] = (Next.SKIP, Retry.LONG)          # no orphan collection for this driver
    table[(Call.VOLUMES, Code.UNIMPLEMENTED)] = (Next.SKIP, Retry.SHORT)      # volumes are not waited for
    return table


NEXT_STEP: Dict[Tuple[Call, Code], Tuple[Next, Retry]] = _build()


def is_failure(call: Call, code: Code) -> bool:
    """Whether a call failed, by the table: an answer the flow goes on with (NotFound on a status call or a delete,
    Unimplemented where MCM continues) is not a failure, so a failure counter does not count every creation."""
    return NEXT_STEP[(call, code)][0] in (Next.RETRY, Next.FAIL, Next.SEVERAL_VMS)


def next_step(call: Call, code: Code) -> Tuple[Next, Retry]:
    """What to do after `call` answered `code`, and when to look again."""
    return NEXT_STEP[(call, Code(code))]


def auto_retried(call: Call, code: Code) -> bool:
    """MCM's "Auto-Retry" column: whether the code is transient for this call."""
    return code in _AUTO or code in _EXTRA_AUTO.get(call, ())


CONFLICT_DELAY = 0.2                 # seconds: someone wrote in between, look again almost at once
THROTTLED_DELAY = (1.0, 5.0)         # seconds: a throttled call is retried after a uniform pick in this range


def retry_delay(retry: Retry, settings: Any, rng: random.Random, retry_after: Optional[float] = None,
                floor: float = 0.0) -> float:
    """Seconds until a machine is looked at again: `retry_after` (an exact delay a plan computed, e.g. up to a
    timeout) when given, else the retry class's period from `settings` (config.Settings: MCM's ShortRetry,
    MediumRetry, LongRetry and the resource-exhausted retry). Throttling is jittered so that machines throttled
    together do not come back together. Never less than `floor` (the scheduler's pass gap)."""
    if retry_after is not None:
        return max(floor, retry_after)
    if retry == Retry.THROTTLED:
        return rng.uniform(*THROTTLED_DELAY)
    return {Retry.CONFLICT: CONFLICT_DELAY, Retry.SHORT: settings.short_retry, Retry.MEDIUM: settings.medium_retry,
            Retry.LONG: settings.long_retry, Retry.RESOURCE_EXHAUSTED: settings.resource_exhausted_retry}[retry]
