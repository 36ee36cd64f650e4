"""The etcd modules' parameters parsed once (etcd/params.py) and the bad input issue 23 §4 found getting through."""

import os

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.etcd import params
from ansible_collections.steward.cluster.plugins.module_utils.etcd.member import config_file
from ansible_collections.steward.cluster.plugins.module_utils.etcd.member.config_file import (
    ConfigFileError,
    apply_config,
)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.cluster.members import parse_member_id
from ansible_collections.steward.cluster.plugins.module_utils.etcd.member.process import (
    ProcessSpec,
    check_spec,
    ensure_process,
)
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.stores import check_store_params


def config_call(tmp_path, **change):
    call = dict(path=str(tmp_path / 'etcd.yml'), config={'name': 'etcd1'}, mode=0o640, directories=[],
                fingerprint_path=str(tmp_path / 'fp'), fingerprint='abc')
    call.update(change)
    return call


@pytest.mark.parametrize('region', ['us-east-1\x07', '\x1b[31mus', 'us east', 'a' * 64, ''])
def test_s3_region_is_a_region_name(region):
    with pytest.raises(InvalidInput) as err:
        check_store_params({'region': region})
    assert err.value.field == 'region'


def test_store_options_checked_without_a_store():
    assert check_store_params({'region': 'eu-central-1', 'store_timeout': 5}) == 5.0
    with pytest.raises(InvalidInput) as err:
        check_store_params({'store_timeout': 0})
    assert err.value.field == 'store_timeout'
    with pytest.raises(InvalidInput) as err:
        check_store_params({'aws_secret_access_key': 'hush\x07ed'})
    assert err.value.field == 'aws_secret_access_key' and 'hush' not in str(err.value)   # never shown


@pytest.mark.parametrize('text', ['xyz', '0', '-1', '', None])
def test_member_id_rule_lives_once(text):
    with pytest.raises(InvalidInput) as err:
        parse_member_id(text, 'member_id')
    assert (err.value.field, err.value.rule) == ('member_id', 'hex')
    assert parse_member_id('8e9e05c52164694d') == 0x8e9e05c52164694d


@pytest.mark.parametrize('field', ['owner', 'group'])
def test_owner_or_group_with_a_nul_byte_is_bad_input_and_nothing_is_written(tmp_path, field):
    with pytest.raises(InvalidInput) as err:
        apply_config(**config_call(tmp_path, **{field: 'etcd\x00'}))
    assert err.value.field == field and os.listdir(tmp_path) == []


def test_an_unwritable_fingerprint_path_is_refused_before_the_config_is_written(tmp_path):
    (tmp_path / 'plain').write_text('x')
    with pytest.raises(InvalidInput) as err:
        apply_config(**config_call(tmp_path, fingerprint_path=str(tmp_path / 'plain' / 'fp')))
    assert err.value.field == 'fingerprint_path'
    assert sorted(os.listdir(tmp_path)) == ['plain']


def test_a_directory_created_by_the_same_call_may_hold_the_files(tmp_path):
    conf = tmp_path / 'etc' / 'etcd'
    result = apply_config(**config_call(tmp_path, path=str(conf / 'etcd.yml'), fingerprint_path=str(conf / 'fp'),
                                        directories=[{'path': str(conf), 'mode': 0o700}]))
    assert result['changed'] and not result['config_existed'] and (conf / 'fp').read_text() == 'abc\n'


@pytest.mark.parametrize('existed', [True, False])
def test_a_failed_fingerprint_write_leaves_the_config_as_it_was(tmp_path, monkeypatch, existed):
    path = tmp_path / 'etcd.yml'
    if existed:
        path.write_text('old: config\n')
        os.chmod(str(path), 0o600)
    real = config_file.write_atomic

    def failing(target, content, mode):
        if target.endswith('fp'):
            raise OSError(28, 'No space left on device')
        real(target, content, mode)
    monkeypatch.setattr(config_file, 'write_atomic', failing)
    with pytest.raises(ConfigFileError):
        apply_config(**config_call(tmp_path))
    if existed:
        assert path.read_text() == 'old: config\n' and os.stat(str(path)).st_mode & 0o777 == 0o600
    else:
        assert not path.exists()
    assert not (tmp_path / 'fp').exists()


def test_check_mode_refuses_a_missing_config_file_like_the_real_run(tmp_path):
    binary = tmp_path / 'etcd'
    binary.write_text('#!/bin/sh\n')
    os.chmod(str(binary), 0o755)
    spec = ProcessSpec(pid_file=str(tmp_path / 'etcd.pid'), binary=str(binary), config_file=str(tmp_path / 'no.yml'))
    for check_mode in (True, False):
        with pytest.raises(InvalidInput) as err:
            ensure_process(spec, 'started', check_mode=check_mode)
        assert err.value.field == 'config_file'
    check_spec(spec, 'started', config_written_first=True)   # etcd_recover_member writes it itself: path only


def test_member_facts_refuse_a_data_dir_that_is_a_file(tmp_path):
    (tmp_path / 'data').write_text('x')
    with pytest.raises(InvalidInput) as err:
        params.parse_etcd_member_facts({'name': 'etcd1', 'data_dir': str(tmp_path / 'data'),
                                        'client_url': 'http://127.0.0.1:2379', 'peer_url': 'http://127.0.0.1:2380',
                                        'pid_file': None, 'probe_timeout': 1, 'endpoints': ['127.0.0.1:2379']})
    assert (err.value.field, err.value.rule) == ('data_dir', 'directory')


def test_restore_checks_the_store_options_with_a_snapshot_file(tmp_path):
    snapshot = tmp_path / 'snap.db'
    snapshot.write_bytes(b'x')
    call = {'tmp_dir': None, 'data_dir': str(tmp_path / 'data'), 'name': 'etcd1', 'initial_cluster_token': 't',
            'snapshot': None, 'last_delta': None, 'initial_cluster': 'etcd1=http://127.0.0.1:2380',
            'initial_advertise_peer_urls': ['http://127.0.0.1:2380'], 'snapshot_file': str(snapshot)}
    params.parse_etcd_restore(dict(call, store_timeout=30))
    with pytest.raises(InvalidInput) as err:
        params.parse_etcd_restore(dict(call, store_timeout=0))
    assert err.value.field == 'store_timeout'
