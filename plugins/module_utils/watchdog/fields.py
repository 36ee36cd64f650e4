# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Reading DWD's YAML the way its Go code reads it, so a config that works there works here unchanged.

DWD decodes with sigs.k8s.io/yaml, i.e. YAML -> JSON -> encoding/json: a key matches a struct field by
its JSON name, exactly or else ignoring case (DWD's own test data writes `backOffJitterFactor` for
`backoffJitterFactor`), and unknown keys are ignored. We match the same way; unknown keys are not an
error either (DWD accepts them), but they are returned as warnings with their path, because a typo
such as `probeIntervall` would otherwise silently fall back to a default.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Mapping, Optional

from ansible_collections.steward.cluster.plugins.module_utils.common.errors import InvalidInput, field_of, shown


class Fields:
    """One YAML mapping decoded into a Go struct's fields: `get(name)` matches like encoding/json, `unknown`
    lists the keys no field took (as `path.key`, for warnings)."""

    def __init__(self, data: Any, path: str, known: Iterable[str]):
        if data is None:
            data = {}
        if not isinstance(data, Mapping):
            raise InvalidInput(path, 'mapping', 'expected a mapping, got %s' % shown(data), data)
        self.data = data
        self.path = path
        self.known = tuple(known)
        self._keys: Dict[str, str] = {}
        for name in self.known:
            key = self._match(name)
            if key is not None:
                self._keys[name] = key

    def _match(self, name: str) -> Optional[str]:
        if name in self.data:
            return name
        lowered = name.lower()
        for key in self.data:
            if isinstance(key, str) and key.lower() == lowered:
                return key
        return None

    def field(self, name: str) -> str:
        """The path of a field in error messages (as the user wrote the key, if present)."""
        return field_of(self.path, self._keys.get(name, name))

    def get(self, name: str) -> Any:
        key = self._keys.get(name)
        return None if key is None else self.data[key]

    def has(self, name: str) -> bool:
        return name in self._keys and self.data[self._keys[name]] is not None

    @property
    def unknown(self) -> List[str]:
        taken = set(self._keys.values())
        return [field_of(self.path, k) for k in self.data if k not in taken]


def boolean(value: Any, field: str) -> bool:
    """A JSON boolean (a YAML true/false); Go refuses "true" in quotes, so do we."""
    if not isinstance(value, bool):
        raise InvalidInput(field, 'boolean', 'expected true or false, got %s' % shown(value), value)
    return value


def listing(value: Any, field: str) -> List[Any]:
    if not isinstance(value, list):
        raise InvalidInput(field, 'list', 'expected a list, got %s' % shown(value), value)
    return value
