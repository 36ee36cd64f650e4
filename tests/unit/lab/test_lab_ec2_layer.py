"""The EC2 fidelity layer's pure parts (lab/cloud/ec2_fidelity.py): the token bucket, the describe filter, the admin
settings' validation. The HTTP behaviour is in tests/integration/test_lab_ec2_fidelity.py."""

import pytest

from lab.cloud.ec2_fidelity import Ec2Fidelity, TokenBucket, _without_instances

DESCRIBE = b'''<?xml version="1.0" encoding="utf-8"?>
<DescribeInstancesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15"><reservationSet>
<item><reservationId>r-1</reservationId><instancesSet><item><instanceId>i-1</instanceId></item>
<item><instanceId>i-2</instanceId></item></instancesSet></item>
<item><reservationId>r-2</reservationId><instancesSet><item><instanceId>i-3</instanceId></item></instancesSet></item>
</reservationSet></DescribeInstancesResponse>'''


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_token_bucket_allows_the_burst_then_the_rate():
    clock = Clock()
    bucket = TokenBucket(2, 3, clock)
    assert [bucket.take() for _i in range(4)] == [True, True, True, False]
    clock.now += 0.5  # one token back
    assert [bucket.take() for _i in range(2)] == [True, False]
    clock.now += 100  # refills to the burst, not beyond
    assert [bucket.take() for _i in range(4)] == [True, True, True, False]


@pytest.mark.parametrize('rate,burst', [(0, 1), (-1, 1), (1, 0)])
def test_token_bucket_refuses_nonsense(rate, burst):
    with pytest.raises(ValueError):
        TokenBucket(rate, burst)


def test_hidden_instances_and_emptied_reservations_leave_the_answer():
    body = _without_instances(DESCRIBE, {'i-2', 'i-3'}, 'DescribeInstances').decode()
    assert '<instanceId>i-1</instanceId>' in body and 'i-2' not in body and 'i-3' not in body
    assert 'r-1' in body and 'r-2' not in body
    assert 'xmlns="http://ec2.amazonaws.com/doc/2016-11-15"' in body and 'ns0:' not in body


def test_settings_are_checked_before_anything_changes():
    layer = Ec2Fidelity(app=None, clock=Clock())
    layer.configure({'describe_lag': 2, 'rate_limit': {'per_second': 5, 'burst': 10}})
    for bad in ({'describe_lag': -1}, {'describe_lag': True}, {'describe_lag': 1, 'rate_limit': {'per_second': 0}},
                {'rate_limit': {'per_second': 1, 'burst': 2, 'extra': 1}}, {'rate_limit': 'fast'}, {'lag': 1}):
        with pytest.raises(ValueError):
            layer.configure(bad)
    settings = layer.settings()
    assert settings['describe_lag'] == 2 and settings['rate_limit'] == {'per_second': 5.0, 'burst': 10}
    layer.configure({'rate_limit': None, 'describe_lag': 0})
    assert layer.settings()['rate_limit'] is None
