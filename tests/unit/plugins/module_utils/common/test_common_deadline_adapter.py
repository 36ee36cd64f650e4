"""The deadline helper every retry loop uses and the checks added for issue 19 (TLS files, endpoint URLs, typed
mappings). The module adapter's tests moved with it to test_common_shell.py."""

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.common import validate
from ansible_collections.steward.cluster.plugins.module_utils.common.deadline import (
    Budget, Deadline, DeadlineExceeded, Stopwatch, read_within, retry_until,
)
from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput


class Clock:
    """A clock the test moves; sleeping moves it."""

    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def test_deadline_counts_from_its_start_and_names_endpoint_and_time():
    clock = Clock()
    deadline = Deadline(2, 'GET /x', clock=clock)
    assert deadline.remaining() == 2 and not deadline.expired()
    clock.sleep(1.5)
    assert deadline.remaining() == pytest.approx(0.5)
    assert deadline.remaining(cap=0.2) == pytest.approx(0.2)
    clock.sleep(1)
    assert deadline.expired() and deadline.remaining() > 0   # still usable as a socket timeout
    with pytest.raises(DeadlineExceeded) as caught:
        deadline.check('http://10.0.0.1:2379')
    assert 'GET /x at http://10.0.0.1:2379 gave up after 2.5s (timeout 2s)' in str(caught.value)
    assert caught.value.spent == pytest.approx(2.5)


def test_a_budget_runs_only_while_spent_and_can_be_extended():
    clock = Clock()
    budget = Budget(2, 'the S3 requests of this run', clock=clock)
    with budget.spending():
        clock.sleep(1.5)
    clock.sleep(600)                  # an etcd stream between two store requests: not counted
    assert not budget.expired() and budget.remaining() == pytest.approx(0.5)
    with budget.spending():
        with budget.spending():       # nested (or from several threads): counted once
            clock.sleep(0.4)
        budget.extend(1)              # granted as work happens: bytes moved, metadata read
        clock.sleep(0.5)
    assert budget.remaining() == pytest.approx(0.6) and budget.timeout == 3
    with budget.spending():
        clock.sleep(1)
        assert budget.expired()
    assert 'gave up after 3.4s (timeout 3s)' in str(budget.exceeded('http://s3:9000'))


def test_a_stopwatch_is_still_between_runs():
    clock = Clock()
    watch = Stopwatch(clock)
    clock.sleep(5)
    assert watch() == 0
    with watch.running():
        clock.sleep(2)
        assert watch() == 2
    clock.sleep(5)
    assert watch() == 2


def test_retry_until_gives_up_within_the_deadline_retries_included():
    clock = Clock()
    deadline = Deadline(5, 'status', clock=clock)
    calls = []

    def attempt(left):
        calls.append(left)
        clock.sleep(min(left, 1.0))          # each attempt takes up to a second of what is left
        raise ConnectionError('refused')

    with pytest.raises(DeadlineExceeded) as caught:
        retry_until(deadline, attempt, (ConnectionError,), endpoint='http://e', sleep=clock.sleep)
    assert clock.now - 100.0 <= 5 + 1.0      # never past the deadline by more than one attempt's floor
    assert len(calls) >= 3 and all(left <= 5 for left in calls)
    assert 'last error: refused' in str(caught.value)


def test_retry_until_returns_the_first_success_and_does_not_retry_other_errors():
    clock = Clock()
    answers = iter([ConnectionError('x'), 'ok'])

    def attempt(_left):
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert retry_until(Deadline(5, 'x', clock=clock), attempt, (ConnectionError,), sleep=clock.sleep) == 'ok'
    with pytest.raises(KeyError):
        retry_until(Deadline(5, 'x', clock=clock), lambda left: {}['missing'], (ConnectionError,), sleep=clock.sleep)


def test_read_within_gives_up_on_a_dripping_body():
    clock = Clock()
    deadline = Deadline(2, 'GET /v3/status', clock=clock)

    def one_byte():
        clock.sleep(0.5)       # a byte every half second: no socket timeout ever fires
        return b'x'

    with pytest.raises(DeadlineExceeded) as caught:
        read_within(one_byte, deadline, 'http://e:2379')
    assert caught.value.spent == pytest.approx(2.0) and 'http://e:2379' in str(caught.value)
    pieces = iter([b'{"a"', b': 1}', b''])
    assert read_within(lambda: next(pieces), Deadline(2, 'x', clock=clock)) == b'{"a": 1}'


def test_tls_files_exist_and_come_in_pairs(tmp_path):
    cert = tmp_path / 'c.pem'
    cert.write_text('x')
    validate.tls_files(None, None, None)
    validate.tls_files(str(cert), str(cert), str(cert))
    with pytest.raises(InvalidInput) as caught:
        validate.tls_files(None, str(cert), None, prefix='etcd_')
    assert (caught.value.field, caught.value.rule) == ('etcd_client_key', 'key-pair')
    with pytest.raises(InvalidInput) as caught:
        validate.tls_files(str(tmp_path), None, None)
    assert (caught.value.field, caught.value.rule) == ('ca_cert', 'file')
    with pytest.raises(InvalidInput) as caught:
        validate.tls_files(str(tmp_path / 'missing'), None, None)
    assert caught.value.rule == 'exists'


@pytest.mark.parametrize('value, ok', [
    ('http://127.0.0.1:2379', True), ('https://etcd-1.example:2379', True), ('127.0.0.1:2379', True),
    ('ftp://x:1', False), ('http://:2379', False), ('http://x:99999', False),
    ('http://x:0', False), ('', False), ('http://x\n', False), ('http://[::1]:2379', True), ('http://my_host:1', True),
    ('not a url', False), ('http://a b:1', False), ('http://-x:1', False), ('http://x..y:1', False),
])
def test_endpoint_url(value, ok):
    if ok:
        assert validate.endpoint_url(value, 'endpoints[0]', default_scheme='http')
    else:
        with pytest.raises(InvalidInput) as caught:
            validate.endpoint_url(value, 'endpoints[0]', default_scheme='http')
        assert caught.value.field == 'endpoints[0]'


def test_endpoint_url_without_default_scheme_needs_one():
    with pytest.raises(InvalidInput) as caught:
        validate.endpoint_url('nowhere', 'client_url')
    assert caught.value.rule == 'url'


@pytest.mark.parametrize('value, field, rule', [
    ({'name': 'a', 'reachable': 'no'}, 'h.reachable', 'type'),       # "no" is a truthy string, not false
    ({'name': 'a', 'reachable': True, 'index': True}, 'h.index', 'type'),   # a bool is not an int
    ({'reachable': True}, 'h.name', 'required'),
    ('a', 'h', 'mapping'),
])
def test_typed_mapping_refuses_what_would_be_misread(value, field, rule):
    with pytest.raises(InvalidInput) as caught:
        validate.typed_mapping(value, 'h', {'name': (str,), 'reachable': (bool,)}, {'index': (int,)})
    assert (caught.value.field, caught.value.rule) == (field, rule)


def test_typed_mapping_passes_good_facts_and_unknown_keys():
    facts = {'name': 'a', 'reachable': False, 'index': None, 'extra': object()}
    assert validate.typed_mapping(facts, 'h', {'name': (str,), 'reachable': (bool,)}, {'index': (int,)}) is facts
