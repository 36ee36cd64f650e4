"""client-go's rate limit: a token bucket of `burst` tokens refilled at `qps`; 0 means the default (5, 10)."""

from ansible_collections.steward.cluster.plugins.module_utils.common.ratelimit import TokenBucket
from ansible_collections.steward.cluster.plugins.module_utils.kube.ratelimit import client_go_bucket, effective

from support.clock import FakeClock


def test_defaults_for_zero():
    assert effective(0, 0) == (5.0, 10)
    assert effective(2.5, 3) == (2.5, 3)


def test_burst_then_qps():
    clock = FakeClock()
    bucket = TokenBucket(5, 10, clock=clock, sleep=clock.sleep)
    waits = [bucket.take() for _call in range(12)]
    assert waits[:10] == [0.0] * 10                  # the burst
    assert [round(w, 6) for w in waits[10:]] == [0.2, 0.2]   # then 5 per second
    clock.now += 10                                  # idle: refilled up to the burst, not beyond
    assert [bucket.take() for _call in range(10)] == [0.0] * 10
    assert round(bucket.take(), 6) == 0.2


def test_a_loop_s_bucket_reads_the_flags_as_client_go():
    bucket = client_go_bucket(0, 0)
    assert (bucket.rate, bucket.burst) == (5.0, 10)
