"""The test harness itself: a real cluster comes up, serves data, and S3 answers over HTTP."""

import socket
import time

import boto3
import pytest

from support.etcd_cluster import EtcdCluster, MemberExited


def test_cluster_serves_data(etcd3):
    etcd3.put_many({'/smoke/a': '1', '/smoke/b': '2'})
    assert etcd3.get_all('/smoke/') == {'/smoke/a': '1', '/smoke/b': '2'}


def test_s3_bucket_roundtrip(s3_bucket):
    url, bucket = s3_bucket
    s3 = boto3.client('s3', endpoint_url=url, region_name='us-east-1')
    s3.put_object(Bucket=bucket, Key='k', Body=b'v')
    assert s3.get_object(Bucket=bucket, Key='k')['Body'].read() == b'v'


def test_a_port_taken_before_etcd_binds_it_restarts_the_new_cluster_on_fresh_ports(tmp_path, etcd_bin_dir):
    # What a client connection's source port does to a port free_port() found free: etcd cannot listen there.
    taken = socket.socket()
    taken.bind(('127.0.0.1', 0))
    taken.listen(1)
    cluster = EtcdCluster(str(tmp_path / 'etcd'), 3, etcd_bin_dir)
    cluster.members['etcd2'].client_port = taken.getsockname()[1]
    try:
        cluster.start(timeout=30)
        assert taken.getsockname()[1] not in [m.client_port for m in cluster.members.values()]
        cluster.put_many({'/smoke/a': '1'})
        assert cluster.get_all('/smoke/') == {'/smoke/a': '1'}
        assert 'address already in use' in open(cluster.members['etcd2'].log_path).read()
    finally:
        cluster.stop()
        taken.close()


def test_a_member_that_exits_for_another_reason_fails_at_once_with_its_log(tmp_path, etcd_bin_dir):
    cluster = EtcdCluster(str(tmp_path / 'etcd'), 1, etcd_bin_dir)
    original = cluster.start_member
    cluster.start_member = lambda name, **kw: original(name, extra=['--no-such-flag'])
    started = time.monotonic()
    with pytest.raises(MemberExited, match='no-such-flag'):
        cluster.start(timeout=30)
    assert time.monotonic() - started < 10
