"""The test harness itself: a real cluster comes up, serves data, and S3 answers over HTTP."""

import boto3


def test_cluster_serves_data(etcd3):
    etcd3.put_many({'/smoke/a': '1', '/smoke/b': '2'})
    assert etcd3.get_all('/smoke/') == {'/smoke/a': '1', '/smoke/b': '2'}


def test_s3_bucket_roundtrip(s3_bucket):
    url, bucket = s3_bucket
    s3 = boto3.client('s3', endpoint_url=url, region_name='us-east-1')
    s3.put_object(Bucket=bucket, Key='k', Body=b'v')
    assert s3.get_object(Bucket=bucket, Key='k')['Body'].read() == b'v'
