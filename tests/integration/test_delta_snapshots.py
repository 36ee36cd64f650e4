"""Delta snapshots against real etcd: the backup loop, resume without gap or duplicate, restore of
full + deltas, gaps, corruption, compacted history and backup compaction."""

from __future__ import annotations

import os
import threading
import time

import pytest
import requests

from ansible_collections.steward.cluster.plugins.module_utils.etcd.backup.backup_loop import (
    BackupListener, BackupPolicy, BackupRunner, compact_chain)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.client import EtcdConnection
from ansible_collections.steward.cluster.plugins.module_utils.etcd.backup.cron import parse_cron
from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot.delta import plan_chain
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import RestoreRefused, SnapshotInvalid
from ansible_collections.steward.cluster.plugins.module_utils.etcd.snapshot.fetch import fetch_delta
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.local_store import LocalStore
from ansible_collections.steward.cluster.plugins.module_utils.etcd.recovery.restore import (
    restore_member,
    select_snapshot,
)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.s3_store import S3Store
from ansible_collections.steward.cluster.plugins.module_utils.etcd.wire.calls import PUT, Transactions, txn_request

from support.etcd_cluster import EtcdCluster


class Recorder(BackupListener):
    def __init__(self):
        self.taken = []
        self.failed = []
        self.idle = []

    def snapshot_taken(self, kind, snapshot, duration, reason):
        self.taken.append((kind, str(snapshot.name), reason))

    def snapshot_failed(self, kind, error, duration):
        self.failed.append((kind, error))

    def delta_idle(self, tip):
        self.idle.append(tip)


def policy(**kw):
    defaults = dict(full_schedule=parse_cron('0 0 1 1 *'), delta_period=1.0, gc_period=3600.0)
    defaults.update(kw)
    return BackupPolicy(**defaults)


class Loop:
    """A BackupRunner on a thread, stoppable like the controller stops it."""

    def __init__(self, cluster, store, work_dir, **kw):
        self.listener = Recorder()
        conn = EtcdConnection(endpoints=tuple(cluster.endpoints))
        self.runner = BackupRunner(conn, store, policy(**kw), work_dir=work_dir, listener=self.listener)
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self.runner.run, args=(self.stop_event,), daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop_event.set()
        self.thread.join(30)
        assert not self.thread.is_alive()


def wait_until(predicate, timeout=20.0, what='condition'):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError('timed out waiting for %s' % what)


def restore_and_read(cluster_tmp, store, bin_dir, **kw):
    """Restore the store's latest full (+ deltas) into a fresh member, start it, return its keys."""
    os.makedirs(str(cluster_tmp), exist_ok=True)
    restored = EtcdCluster(str(cluster_tmp), 1, bin_dir, token='restored')
    m = restored.members['etcd1']
    result = restore_member(store, select_snapshot(store), name='etcd1', data_dir=m.data_dir,
                            initial_cluster=restored.initial_cluster(), initial_cluster_token='restored',
                            initial_advertise_peer_urls=[m.peer_url], now=time.time(), tmp_dir=str(cluster_tmp), **kw)
    restored.start_member('etcd1', 'new')
    try:
        restored.wait_healthy(['etcd1'])
        return result, restored.get_all()
    finally:
        restored.stop()


def deltas_of(store):
    return [s for s in store.list() if s.valid and not s.is_full]


def one_delta_per_write(cluster, store, tmp_path, writes):
    """Run the loop and make each write land in a delta of its own; the deltas in order."""
    with Loop(cluster, store, str(tmp_path)):
        wait_until(lambda: plan_chain(store.list()).base, what='full snapshot')
        for i, key in enumerate(writes):
            cluster.put_many({key: 'v'})
            wait_until(lambda i=i: len(deltas_of(store)) > i, what='delta %d' % i)
    return sorted(deltas_of(store), key=lambda s: s.name.sort_key)


def test_loop_takes_full_then_deltas_and_restore_has_every_key(etcd1, tmp_path, etcd_bin_dir):
    store = LocalStore(str(tmp_path / 'store'))
    etcd1.put_many({'before/%d' % i: 'v' for i in range(20)})
    with Loop(etcd1, store, str(tmp_path)) as loop:
        wait_until(lambda: [s for s in store.list() if s.valid and s.is_full], what='first full snapshot')
        for batch in range(3):
            etcd1.put_many({'during/%d/%d' % (batch, i): 'x' * 100 for i in range(30)})
            time.sleep(0.4)
        etcd1.put_many({'last': 'written'})
        wait_until(lambda: plan_chain(store.list()).tip >= current_revision(etcd1), what='deltas up to the last write')
    assert loop.listener.taken[0][0] == 'Full' and 'no valid full snapshot' in loop.listener.taken[0][2]
    assert len(deltas_of(store)) >= 2
    assert loop.listener.failed == []
    chain = plan_chain(store.list())
    assert chain.gap == '' and chain.deltas
    expected = etcd1.get_all()
    result, restored = restore_and_read(tmp_path / 'restored', store, etcd_bin_dir)
    assert result['deltas'] == [str(d.name) for d in chain.deltas]
    assert result['revision'] == chain.tip
    assert restored == expected and restored['last'] == 'written'


def test_a_quiet_period_is_reported_current_at_the_tip_and_writes_nothing(etcd1, tmp_path):
    store = LocalStore(str(tmp_path / 'store'))
    etcd1.put_many({'k/%d' % i: 'v' for i in range(5)})
    with Loop(etcd1, store, str(tmp_path)) as loop:
        wait_until(lambda: plan_chain(store.list()).tip >= current_revision(etcd1), what='the chain at the tip')
        written = len(store.list())
        wait_until(lambda: len(loop.listener.idle) >= 2, what='two quiet delta periods')
        assert set(loop.listener.idle) == {current_revision(etcd1)} and len(store.list()) == written
        etcd1.put_many({'after': 'quiet'})
        wait_until(lambda: plan_chain(store.list()).tip >= current_revision(etcd1), what='a delta of the new write')
        quiet = len(loop.listener.idle)
        wait_until(lambda: len(loop.listener.idle) > quiet, what='a quiet period after it')
        assert loop.listener.idle[-1] == current_revision(etcd1)
    assert loop.listener.failed == []


def current_revision(cluster):
    r = requests.post(cluster.healthy_endpoint() + '/v3/kv/range', json={'key': 'AA=='}, timeout=5)
    return int(r.json()['header']['revision'])


def test_restart_resumes_without_gap_or_duplicate(etcd1, tmp_path):
    store = LocalStore(str(tmp_path / 'store'))
    with Loop(etcd1, store, str(tmp_path)):
        wait_until(lambda: plan_chain(store.list()).base, what='full snapshot')
        etcd1.put_many({'a/%d' % i: 'v' for i in range(10)})
        wait_until(lambda: deltas_of(store), what='a delta')
    etcd1.put_many({'b/%d' % i: 'v' for i in range(10)})  # written while no loop runs
    with Loop(etcd1, store, str(tmp_path)) as second:
        etcd1.put_many({'c/%d' % i: 'v' for i in range(10)})
        wait_until(lambda: plan_chain(store.list()).tip >= current_revision(etcd1), what='catch up')
    assert [k for k, _n, _r in second.listener.taken] == ['Incr'] * len(second.listener.taken)  # no new full
    deltas = sorted(deltas_of(store), key=lambda s: s.name.sort_key)
    chain = plan_chain(store.list())
    previous = chain.base.name.end_revision
    revisions = []
    for d in deltas:
        assert d.name.start_revision == previous + 1  # contiguous names: no gap, no overlap
        previous = d.name.end_revision
        revisions += [e.revision for e in fetch_delta(store, d, str(tmp_path))]
    assert revisions == sorted(set(revisions))  # no event twice
    first = max(chain.base.name.end_revision, 1) + 1  # an empty etcd is at revision 1 (its snapshot says 0)
    assert revisions == list(range(first, chain.tip + 1))  # none missing


def test_a_backlog_is_stored_when_read_not_a_period_later(etcd1, tmp_path):
    """3 MiB written while no loop ran (etcd answers the catch-up in one response larger than any of our buffers):
    the loop stores it as soon as it has read it, not a delta period later, in deltas of at most half the memory
    limit, every revision once."""
    store = LocalStore(str(tmp_path / 'store'))
    with Loop(etcd1, store, str(tmp_path)):
        wait_until(lambda: plan_chain(store.list()).base, what='full snapshot')
    etcd1.put_many({'big/%02d' % i: 'x' * 100000 for i in range(30)})
    began = time.time()
    with Loop(etcd1, store, str(tmp_path), delta_period=600.0, delta_memory_limit=2 * 1024 * 1024) as loop:
        wait_until(lambda: plan_chain(store.list()).tip >= current_revision(etcd1), what='catch up')
        assert time.time() - began < 60, 'stored long before the 600 s period'
    assert loop.listener.failed == []
    reasons = [reason for kind, _name, reason in loop.listener.taken if kind == 'Incr']
    assert reasons[-1] == 'the backlog is read' and 'memory limit reached' in reasons, reasons
    chain = plan_chain(store.list())
    assert all(d.size < 2 * 1024 * 1024 for d in chain.deltas)
    revisions = [e.revision for d in chain.deltas for e in fetch_delta(store, d, str(tmp_path))]
    assert revisions == list(range(max(chain.base.name.end_revision, 1) + 1, chain.tip + 1))


def test_a_long_backlog_is_read_in_spans_every_revision_once_in_order(etcd1, tmp_path):
    """2,500 revisions of 3 puts each written while no loop ran: the loop reads them with 3 watches at once
    (snapshot/catch_up.py), under a queue budget smaller than one span, and stores every revision once, in
    order, with its 3 events (a span never ends inside a revision)."""
    store = LocalStore(str(tmp_path / 'store'))
    with Loop(etcd1, store, str(tmp_path)):
        wait_until(lambda: plan_chain(store.list()).base, what='full snapshot')
    conn = EtcdConnection(endpoints=tuple(etcd1.endpoints))
    with Transactions(conn, etcd1.endpoints[0], timeout=60) as client:
        for revision in range(2500):
            client.txn(txn_request([(PUT, b'span/%04d/%d' % (revision, i), b'x' * 300) for i in range(3)]))
    with Loop(etcd1, store, str(tmp_path), delta_period=600.0, delta_memory_limit=1024 * 1024) as loop:
        wait_until(lambda: plan_chain(store.list()).tip >= current_revision(etcd1), timeout=90, what='catch up')
        plan = loop.runner.watcher.plan
    assert loop.listener.failed == []
    assert len(plan) == 3 and plan[-1][1] is None, plan
    chain = plan_chain(store.list())
    events = [e for d in chain.deltas for e in fetch_delta(store, d, str(tmp_path))]
    revisions = [e.revision for e in events]
    assert sorted(set(revisions)) == list(range(max(chain.base.name.end_revision, 1) + 1, chain.tip + 1))
    assert revisions == sorted(revisions) and len(events) == 3 * 2500
    assert [e.key for e in events] == [b'span/%04d/%d' % (r, i) for r in range(2500) for i in range(3)]


def test_gap_refuses_restore_unless_stop_at_gap(etcd1, tmp_path, etcd_bin_dir):
    store = LocalStore(str(tmp_path / 'store'))
    middle = one_delta_per_write(etcd1, store, tmp_path, ['k0', 'k1', 'k2'])[1]
    store.delete(middle)
    data_dir = str(tmp_path / 'never' / 'data')
    with pytest.raises(RestoreRefused, match='gap'):
        restore_member(store, select_snapshot(store), name='n1', data_dir=data_dir,
                       initial_cluster='n1=http://127.0.0.1:2380', initial_cluster_token='t',
                       initial_advertise_peer_urls=['http://127.0.0.1:2380'], now=time.time())
    assert not os.path.exists(data_dir)
    result, restored = restore_and_read(tmp_path / 'restored', store, etcd_bin_dir, stop_at_gap=True)
    assert 'no valid delta snapshot' in (result['gap'] or '') and len(result['deltas']) == 1
    assert restored.get('k0') == 'v' and 'k1' not in restored


def test_corrupt_delta_fails_restore_and_touches_nothing(etcd1, tmp_path):
    store = LocalStore(str(tmp_path / 'store'))
    with Loop(etcd1, store, str(tmp_path)):
        wait_until(lambda: plan_chain(store.list()).base, what='full snapshot')
        etcd1.put_many({'x': '1' * 50})
        wait_until(lambda: deltas_of(store), what='a delta')
    delta = deltas_of(store)[0]
    path = store.path_of(delta)
    with open(path, 'r+b') as f:  # same size, one byte flipped: only the sha256 can tell
        f.seek(10)
        byte = f.read(1)
        f.seek(10)
        f.write(bytes([byte[0] ^ 0xff]))
    data_dir = tmp_path / 'member' / 'data'
    data_dir.mkdir(parents=True)
    (data_dir / 'keep').write_text('old data')
    with pytest.raises(SnapshotInvalid, match='sha256'):
        restore_member(store, select_snapshot(store), name='n1', data_dir=str(data_dir), force=True,
                       initial_cluster='n1=http://127.0.0.1:2380', initial_cluster_token='t',
                       initial_advertise_peer_urls=['http://127.0.0.1:2380'], now=time.time())
    assert (data_dir / 'keep').read_text() == 'old data'
    assert not [p for p in os.listdir(tmp_path / 'member') if p != 'data']  # nothing moved aside


def test_compacted_history_gets_a_full_snapshot_first(etcd1, tmp_path):
    store = LocalStore(str(tmp_path / 'store'))
    with Loop(etcd1, store, str(tmp_path)):
        wait_until(lambda: plan_chain(store.list()).base, what='full snapshot')
    etcd1.put_many({'k%d' % i: 'v' for i in range(10)})
    rev = current_revision(etcd1)
    requests.post(etcd1.healthy_endpoint() + '/v3/kv/compaction', json={'revision': rev}, timeout=5).raise_for_status()
    with Loop(etcd1, store, str(tmp_path)) as loop:
        wait_until(lambda: loop.listener.taken, what='a snapshot after restart')
        etcd1.put_many({'after': 'compaction'})
        wait_until(lambda: plan_chain(store.list()).tip >= current_revision(etcd1), what='catch up')
    kind, _name, reason = loop.listener.taken[0]
    assert kind == 'Full' and 'compacted' in reason
    chain = plan_chain(store.list())
    assert chain.gap == '' and chain.base.name.end_revision >= rev


def test_backup_compaction_makes_one_full_at_the_tip(etcd1, tmp_path, etcd_bin_dir):
    store = LocalStore(str(tmp_path / 'store'))
    with Loop(etcd1, store, str(tmp_path), compaction_enabled=True, compaction_threshold=50) as loop:
        wait_until(lambda: plan_chain(store.list()).base, what='full snapshot')
        for i in range(4):
            etcd1.put_many({'c/%d/%d' % (i, j): 'v' * 10 for j in range(20)})
            time.sleep(0.3)
        wait_until(lambda: any(k == 'Compaction' for k, _n, _r in loop.listener.taken), what='a compaction')
        etcd1.put_many({'after': 'compaction'})
        wait_until(lambda: plan_chain(store.list()).tip >= current_revision(etcd1), what='catch up')
    compacted = [s for s in store.list() if s.is_full and (s.metadata or {}).get('compacted')]
    assert len(compacted) == 1 and compacted[0].metadata['compacted_from']
    chain = plan_chain(store.list())
    assert chain.base.key == compacted[0].key or chain.base.name.end_revision >= compacted[0].name.end_revision
    expected = etcd1.get_all()
    _result, restored = restore_and_read(tmp_path / 'restored', store, etcd_bin_dir)
    assert restored == expected


def test_compact_chain_refuses_without_deltas(etcd1, tmp_path):
    store = LocalStore(str(tmp_path / 'store'))
    with Loop(etcd1, store, str(tmp_path)):
        wait_until(lambda: plan_chain(store.list()).base, what='full snapshot')
    with pytest.raises(Exception, match='nothing to compact'):
        compact_chain(store, plan_chain(store.list()), work_dir=str(tmp_path), now=time.time())


def test_s3_compressed_full_and_deltas_restore(etcd1, tmp_path, s3_bucket, etcd_bin_dir):
    endpoint, bucket = s3_bucket
    store = S3Store('s3://%s/etcd/main' % bucket, endpoint_url=endpoint)
    with Loop(etcd1, store, str(tmp_path), compression='gzip'):
        wait_until(lambda: plan_chain(store.list()).base, what='full snapshot')
        etcd1.put_many({'s3/%d' % i: 'v' * 200 for i in range(40)})
        wait_until(lambda: plan_chain(store.list()).tip >= current_revision(etcd1), what='catch up')
    names = [str(s.name) for s in store.list() if s.valid]
    assert all(n.endswith('.gz') for n in names) and any(n.startswith('Incr-') for n in names)
    expected = etcd1.get_all()
    _result, restored = restore_and_read(tmp_path / 'restored', store, etcd_bin_dir)
    assert restored == expected


def test_last_delta_pins_what_is_restored(etcd1, tmp_path, etcd_bin_dir):
    store = LocalStore(str(tmp_path / 'store'))
    first = one_delta_per_write(etcd1, store, tmp_path, ['p0', 'p1'])[0]
    result, restored = restore_and_read(tmp_path / 'restored', store, etcd_bin_dir, last_delta=str(first.name))
    assert result['deltas'] == [str(first.name)] and restored.get('p0') == 'v' and 'p1' not in restored
    with pytest.raises(RestoreRefused, match='does not continue'):
        restore_member(store, select_snapshot(store), name='n1', data_dir=str(tmp_path / 'x' / 'data'),
                       initial_cluster='n1=http://127.0.0.1:2380', initial_cluster_token='t',
                       initial_advertise_peer_urls=['http://127.0.0.1:2380'], now=time.time(),
                       last_delta='Incr-00000001-00000002-1')


def test_a_store_of_another_cluster_gets_a_new_full_snapshot(tmp_path, etcd_bin_dir):
    store = LocalStore(str(tmp_path / 'store'))
    first = EtcdCluster(str(tmp_path / 'first'), 1, etcd_bin_dir, token='first').start()
    try:
        first.put_many({'k%d' % i: 'v' for i in range(50)})
        with Loop(first, store, str(tmp_path)):
            wait_until(lambda: plan_chain(store.list()).base, what='full snapshot of the first cluster')
    finally:
        first.stop()
    second = EtcdCluster(str(tmp_path / 'second'), 1, etcd_bin_dir, token='second').start()
    try:
        with Loop(second, store, str(tmp_path)) as loop:  # behind the store's tip, another cluster ID
            wait_until(lambda: loop.listener.taken, what='a snapshot of the second cluster')
            second.put_many({'x': 'y'})
            wait_until(lambda: plan_chain(store.list()).tip >= current_revision(second), what='catch up')
        kind, _name, reason = loop.listener.taken[0]
        assert kind == 'Full' and 'cluster' in reason
        assert loop.listener.failed == []
    finally:
        second.stop()
