# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where node_maintenance_info reads its config (maintenance/kube_reads.py and config.load_config_for_viewing):
the config_source option, the text out of a ConfigMap or Secret, a file, and `${VAR}`s only the controller has."""

from __future__ import annotations

import base64
import os

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.config import unset_variables
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.config_source import ConfigSource
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.errors import ConfigError, MaintenanceError, OptionError
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.kube_reads import (
    config_text, parse_config_source, read_config)

from support.maintenance import FLATCAR


@pytest.mark.parametrize('text, source', [
    ('configmap/steward-system/maintenance', ConfigSource('configmap', 'steward-system', 'maintenance', 'maintenance.yaml')),
    ('secret/ns/mc/config.yaml', ConfigSource('secret', 'ns', 'mc', 'config.yaml')),
    ('ConfigMap/ns/mc', ConfigSource('configmap', 'ns', 'mc', 'maintenance.yaml')),
])
def test_parse_config_source(text, source):
    assert parse_config_source(text) == source


@pytest.mark.parametrize('text', ['configmap/ns', 'deployment/ns/x', 'configmap/ns//key', 'secret/a/b/c/d', ''])
def test_parse_config_source_errors(text):
    with pytest.raises(OptionError, match="^config_source: ('|expected)"):
        parse_config_source(text)


def test_config_text_from_configmap_and_secret():
    cm = parse_config_source('configmap/ns/mc')
    assert config_text({'data': {'maintenance.yaml': 'x: 1'}}, cm) == 'x: 1'
    assert config_text({'binaryData': {'maintenance.yaml': base64.b64encode(b'y: 2').decode()}}, cm) == 'y: 2'
    secret = parse_config_source('secret/ns/mc/m.yaml')
    assert config_text({'data': {'m.yaml': base64.b64encode('z: ü'.encode()).decode()}}, secret) == 'z: ü'
    with pytest.raises(OptionError, match=r'secret/ns/mc/m.yaml: Secret ns/mc has no key "m.yaml" \(keys: other\)'):
        config_text({'data': {'other': ''}}, secret)
    with pytest.raises(OptionError, match='not base64'):
        config_text({'data': {'m.yaml': '***'}}, secret)


def test_read_config_sources(tmp_path, monkeypatch):
    assert read_config(None, None, None, None) == (None, '')
    path = tmp_path / 'maintenance.yaml'
    path.write_text(FLATCAR)
    config, where = read_config(None, str(path), None, None)
    assert where == str(path) and 'flatcar' in config.profiles
    # A relative path: the message shows at most 80 characters of a value, and tmp_path's length depends on the
    # run (an xdist worker's is longer), which cut the name off.
    monkeypatch.chdir(tmp_path)
    with pytest.raises(OptionError, match="^config_file: 'missing.yaml' does not exist") as info:
        read_config(None, 'missing.yaml', None, None)
    assert info.value.field == 'config_file'
    os.mkfifo(str(tmp_path / 'fifo'))   # opening it would block: refused before
    with pytest.raises(OptionError, match='is not a regular file') as info:
        read_config(None, str(tmp_path / 'fifo'), None, None)
    (tmp_path / 'bad.yaml').write_text('intervals: [unclosed\n')
    with pytest.raises(ConfigError, match='^config_file: .*bad.yaml: ') as info:
        read_config(None, str(tmp_path / 'bad.yaml'), None, None)
    assert info.value.field == 'config_file'
    with pytest.raises(ConfigError, match=r'^config: intervals.requeue: required'):
        read_config({'profiles': []}, None, None, None)

    class Client:
        def get(self, path):
            assert path == '/api/v1/namespaces/steward-system/configmaps/maintenance'
            return {'data': {'maintenance.yaml': 'intervals: {requeue: 1s}\nprofiles: [{name: p, operational: {transitions: '
                                                 '[{check: nope, next: in-maintenance}]}}]'}}
    with pytest.raises(ConfigError, match=r'^config_source: configmap/steward-system/maintenance/maintenance.yaml: '
                                          r'profiles\[0\].operational.transitions\[0\].check: unknown instance "nope"'
                       ) as info:
        read_config(None, None, 'configmap/steward-system/maintenance', Client())
    assert info.value.field == 'config_source'


def test_option_errors_are_typed():
    with pytest.raises(OptionError) as info:
        parse_config_source('deployment/ns/x')
    assert isinstance(info.value, MaintenanceError) and isinstance(info.value, InvalidInput)
    assert (info.value.field, info.value.rule) == ('config_source', 'one-of')


def test_unset_variables():
    text = 'a: ${HOOK}\nb: ${WITH:default}\nc: ${STRICT:?say it}\nd: $${LITERAL}\ne: ${SET}\nf: ${HOOK}'
    assert unset_variables(text, {'SET': '1'}) == ['HOOK', 'STRICT']
    assert unset_variables({'x': [{'y': '${A}'}, '${B:}'], 'z': b'${C}'}, {}) == ['A', 'C']


def test_config_with_variables_only_the_controller_has(tmp_path, monkeypatch):
    """The controller gets SLACK_HOOK from a Secret; the info view does not need it and says so."""
    monkeypatch.delenv('SLACK_HOOK', raising=False)
    path = tmp_path / 'maintenance.yaml'
    path.write_text(FLATCAR.replace('https://hooks.example/T000/B000/XXXX', '${SLACK_HOOK}').replace('60s', '${REQUEUE:60s}'))
    config, where = read_config(None, str(path), None, None)
    assert config.requeue == 60.0 and config.instances['notify']['approval_required'].plugin.hook == '${SLACK_HOOK}'
    assert config.warnings[-1] == ('%s: environment variable(s) SLACK_HOOK not set where the module runs: left as ${...} '
                                   '(only the controller needs their values)' % where)
    monkeypatch.setenv('SLACK_HOOK', 'https://hooks.example/real')
    config, where = read_config(None, str(path), None, None)
    assert config.instances['notify']['approval_required'].plugin.hook == 'https://hooks.example/real' and config.warnings == ()
    with pytest.raises(ConfigError, match=r"intervals.requeue: .*'\$\{NOPE\}'"):
        read_config({'intervals': {'requeue': '${NOPE}'}}, None, None, None)
