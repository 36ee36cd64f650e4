# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cloud API budget: one token bucket per account and region, shared by every caller in the process,
and a full-jitter exponential backoff for throttled calls (common/deadline.jittered_backoff).

EC2 limits requests per account and region (a token bucket on its side; ours is common/ratelimit.py). MCM's AWS driver has no client-
side limit: a scale-out of hundreds of machines runs into `RequestLimitExceeded`, which it then treats as
an internal error and retries after three minutes. Here every call takes a token first; a throttled answer
also pauses the bucket for the backoff, so all callers slow down together instead of each finding out alone.
"""

from __future__ import annotations

import threading
from typing import Dict, Hashable

from ansible_collections.steward.cluster.plugins.module_utils.common.ratelimit import TokenBucket

_BUCKETS: Dict[Hashable, TokenBucket] = {}
_BUCKETS_LOCK = threading.Lock()


def bucket_for(key: Hashable, rate: float, burst: int) -> TokenBucket:
    """The process-wide bucket of one account/region (created on first use with these limits)."""
    with _BUCKETS_LOCK:
        bucket = _BUCKETS.get(key)
        if bucket is None or (bucket.rate, bucket.burst) != (float(rate), int(burst)):
            bucket = TokenBucket(rate, burst)
            _BUCKETS[key] = bucket
        return bucket
