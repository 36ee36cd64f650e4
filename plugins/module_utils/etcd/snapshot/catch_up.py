# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The watch of a backup loop, reading a backlog of history with several watches at once (issue 29).

etcd hands a watcher that is behind at most 1,000 revisions per pass of its sync loop, and the passes are
100 ms apart while no watcher catches up (mvcc/watchable_store.go: watchBatchMaxRevs, syncWatchersLoop). A
loop that restarts behind a busy cluster would read its backlog at that pace. But one pass serves every
watcher behind, from one read of the history: so a backlog of at least 2 x SPAN_MIN revisions is cut into up
to SPANS spans of revisions, each read by a watch of its own, all started together; the last one goes on as
the live watch. The loop takes the spans in order, so the events reach it in revision order, each once.

The spans share one byte budget (watcher.QueueBudget, the loop's queue bytes) for what waits to be taken:
once it is used, a span ahead of its turn holds etcd back through HTTP/2 flow control, and the span being
taken always makes progress. Each extra watch also holds its receive buffer, the run of events being
parsed and the chunk being encoded (SPAN_OVERHEAD): the budget is that much smaller for each, so the memory
stays what one watch would hold.
"""

from __future__ import annotations

import time
from typing import Any, List, Optional, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.client import EtcdConnection, Gateway
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import EtcdError
from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot.watcher import (
    QUEUE_BYTES,
    SPAN_READ,
    QueueBudget,
    Watcher,
)

SPANS = 4          # watches at most: on 2 cores a backlog of 100,000 events came 1.3x faster with 4, not faster with 7
SPAN_MIN = 1000    # revisions: a span shorter than one of etcd's batches gains nothing
# What each extra watch holds beside its queued chunks: its receive buffer, the run of events being parsed and
# its parse, the chunk being encoded and its join (1 MiB each), and the allocator's slack (bench/delta_snapshot.py:
# with 5 MiB the peak went past the loop's stated overhead once in 8 runs; with 7 MiB it stays 10 MiB below).
SPAN_OVERHEAD = 7 * 1024 * 1024


def plan_spans(start: int, current: int, spans: int = SPANS, minimum: int = SPAN_MIN) -> List[Tuple[int, Optional[int]]]:
    """[(first revision, end revision (exclusive) or None for the live watch)] covering start.. in order:
    one live watch when fewer than 2 x `minimum` revisions start..current are behind, else up to `spans`
    equal spans of at least `minimum` revisions, the last of which goes on live."""
    behind = current - start + 1
    count = max(1, min(spans, -(-behind // minimum))) if behind >= 2 * minimum else 1
    size = -(-behind // count)  # ceil
    firsts = [start + i * size for i in range(count)]
    return [(first, first + size) for first in firsts[:-1]] + [(firsts[-1], None)]


def current_revision(conn: EtcdConnection, endpoint: str) -> Optional[int]:
    """The member's revision now, or None when it does not answer (the watch then says why)."""
    try:
        with Gateway(conn) as gateway:
            status = gateway.status(endpoint)
    except EtcdError:
        return None
    return int((status.get('header') or {}).get('revision') or 0) or None


class CatchUpWatch:
    """Watch all keys from `start_revision` on `endpoint`, a backlog read in spans (see the module docstring).
    What the backup loop uses of a Watcher: get, pending, created_revision, close."""

    def __init__(self, conn: EtcdConnection, endpoint: str, start_revision: int, *, clock=time.time,
                 queue_bytes: int = QUEUE_BYTES, spans: int = SPANS):
        self.conn = conn
        self.endpoint = endpoint
        self.start_revision = start_revision
        self.clock = clock
        self.queue_bytes = queue_bytes
        self.spans = spans
        self.plan: List[Tuple[int, Optional[int]]] = []
        self._watches: List[Watcher] = []

    def start(self) -> 'CatchUpWatch':
        current = current_revision(self.conn, self.endpoint) if self.spans > 1 else None
        self.plan = plan_spans(self.start_revision, current or 0, self.spans)
        budget = QueueBudget(max(self.queue_bytes - (len(self.plan) - 1) * SPAN_OVERHEAD, self.queue_bytes // 2))
        try:
            for index, (first, end) in enumerate(self.plan):
                self._watches.append(Watcher(self.conn, self.endpoint, first, clock=self.clock, end_revision=end,
                                             budget=budget, head=index == 0).start())
        except BaseException:
            self.close()
            raise
        return self

    @property
    def created_revision(self) -> Optional[int]:
        """The cluster's revision when etcd created the live watch (the last span's)."""
        return self._watches[-1].created_revision if self._watches else None

    def get(self, timeout: float) -> Optional[Any]:
        """The next WatchBatch or error in revision order, or None after `timeout` seconds."""
        deadline = time.monotonic() + max(timeout, 0)
        while self._watches:
            item = self._watches[0].get(max(0.0, deadline - time.monotonic()))
            if item is not SPAN_READ:
                return item
            self._watches.pop(0).close()
            self._watches[0].take_turn()
        return None

    def pending(self) -> int:
        """Items the span being taken has queued now."""
        return self._watches[0].pending() if self._watches else 0

    def close(self) -> None:
        watches, self._watches = self._watches, []
        for watch in watches:
            watch.close()
