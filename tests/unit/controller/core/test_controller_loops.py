"""--controllers: which loops a process runs, and the flags each loop brings."""

import pytest

from steward_controller.core import settings
from steward_controller.core.loops import Loop, LoopSelectionError, all_loops, select

LOOPS = (Loop('a', 'first', register=lambda r, rt: None), Loop('b-c', 'second', register=lambda r, rt: None),
         Loop('d', 'third', register=lambda r, rt: None))


@pytest.mark.parametrize('spec, expected', [
    ('all', ('a', 'b-c', 'd')),
    ('', ('a', 'b-c', 'd')),
    ('d,a', ('a', 'd')),           # registration order, not the order given
    (' b-c , d ', ('b-c', 'd')),
    ('a,a', ('a',)),
])
def test_select(spec, expected):
    assert select(spec, LOOPS) == expected


@pytest.mark.parametrize('spec, message', [
    ('x', "unknown loop 'x'; known loops: a, b-c, d (or all)"),
    ('a,all', 'cannot be combined'),
    (',', 'is empty'),
])
def test_select_refuses(spec, message):
    with pytest.raises(LoopSelectionError, match=message.replace('(', r'\(').replace(')', r'\)')):
        select(spec, LOOPS)


def test_every_loop_is_known_once_and_selected_by_default():
    names = [loop.name for loop in all_loops()]
    assert {'etcd-backup', 'sabakan', 'repair', 'maintenance'} <= set(names)
    parsed = settings.parse([])
    assert parsed.controllers == tuple(names)
    assert all(parsed.enabled(name) for name in names)


def test_controllers_flag_and_environment(monkeypatch):
    assert settings.parse(['--controllers', 'maintenance']).controllers == ('maintenance',)
    monkeypatch.setenv('STEWARD_CONTROLLERS', 'sabakan,repair')
    parsed = settings.parse([])
    assert parsed.controllers == ('sabakan', 'repair') and not parsed.enabled('etcd-backup')
    with pytest.raises(SystemExit):
        settings.parse(['--controllers', 'nope'])


def test_loop_options_are_parsed_even_when_the_loop_is_not_selected():
    parsed = settings.parse(['--controllers', 'etcd-backup', '--maintenance-workers', '2'])
    assert parsed.options('maintenance').workers == 2 and not parsed.enabled('maintenance')


def test_secret_opt_in_is_on_by_default_and_can_be_turned_off(monkeypatch):
    monkeypatch.delenv('STEWARD_SECRET_OPT_IN', raising=False)
    assert settings.parse([]).secret_opt_in is True
    assert settings.parse(['--no-secret-opt-in']).secret_opt_in is False
    monkeypatch.setenv('STEWARD_SECRET_OPT_IN', 'false')
    assert settings.parse([]).secret_opt_in is False
    assert settings.parse(['--secret-opt-in']).secret_opt_in is True
