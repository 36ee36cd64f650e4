"""LocalStore listing classification and atomic publishing (real files in a temp dir)."""

from __future__ import annotations

import hashlib
import json
import os

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.etcd.errors import StoreError
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.local_store import LocalStore
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.naming import full_name
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.stores import open_store

NAME = 'Full-00000000-00000100-1700000000'
DATA = b'snapshot-bytes' * 10


def meta(data=DATA, name=NAME, **over):
    m = {'format': 1, 'name': name, 'size': len(data), 'sha256': hashlib.sha256(data).hexdigest()}
    m.update(over)
    return json.dumps(m).encode()


@pytest.mark.parametrize('files, expected', [
    ({NAME: DATA, NAME + '.meta.json': meta()}, [(NAME, 'valid')]),
    ({NAME: DATA}, [(NAME, 'unrecorded')]),  # etcd-backup-restore writes no metadata
    ({NAME: DATA, 'Full-00000000-00000050-1600000000': DATA, 'Full-00000000-00000050-1600000000.meta.json':
      meta(name='Full-00000000-00000050-1600000000')},
     [('Full-00000000-00000050-1600000000', 'valid'), (NAME, 'incomplete')]),  # newer than ours: ours, unfinished
    ({NAME: DATA + b'x', NAME + '.meta.json': meta()}, [(NAME, 'corrupt')]),
    ({NAME: DATA, NAME + '.meta.json': b'{not json'}, [(NAME, 'corrupt')]),
    ({NAME: DATA, NAME + '.meta.json': meta(name='Full-00000000-00000001-1')}, [(NAME, 'corrupt')]),
    ({NAME: DATA, NAME + '.meta.json': meta(sha256='')}, [(NAME, 'corrupt')]),
    ({NAME + '.meta.json': meta()}, [(NAME, 'orphan-metadata')]),
    ({'.' + NAME + '.tmp-abc123': DATA}, [(NAME, 'partial')]),
    ({'.snapshot.tmp-abc123': DATA}, [(None, 'partial')]),
    ({'README': b'x', 'lost+found.txt': b''}, []),
    ({'Full-00000000-00000200-1700000100': DATA, 'Full-00000000-00000200-1700000100.meta.json':
      meta(name='Full-00000000-00000200-1700000100'), NAME: DATA, NAME + '.meta.json': meta()},
     [(NAME, 'valid'), ('Full-00000000-00000200-1700000100', 'valid')]),
], ids=['valid', 'unrecorded', 'incomplete', 'size-mismatch', 'bad-json', 'wrong-name', 'no-sha', 'orphan', 'partial-named',
        'partial-unnamed', 'foreign-files', 'restore-order'])
def test_listing_classifies(tmp_path, files, expected):
    v2 = tmp_path / 'v2'
    v2.mkdir()
    for name, body in files.items():
        (v2 / name).write_bytes(body)
    listed = LocalStore(str(tmp_path)).list()
    assert [(str(s.name) if s.name else None, s.status) for s in listed] == expected
    for s in listed:
        assert s.valid == (s.status in ('valid', 'unrecorded'))
        assert (s.problem == '') == (s.status == 'valid')


def test_legacy_v1_layout_is_listed(tmp_path):
    backup = tmp_path / 'v1' / 'Backup-1600000000'
    backup.mkdir(parents=True)
    (backup / 'Full-00000000-00000050-1600000000').write_bytes(DATA)
    listed = LocalStore(str(tmp_path)).list()
    assert [(s.key, s.status) for s in listed] == [('v1/Backup-1600000000/Full-00000000-00000050-1600000000', 'unrecorded')]


def test_publish_is_two_phase_and_leaves_no_temp(tmp_path):
    store = open_store('file://' + str(tmp_path / 'store'))
    src = tmp_path / 'src.db'
    src.write_bytes(DATA)
    name = full_name(100, 1700000000)
    snap = store.publish_data(name, str(src))
    assert [s.status for s in store.list()] == ['partial']  # renamed into place only after its metadata
    final = store.publish_metadata(snap, json.loads(meta()))
    assert final.valid
    assert sorted(os.listdir(tmp_path / 'store' / 'v2')) == [NAME, NAME + '.meta.json']
    with pytest.raises(StoreError, match='refusing to overwrite'):
        store.publish_data(name, str(src))
    assert sorted(os.listdir(tmp_path / 'store' / 'v2')) == [NAME, NAME + '.meta.json']
    out = tmp_path / 'out.db'
    store.fetch(final, str(out))
    assert out.read_bytes() == DATA
    store.delete(final)
    assert store.list() == []


@pytest.mark.parametrize('url, message', [
    ('relative/dir', 'neither an absolute path nor a URL'),
    ('gs://bucket/x', "unsupported scheme 'gs'"),
    ('file://otherhost/x', "names host 'otherhost'"),
    ('', 'no snapshot store given'),
    ('s3://', 'not an S3 store URL'),
], ids=['relative', 'gcs', 'remote-file', 'empty', 's3-no-bucket'])
def test_bad_store_urls(url, message):
    with pytest.raises(StoreError, match=message):
        open_store(url)


def test_store_root_that_is_a_file(tmp_path):
    f = tmp_path / 'file'
    f.write_bytes(b'')
    with pytest.raises(StoreError, match='not a directory'):
        LocalStore(str(f)).list()
