"""An etcd member's config, directories and restart fingerprint in one step: written only when they change,
the same plan in check mode, and a change of bootstrap-only keys never asks for a restart."""

from __future__ import annotations

import os
import stat

import pytest
import yaml

from ansible_collections.steward.cluster.plugins.module_utils.etcd.member.config_file import (
    ConfigFileError,
    apply_config,
)

CONFIG = {'name': 'etcd1', 'data-dir': '/var/lib/etcd', 'initial-cluster': 'etcd1=http://10.0.0.1:2380',
          'heartbeat-interval': 100, 'force-new-cluster': False, 'log-outputs': ['stderr'],
          'client-transport-security': {}}


def run(tmp_path, config=None, fingerprint='abc', check_mode=False):
    return apply_config(path=str(tmp_path / 'conf' / 'etcd.conf.yml'), config=config or CONFIG, mode=0o640,
                        directories=[{'path': str(tmp_path / 'data'), 'mode': 0o700},
                                     {'path': str(tmp_path / 'conf'), 'mode': 0o755}],
                        fingerprint_path=str(tmp_path / 'conf' / 'fp'), fingerprint=fingerprint, check_mode=check_mode)


def mode(path):
    return stat.S_IMODE(os.stat(str(path)).st_mode)


def test_first_write_then_nothing_to_do(tmp_path):
    planned = run(tmp_path, check_mode=True)
    assert planned['changed'] and planned['fingerprint_changed'] and not os.path.exists(str(tmp_path / 'conf'))
    done = run(tmp_path)
    assert done['actions'] == planned['actions'] and done['config_changed']
    text = (tmp_path / 'conf' / 'etcd.conf.yml').read_text()
    assert text.startswith('# Ansible managed') and yaml.safe_load(text) == CONFIG
    assert list(yaml.safe_load(text)) == list(CONFIG), 'keys keep their order'
    assert mode(tmp_path / 'data') == 0o700 and mode(tmp_path / 'conf' / 'etcd.conf.yml') == 0o640
    again = run(tmp_path)
    assert not again['changed'] and again['actions'] == []


def test_bootstrap_keys_change_the_file_not_the_fingerprint(tmp_path):
    run(tmp_path)
    result = run(tmp_path, config=dict(CONFIG, **{'initial-cluster': 'etcd1=http://10.0.0.1:2380,etcd2=x'}))
    assert result['config_changed'] and not result['fingerprint_changed']
    assert run(tmp_path, fingerprint='def')['fingerprint_changed']


def test_a_wrong_directory_mode_is_fixed_and_a_file_in_the_way_refused(tmp_path):
    run(tmp_path)
    os.chmod(str(tmp_path / 'data'), 0o755)
    assert run(tmp_path)['actions'] == ['set mode 0700 on %s' % (tmp_path / 'data')]
    assert mode(tmp_path / 'data') == 0o700
    (tmp_path / 'data').rmdir()
    (tmp_path / 'data').write_text('not a directory')
    with pytest.raises(ConfigFileError, match='cannot prepare directory'):
        run(tmp_path)


def test_the_yaml_reads_back_as_the_config_whatever_the_strings_look_like():
    """Written without PyYAML (the module runs on etcd hosts): strings YAML 1.1 would read as something else
    (yes, on, 123, 1.5, '', 'a: b', a comma in a list) are quoted; URLs and paths stay plain."""
    import yaml
    from ansible_collections.steward.cluster.plugins.module_utils.etcd.member.config_file import render
    config = {'initial-cluster': 'a=http://10.0.0.1:2380,b=http://10.0.0.2:2380', 'data-dir': '/var/lib/etcd',
              'odd': ['yes', 'on', '123', '1.5', '', 'a: b', 'x,y', '#c', '-d'], 'n': 0, 'f': False,
              'nested': {'deep': {'k': 'v'}, 'empty': {}}, 'ratio': 0.5, 'none': None}
    text = render(config, '/etc/etcd/etcd.conf.yml')
    assert yaml.safe_load(text) == config
    assert 'initial-cluster: a=http://10.0.0.1:2380,b=http://10.0.0.2:2380\n' in text
