# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one way a flag is declared: name, environment variable, kind, default, help, in a table.

Every flag has an environment variable of the same meaning (the Deployment sets these): `STEWARD_` + the flag in
upper snake case unless the table names another one. The environment only changes the flag's default; the command
line wins. Values stay text in argparse and are converted by `values()` after parsing, so a bad value, typed or
from the environment, is refused with the flag (and the variable it came from) named instead of a bare ValueError
from `float()` while the parser is being built:

    --lease-duration: expected a number, got 'soon' (from environment variable STEWARD_LEASE_DURATION)

Kinds: `text`, `int`, `float`, `duration` (Go durations, common/durations), `bool` (true/false, 1/0, yes/no,
on/off), `switch` (true, false or inherit: None), or a function `(text, field) -> value` raising InvalidInput.
This module stays light (no kopf, no engine beyond common/): `--help` imports it.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from typing import Any, Callable, Dict, Iterable, Sequence, Tuple, Union

from ansible_collections.steward.cluster.plugins.module_utils.common import validate
from ansible_collections.steward.cluster.plugins.module_utils.common.durations import format_duration, parse_duration
from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput, shown

TRUE_WORDS = ('1', 't', 'true', 'y', 'yes', 'on')
FALSE_WORDS = ('0', 'f', 'false', 'n', 'no', 'off')
SWITCH = {'inherit': None, 'true': True, 'false': False}

Kind = Union[str, Callable[[str, str], Any]]


class FlagError(InvalidInput):
    """A flag's value broke its rule; `field` is the flag (`--lease-duration`), the message also names the
    environment variable when the value came from there."""


class _FromEnvironment(str):
    """A flag's default read from its environment variable (remembers which, for the error message)."""

    variable = ''


@dataclasses.dataclass(frozen=True)
class Flag:
    """One flag. `name` without the dashes; `dest` the argparse attribute (default: name with underscores);
    `env` the environment variable (default STEWARD_ + NAME); `off` for a bool flag spelt only negatively
    (`--no-leader-election`: the flag stores false), else a bool flag is `--name` / `--no-name`."""
    name: str
    kind: Kind
    default: Any
    help: str = ''
    env: str = ''
    dest: str = ''
    off: str = ''

    @property
    def option(self) -> str:
        return '--' + self.name

    @property
    def attribute(self) -> str:
        return self.dest or self.name.replace('-', '_')

    @property
    def variable(self) -> str:
        return self.env or 'STEWARD_' + self.name.replace('-', '_').upper()

    def shown_default(self) -> str:
        """The default as text, as the environment variable would spell it."""
        if self.kind == 'duration' and isinstance(self.default, (int, float)) and not isinstance(self.default, bool):
            return format_duration(self.default)
        if isinstance(self.default, bool):
            return 'true' if self.default else 'false'
        return '' if self.default is None else str(self.default)


def add(group: Any, table: Iterable[Flag]) -> None:
    """Add every flag of `table` to an argparse parser or group; each default comes from its variable when set."""
    for flag in table:
        text = os.environ.get(flag.variable)
        if text is None:
            default: str = flag.shown_default()
        else:
            default = _FromEnvironment(text)
            default.variable = flag.variable
        helptext = ('%s ' % flag.help if flag.help else '') + '(env %s; default %s)' % (
            flag.variable, flag.shown_default() or '""')
        if flag.kind == 'bool' and flag.off:
            action = group.add_argument(flag.off, dest=flag.attribute, action='store_const', const=False,
                                        default=default, help=helptext)
        elif flag.kind == 'bool':
            action = group.add_argument(flag.option, dest=flag.attribute, action=argparse.BooleanOptionalAction,
                                        default=default, help=helptext)
        else:
            action = group.add_argument(flag.option, dest=flag.attribute, default=default, help=helptext)
        action.environment_variable = flag.variable


def variables(parser: argparse.ArgumentParser) -> Tuple[str, ...]:
    """The environment variable of every flag a parser has from a table (what a Deployment may set)."""
    return tuple(sorted({getattr(a, 'environment_variable') for a in parser._actions
                         if getattr(a, 'environment_variable', None)}))


def convert(flag: Flag, value: Any) -> Any:
    """The typed value of one flag; FlagError naming the flag (and the variable the value came from)."""
    try:
        return _convert(flag.kind, value, flag.off or flag.option)
    except InvalidInput as exc:
        where = getattr(value, 'variable', '')
        message = exc.detail + (' (from environment variable %s)' % where if where else '')
        raise FlagError(flag.off or flag.option, exc.rule, message, exc.value) from None


def values(args: argparse.Namespace, table: Iterable[Flag]) -> Dict[str, Any]:
    """Every flag of `table` converted, by attribute name."""
    return {flag.attribute: convert(flag, getattr(args, flag.attribute)) for flag in table}


def find(table: Sequence[Flag], name: str) -> Flag:
    return next(flag for flag in table if flag.name == name)


def choice(*choices: str) -> Callable[[str, str], str]:
    """A kind: one of `choices`."""
    def parse(text: str, field: str) -> str:
        return validate.one_of(text, field, choices)
    return parse


def _convert(kind: Kind, value: Any, field: str) -> Any:
    if isinstance(value, bool):          # a bool flag given on the command line
        if kind != 'bool':
            raise InvalidInput(field, 'kind', 'a %s flag got a switch' % kind, value)
        return value
    text = str(value)
    if callable(kind):
        return kind(text, field)
    if kind == 'text':
        return text
    if kind == 'int':
        try:
            return int(text.strip())
        except ValueError:
            raise InvalidInput(field, 'integer', 'expected a whole number, got %s' % shown(text), text) from None
    if kind == 'float':
        return validate.number(text.strip(), field)
    if kind == 'duration':
        return parse_duration(text, field)
    if kind == 'bool':
        word = text.strip().lower()
        if word in TRUE_WORDS:
            return True
        if word in FALSE_WORDS:
            return False
        raise InvalidInput(field, 'boolean', 'expected true or false, got %s' % shown(text), text)
    if kind == 'switch':
        if text not in SWITCH:
            raise InvalidInput(field, 'choice', 'expected one of %s, got %s' % (', '.join(SWITCH), shown(text)), text)
        return SWITCH[text]
    raise ValueError('unknown flag kind %r' % (kind,))
