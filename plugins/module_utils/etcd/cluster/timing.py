# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Timed membership and defragmentation calls, reported to whoever listens in this process.

etcd-backup-restore times each membership change and each member's defragmentation for its Prometheus histograms
(`etcdbr_add_learner_duration_seconds`, `..._member_promote_...`, `..._member_remove_...`,
`..._defragmentation_...`, and `etcdbr_is_learner_count_total` per learner add, each by `succeeded`). The calls
happen deep in the engine (members.py, defrag.py), called by the member program, the controller's anchor, the
recovery steps and the modules; those with a /metrics endpoint register a listener once at their start instead of
each caller timing its own calls. The engine itself keeps no metric: a listener receives a plain `EtcdCall`
record, typed, and decides what to count. With no listener, timing costs one clock read per call.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import Any, Callable, List

ADD_LEARNER = 'add-learner'   # a member added as a learner (etcdbr_add_learner_duration_seconds, is_learner_count)
ADD_MEMBER = 'add-member'     # a member added as a voter (no seed family; timed all the same)
PROMOTE = 'promote'           # a learner promoted to a voter (etcdbr_member_promote_duration_seconds)
REMOVE = 'remove'             # a member removed (etcdbr_member_remove_duration_seconds)
DEFRAGMENT = 'defragment'     # one member defragmented (etcdbr_defragmentation_duration_seconds)
OPERATIONS = (ADD_LEARNER, ADD_MEMBER, PROMOTE, REMOVE, DEFRAGMENT)


@dataclasses.dataclass(frozen=True)
class EtcdCall:
    """One call as it ended. `seconds` spans its retries (etcd refuses a change within 5 s of the last, or a
    promotion before the learner caught up): the time the caller waited, as etcd-backup-restore measures it.
    `target`: the member's name or hex id, or the endpoint a defragmentation went to."""
    operation: str
    target: str
    succeeded: bool
    seconds: float


Listener = Callable[[EtcdCall], None]
_listeners: List[Listener] = []
_lock = threading.Lock()


def listen(listener: Listener) -> Callable[[], None]:
    """Call `listener` with every EtcdCall of this process from now on (every thread); returns the function that
    stops it. A listener must be quick and must not raise (it runs in the caller's thread, after the call)."""
    with _lock:
        _listeners.append(listener)

    def stop() -> None:
        with _lock:
            if listener in _listeners:
                _listeners.remove(listener)
    return stop


def report(call: EtcdCall) -> None:
    with _lock:
        listeners = list(_listeners)
    for listener in listeners:
        listener(call)


def timed(operation: str, target: str, action: Callable[[], Any], clock: Callable[[], float] = time.monotonic) -> Any:
    """Run `action`, report it as `operation` on `target` (succeeded unless it raised), return its result."""
    started = clock()
    try:
        result = action()
    except Exception:
        report(EtcdCall(operation, target, False, clock() - started))
        raise
    report(EtcdCall(operation, target, True, clock() - started))
    return result
