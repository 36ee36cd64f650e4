"""common/files.write_atomic: the old or the new content, never half; private from the first byte; and the
directory fsynced after the rename, so the new name survives a power cut (issue 23 §4). open_private and
makedirs_private (moved here from etcd with their tests): backup files 0600 from the first byte, store directories
we create 0700, existing ones left alone."""

from __future__ import annotations

import os
import stat

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.common import files
from ansible_collections.steward.cluster.plugins.module_utils.common.files import makedirs_private, open_private, write_atomic


def mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture
def umask():
    old = os.umask(0o022)
    yield os.umask
    os.umask(old)


def test_writes_bytes_and_text_at_the_mode_whatever_the_umask(tmp_path, umask):
    umask(0o277)   # would take the owner's write bit and every other bit
    write_atomic(str(tmp_path / 'a'), b'\x00bytes', 0o640)
    write_atomic(str(tmp_path / 'b'), 'text é')
    assert (tmp_path / 'a').read_bytes() == b'\x00bytes' and mode(tmp_path / 'a') == 0o640
    assert (tmp_path / 'b').read_text('utf-8') == 'text é' and mode(tmp_path / 'b') == 0o600
    assert sorted(os.listdir(tmp_path)) == ['a', 'b']   # no temporary file left


def test_replaces_an_existing_file_and_its_mode(tmp_path):
    target = tmp_path / 'config'
    target.write_text('old')
    os.chmod(target, 0o644)
    write_atomic(str(target), 'new', 0o600)
    assert target.read_text() == 'new' and mode(target) == 0o600


def test_temporary_file_is_private_before_the_first_byte(tmp_path, monkeypatch, umask):
    """The temporary file has its final mode when the first byte is written (no window in which another user
    could open a key), and is unique (O_EXCL), not a fixed '.tmp' name."""
    umask(0o000)
    seen = []
    real_write = os.write

    def spy(fd, data):
        seen.append((stat.S_IMODE(os.fstat(fd).st_mode), os.readlink('/proc/self/fd/%d' % fd)))
        return real_write(fd, data)

    monkeypatch.setattr(os, 'write', spy)
    write_atomic(str(tmp_path / 'key'), b'secret', 0o600)
    write_atomic(str(tmp_path / 'key'), b'secret2', 0o600)
    assert [mode_ for mode_, _path in seen] == [0o600, 0o600]
    names = [os.path.basename(path) for _mode, path in seen]
    assert all(n.startswith('.key.tmp-') for n in names) and names[0] != names[1]


def test_fsyncs_the_file_and_then_the_directory_after_the_rename(tmp_path, monkeypatch):
    """The rename is a change to the directory: without the directory's fsync a power cut can lose it."""
    events = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        events.append(('fsync', 'dir' if stat.S_ISDIR(os.fstat(fd).st_mode) else 'file',
                       os.readlink('/proc/self/fd/%d' % fd)))
        return real_fsync(fd)

    def replace(src, dst):
        events.append(('rename', os.path.basename(dst)))
        return real_replace(src, dst)

    monkeypatch.setattr(os, 'fsync', fsync)
    monkeypatch.setattr(os, 'replace', replace)
    write_atomic(str(tmp_path / 'etcd.conf.yml'), 'name: a\n')
    assert [e[:2] for e in events] == [('fsync', 'file'), ('rename', 'etcd.conf.yml'), ('fsync', 'dir')]
    assert events[2][2] == str(tmp_path)


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    target = tmp_path / 'config'
    target.write_text('old')

    def broken(fd):
        raise OSError(28, 'No space left on device')

    monkeypatch.setattr(os, 'fsync', broken)
    with pytest.raises(OSError, match='No space'):
        write_atomic(str(target), 'new')
    assert target.read_text() == 'old' and os.listdir(tmp_path) == ['config']


def test_a_directory_that_cannot_be_fsynced_is_not_an_error(tmp_path, monkeypatch):
    """EINVAL from a directory fsync (some network filesystems): the write still counts."""
    real = os.fsync

    def fsync(fd):
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            raise OSError(22, 'Invalid argument')
        return real(fd)

    monkeypatch.setattr(os, 'fsync', fsync)
    write_atomic(str(tmp_path / 'x'), 'x')
    assert (tmp_path / 'x').read_text() == 'x'


def test_a_planted_symlink_at_a_temporary_name_is_not_followed(tmp_path, monkeypatch):
    victim = tmp_path / 'victim'
    victim.write_text('untouched')
    monkeypatch.setattr(files.uuid, 'uuid4', type('U', (), {'hex': 'f' * 32}))
    os.symlink(str(victim), str(tmp_path / ('.x.tmp-' + 'f' * 12)))
    with pytest.raises(FileExistsError):
        write_atomic(str(tmp_path / 'x'), 'evil')
    assert victim.read_text() == 'untouched' and not (tmp_path / 'x').exists()


@pytest.mark.parametrize('writer', ['etcd_config', 'provisioning', 'sabakan', 'pid_file', 'restore_marker'])
def test_every_writer_fsyncs_the_directory(tmp_path, monkeypatch, writer):
    """The writers that rename into place (etcd config and pid files, the restore marker, node files, sabakan's
    files) all go through write_atomic, so each of them fsyncs the directory after its rename."""
    synced_dirs = []
    real = os.fsync

    def fsync(fd):
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            synced_dirs.append(os.readlink('/proc/self/fd/%d' % fd))
        return real(fd)

    monkeypatch.setattr(os, 'fsync', fsync)
    if writer == 'etcd_config':
        from ansible_collections.steward.cluster.plugins.module_utils.etcd.member.config_file import apply_config
        apply_config(path=str(tmp_path / 'etcd.conf.yml'), config={'name': 'a'}, mode=0o600, directories=[],
                     fingerprint_path=str(tmp_path / 'fp'), fingerprint='abc')
        expected = 2
    elif writer == 'provisioning':
        from ansible_collections.steward.cluster.plugins.module_utils.provisioning.files import Root
        Root(str(tmp_path)).write('/etc/kubernetes/pki/ca.crt', b'cert', 0o644)
        tmp_path = tmp_path / 'etc' / 'kubernetes' / 'pki'
        expected = 1
    elif writer == 'sabakan':
        from ansible_collections.steward.cluster.plugins.module_utils.sabakan.files import write_text_atomic
        write_text_atomic(str(tmp_path / 'machines.yml'), 'x: 1\n')
        expected = 1
    elif writer == 'pid_file':
        from ansible_collections.steward.cluster.plugins.module_utils.etcd.member import process
        process._write_pid_file(str(tmp_path / 'etcd.pid'), os.getpid())  # pylint: disable=protected-access
        assert (tmp_path / 'etcd.pid').read_text().startswith('%d\n' % os.getpid())
        expected = 1
    else:
        from ansible_collections.steward.cluster.plugins.module_utils.etcd.recovery import restore
        restore._write_marker(str(tmp_path / 'member'), {'snapshot': 's'})  # pylint: disable=protected-access
        expected = 1
    assert synced_dirs == [str(tmp_path)] * expected


# --- open_private / makedirs_private ----------------------------------------------------------------
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
