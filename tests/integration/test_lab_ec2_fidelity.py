"""The lab's EC2 with fidelity (lab/ec2_fidelity.py in front of moto), over HTTP with boto3 as the machine driver
would call it: ClientToken idempotency, describe lag, RequestLimitExceeded, call counts, S3 unchanged."""

from __future__ import annotations

import re
import threading
import time

import boto3
import pytest
import requests
from botocore.exceptions import ClientError

from support.controller import wait_for
from support.ec2 import ACCESS_KEY_ID, SECRET_ACCESS_KEY

IMAGE = 'ami-12345678'


def instances(client, **kwargs):
    pages = client.get_paginator('describe_instances').paginate(**kwargs)
    return [i for page in pages for r in page['Reservations'] for i in r['Instances']]


def run(client, token=None, instance_type='t3.micro', count=1):
    kwargs = {'ImageId': IMAGE, 'MinCount': count, 'MaxCount': count, 'InstanceType': instance_type}
    if token:
        kwargs['ClientToken'] = token
    return client.run_instances(**kwargs)


def test_a_repeated_client_token_returns_the_same_reservation_and_creates_nothing(ec2):
    client = ec2.client()
    first = run(client, 'machine-uid-1')
    again = run(client, 'machine-uid-1')
    assert again['ReservationId'] == first['ReservationId']
    assert [i['InstanceId'] for i in again['Instances']] == [i['InstanceId'] for i in first['Instances']]
    assert len(instances(client)) == 1
    other = run(client, 'machine-uid-2')
    assert other['ReservationId'] != first['ReservationId'] and len(instances(client)) == 2


def test_the_same_token_with_other_parameters_is_idempotent_parameter_mismatch(ec2):
    client = ec2.client()
    run(client, 'tok')
    with pytest.raises(ClientError) as err:
        run(client, 'tok', instance_type='m5.large')
    assert err.value.response['Error']['Code'] == 'IdempotentParameterMismatch'
    assert err.value.response['ResponseMetadata']['HTTPStatusCode'] == 400
    assert len(instances(client)) == 1


def test_tokens_are_scoped_by_region(ec2):
    run(ec2.client(), 'tok')  # eu-west-1
    us = boto3.client('ec2', endpoint_url=ec2.url, region_name='us-east-1', aws_access_key_id=ACCESS_KEY_ID,
                      aws_secret_access_key=SECRET_ACCESS_KEY)
    run(us, 'tok')
    assert len(instances(us)) == 1 and len(instances(ec2.client())) == 1


def test_concurrent_retries_with_one_token_make_one_instance(ec2):
    client = ec2.client()
    answers = []

    def call():
        answers.append(run(client, 'crash-retry')['ReservationId'])

    threads = [threading.Thread(target=call) for _i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(answers) == 6 and len(set(answers)) == 1
    assert len(instances(client)) == 1


def test_a_failed_call_records_no_token(ec2):
    client = ec2.client()
    with pytest.raises(ClientError):
        client.run_instances(ImageId=IMAGE, MinCount=1, MaxCount=1, ClientToken='t', SubnetId='subnet-nonexistent')
    run(client, 't')  # other parameters, but the first call made nothing: no mismatch
    assert len(instances(client)) == 1


def test_describe_lag_hides_new_instances_then_shows_them(ec2):
    client = ec2.client()
    old = run(client)['Instances'][0]['InstanceId']
    started = time.monotonic()
    ec2.set_describe_lag(1.5)
    new = run(client, count=2)['Instances']
    ids = {i['InstanceId'] for i in new}
    visible = {i['InstanceId'] for i in instances(client)}
    assert ids.isdisjoint(visible)
    with pytest.raises(ClientError) as err:
        client.describe_instances(InstanceIds=[new[0]['InstanceId']])
    assert err.value.response['Error']['Code'] == 'InvalidInstanceID.NotFound'
    assert new[0]['InstanceId'] in err.value.response['Error']['Message']
    status_ids = {s['InstanceId'] for s in client.describe_instance_status(IncludeAllInstances=True)['InstanceStatuses']}
    assert ids.isdisjoint(status_ids)
    wait_for(lambda: ids <= {i['InstanceId'] for i in instances(client)}, 15, 0.1, 'instances to become visible')
    assert time.monotonic() - started >= 1.5
    assert old in {i['InstanceId'] for i in instances(client)}


def test_rate_limit_answers_request_limit_exceeded_and_counts(ec2):
    client = ec2.client(retries={'total_max_attempts': 1, 'mode': 'standard'})
    ec2.set_rate_limit(1, burst=3)
    codes = []
    for _i in range(5):
        try:
            client.describe_instances()
            codes.append('ok')
        except ClientError as exc:
            codes.append((exc.response['Error']['Code'], exc.response['ResponseMetadata']['HTTPStatusCode']))
    assert codes[:3] == ['ok', 'ok', 'ok'] and ('RequestLimitExceeded', 503) in codes[3:]
    assert ec2.calls('DescribeInstances') == 5 and ec2.throttled('DescribeInstances') >= 1
    # botocore retries RequestLimitExceeded as throttling: a retrying client gets through
    patient = ec2.client(retries={'total_max_attempts': 10, 'mode': 'standard'})
    patient.describe_instances()
    ec2.set_rate_limit(None)
    for _i in range(10):
        client.describe_instances()


def test_calls_are_counted_per_action_and_reset(ec2):
    client = ec2.client()
    run(client)
    instances(client)
    client.describe_vpcs()
    assert ec2.calls('RunInstances') == 1 and ec2.calls('DescribeInstances') == 1 and ec2.calls() == 3
    ec2.reset_counts()
    assert ec2.calls() == 0


def test_lab_machinery_is_not_lagged_throttled_or_counted(ec2):
    client = ec2.client()
    lab = ec2.client(user_agent_extra='steward-lab/nodes')
    ec2.set_describe_lag(30)
    ec2.set_rate_limit(1, burst=1)
    instance_id = run(client)['Instances'][0]['InstanceId']
    for _i in range(5):
        assert instance_id in {i['InstanceId'] for i in instances(lab)}
    assert ec2.calls('DescribeInstances') == 0 and ec2.settings()['lab_calls']['DescribeInstances'] == 5


def test_s3_passes_unchanged_and_reset_clears_everything(ec2):
    s3 = ec2.client('s3')
    s3.create_bucket(Bucket='lab-bucket', CreateBucketConfiguration={'LocationConstraint': ec2.region})
    s3.put_object(Bucket='lab-bucket', Key='k', Body=b'v')
    assert s3.get_object(Bucket='lab-bucket', Key='k')['Body'].read() == b'v'
    run(ec2.client(), 'tok')
    ec2.set_describe_lag(5)
    ec2.reset()
    assert s3.list_buckets()['Buckets'] == [] and instances(ec2.client()) == []
    assert ec2.settings()['describe_lag'] == 0 and ec2.calls() == 1
    run(ec2.client(), 'tok', instance_type='m5.large')  # the token was forgotten too


@pytest.mark.parametrize('body', [{'describe_lag': -1}, {'describe_lag': 'soon'}, {'rate_limit': {'per_second': 0}},
                                  {'rate_limit': 5}, {'nonsense': True}, {'tag_index': 'yes'}])
def test_bad_admin_settings_are_refused_and_change_nothing(ec2, body):
    answer = requests.post(ec2.url + '/_lab/ec2', json=body, timeout=10)
    assert answer.status_code == 400 and answer.json()['error']
    assert ec2.settings()['describe_lag'] == 0 and ec2.settings()['rate_limit'] is None


def raw_answers(client, calls):
    """Each call's raw XML answer (request id removed: moto makes a new one per answer)."""
    bodies = []

    def keep(http_response, **_kwargs):
        bodies.append(re.sub(rb'<requestId>[^<]*</requestId>|<RequestID>[^<]*</RequestID>', b'', http_response.content))
    client.meta.events.register('after-call.ec2', keep)
    try:
        for operation, kwargs in calls:
            getattr(client, operation)(**kwargs)
    finally:
        client.meta.events.unregister('after-call.ec2', keep)
    assert len(bodies) == len(calls)
    return bodies


def test_the_tag_index_answers_exactly_what_moto_scanning_every_tag_answers(ec2):
    """lab/moto_tags.py reads a resource's tags from moto's dict by id instead of moto's scan of every tag; every
    answer that carries or filters on tags is byte for byte the same with the index off."""
    client = ec2.client()
    vpc = client.create_vpc(CidrBlock='10.9.0.0/16')['Vpc']['VpcId']
    subnet = client.create_subnet(VpcId=vpc, CidrBlock='10.9.0.0/20')['Subnet']['SubnetId']
    client.create_tags(Resources=[vpc], Tags=[{'Key': 'Name', 'Value': 'lab-vpc'}])
    ids = []
    for i in range(12):
        tags = [{'Key': 'kubernetes.io/cluster/shoot--a' if i % 3 else 'kubernetes.io/cluster/shoot--b', 'Value': '1'},
                {'Key': 'kubernetes.io/role/node', 'Value': '1'}, {'Key': 'Name', 'Value': 'machine-%d' % i},
                {'Key': 'team', 'Value': 'blue*' if i % 4 == 0 else 'red'}]
        answer = client.run_instances(ImageId=IMAGE, MinCount=1, MaxCount=1, InstanceType='t3.micro', SubnetId=subnet,
                                      TagSpecifications=[{'ResourceType': kind, 'Tags': tags[:2 + i % 3]}
                                                         for kind in ('instance', 'volume', 'network-interface')])
        ids.append(answer['Instances'][0]['InstanceId'])
    client.create_tags(Resources=ids[:3], Tags=[{'Key': 'added', 'Value': 'later'}])
    client.delete_tags(Resources=[ids[4]], Tags=[{'Key': 'kubernetes.io/role/node'}])
    client.terminate_instances(InstanceIds=[ids[5]])
    states = ['pending', 'running', 'shutting-down', 'terminated', 'stopping', 'stopped']
    calls = [
        ('describe_instances', {}),
        ('describe_instances', {'Filters': [{'Name': 'tag-key', 'Values': ['kubernetes.io/cluster/shoot--a']},
                                            {'Name': 'tag-key', 'Values': ['kubernetes.io/role/node']},
                                            {'Name': 'instance-state-name', 'Values': states}], 'MaxResults': 5}),
        ('describe_instances', {'Filters': [{'Name': 'tag:Name', 'Values': ['machine-7']},
                                            {'Name': 'tag-key', 'Values': ['kubernetes.io/cluster/shoot--a']}]}),
        ('describe_instances', {'Filters': [{'Name': 'tag-value', 'Values': ['blue*', 'lat?r']}]}),
        ('describe_instances', {'Filters': [{'Name': 'tag:team', 'Values': ['red', 'green']}]}),
        ('describe_instances', {'InstanceIds': ids[2:6]}),
        ('describe_tags', {'Filters': [{'Name': 'resource-type', 'Values': ['instance']}]}),
        ('describe_tags', {'Filters': [{'Name': 'resource-id', 'Values': [ids[0], ids[4]]}]}),
        ('describe_volumes', {'Filters': [{'Name': 'tag-key', 'Values': ['kubernetes.io/role/node']}]}),
        ('describe_network_interfaces', {'Filters': [{'Name': 'tag:Name', 'Values': ['machine-*']}]}),
        ('describe_vpcs', {'Filters': [{'Name': 'tag:Name', 'Values': ['lab-vpc']}]}),
    ]
    assert ec2.settings()['tag_index'] is True
    indexed = raw_answers(client, calls)
    requests.post(ec2.url + '/_lab/ec2', json={'tag_index': False}, timeout=10).raise_for_status()
    try:
        assert ec2.settings()['tag_index'] is False
        scanned = raw_answers(client, calls)
    finally:
        requests.post(ec2.url + '/_lab/ec2', json={'tag_index': True}, timeout=10).raise_for_status()
    for (operation, kwargs), mine, moto in zip(calls, indexed, scanned):
        assert mine == moto, (operation, kwargs)
    assert b'machine-7' in indexed[2] and indexed[2].count(b'<instanceId>') == 1   # the answers are not empty
    assert indexed[4].count(b'<instanceId>') > 1 and b'<key>added</key>' in indexed[0]
