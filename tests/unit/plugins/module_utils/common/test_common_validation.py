"""The validation home: each check returns the clean value or names field, rule and value."""

import math
import os

import pytest

from ansible_collections.steward.cluster.plugins.module_utils.common import durations, names, validate
from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput, input_errors_as


def rule_of(fn, *args, **kwargs):
    with pytest.raises(InvalidInput) as info:
        fn(*args, **kwargs)
    return info.value.rule


@pytest.mark.parametrize('value, expected', [
    ('0', 0.0), (0, 0.0), ('90s', 90.0), ('1m30s', 90.0), ('1.5h', 5400.0), ('300ms', 0.3), ('.5s', 0.5),
    ('1h2m3s4ms', 3723.004), (2.5, 2.5), ('+10s', 10.0), ('1us', 1e-6), ('2µs', 2e-6),
])
def test_durations_read_go_syntax_and_seconds(value, expected):
    assert durations.parse_duration(value, 'f') == pytest.approx(expected)


@pytest.mark.parametrize('value, rule', [
    ('', 'duration'), ('10', 'duration'), ('10 s', 'duration'), ('1d', 'duration'), (None, 'duration'),
    (True, 'duration'), ([], 'duration'), (math.inf, 'duration'), (math.nan, 'duration'), ('-5s', 'non-negative'),
    (-1, 'non-negative'), ('s', 'duration'), ('1.s5', 'duration'),
])
def test_durations_refuse(value, rule):
    assert rule_of(durations.parse_duration, value, 'spec.interval') == rule


def test_duration_error_names_the_field():
    with pytest.raises(InvalidInput, match=r"^spec.timeout: '1d' is not a duration"):
        durations.parse_duration('1d', 'spec.timeout')
    assert durations.parse_duration('-5s', 'x', allow_negative=True) == -5.0


def test_metav1_duration_takes_strings_only():
    """metav1.Duration as Go decodes it: `10s` is 10 seconds, a bare 10 is refused (Go rejects it too)."""
    assert durations.metav1_duration('1m30s', 'probeInterval') == 90.0
    assert rule_of(durations.metav1_duration, 10, 'probeInterval') == 'duration'
    assert rule_of(durations.metav1_duration, '-1s', 'probeInterval') == 'non-negative'
    with pytest.raises(InvalidInput, match=r'^probeInterval: expected a duration string'):
        durations.metav1_duration(10, 'probeInterval')


def test_positive_duration_refuses_zero_with_the_field_and_value():
    """The one 'longer than 0' check (sabakan's interval, machines' timeouts, the prober's graces)."""
    assert durations.positive_duration('90s', 'spec.interval') == 90.0
    assert durations.positive_duration(0.5, 'x') == 0.5
    with pytest.raises(InvalidInput, match=r"^spec.interval: must be longer than 0s, got '0s'$") as info:
        durations.positive_duration('0s', 'spec.interval')
    assert (info.value.field, info.value.rule, info.value.value) == ('spec.interval', 'positive', '0s')
    assert rule_of(durations.positive_duration, 0, 'x') == 'positive'
    assert rule_of(durations.positive_duration, '-1s', 'x') == 'non-negative'
    assert rule_of(durations.positive_duration, '1d', 'x') == 'duration'
    assert durations.positive_duration('1m', 'grace', metav1=True) == 60.0
    assert rule_of(durations.positive_duration, 60, 'grace', metav1=True) == 'duration'   # metav1: strings only
    assert rule_of(durations.positive_duration, '0s', 'grace', metav1=True) == 'positive'


@pytest.mark.parametrize('seconds, text', [
    (0, '0s'), (90, '1m30s'), (3600, '1h0m0s'), (1.5, '1.5s'), (-2, '-2s'), (0.25, '250ms'), (0.0003, '300µs'),
    (1e-8, '10ns'), (0.0015, '1.5ms'), (30, '30s'), (300, '5m0s'), (5400, '1h30m0s'), (3600.5, '1h0m0.5s'),
])
def test_format_duration_is_go_string(seconds, text):
    assert durations.format_duration(seconds) == text


@pytest.mark.parametrize('value', [0, -1, math.inf, math.nan, 1e999, True, 'abc', None, [], 8 * 24 * 3600])
def test_timeout_refuses(value):
    with pytest.raises(InvalidInput):
        validate.timeout(value, 'timeout')


def test_timeout_and_numbers_accept():
    assert validate.timeout(0.5, 't') == 0.5 and validate.timeout('3', 't') == 3.0
    assert validate.number(0, 'n', minimum=0) == 0.0
    assert validate.integer(3.0, 'i') == 3 and rule_of(validate.integer, '3', 'i') == 'integer'
    assert rule_of(validate.integer, 2.5, 'i') == 'integer' and rule_of(validate.integer, 0, 'i', minimum=1) == 'minimum'


@pytest.mark.parametrize('value, rule', [('', 'non-empty'), ('a\nb', 'one-line'), ('a\x00', 'one-line'), (3, 'string'),
                                         ('x' * 5000, 'max-length')])
def test_text_refuses(value, rule):
    assert rule_of(validate.text, value, 'name') == rule


@pytest.mark.parametrize('value', ['a/b', '..', '.', 'x/../../escaped', 'a\nb'])
def test_path_component_refuses(value):
    with pytest.raises(InvalidInput):
        validate.path_component(value, 'reason')


def test_paths(tmp_path):
    f = tmp_path / 'f'
    f.write_text('x')
    assert validate.existing_file(str(f), 'ca_cert') == str(f)
    assert rule_of(validate.existing_file, str(tmp_path), 'ca_cert') == 'file'
    assert rule_of(validate.existing_file, str(tmp_path / 'missing'), 'ca_cert') == 'exists'
    assert validate.existing_dir(str(tmp_path), 'd') == str(tmp_path)
    assert rule_of(validate.existing_dir, str(f), 'd') == 'directory'
    assert rule_of(validate.absolute_path, 'rel/x', 'p') == 'absolute-path'
    assert rule_of(validate.absolute_path, '/a/../b', 'p') == 'absolute-path'
    assert validate.absolute_path('/a//b/', 'p') == '/a/b'


def test_safe_target_dir(tmp_path):
    assert rule_of(validate.safe_target_dir, '/', 'data_dir') == 'system-dir'
    assert rule_of(validate.safe_target_dir, '/etc', 'data_dir') == 'system-dir'
    f = tmp_path / 'file'
    f.write_text('x')
    assert rule_of(validate.safe_target_dir, str(f), 'data_dir') == 'directory'
    link = tmp_path / 'link'
    os.symlink(str(tmp_path), str(link))
    assert rule_of(validate.safe_target_dir, str(link), 'data_dir') == 'not-symlink'
    assert validate.safe_target_dir(str(tmp_path / 'new'), 'data_dir') == str(tmp_path / 'new')


@pytest.mark.parametrize('value, mode', [('0600', 0o600), ('600', 0o600), ('0o750', 0o750), (420, 0o644), (0o700, 0o700),
                                         ('04755', 0o4755)])
def test_file_mode_accepts(value, mode):
    assert validate.file_mode(value, 'mode') == mode


@pytest.mark.parametrize('value', [644, 600, 'rw', '0999', -1, True, None, '', 1.5])
def test_file_mode_refuses(value):
    assert rule_of(validate.file_mode, value, 'mode') == 'file-mode'


@pytest.mark.parametrize('check, good, bad', [
    (names.is_label_name, ['a', 'A_b.c-9', 'x' * 63], ['', '-a', 'a-', 'x' * 64, 'a/b', 'a b', None]),
    (names.is_qualified_name, ['node', 'cloud.sap/maintenance-state', 'k8s.io/' + 'a' * 63],
     ['', '/a', 'a/', 'Bad_/x', 'a/b/c', 'a' * 64, 7]),
    (names.is_label_value, ['', 'v1', 'a.b_c-d'], ['-x', 'x' * 64, 'a b', None]),
    (names.is_configmap_key, ['maintenance.yaml', 'a_b-c.d', 'x' * 253], ['', 'a/b', 'x' * 254, 'a b', None]),
])
def test_name_predicates(check, good, bad):
    assert all(check(v) for v in good), [v for v in good if not check(v)]
    assert not any(check(v) for v in bad), [v for v in bad if check(v)]


def test_names():
    assert names.dns_subdomain('a-b.c', 'n') == 'a-b.c' and names.dns_label('abc', 'n') == 'abc'
    for bad in ('', 'A', '-a', 'a_b', 'a' * 254, None):
        with pytest.raises(InvalidInput):
            names.dns_subdomain(bad, 'metadata.name')
    assert rule_of(names.dns_label, 'a.b', 'n') == 'dns-label'
    assert names.qualified_name('cloud.sap/maintenance-state', 'k') and names.qualified_name('node', 'k')
    for bad in ('a/', '/a', 'Bad_/x', 'x' * 64, 'a b'):
        with pytest.raises(InvalidInput):
            names.qualified_name(bad, 'k')
    assert names.label_value('', 'v') == '' and rule_of(names.label_value, '-x', 'v') == 'label-value'


def test_invalid_input_carries_and_relocates():
    err = InvalidInput('replicas', 'minimum', 'must be at least 0', -1)
    assert str(err) == 'replicas: must be at least 0' and err.value == -1
    moved = err.at('spec')
    assert moved.field == 'spec.replicas' and str(moved) == 'spec.replicas: must be at least 0'
    assert InvalidInput('password', 'x', 'bad', 'hunter2', secret=True).value is None


def test_an_error_inside_a_file_keeps_its_text():
    err = InvalidInput('template.nodes', 'minimum', 'at least two nodes', 1).inside('template file t.yml')
    assert (err.field, err.rule, err.value) == ('template file t.yml', 'minimum', 1)
    assert str(err) == 'template file t.yml: template.nodes: at least two nodes'


def test_an_area_entry_point_raises_its_own_class():
    class AreaError(Exception):
        pass

    class ConfigError(AreaError, InvalidInput):
        pass

    @input_errors_as(ConfigError)
    def load(value):
        if value == 'own':
            raise ConfigError('x', 'own', 'the area said no')
        return durations.parse_duration(value, 'spec.interval')

    assert load('5s') == 5.0 and load.__name__ == 'load'
    with pytest.raises(ConfigError) as info:
        load('soon')
    assert (info.value.field, info.value.rule, info.value.value) == ('spec.interval', 'duration', 'soon')
    with pytest.raises(ConfigError, match='^x: the area said no$'):
        load('own')


def test_relocating_keeps_the_area_class():
    class AreaError(Exception):
        pass

    class SpecError(AreaError, InvalidInput):
        pass

    moved = SpecError('interval', 'duration', 'not a duration', 'x').at('spec')
    assert isinstance(moved, SpecError) and isinstance(moved, AreaError)
    assert (moved.field, moved.rule, moved.value, str(moved)) == ('spec.interval', 'duration', 'x', 'spec.interval: not a duration')


# --- what the outside sweep found (issue 19 §6) ----------------------------------------------------------------
def test_regular_file_or_absent_refuses_what_would_block_or_is_no_file(tmp_path):
    os.mkfifo(str(tmp_path / 'fifo'))
    (tmp_path / 'plain').write_text('x')
    assert validate.regular_file_or_absent(str(tmp_path / 'plain'), 'pid_file') == str(tmp_path / 'plain')
    assert validate.regular_file_or_absent(str(tmp_path / 'not-yet'), 'pid_file') == str(tmp_path / 'not-yet')
    for path, problem in ((tmp_path / 'fifo', 'not a regular file'), (tmp_path, 'a directory')):
        with pytest.raises(InvalidInput, match=problem) as caught:
            validate.regular_file_or_absent(str(path), 'pid_file')
        assert (caught.value.field, caught.value.rule) == ('pid_file', 'file')
    with pytest.raises(InvalidInput, match='absolute'):
        validate.regular_file_or_absent('relative/pid', 'pid_file')


def test_document_size_stops_a_billion_laughs_cheaply():
    import yaml
    bomb = yaml.safe_load('a: &a [1,2,3,4,5,6,7,8,9,10]\n' + ''.join(
        '%s: &%s [%s]\n' % (b, b, ','.join(['*%s' % a] * 10)) for a, b in zip('abcdefgh', 'bcdefghi')))
    with pytest.raises(InvalidInput) as caught:
        validate.document_size(bomb, 'config_file')
    assert (caught.value.field, caught.value.rule) == ('config_file', 'max-size')
    fine = {'machines': [{'spec': {'serial': str(n)}} for n in range(5000)]}
    assert validate.document_size(fine, 'machines_file') is fine


@pytest.mark.parametrize('value', ['0.0.0.0', '::', '224.0.0.1', 'ff02::1'])
def test_ip_address_is_a_host_address(value):
    with pytest.raises(InvalidInput, match='not the address of a host'):
        validate.ip_address(value, 'address')
    assert validate.ip_address('fd00:0::1', 'address') == 'fd00::1'


def test_urls_carry_no_credentials_or_fragment():
    with pytest.raises(InvalidInput) as caught:
        validate.endpoint_url('http://user:secret@sabakan:10080', 'url')
    assert 'secret' not in str(caught.value) and caught.value.value is None
    with pytest.raises(InvalidInput, match='fragment'):
        validate.endpoint_url('http://sabakan:10080/graphql#x', 'url')


@pytest.mark.parametrize('value', ['false', 'true', 0, 1, None, []])
def test_boolean_is_a_yaml_boolean(value):
    with pytest.raises(InvalidInput, match='expected true or false'):
        validate.boolean(value, 'spec.suspend')
    assert validate.boolean(False, 'spec.suspend') is False
