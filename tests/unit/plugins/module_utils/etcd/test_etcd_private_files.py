"""Backup files are private from the first byte; store directories we create are 0700; existing ones are
left alone and reported."""

from __future__ import annotations

import os
import stat

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.private_files import (
    makedirs_private,
    open_private,
    wide_mode_notes,
)


def mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture
def umask():
    """Run with a given umask and restore the old one."""
    old = os.umask(0o022)
    yield os.umask
    os.umask(old)


@pytest.mark.parametrize('mask', [0o022, 0o000, 0o077, 0o277], ids=['022', '000', '077', '277'])
def test_open_private_is_0600_whatever_the_umask(tmp_path, umask, mask):
    umask(mask)
    path = tmp_path / 'snap'
    with open_private(str(path)) as f:
        assert mode(path) == 0o600  # before the first byte
        f.write(b'secret')
    assert mode(path) == 0o600 and path.read_bytes() == b'secret'


def test_open_private_never_opens_an_existing_file(tmp_path):
    path = tmp_path / 'snap'
    path.write_bytes(b'theirs')
    with pytest.raises(FileExistsError):
        open_private(str(path))
    os.symlink(str(tmp_path / 'elsewhere'), str(tmp_path / 'link'))
    with pytest.raises(FileExistsError):
        open_private(str(tmp_path / 'link'))  # a planted symlink is not followed
    assert path.read_bytes() == b'theirs' and not (tmp_path / 'elsewhere').exists()


def test_makedirs_private_creates_0700_and_leaves_existing_dirs(tmp_path, umask):
    umask(0o022)
    existing = tmp_path / 'backups'
    existing.mkdir(mode=0o755)
    target = existing / 'etcd' / 'v2'
    makedirs_private(str(target))
    assert mode(existing) == 0o755  # the operator's, not ours
    assert mode(existing / 'etcd') == 0o700 and mode(target) == 0o700
    makedirs_private(str(target))  # idempotent
    assert mode(target) == 0o700


def test_makedirs_private_refuses_a_file_in_the_way(tmp_path):
    (tmp_path / 'store').write_bytes(b'')
    with pytest.raises(NotADirectoryError, match='is not a directory'):
        makedirs_private(str(tmp_path / 'store' / 'v2'))


def test_wide_mode_notes_name_what_others_may_read(tmp_path):
    private = tmp_path / 'private'
    private.mkdir(mode=0o700)
    shared = tmp_path / 'shared'
    shared.mkdir()
    os.chmod(str(shared), 0o750)
    notes = wide_mode_notes([str(private), str(shared), str(tmp_path / 'missing')])
    assert [(n.path, n.mode, n.expected) for n in notes] == [(str(shared), '0750', '0700')]
    assert 'left as it is' in notes[0].message() and 'chmod 0700' in notes[0].message()
