"""restore.py's pure parts: snapshot selection, member argument checks, data dir state and aside names."""

from __future__ import annotations

import os

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.etcd.recovery import restore
from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import RestoreRefused, SnapshotNotFound
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.naming import delta_name, full_name
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.store import (
    STATUS_CORRUPT,
    STATUS_INCOMPLETE,
    STATUS_VALID,
    Snapshot,
)


class FakeStore:
    url = 'memory://test'

    def __init__(self, snaps):
        self.snaps = snaps

    def list(self):
        return list(self.snaps)


def snap(name, status=STATUS_VALID):
    return Snapshot(name, 'v2/' + str(name), 100, float(name.created), status,
                    metadata={'sha256': 'ab'} if status == STATUS_VALID else None,
                    problem='' if status == STATUS_VALID else 'broken')


F1 = snap(full_name(10, 1000))
D1 = snap(delta_name(11, 20, 1100))
F2 = snap(full_name(30, 2000))
F3_BAD = snap(full_name(40, 3000), STATUS_CORRUPT)
F4_INC = snap(full_name(50, 4000), STATUS_INCOMPLETE)


@pytest.mark.parametrize('snaps,name,expected', [
    ([F1, D1, F2, F3_BAD, F4_INC], None, F2),
    ([F1, D1, F2], str(F1.name), F1),
    ([F1, D1, F2], 'v2/' + str(F1.name), F1),
    ([F1], None, F1),
], ids=['latest-valid-skips-invalid', 'by-name', 'by-key', 'single'])
def test_select(snaps, name, expected):
    assert restore.select_snapshot(FakeStore(snaps), name) is expected


@pytest.mark.parametrize('snaps,name,exc,match', [
    ([], None, SnapshotNotFound, 'holds no snapshots'),
    ([F3_BAD, F4_INC], None, RestoreRefused, r'no valid full snapshot \(1 corrupt Full, 1 incomplete Full\)'),
    ([D1], None, RestoreRefused, 'no valid full snapshot'),
    ([F1, F3_BAD], str(F3_BAD.name), RestoreRefused, 'is corrupt'),
    ([F1, D1], str(D1.name), RestoreRefused, 'delta snapshot'),
    ([F1], 'Full-00000000-00000099-1', SnapshotNotFound, 'not in the store memory://test'),
], ids=['empty', 'only-invalid', 'only-deltas', 'named-corrupt', 'named-delta', 'named-missing'])
def test_select_refuses(snaps, name, exc, match):
    with pytest.raises(exc, match=match):
        restore.select_snapshot(FakeStore(snaps), name)


@pytest.mark.parametrize('cluster,expected', [
    ('a=http://h:1,b=http://h:2', {'a': ['http://h:1'], 'b': ['http://h:2']}),
    ('a=http://h:1, a=http://i:1 ,', {'a': ['http://h:1', 'http://i:1']}),
])
def test_parse_initial_cluster(cluster, expected):
    assert restore.parse_initial_cluster(cluster) == expected


@pytest.mark.parametrize('name,cluster,urls,field,match', [
    ('a', '', ['http://h:1'], 'initial_cluster', 'initial_cluster: is empty'),
    ('a', 'a=h:1', ['http://h:1'], 'initial_cluster', "entry 'a=h:1' is not name=scheme"),
    ('a', 'http://h:1', ['http://h:1'], 'initial_cluster', 'is not name=scheme'),
    ('c', 'a=http://h:1', ['http://h:1'], 'name', "member 'c' is not in initial_cluster"),
    ('a', 'a=http://h:1', [], 'initial_advertise_peer_urls', 'initial_advertise_peer_urls: is empty'),
    ('a', 'a=http://h:1', ['http://h:2'], 'initial_advertise_peer_urls', 'differ from the peer URLs'),
    ('', 'a=http://h:1', ['http://h:1'], 'name', 'member name is empty'),
])
def test_member_args_refused(name, cluster, urls, field, match):
    """Bad input naming its option (InvalidInput), and still a RestoreRefused for callers that catch that."""
    with pytest.raises(RestoreRefused, match=match) as err:
        restore.check_member_args(name, cluster, urls)
    assert isinstance(err.value, InvalidInput) and err.value.field == field


def test_member_args_ok():
    restore.check_member_args('b', 'a=http://h:1,b=http://h:2,b=http://i:2', ['http://i:2', 'http://h:2'])


def test_data_dir_state_and_aside(tmp_path):
    d = str(tmp_path / 'm.etcd')
    assert restore.data_dir_state(d)['state'] == 'absent'
    os.mkdir(d)
    assert restore.data_dir_state(d)['state'] == 'empty'
    os.mkdir(os.path.join(d, 'member'))
    with open(d + '.restore.json', 'w') as f:
        f.write('{"snapshot": "Full-1", "sha256": "ab"}')
    assert restore.data_dir_state(d) == {'path': d, 'state': 'present', 'restored_from': 'Full-1',
                                         'restored_sha256': 'ab'}
    assert restore.aside_path(d, 1700000000.7) == d + '.pre-restore-1700000000'
    os.mkdir(d + '.pre-restore-1700000000')
    assert restore.aside_path(d, 1700000000) == d + '.pre-restore-1700000000.1'
    f = str(tmp_path / 'file')
    open(f, 'w').close()
    with pytest.raises(RestoreRefused, match='not a directory'):
        restore.data_dir_state(f)


@pytest.mark.parametrize('data_dir,match', [('relative/dir', 'absolute path'), ('/', 'filesystem root')])
def test_restore_refuses_bad_data_dir(data_dir, match):
    with pytest.raises(RestoreRefused, match=match):
        restore.restore_member(FakeStore([F1]), F1, name='a', data_dir=data_dir, initial_cluster='a=http://h:1',
                               initial_cluster_token='t', initial_advertise_peer_urls=['http://h:1'], now=0)


@pytest.mark.parametrize('snapshot,match', [(F3_BAD, 'only valid full'), (D1, 'not a full snapshot')])
def test_restore_refuses_invalid_snapshot(snapshot, match, tmp_path):
    with pytest.raises(RestoreRefused, match=match):
        restore.restore_member(FakeStore([snapshot]), snapshot, name='a', data_dir=str(tmp_path / 'x'),
                               initial_cluster='a=http://h:1', initial_cluster_token='t',
                               initial_advertise_peer_urls=['http://h:1'], now=0)
    assert not os.path.exists(str(tmp_path / 'x'))
