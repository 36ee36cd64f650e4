# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one error for bad input, shared by every area: which field, which value, which rule.

Areas keep their own exception base for what goes wrong while acting (EtcdError, KubeError, ...);
an input that fails validation raises InvalidInput before anything acts, in check mode too.
Modules turn it into `fail_json(msg=str(exc), field=..., rule=...)`; the controller into a
`SpecValid=False` condition naming the field.
"""

from __future__ import annotations

import contextlib
import functools
from typing import Any, Callable, Iterator, Optional, TypeVar

_F = TypeVar('_F', bound=Callable[..., Any])


class InvalidInput(ValueError):
    """An input broke a rule. `field` is its path (`timeout`, `spec.replicas`, `hosts[2].members`),
    `rule` a short stable word callers may match on (`positive`, `absolute-path`, `dns-subdomain`, ...),
    `value` the offending value (never shown for secrets: pass `secret=True`)."""

    def __init__(self, field: str, rule: str, message: str, value: Any = None, secret: bool = False):
        self.field = field
        self.rule = rule
        self.value = None if secret else value
        self.detail = message
        super().__init__('%s: %s' % (field, message) if field else message)

    def explained(self) -> str:
        """The message with its rule, as a status condition or an Event shows it: the field leads the message, the
        value is in it (never for secrets), the rule closes it (`spec.maxBackups: ..., got 0 (rule: minimum)`)."""
        return '%s (rule: %s)' % (self, self.rule) if self.rule else str(self)

    def at(self, prefix: str) -> 'InvalidInput':
        """The same error (same class) with its field placed under `prefix` (`spec` + `replicas` -> `spec.replicas`)."""
        field = prefix + ('.' + self.field if self.field and not self.field.startswith('[') else self.field)
        return self.recast(type(self), field)

    def inside(self, where: str) -> 'InvalidInput':
        """The same error (same class, rule, value) reported inside `where`, a file or an object that is not a
        field path: `template file t.yml` + `template.nodes: ...` -> `template file t.yml: template.nodes: ...`."""
        moved = self.recast(type(self))
        InvalidInput.__init__(moved, where, self.rule, str(self), self.value)
        return moved

    def recast(self, cls: type, field: Optional[str] = None) -> 'InvalidInput':
        """The same error as `cls` (an area's InvalidInput subclass, e.g. ConfigError), so an area's entry point
        raises only its own types while the shared checks in common/ raise plain InvalidInput."""
        moved = cls.__new__(cls)
        moved.__dict__.update(self.__dict__)
        InvalidInput.__init__(moved, self.field if field is None else field, self.rule, self.detail, self.value)
        return moved


def input_errors_as(cls: type) -> Callable[[_F], _F]:
    """Decorator for an area's entry point (load_config, parse_spec, ...): an InvalidInput raised by the shared
    checks inside it leaves it as `cls`, the area's own InvalidInput subclass, so its callers catch one type."""
    def decorate(function: _F) -> _F:
        @functools.wraps(function)
        def checked(*args: Any, **kwargs: Any) -> Any:
            try:
                return function(*args, **kwargs)
            except cls:
                raise
            except InvalidInput as exc:
                raise exc.recast(cls) from None
        return checked  # type: ignore[return-value]
    return decorate


@contextlib.contextmanager
def about_option(option: str, path: Optional[str] = None) -> Iterator[None]:
    """Bad input found inside the block is about the value of `option` (usually a file it names, read inside):
    the error's field becomes the option and its message keeps where inside, with the file's `path` when the message
    does not already say it (`constraints_file: /etc/c.yml: minimum-workers: ...`). The class stays the same."""
    try:
        yield
    except InvalidInput as exc:
        if exc.field == option or (exc.field or '').startswith((option + '.', option + '[')):
            raise
        raise (exc.inside(path) if path and path not in str(exc) else exc).inside(option) from None


def shown(value: Any, limit: int = 80) -> str:
    """A value as an error message shows it: repr, cut to `limit` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + '...'


def field_of(parent: Optional[str], key: Any) -> str:
    """`parent.key` or `parent[3]`; just the key when there is no parent."""
    if isinstance(key, int):
        return '%s[%d]' % (parent or '', key)
    return '%s.%s' % (parent, key) if parent else str(key)
