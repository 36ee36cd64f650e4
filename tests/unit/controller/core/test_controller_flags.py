"""core/flags.py: one table declares a flag, its environment variable, kind and default; a bad value, typed or from
the environment, stops the program naming the flag (and the variable) instead of a bare ValueError."""

from __future__ import annotations

import argparse

import pytest

from steward_controller.core import flags, settings
from steward_controller.core.flags import Flag, FlagError

TABLE = (
    Flag('wait', 'duration', 90.0, 'how long'),
    Flag('count', 'int', 3, 'how many', dest='loop_count'),
    Flag('rate', 'float', 2.5, 'how fast', env='OTHER_RATE'),
    Flag('enabled', 'bool', True, 'on or off', off='--no-enabled'),
    Flag('opt-in', 'bool', False, 'opt in'),
    Flag('mode', 'switch', 'inherit', 'tri-state'),
    Flag('colour', flags.choice('red', 'blue'), 'red', 'one of two'),
)


def parse(argv, table=TABLE):
    parser = argparse.ArgumentParser()
    flags.add(parser, table)
    return flags.values(parser.parse_args(argv), table), parser


def test_defaults_environment_and_command_line(monkeypatch):
    value, parser = parse([])
    assert value == {'wait': 90.0, 'loop_count': 3, 'rate': 2.5, 'enabled': True, 'opt_in': False, 'mode': None,
                     'colour': 'red'}
    assert flags.variables(parser) == ('OTHER_RATE', 'STEWARD_COLOUR', 'STEWARD_COUNT', 'STEWARD_ENABLED',
                                       'STEWARD_MODE', 'STEWARD_OPT_IN', 'STEWARD_WAIT')
    assert '(env STEWARD_WAIT; default 1m30s)' in parser.format_help()
    for name, text in (('STEWARD_WAIT', '2m'), ('STEWARD_COUNT', '7'), ('OTHER_RATE', '0.5'), ('STEWARD_ENABLED', 'off'),
                       ('STEWARD_OPT_IN', 'Yes'), ('STEWARD_MODE', 'false'), ('STEWARD_COLOUR', 'blue')):
        monkeypatch.setenv(name, text)
    value, _unused = parse([])
    assert value == {'wait': 120.0, 'loop_count': 7, 'rate': 0.5, 'enabled': False, 'opt_in': True, 'mode': False,
                     'colour': 'blue'}
    value, _unused = parse(['--wait', '5s', '--count', '1', '--no-opt-in'])
    assert (value['wait'], value['loop_count'], value['opt_in']) == (5.0, 1, False)
    value, _unused = parse(['--no-enabled', '--opt-in', '--mode', 'true'])
    assert (value['enabled'], value['opt_in'], value['mode']) == (False, True, True)


@pytest.mark.parametrize('name, text, flag, words', [
    ('STEWARD_WAIT', 'soon', '--wait', "from environment variable STEWARD_WAIT"),
    ('STEWARD_COUNT', '2.5', '--count', "expected a whole number, got '2.5' (from environment variable STEWARD_COUNT)"),
    ('OTHER_RATE', 'fast', '--rate', "expected a number, got 'fast' (from environment variable OTHER_RATE)"),
    ('OTHER_RATE', 'nan', '--rate', 'must be a finite number'),
    ('STEWARD_ENABLED', 'maybe', '--no-enabled', "expected true or false, got 'maybe' (from environment variable "
                                                 "STEWARD_ENABLED)"),
    ('STEWARD_MODE', 'yes', '--mode', "expected one of inherit, true, false, got 'yes'"),
    ('STEWARD_COLOUR', 'green', '--colour', "must be one of 'red', 'blue', got 'green'"),
])
def test_a_bad_environment_value_names_the_flag_and_the_variable(monkeypatch, name, text, flag, words):
    monkeypatch.setenv(name, text)
    with pytest.raises(FlagError) as raised:
        parse([])
    assert raised.value.field == flag
    assert str(raised.value).startswith(flag + ': ') and words in str(raised.value)


def test_a_bad_command_line_value_names_the_flag_only():
    with pytest.raises(FlagError, match=r"^--count: expected a whole number, got 'x'$"):
        parse(['--count', 'x'])


@pytest.mark.parametrize('name, text, words', [
    ('STEWARD_LEASE_DURATION', 'soon', "--lease-duration: expected a number, got 'soon' (from environment variable "
                                       "STEWARD_LEASE_DURATION)"),
    ('STEWARD_HTTP_PORT', '80a', "--http-port: expected a port number, got '80a' (from environment variable "
                                 "STEWARD_HTTP_PORT)"),
    ('STEWARD_HEALTH_PORT', '70000', '--health-port: must be at most 65535, got 70000'),
    ('STEWARD_LEADER_ELECTION', 'flase', "--no-leader-election: expected true or false, got 'flase'"),
    ('STEWARD_LOG_FORMAT', 'xml', "--log-format: must be one of 'json', 'plain', got 'xml'"),
    ('STEWARD_MAINTENANCE_WORKERS', 'many', "--maintenance-workers: expected a whole number, got 'many' (from "
                                            "environment variable STEWARD_MAINTENANCE_WORKERS)"),
    ('STEWARD_KUBE_API_QPS', 'lots', "--kube-api-qps: expected a number, got 'lots'"),
    ('STEWARD_ANCHOR_INTERVAL', '10x', "--anchor-interval: expected a number, got '10x'"),
    ('STEWARD_ANCHOR_ETCD_PEER_PORT', 'peer', "--anchor-etcd-peer-port: expected a whole number, got 'peer'"),
    ('STEWARD_SAFETY_UP', 'two', "--safety-up: expected a whole number, got 'two'"),
])
def test_every_loop_and_the_runtime_name_a_bad_environment_value(monkeypatch, capsys, name, text, words):
    monkeypatch.setenv(name, text)
    with pytest.raises(SystemExit) as raised:
        settings.parse([])
    assert raised.value.code == 2
    err = capsys.readouterr().err
    assert words in err and 'Traceback' not in err


def test_the_environment_only_changes_defaults(monkeypatch):
    monkeypatch.setenv('STEWARD_LEASE_DURATION', '30')
    monkeypatch.setenv('STEWARD_LEADER_ELECTION', 'false')
    parsed = settings.parse(['--lease-duration', '20'])
    assert parsed.lease_duration == 20.0 and parsed.leader_election is False
    monkeypatch.setenv('STEWARD_ANCHOR_CLEANUP', 'false')
    assert settings.parse([]).options('anchor').cleanup is False


def test_environment_variables_lists_every_loop_and_the_runtime():
    names = settings.environment_variables()
    assert {'STEWARD_HTTP_PORT', 'STEWARD_CONTROLLERS', 'STEWARD_WATCH_NAMESPACES', 'STEWARD_NODE_NAME',
            'STEWARD_PROVISIONING_API_USERS', 'STEWARD_MACHINE_SYNC_PERIOD', 'STEWARD_KUBE_API_BURST', 'KUBECONFIG',
            'STEWARD_MAINTENANCE_CONFIG', 'STEWARD_WEEDER_CONFIG'} <= set(names)
