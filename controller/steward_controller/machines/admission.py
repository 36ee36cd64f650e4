# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""How many machine jobs of one MachineClass may be out on the cloud at once.

Every EC2 request first takes a token from the account/region's bucket (ratelimit.py), and a request that
cannot get one within its deadline (30 s) fails as THROTTLED. Without a limit here, a scale-out of more
machines than the budget serves in that time hands every worker a create that then sleeps in the bucket:
measured with 100 machines against EC2 limited to 4 requests/s (controller bucket 3.2/s, 50 workers), two
creates waited past 30 s and surfaced as `Throttled` failures although EC2 never throttled anything, and
meanwhile no worker was free for the Kubernetes-only work (a Node turned Ready, a set's status). So a job
that may call the cloud (`MachinePlan.calls_cloud`: a create, an initialize, a deletion whose VM is not deleted yet) takes a slot of its
class first; a class has `burst + rate` slots (what its bucket hands out within about a second), the others
wait in the scheduler, not in a worker, and the first job to finish wakes the scheduler for the next.
"""

from __future__ import annotations

import math
import threading
from typing import Dict, Optional, Set


def slots_for(rate: float, burst: int) -> int:
    """Jobs one bucket serves without any waiting past about a second: its burst plus one second of its rate."""
    return max(1, int(burst) + int(math.ceil(rate)))


class CloudSlots:
    """Per class key, the uids of the jobs out on the cloud; `limit` slots each (None: no limit)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._taken: Dict[str, Set[str]] = {}

    def take(self, key: str, uid: str, limit: Optional[int]) -> bool:
        """A slot for uid's job; False when all are taken, or uid holds one already (its job is still out)."""
        with self._lock:
            taken = self._taken.setdefault(key, set())
            if uid in taken or (limit is not None and len(taken) >= limit):
                return False
            taken.add(uid)
            return True

    def release(self, key: str, uid: str) -> None:
        with self._lock:
            self._taken.get(key, set()).discard(uid)

    def in_use(self, key: str) -> int:
        with self._lock:
            return len(self._taken.get(key, ()))
