"""The lab's EC2 with fidelity (lab/cloud/ec2_fidelity.py in front of moto), over HTTP with boto3 as the machine driver
would call it: ClientToken idempotency, describe lag, RequestLimitExceeded, call counts, S3 unchanged."""

from __future__ import annotations

import re
import threading
import time

import boto3
import pytest
import requests
from botocore.exceptions import ClientError

from lab.env.controller import wait_for
from lab.env.ec2_server import ACCESS_KEY_ID, SECRET_ACCESS_KEY

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
                                  {'rate_limit': 5}, {'nonsense': True}, {'moto_index': 'yes'}])
def test_bad_admin_settings_are_refused_and_change_nothing(ec2, body):
    answer = requests.post(ec2.url + '/_lab/ec2', json=body, timeout=10)
    assert answer.status_code == 400 and answer.json()['error']
    assert ec2.settings()['describe_lag'] == 0 and ec2.settings()['rate_limit'] is None


def raw_answers(calls):
    """Each call's raw answer, errors included (request ids removed: moto makes a new one per answer)."""
    bodies = []

    def keep(http_response, **_kwargs):
        bodies.append(re.sub(rb'<requestId>[^<]*</requestId>|<RequestID>[^<]*</RequestID>|<RequestId>[^<]*</RequestId>'
                             rb'|"RequestId": ?"[^"]*"', b'', http_response.content))
    for client, operation, kwargs in calls:
        client.meta.events.register('after-call', keep)
        try:
            getattr(client, operation)(**kwargs)
        except ClientError:
            pass
        finally:
            client.meta.events.unregister('after-call', keep)
    assert len(bodies) == len(calls)
    return bodies


_IDS = re.compile(rb'\b(?:[a-z]+-)+[0-9a-f]{8,17}\b'                                   # i-, vol-, eni-, r-, subnet-, ...
                  rb'|\b(?=[a-z0-9]*[0-9])(?=[a-z0-9]*[a-z])[a-z0-9]{20}\b'                # IAM instance profile ids
                  rb'|\b(?:[0-9a-f]{2}:){5}[0-9a-f]{2}\b'                                  # MAC addresses
                  rb'|\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b')    # boto3's ClientTokens
_TIMES = re.compile(rb'\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:\.\d+)?(?:Z| UTC|[+-]\d\d:?\d\d)?')


def normalized(bodies):
    """Two runs of one scenario differ in moto's random ids and MAC addresses, boto3's ClientTokens and the clock:
    ids become their order of first appearance over all answers (so which instance a volume is attached to still
    has to match), times a placeholder."""
    seen = {}

    def name(match):
        return b'<%d>' % seen.setdefault(match.group(0), len(seen))
    return [_IDS.sub(name, _TIMES.sub(b'<time>', body)) for body in bodies]


def index_scenario(ec2):
    """Tags (on instances, volumes, ENIs, a VPC; added, removed), several instances per reservation, a terminated
    and a modified instance, other services; then every kind of answer that reads tags or finds instances by id."""
    client = ec2.client()
    vpc = client.create_vpc(CidrBlock='10.9.0.0/16')['Vpc']['VpcId']
    subnet = client.create_subnet(VpcId=vpc, CidrBlock='10.9.0.0/20', AvailabilityZone=ec2.region + 'a')['Subnet']['SubnetId']
    client.create_tags(Resources=[vpc], Tags=[{'Key': 'Name', 'Value': 'lab-vpc'}])
    iam = ec2.client('iam')
    iam.create_instance_profile(InstanceProfileName='index-profile')
    ids = []
    for i in range(12):
        tags = [{'Key': 'kubernetes.io/cluster/shoot--a' if i % 3 else 'kubernetes.io/cluster/shoot--b', 'Value': '1'},
                {'Key': 'kubernetes.io/role/node', 'Value': '1'}, {'Key': 'Name', 'Value': 'machine-%d' % i},
                {'Key': 'team', 'Value': 'blue*' if i % 4 == 0 else 'red'}]
        extra = {'IamInstanceProfile': {'Name': 'index-profile'}} if i % 2 else {}
        answer = client.run_instances(ImageId=IMAGE, MinCount=1 + i % 2, MaxCount=1 + i % 2, InstanceType='t3.micro',
                                      SubnetId=subnet, TagSpecifications=[{'ResourceType': kind, 'Tags': tags[:2 + i % 3]}
                                                                          for kind in ('instance', 'volume', 'network-interface')],
                                      **extra)
        ids.extend(i['InstanceId'] for i in answer['Instances'])
    client.create_tags(Resources=ids[:3], Tags=[{'Key': 'added', 'Value': 'later'}])
    client.delete_tags(Resources=[ids[4]], Tags=[{'Key': 'kubernetes.io/role/node'}])
    client.terminate_instances(InstanceIds=[ids[5], ids[9]])
    client.modify_instance_attribute(InstanceId=ids[6], SourceDestCheck={'Value': False})
    s3 = ec2.client('s3')
    s3.create_bucket(Bucket='index-bucket', CreateBucketConfiguration={'LocationConstraint': ec2.region})
    states = ['pending', 'running', 'shutting-down', 'terminated', 'stopping', 'stopped']
    calls = [
        (client, 'describe_instances', {}),
        (client, 'describe_instances', {'Filters': [{'Name': 'tag-key', 'Values': ['kubernetes.io/cluster/shoot--a']},
                                                    {'Name': 'tag-key', 'Values': ['kubernetes.io/role/node']},
                                                    {'Name': 'instance-state-name', 'Values': states}], 'MaxResults': 5}),
        (client, 'describe_instances', {'Filters': [{'Name': 'tag:Name', 'Values': ['machine-7']},
                                                    {'Name': 'tag-key', 'Values': ['kubernetes.io/cluster/shoot--a']}]}),
        (client, 'describe_instances', {'Filters': [{'Name': 'tag-value', 'Values': ['blue*', 'lat?r']}]}),
        (client, 'describe_instances', {'Filters': [{'Name': 'tag:team', 'Values': ['red', 'green']}]}),
        (client, 'describe_instances', {'InstanceIds': ids[2:6]}),
        (client, 'describe_instances', {'InstanceIds': [ids[0], 'i-0123456789abcdef0']}),
        (client, 'describe_tags', {'Filters': [{'Name': 'resource-type', 'Values': ['instance']}]}),
        (client, 'describe_tags', {'Filters': [{'Name': 'resource-id', 'Values': [ids[0], ids[4]]}]}),
        (client, 'describe_volumes', {'Filters': [{'Name': 'tag-key', 'Values': ['kubernetes.io/role/node']}]}),
        (client, 'describe_network_interfaces', {'Filters': [{'Name': 'tag:Name', 'Values': ['machine-*']}]}),
        (client, 'describe_vpcs', {'Filters': [{'Name': 'tag:Name', 'Values': ['lab-vpc']}]}),
        (client, 'describe_instance_attribute', {'InstanceId': 'i-0123456789abcdef0', 'Attribute': 'instanceType'}),
        (client, 'describe_instance_status', {'InstanceIds': ids[4:8], 'IncludeAllInstances': True}),
        (client, 'describe_iam_instance_profile_associations', {}),
        (s3, 'list_buckets', {}),
        (iam, 'list_instance_profiles', {}),
        (client, 'describe_volumes', {}),
    ] + [(client, 'describe_instance_attribute', {'InstanceId': i, 'Attribute': attribute})
         for i in (ids[0], ids[5], ids[6], ids[-1]) for attribute in ('instanceType', 'sourceDestCheck', 'userData')]
    return raw_answers(calls)


def test_the_moto_index_answers_exactly_what_moto_scanning_answers(ec2):
    """lab/cloud/moto_index.py reads tags and instances by id and remembers each host's backend instead of moto's scans.
    One scenario (writes that look instances up, then reads of every kind) run on a fresh moto with the index and
    again without: the answers are byte for byte the same but for moto's random ids and the clock."""
    assert ec2.settings()['moto_index'] is True
    indexed = index_scenario(ec2)
    ec2.reset()
    requests.post(ec2.url + '/_lab/ec2', json={'moto_index': False}, timeout=10).raise_for_status()
    try:
        assert ec2.settings()['moto_index'] is False
        scanned = index_scenario(ec2)
    finally:
        requests.post(ec2.url + '/_lab/ec2', json={'moto_index': True}, timeout=10).raise_for_status()
    assert len(indexed) == len(scanned)
    for i, (mine, moto) in enumerate(zip(normalized(indexed), normalized(scanned))):
        assert mine == moto, i
    assert indexed != scanned      # the ids did differ: the runs were two
    assert b'machine-7' in indexed[2] and indexed[2].count(b'<instanceId>') == 2   # two instances, one reservation
    assert indexed[4].count(b'<instanceId>') > 1 and b'<key>added</key>' in indexed[0]
    assert b'InvalidInstanceID.NotFound' in indexed[6] and b'InvalidInstanceID.NotFound' in indexed[12]
    assert indexed[14].count(b'index-profile') >= 6 and b'index-bucket' in indexed[15] and b't3.micro' in indexed[-3]
    assert b'<value>false</value>' in indexed[-5] and b'<value>true</value>' in indexed[-11]   # ids[6] modified, ids[0] not
