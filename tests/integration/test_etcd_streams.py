"""etcd/wire against real etcd (each installed version): the snapshot stream over plain HTTP/2, over TLS with a
client certificate and with etcd's user/password auth; gRPC errors decoded from etcd's own trailers; HashKV
as etcdctl reports it; transactions one after the other on one connection, larger than etcd's flow-control
window; the watch taking responses far larger than any buffer, every revision once."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import threading
import time

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.client import EtcdConnection
from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot.delta import EVENT_DELETE, decode_events
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import EtcdUnavailable
from ansible_collections.steward.cluster.plugins.module_utils.etcd.wire.calls import (
    DELETE,
    PUT,
    Transactions,
    hash_kv,
    txn_request,
    unary,
)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.wire.http2 import GrpcError
from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot.snapshot_stream import stream_snapshot
from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot.verify import verify_snapshot_file
from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot.watcher import Watcher, WatchBatch

from support.etcd_cluster import EtcdCluster
from support.tls import make_pki


def etcdctl(cluster: EtcdCluster, *args: str, extra=()) -> str:
    tls = ['--cacert', cluster.pki['ca'], '--cert', cluster.pki['client_cert'], '--key', cluster.pki['client_key']] \
        if cluster.pki else []
    out = subprocess.run([cluster.etcdctl, '--endpoints', cluster.endpoints[0]] + tls + list(extra) + list(args),
                         capture_output=True, text=True, check=True, env=dict(os.environ, ETCDCTL_API='3'))
    return out.stdout


def fill(cluster: EtcdCluster, keys: int) -> None:
    cluster.put_many({'k/%05d' % i: 'v' * (i % 300) for i in range(keys)})


def test_snapshot_streams_the_same_bytes_etcdctl_saves(etcd1, tmp_path):
    fill(etcd1, 300)
    conn = EtcdConnection(endpoints=tuple(etcd1.endpoints))
    ours = str(tmp_path / 'ours.db')
    hasher = stream_snapshot(conn, etcd1.endpoints[0], ours, timeout=60)
    theirs = str(tmp_path / 'theirs.db')
    etcdctl(etcd1, 'snapshot', 'save', theirs)
    with open(ours, 'rb') as a, open(theirs, 'rb') as b:
        assert a.read() == b.read(), 'an idle member streams the same snapshot to both'
    verified = verify_snapshot_file(ours, digests=hasher.result(), full_structure=False)
    assert verified['sha256'] == hashlib.sha256(open(ours, 'rb').read()).hexdigest()
    assert oct(os.stat(ours).st_mode & 0o777) == '0o600'


def test_snapshot_over_tls_with_a_client_certificate(tmp_path, etcd_bin_dir):
    pki = make_pki(str(tmp_path / 'pki'))
    cluster = EtcdCluster(str(tmp_path / 'etcd'), 1, etcd_bin_dir, pki=pki).start()
    try:
        fill(cluster, 50)
        conn = EtcdConnection(endpoints=tuple(cluster.endpoints), ca_cert=pki['ca'], client_cert=pki['client_cert'],
                              client_key=pki['client_key'])
        hasher = stream_snapshot(conn, cluster.endpoints[0], str(tmp_path / 'tls.db'), timeout=60)
        assert verify_snapshot_file(str(tmp_path / 'tls.db'), digests=hasher.result(), full_structure=False)
        without = EtcdConnection(endpoints=tuple(cluster.endpoints), ca_cert=pki['ca'])
        with pytest.raises(EtcdUnavailable):  # the server demands a client certificate
            stream_snapshot(without, cluster.endpoints[0], str(tmp_path / 'refused.db'), timeout=10)
        stranger = EtcdConnection(endpoints=tuple(cluster.endpoints))  # the system CAs do not know this one
        with pytest.raises(EtcdUnavailable, match='CERTIFICATE_VERIFY_FAILED'):
            stream_snapshot(stranger, cluster.endpoints[0], str(tmp_path / 'stranger.db'), timeout=10)
    finally:
        cluster.stop()


def test_snapshot_with_user_password_auth(etcd1, tmp_path):
    fill(etcd1, 50)
    etcdctl(etcd1, 'role', 'add', 'root')
    etcdctl(etcd1, 'user', 'add', 'root', '--new-user-password', 'rootpw')
    etcdctl(etcd1, 'user', 'grant-role', 'root', 'root')
    etcdctl(etcd1, 'auth', 'enable')
    authed = EtcdConnection(endpoints=tuple(etcd1.endpoints), user='root', password='rootpw')
    hasher = stream_snapshot(authed, etcd1.endpoints[0], str(tmp_path / 'auth.db'), timeout=60)
    assert verify_snapshot_file(str(tmp_path / 'auth.db'), digests=hasher.result(), full_structure=False)
    anonymous = EtcdConnection(endpoints=tuple(etcd1.endpoints))
    with pytest.raises(GrpcError) as refused:
        stream_snapshot(anonymous, etcd1.endpoints[0], str(tmp_path / 'anonymous.db'), timeout=10)
    assert refused.value.status and 'user name is empty' in str(refused.value)  # etcd's own words, decoded


def test_a_failed_call_reports_etcds_status_and_message(etcd1):
    conn = EtcdConnection(endpoints=tuple(etcd1.endpoints))
    with pytest.raises(GrpcError) as failed:
        unary(conn, etcd1.endpoints[0], '/etcdserverpb.Maintenance/NoSuchCall', b'', timeout=10)
    assert failed.value.status == 12 and 'NoSuchCall' in str(failed.value) and 'UNIMPLEMENTED' in str(failed.value)
    # a compacted revision: etcd's own error text, Huffman-coded in its trailers
    fill(etcd1, 20)
    revision = int(json.loads(etcdctl(etcd1, 'endpoint', 'status', '-w', 'json'))[0]['Status']['header']['revision'])
    etcdctl(etcd1, 'compaction', str(revision))
    with pytest.raises(GrpcError, match='compacted') as compacted:
        hash_kv(conn, etcd1.endpoints[0], revision - 5, timeout=10)
    assert compacted.value.status == 11  # OUT_OF_RANGE


def test_hash_kv_is_what_etcdctl_reports(etcd1):
    fill(etcd1, 100)
    conn = EtcdConnection(endpoints=tuple(etcd1.endpoints))
    theirs = json.loads(etcdctl(etcd1, 'endpoint', 'hashkv', '-w', 'json'))[0]['HashKV']
    ours = hash_kv(conn, etcd1.endpoints[0], 0, timeout=10)
    assert ours['hash'] == theirs['hash'] and ours['compact_revision'] == theirs.get('compact_revision', 0)


def test_large_transactions_on_eight_connections_at_once_never_wait_for_a_window_already_open(etcd1):
    """Each transaction is twice etcd's initial 64 KiB window, so every send waits for WINDOW_UPDATEs; with eight
    connections at once the update often arrives in the same read as other frames. The wire once parsed it and
    then read again, waiting for a frame etcd never sends, until etcd's deadline ended the call."""
    conn = EtcdConnection(endpoints=tuple(etcd1.endpoints))
    failures, started = [], time.monotonic()

    def load(thread):
        try:
            with Transactions(conn, etcd1.endpoints[0], timeout=20) as txns:
                for rnd in range(4):
                    txns.txn(txn_request([(PUT, b'w/%d/%d/%03d' % (thread, rnd, j), os.urandom(1024))
                                          for j in range(128)]))
        except Exception as exc:  # noqa: BLE001 - every failure is reported below
            failures.append((thread, exc))

    threads = [threading.Thread(target=load, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures, failures
    assert time.monotonic() - started < 15, 'no call waited for a deadline'
    count = json.loads(etcdctl(etcd1, 'get', '--prefix', 'w/', '--limit', '1', '-w', 'json'))['count']
    assert count == 8 * 4 * 128


def test_transactions_on_one_connection_land_as_etcdctl_reads_them(etcd1):
    conn = EtcdConnection(endpoints=tuple(etcd1.endpoints))
    start = int(json.loads(etcdctl(etcd1, 'endpoint', 'status', '-w', 'json'))[0]['Status']['header']['revision'])
    big = os.urandom(150 * 1024)   # 10 of them: 1.5 MB, 23 times the 64 KiB window etcd grants at first
    with Transactions(conn, etcd1.endpoints[0], timeout=30) as txns:
        landed = [txns.txn(txn_request([(PUT, b't/%03d/%d' % (i, j), b'v%d' % i) for j in range(3)]))
                  for i in range(200)]
        landed.append(txns.txn(txn_request([(PUT, b'big/%d' % j, big) for j in range(10)])))
        landed.append(txns.txn(txn_request([(DELETE, b't/000/0', None), (PUT, b'empty', b'')])))
        with pytest.raises(GrpcError, match='RESOURCE_EXHAUSTED') as refused:   # above --max-request-bytes
            txns.txn(txn_request([(PUT, b'huge', os.urandom(3 * 1024 * 1024))]))
        assert refused.value.status == 8
        landed.append(txns.txn(txn_request([(PUT, b'after', b'refusal')])))  # the connection goes on
        assert txns._call.stream == 1 + 2 * 203, 'all 204 calls on the one connection, a stream each'
    assert landed == list(range(start + 1, start + 204)), 'one revision per transaction, in order'
    kvs = json.loads(etcdctl(etcd1, 'get', '--prefix', 'big/', '-w', 'json'))['kvs']
    assert [base64.b64decode(kv['value']) for kv in kvs] == [big] * 10
    assert etcdctl(etcd1, 'get', 't/000/0') == '' and etcdctl(etcd1, 'get', 't/199/2', '--print-value-only') == 'v199\n'
    assert etcdctl(etcd1, 'get', 'empty') == 'empty\n\n' and 'refusal' in etcdctl(etcd1, 'get', 'after')


def test_watch_streams_huge_responses_in_bounded_pieces_every_revision_once(etcd1):
    """Revisions of 100 events of 10 KiB (one etcd response of 1,000 such revisions would be 1 GB): the watcher
    hands over chunks of whole revisions while the queue stays within its bound."""
    conn = EtcdConnection(endpoints=tuple(etcd1.endpoints))
    value = 'x' * 10000
    start = int(json.loads(etcdctl(etcd1, 'endpoint', 'status', '-w', 'json'))[0]['Status']['header']['revision']) + 1
    for r in range(30):
        ops = '\n'.join('put big/%03d/%03d %s' % (r, i, value) for i in range(100))
        subprocess.run([etcd1.etcdctl, '--endpoints', etcd1.endpoints[0], 'txn'], input='\n' + ops + '\n\n\n',
                       text=True, capture_output=True, check=True, env=dict(os.environ, ETCDCTL_API='3'))
    etcdctl(etcd1, 'del', 'big/000/000')
    last = start + 30
    watcher = Watcher(conn, etcd1.endpoints[0], start, queue_bytes=2 * 1024 * 1024).start()
    revisions, biggest = [], 0
    try:
        deadline = time.time() + 60
        while (not revisions or revisions[-1] < last) and time.time() < deadline:
            time.sleep(0.01)  # a slow loop: the queue fills and holds the stream back
            item = watcher.get(5)
            assert isinstance(item, WatchBatch), item
            biggest = max(biggest, item.events.size)
            data = b'[' + item.events.data + b']'
            events = decode_events(data + hashlib.sha256(data).digest())
            assert [e.revision for e in events] == list(item.events.revisions)
            assert not revisions or events[0].revision > revisions[-1], 'a revision split or repeated'
            revisions += sorted(set(e.revision for e in events))
            if events[-1].revision == last:
                assert events[-1].type == EVENT_DELETE and events[-1].key == b'big/000/000'
        assert watcher.created_revision == last
    finally:
        watcher.close()
    assert revisions == list(range(start, last + 1))
    assert biggest < 3 * 1024 * 1024, 'chunks of about 1 MiB, never a whole response'


def test_closing_a_watch_that_waits_for_events_ends_it_at_once(etcd1):
    conn = EtcdConnection(endpoints=tuple(etcd1.endpoints))
    watcher = Watcher(conn, etcd1.endpoints[0], 1).start()
    assert watcher.get(1) is None  # nothing happens on an idle member
    began = time.monotonic()
    closer = threading.Thread(target=watcher.close)
    closer.start()
    closer.join(10)
    assert not closer.is_alive() and time.monotonic() - began < 5
    assert watcher.get(0.1) is None, 'a closed watch reports no error'
