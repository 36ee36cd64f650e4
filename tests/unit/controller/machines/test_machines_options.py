"""The machines loop's Secret opt-in switch: its own value when given, else the controller-wide --secret-opt-in."""

import argparse
import types

import pytest

from steward_controller.machines import add_arguments, options
from steward_controller.machines.controller import machine_secret_opt_in


def parsed(*argv):
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return options(parser.parse_args(list(argv)))


@pytest.mark.parametrize('argv, controller_wide, expected', [
    ((), True, True), ((), False, False),
    (('--machine-secret-opt-in', 'false'), True, False),
    (('--machine-secret-opt-in', 'true'), False, True),
    (('--machine-secret-opt-in', 'inherit'), False, False),
])
def test_the_machines_switch_or_the_controller_wide_one(argv, controller_wide, expected):
    settings = types.SimpleNamespace(secret_opt_in=controller_wide)
    assert machine_secret_opt_in(parsed(*argv), settings) is expected


def test_a_wrong_switch_value_names_the_flag():
    with pytest.raises(ValueError, match='--machine-secret-opt-in.*inherit'):
        parsed('--machine-secret-opt-in', 'yes-please')
