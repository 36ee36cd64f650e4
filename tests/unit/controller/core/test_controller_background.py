"""core/background.py: the lifecycle every background loop shares - named threads, one stop, a beating sleep, a
body whose bug is logged and retried, a stop that joins within one deadline and names what did not finish."""

from __future__ import annotations

import logging
import threading
import time

from steward_controller.core.background import BackgroundLoop
from steward_controller.core.metrics import Health


def test_spawn_names_threads_and_stop_joins_them():
    loop = BackgroundLoop('demo', Health())
    started = threading.Event()

    def body(tag):
        assert tag == 'x'
        started.set()
        loop.stopped.wait(30)

    thread = loop.spawn(body, 'demo-worker', 'x')
    assert started.wait(5) and thread.name == 'demo-worker' and thread.daemon
    assert loop.alive() == ['demo-worker']
    begun = time.monotonic()
    assert loop.stop(5) == []
    assert time.monotonic() - begun < 2 and not thread.is_alive() and loop.alive() == []


def test_stop_names_a_thread_that_does_not_finish_in_time():
    loop = BackgroundLoop('demo', Health())
    release = threading.Event()
    loop.spawn(lambda: release.wait(30), 'stuck')
    begun = time.monotonic()
    assert loop.stop(0.3) == ['stuck']
    assert time.monotonic() - begun < 2
    release.set()


def test_an_exception_that_ends_a_thread_is_logged_with_its_name(caplog):
    loop = BackgroundLoop('demo', Health())

    def broken():
        raise RuntimeError('boom')

    with caplog.at_level(logging.ERROR, logger='steward.background'):
        loop.spawn(broken, 'demo-broken').join(5)
    assert 'demo: thread demo-broken ended by an unexpected error' in caplog.text and 'boom' in caplog.text


def test_repeat_logs_a_bug_counts_it_and_goes_on(caplog):
    loop = BackgroundLoop('demo', Health())
    runs, crashes = [], []

    def step():
        runs.append(1)
        if len(runs) == 2:
            raise ValueError('a bug')
        if len(runs) == 4:
            loop.stopped.set()
        return 0.01

    with caplog.at_level(logging.ERROR, logger='steward.background'):
        loop.repeat(step, 'demo step failed', crash_wait=0.01, on_crash=lambda: crashes.append(1))
    assert len(runs) == 4 and crashes == [1]
    assert 'demo step failed' in caplog.text and 'a bug' in caplog.text


def test_sleep_beats_until_its_time_and_ends_at_stop():
    now = [100.0]
    health = Health()
    beats = []
    health.beat = beats.append
    loop = BackgroundLoop('demo', health, clock=lambda: now[0])
    loop.stopped.wait = lambda seconds: now.__setitem__(0, now[0] + seconds)   # a clock that moves as we wait
    assert loop.sleep(2.5) is True
    assert now[0] == 102.5 and beats == ['demo-loop'] * 4      # at 100, 101, 102, 102.5
    loop.stopped.set()
    assert loop.sleep(10) is False and now[0] == 102.5


def test_a_wakeable_repeat_runs_again_when_woken_and_stop_ends_its_wait():
    """The machines scheduler's wait: a wake ends it early (several wakes during one run: one early run), and stop
    ends it at once although the step asked for a long wait."""
    loop = BackgroundLoop('demo', Health())
    runs = []
    ran = threading.Event()

    def step():
        runs.append(time.monotonic())
        if len(runs) == 1:
            loop.wake()
            loop.wake()
        ran.set()
        return 30.0

    thread = loop.spawn(lambda: loop.repeat(step, 'demo step failed', crash_wait=30.0, wakeable=True), 'demo-waker')
    deadline = time.monotonic() + 5
    while len(runs) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.3)
    assert len(runs) == 2                              # the two wakes during the first run: one run more, no third
    ran.clear()
    loop.wake()
    assert ran.wait(5) and len(runs) == 3              # a wake while it waits: the next run at once
    begun = time.monotonic()
    assert loop.stop(5) == [] and not thread.is_alive()
    assert time.monotonic() - begun < 2 and len(runs) == 3
