# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Reading one plugin's `config:` block with errors that name the field.

go-ucfg, which upstream unpacks with, is lenient in the same ways this reader is: a scalar where a
string is wanted becomes its text (`value: true` is "true"), "true"/"false" strings are booleans, a number
is a duration in seconds, and unknown keys are ignored (here: remembered, so the config loader can warn
about `vaule:` instead of silently dropping it).
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence

from ansible_collections.steward.cluster.plugins.module_utils.common.durations import parse_duration
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.errors import ConfigError

_MISSING = object()


class Fields:
    """`Fields(raw, 'instances.check[0] (name "x").config')`, then `.string('key')` and friends."""

    def __init__(self, raw: Any, where: str):
        if raw is None:
            raw = {}
        if not isinstance(raw, Mapping):
            raise ConfigError(where, 'type', 'expected a mapping of options, got %s' % (type(raw).__name__,))
        self.raw: Mapping[str, Any] = raw
        self.where = where
        self.read: List[str] = []

    def path(self, key: str) -> str:
        return '%s.%s' % (self.where, key)

    def _get(self, key: str, required: bool) -> Any:
        self.read.append(key)
        value = self.raw.get(key, _MISSING)
        if value is _MISSING or value is None:
            if required:
                raise ConfigError(self.path(key), 'required', 'required')
            return _MISSING
        return value

    def string(self, key: str, required: bool = False, default: str = '') -> str:
        value = self._get(key, required)
        if value is _MISSING:
            return default
        if isinstance(value, bool):
            return 'true' if value else 'false'
        if isinstance(value, (Mapping, list, tuple)):
            raise ConfigError(self.path(key), 'type', 'expected a string, got %s' % (type(value).__name__,))
        text = str(value)
        if required and text == '':
            raise ConfigError(self.path(key), 'required', 'required, must not be empty')
        return text

    def boolean(self, key: str, required: bool = False, default: bool = False) -> bool:
        value = self._get(key, required)
        if value is _MISSING:
            return default
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in ('true', 'false'):
            return value.strip().lower() == 'true'
        raise ConfigError(self.path(key), 'type', 'expected true or false, got %r' % (value,))

    def integer(self, key: str, required: bool = False, default: int = 0, minimum: Optional[int] = None) -> int:
        value = self._get(key, required)
        if value is _MISSING:
            return default
        if isinstance(value, bool) or not (isinstance(value, int) or (isinstance(value, str) and value.strip().lstrip('-').isdigit())):
            raise ConfigError(self.path(key), 'type', 'expected a whole number, got %r' % (value,))
        number = int(value)
        if minimum is not None and number < minimum:
            raise ConfigError(self.path(key), 'minimum', 'must be at least %d, got %d' % (minimum, number))
        return number

    def duration(self, key: str, required: bool = False, default: float = 0.0) -> float:
        value = self._get(key, required)
        if value is _MISSING:
            return default
        return parse_duration(value, self.path(key))

    def string_list(self, key: str, required: bool = False, default: Sequence[str] = ()) -> List[str]:
        value = self._get(key, required)
        if value is _MISSING:
            return list(default)
        if isinstance(value, str):
            value = [value]  # go-ucfg accepts a single value for a list
        if not isinstance(value, (list, tuple)):
            raise ConfigError(self.path(key), 'type', 'expected a list, got %s' % (type(value).__name__,))
        items = []
        for index, item in enumerate(value):
            if item is None or isinstance(item, (Mapping, list, tuple)):
                raise ConfigError('%s[%d]' % (self.path(key), index), 'type', 'expected a string, got %r' % (item,), item)
            items.append('true' if item is True else 'false' if item is False else str(item))
        if required and not items:
            raise ConfigError(self.path(key), 'required', 'required, must not be empty')
        return items

    def raw_value(self, key: str) -> Any:
        self.read.append(key)
        return self.raw.get(key)

    def unknown(self) -> List[str]:
        return sorted(str(k) for k in self.raw if k not in self.read)


def as_mapping(value: Any, where: str) -> Dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(where, 'type', 'expected a mapping, got %s' % (type(value).__name__,))
    return dict(value)


def as_list(value: Any, where: str) -> List[Any]:
    if value is None:
        return []
    if not isinstance(value, (list, tuple)):
        raise ConfigError(where, 'type', 'expected a list, got %s' % (type(value).__name__,))
    return list(value)
