"""common/yaml_text.load_yaml: the one YAML reader of the engine (watchdog configs, druid task configs and
ConfigMaps, static-pod manifests)."""

from __future__ import annotations

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput
from ansible_collections.steward.cluster.plugins.module_utils.common.yaml_text import load_yaml

LAUGHS = 'a: &a [x, x, x, x, x, x, x, x, x, x]\n' + ''.join(
    '%s: &%s [%s]\n' % (chr(98 + i), chr(98 + i), ', '.join(['*' + chr(97 + i)] * 10)) for i in range(6))


def test_text_and_bytes_are_parsed_and_parsed_data_is_kept():
    assert load_yaml('a: [1, 2]\n', 'config') == {'a': [1, 2]}
    assert load_yaml(b'image: etcd:3.5\n', 'manifest') == {'image': 'etcd:3.5'}
    parsed = {'already': 'parsed'}
    assert load_yaml(parsed, 'config') is parsed
    assert load_yaml('', 'config') is None


def test_a_syntax_error_names_the_field_and_the_line():
    with pytest.raises(InvalidInput) as bad:
        load_yaml('a: 1\nb: [2\n', 'spec.config')
    assert (bad.value.field, bad.value.rule) == ('spec.config', 'yaml')
    assert 'is not valid YAML at line' in str(bad.value)


def test_a_billion_laughs_document_is_refused():
    with pytest.raises(InvalidInput) as bad:
        load_yaml(LAUGHS, 'data.etcd.conf.yaml')
    assert (bad.value.field, bad.value.rule) == ('data.etcd.conf.yaml', 'max-size')
