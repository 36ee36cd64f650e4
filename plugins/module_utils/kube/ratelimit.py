# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Client-side rate limiting as client-go's `rest.Config{QPS, Burst}`: a token bucket (common/ratelimit.py) that
holds `burst` tokens and refills `qps` per second; each request takes one, waiting for it if the bucket is empty.
client-go's defaults are QPS 5 and burst 10 (also DWD's `--kube-api-qps` / `--kube-api-burst`, where 0
means the default)."""

from __future__ import annotations

from typing import Any, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.common.ratelimit import TokenBucket
from ansible_collections.steward.cluster.plugins.module_utils.kube.client import KubeClient

DEFAULT_QPS = 5.0
DEFAULT_BURST = 10


def effective(qps: float, burst: int) -> Tuple[float, int]:
    """client-go's reading of the flags: 0 means the default; negative values are refused by the caller."""
    return (float(qps) or DEFAULT_QPS, int(burst) or DEFAULT_BURST)


def client_go_bucket(qps: float, burst: int) -> TokenBucket:
    """The bucket of one loop's API clients, from its --kube-api-qps / --kube-api-burst flags (0: the default)."""
    return TokenBucket(*effective(qps, burst))


class RateLimitedClient(KubeClient):
    """A KubeClient whose every request first takes a token from `bucket` (shared by the clients of one loop)."""

    def __init__(self, configuration: Any, bucket: TokenBucket, timeout: float = 30.0):
        super().__init__(configuration, timeout=timeout)
        self.bucket = bucket

    def request(self, method: str, path: str, body: Any = None, query: Any = None,
                content_type: str = 'application/json') -> Any:
        self.bucket.take()
        return super().request(method, path, body=body, query=query, content_type=content_type)
