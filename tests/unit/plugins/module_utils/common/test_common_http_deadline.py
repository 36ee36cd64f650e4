"""A deadline over a whole HTTP exchange, headers included (common/http_deadline.py): a server that never finishes
its status line and headers, or its body, is cut at the deadline through urllib (sabakan, etcd's health URL),
requests (etcd's gateway) and a plain urllib3 pool manager (the kubernetes client) - the three transports the
clients use - and the error names the endpoint and the time spent. Real sockets: the bad-input suite's drips."""

import threading
import time
import urllib.request

import pytest
import requests
import urllib3

from ansible_collections.steward.cluster.plugins.module_utils.common.deadline import Deadline, DeadlineExceeded
from ansible_collections.steward.cluster.plugins.module_utils.common.http_deadline import (
    ContextThreadPool, check_deadline, grant, watch_pool_manager, watched_handlers, watching,
)
from support.bad_input import Drip

TIMEOUT = 0.5
# The per-read timeout the libraries get: far above the drip's half second, so only the deadline can end the wait.
READ_TIMEOUT = 5
# On a loaded 2-core machine a thread wakes late; still far below the drip's 100+ seconds of headers.
SLACK = 2.0


@pytest.fixture(scope='module', params=['slow-headers', 'slow-body'])
def drip(request):
    server = Drip(headers=request.param == 'slow-headers')
    yield 'http://127.0.0.1:%d/' % server.port
    server.close()


def urllib_get(url, timeout=READ_TIMEOUT):
    opener = urllib.request.build_opener(*watched_handlers())
    with opener.open(url, timeout=timeout) as answer:
        return answer.read()


def requests_get(url):
    session = requests.Session()
    for adapter in session.adapters.values():
        watch_pool_manager(adapter.poolmanager)
    return session.get(url, timeout=READ_TIMEOUT).content


def urllib3_get(url):
    return watch_pool_manager(urllib3.PoolManager()).request('GET', url, timeout=READ_TIMEOUT, retries=False).data


@pytest.mark.parametrize('get', [urllib_get, requests_get, urllib3_get], ids=['urllib', 'requests', 'urllib3'])
def test_a_dripping_server_is_cut_at_the_deadline(drip, get):
    started = time.monotonic()
    with pytest.raises(DeadlineExceeded) as caught:
        with watching(Deadline(TIMEOUT, 'GET /'), drip):
            get(drip)
    took = time.monotonic() - started
    assert TIMEOUT <= took < TIMEOUT + SLACK, took
    assert 'GET / at %s gave up after' % drip in str(caught.value)


def test_a_watch_cuts_only_the_sockets_of_its_own_context(drip):
    """A request made in another thread, outside any watch, keeps running when this watch fires."""
    def get_outside():
        try:
            urllib_get(drip)
        except Exception:  # pylint: disable=broad-except  # the drip ends when the fixture closes it
            pass
    outside = threading.Thread(target=get_outside, daemon=True)
    outside.start()
    with pytest.raises(DeadlineExceeded):
        with watching(Deadline(TIMEOUT, 'GET /'), drip):
            urllib_get(drip)
    time.sleep(0.3)
    assert outside.is_alive()


def test_grant_moves_the_deadline_and_check_stops_the_next_attempt(drip):
    deadline = Deadline(TIMEOUT, 'listing')
    with pytest.raises(DeadlineExceeded):
        with watching(deadline, drip):
            grant(0.5)
            assert deadline.timeout == TIMEOUT + 0.5
            started = time.monotonic()
            try:
                urllib_get(drip)
            finally:
                assert time.monotonic() - started >= TIMEOUT + 0.3   # the granted time was given
            check_deadline()
    check_deadline()   # no watch here: nothing to check


def test_tasks_of_a_context_pool_join_the_callers_watch(drip):
    """boto3's transfers run in threads; their sockets must be cut at the caller's deadline too."""
    started = time.monotonic()
    with pytest.raises(DeadlineExceeded):
        with watching(Deadline(TIMEOUT, 'transfer'), drip), ContextThreadPool(max_workers=2) as pool:
            pool.submit(urllib_get, drip).result()
    assert time.monotonic() - started < TIMEOUT + SLACK
