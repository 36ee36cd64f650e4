"""Bounded time against S3 (issue 19 §3): one module run's S3 requests share one budget, `store_timeout`, retries
included - a store that answers every request, only late, is given up on within twice that, however many requests
the run needs; a store that never finishes its headers, or never answers, the same. Real moto S3 over HTTP, a
proxy that delays each request (support/slow_proxy.py), the bad-input suite's header drip and black hole."""

from __future__ import annotations

import time
from urllib.parse import urlsplit

import boto3
import pytest

from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import StoreError
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.stores import open_store, store_from_params
from support.bad_input import BlackHole, Drip, call_main
from support.slow_proxy import SlowProxy

SNAPSHOTS = 8
# A request answered after DELAY (well inside a single request's timeout); a listing of SNAPSHOTS snapshots takes
# 3 + SNAPSHOTS requests, far more than the budget allows.
DELAY = 0.6


def params(bucket, endpoint, store_timeout):
    return {'store': 's3://%s/etcd' % bucket, 's3_endpoint_url': endpoint, 'store_timeout': store_timeout,
            'aws_access_key_id': 'testing', 'aws_secret_access_key': 'testing', 'region': 'us-east-1'}


@pytest.fixture
def filled_bucket(s3_bucket):
    url, bucket = s3_bucket
    client = boto3.client('s3', endpoint_url=url, region_name='us-east-1')
    for n in range(SNAPSHOTS):
        key = 'etcd/v2/Full-00000000-%08d-%d' % (100 + n, 1767225600 + n)
        client.put_object(Bucket=bucket, Key=key, Body=b'x' * 64)
        client.put_object(Bucket=bucket, Key=key + '.meta.json', Body=b'{}')
    return url, bucket


def timed(call):
    started = time.monotonic()
    with pytest.raises(StoreError) as err:
        call()
    return time.monotonic() - started, str(err.value)


def test_a_slow_store_is_given_up_on_across_calls(filled_bucket):
    url, bucket = filled_bucket
    assert len(store_from_params(params(bucket, url, 30)).list()) == SNAPSHOTS   # the data lists fine
    proxy = SlowProxy(urlsplit(url).port, DELAY)
    try:
        store = store_from_params(params(bucket, proxy.url, 2))
        took, message = timed(store.list)
    finally:
        proxy.close()
    assert took < 2 * 2, (took, message)
    assert proxy.requests < 3 + SNAPSHOTS, proxy.requests   # stopped before the listing was done
    assert '127.0.0.1:%d' % proxy.port in message and 'gave up after' in message, message


def test_a_module_run_against_a_slow_store_fails_within_twice_store_timeout(filled_bucket):
    """The same through the module as Ansible runs it (in process: main(), exit_json/fail_json caught)."""
    url, bucket = filled_bucket
    proxy = SlowProxy(urlsplit(url).port, DELAY)
    try:
        args = dict(params(bucket, proxy.url, 2), verify='listing')
        started = time.monotonic()
        how, result, _text = call_main('etcd_snapshot_info', args, False, 30)
        took = time.monotonic() - started
    finally:
        proxy.close()
    assert how == 'exit' and result['failed'] and not result['changed'], result
    assert took < 2 * 2 + 1.0, took   # + boto3's client creation, which no timeout bounds
    assert '127.0.0.1:%d' % proxy.port in result['msg'] and 'gave up after' in result['msg'], result['msg']


def test_the_budget_counts_only_time_spent_on_the_store(filled_bucket):
    """Between requests (an etcd stream of many minutes before the upload) the budget does not run."""
    url, bucket = filled_bucket
    store = store_from_params(params(bucket, url, 2))
    store.list()
    time.sleep(2.5)
    assert len(store.list()) == SNAPSHOTS


@pytest.mark.parametrize('server', [BlackHole, lambda: Drip(headers=True)], ids=['black-hole', 'slow-headers'])
def test_a_store_that_never_answers_is_given_up_on(server):
    silent = server()
    try:
        endpoint = 'http://127.0.0.1:%d' % silent.port
        module_store = store_from_params(params('bucket', endpoint, 1))
        took, message = timed(module_store.list)
        assert took < 2 * 1, (took, message)
        controller_store = open_store('s3://bucket/etcd', endpoint_url=endpoint, timeout=1)   # per operation
        took, message = timed(controller_store.check)
        assert took < 2 * 1, (took, message)
        assert '127.0.0.1:%d' % silent.port in message and 'gave up after' in message, message
    finally:
        silent.close()
