"""common/deadline's retry pacing: retry_until with a predicate, a fixed interval and a caller's own give-up
error (as etcd's membership changes use it), and the doubling / full-jitter delays of loops that come back later."""

import random

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.common.deadline import (
    Deadline, doubled, jittered_backoff, retry_until)

from support.clock import FakeClock


class Refused(Exception):
    def __init__(self, why):
        super().__init__(why)
        self.why = why


def test_a_fixed_interval_a_predicate_and_the_caller_s_error():
    clock = FakeClock()
    calls = []

    def attempt(left):
        calls.append(round(left, 6))
        raise Refused('busy')

    with pytest.raises(RuntimeError, match='^gave up after 4 attempts: busy$') as caught:
        retry_until(Deadline(0.35, 'x', clock=clock), attempt, (Refused,), pause=0.1, cap=0.1, sleep=clock.sleep,
                    retryable=lambda exc: exc.why == 'busy',
                    give_up=lambda exc, n: RuntimeError('gave up after %d attempts: %s' % (n, exc)))
    assert clock.slept == [0.1, 0.1, 0.1, 0.05] and calls == [0.35, 0.25, 0.15, 0.05]
    assert isinstance(caught.value.__cause__, Refused)


def test_an_error_the_predicate_refuses_leaves_at_once():
    clock = FakeClock()
    calls = []

    def attempt(left):
        calls.append(left)
        raise Refused('never')

    with pytest.raises(Refused, match='never'):
        retry_until(Deadline(5, 'x', clock=clock), attempt, (Refused,), sleep=clock.sleep,
                    retryable=lambda exc: exc.why == 'busy')
    assert len(calls) == 1 and clock.slept == []


def test_doubled_starts_at_the_floor_and_stops_at_the_cap():
    delays = [0.0]
    for _step in range(6):
        delays.append(doubled(delays[-1], 5.0, 30.0))
    assert delays[1:] == [5.0, 10.0, 20.0, 30.0, 30.0, 30.0]
    assert doubled(0.2, 0.2, 5.0) == 0.4


def test_jittered_backoff_stays_within_its_bounds():
    rng = random.Random(7)
    for attempt in range(12):
        value = jittered_backoff(attempt, 0.5, 4.0, rng)
        assert 0.25 <= value <= min(4.0, 0.5 * 2 ** attempt)
