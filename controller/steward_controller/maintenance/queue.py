# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The work queue of node names behind the maintenance loop (the node cache is core/informer.py).

`WorkQueue` has client-go's workqueue semantics, which is what makes a bounded pool of workers safe:
a name is queued at most once however often it is added, and a name being processed is never handed
to a second worker; added again meanwhile, it is queued once more when the first worker is done (the
change that caused the add is then seen).

"""

from __future__ import annotations

import collections
import threading
from typing import Deque, Iterable, Optional, Set


class WorkQueue:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._order: Deque[str] = collections.deque()
        self._dirty: Set[str] = set()        # wanted: queued, or to queue again when processing ends
        self._processing: Set[str] = set()
        self._closed = False

    def add(self, name: str) -> None:
        with self._cond:
            if self._closed or name in self._dirty:
                return
            self._dirty.add(name)
            if name in self._processing:
                return
            self._order.append(name)
            self._cond.notify()

    def add_all(self, names: Iterable[str]) -> int:
        """Queue many names under one lock hold; returns how many were not wanted yet."""
        added = 0
        with self._cond:
            if self._closed:
                return 0
            for name in names:
                if name in self._dirty:
                    continue
                self._dirty.add(name)
                added += 1
                if name not in self._processing:
                    self._order.append(name)
            self._cond.notify_all()
        return added

    def get(self, timeout: Optional[float] = None) -> Optional[str]:
        """The next name (now being processed: call `done`), or None when closed or after `timeout`."""
        with self._cond:
            if not self._cond.wait_for(lambda: self._order or self._closed, timeout):
                return None
            if self._closed:
                return None
            name = self._order.popleft()
            self._dirty.discard(name)
            self._processing.add(name)
            return name

    def done(self, name: str) -> None:
        with self._cond:
            self._processing.discard(name)
            if name in self._dirty and not self._closed:
                self._order.append(name)
                self._cond.notify()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def depth(self) -> int:
        with self._cond:
            return len(self._order)

    def busy(self) -> int:
        with self._cond:
            return len(self._processing)

    def idle(self) -> bool:
        """Nothing queued and nothing being processed (one consistent look)."""
        with self._cond:
            return not self._order and not self._processing
