"""common/ratelimit.TokenBucket: reservations (take) and bounded waits (acquire) on one bucket, and a pause that
holds back both."""

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.common.ratelimit import TokenBucket

from support.clock import FakeClock


def test_take_reserves_in_order_and_acquire_waits_behind_the_reservations():
    clock = FakeClock()
    bucket = TokenBucket(10, 2, clock=clock, sleep=lambda s: None)     # reservations only: nobody sleeps here
    assert [round(bucket.take(), 6) for _call in range(4)] == [0.0, 0.0, 0.1, 0.2]
    assert bucket.try_take() == pytest.approx(0.3)                     # two tokens are promised already
    assert not bucket.acquire(timeout=0.2)
    clock.now = 0.3
    assert bucket.acquire(timeout=0)


def test_pause_holds_back_takes_and_acquires_then_restarts_empty():
    clock = FakeClock()
    bucket = TokenBucket(10, 5, clock=clock, sleep=clock.sleep)
    bucket.pause(3)
    assert bucket.try_take() == pytest.approx(3.0)
    assert not bucket.acquire(timeout=1)
    assert bucket.take() == pytest.approx(3.1)                         # the pause, then the first token refilled
    assert clock.now == pytest.approx(3.1)
    assert bucket.waited == pytest.approx(3.1)


@pytest.mark.parametrize('rate, burst', [(0, 1), (-1, 1), (1, 0)])
def test_refuses_a_bucket_that_never_gives_a_token(rate, burst):
    with pytest.raises(ValueError):
        TokenBucket(rate, burst)
