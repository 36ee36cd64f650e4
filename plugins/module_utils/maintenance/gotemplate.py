# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A safe interpreter for the subset of Go's text/template that notification messages use.

Upstream renders `message`/`title` with Go's text/template over its plugin parameters, so existing
maintenance.yaml files carry Go syntax. Rather than translating to Jinja2 (whose `.Node.Name` means
something else), this module interprets Go syntax directly. It only ever indexes dicts and lists and
calls the built-ins below: no attribute access on Python objects, no imports, no template inclusion,
bounded output; a bad template raises TemplateError and never reaches the reconciliation.

Data (see `notifiers.template_data`) and how Go names map onto it:

=================================  ===============================================================
`{{ .State }}`                     the profile's current state (`maintenance-required`, ...)
`{{ .Profile }}`                   the current profile's name; `.Profile.Current` the same,
                                   `.Profile.Last` the profile of the node's latest transition
`{{ .Node.Name }}`                 Go's embedded ObjectMeta: `.Node.X` falls back to
                                   `metadata.x` (`.Node.Labels`, `.Node.Annotations`, `.Node.UID`)
`{{ .Node.Status.NodeInfo.KubeletVersion }}`  Go field names are the JSON names with a capital
                                   initial (`UID` -> `uid`, `OSImage` -> `osImage`)
`{{ index .Node.Labels "k" }}`     map lookups; `.Node.Labels.k` works for simple keys, as in Go
`{{ .LastTransition }}`            Go's time format (`2024-05-01 10:00:00 +0000 UTC`)
`{{ .InMaintenance }}`             true if some profile of the node is in-maintenance
=================================  ===============================================================

Syntax: `{{ pipeline }}`, `{{- trim -}}`, `{{/* comment */}}`, `|` pipes, parentheses, `$` and
`$x := ...` variables, `if`/`else if`/`else`/`end`, `range` (with `$k, $v :=`), `with`; functions
`and or not eq ne lt le gt ge len index print printf println html urlquery`. A missing map key prints
`<no value>` as in Go; an unknown top-level field is an error, as in Go.
"""

from __future__ import annotations

import dataclasses
import html
import json
import re
import urllib.parse
from typing import Any, Dict, List, Mapping, Optional

from ansible_collections.steward.cluster.plugins.module_utils.maintenance.errors import TemplateError
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.gotemplate_syntax import (
    Block, Pipeline, Tok, parse, where_in)
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.gotime import go_time_string

MAX_OUTPUT = 1 << 20
MAX_ITERATIONS = 100000


class Missing:
    """A missing map key: prints `<no value>`, is false, and any field of it is missing too."""

    def __repr__(self) -> str:
        return '<no value>'


MISSING = Missing()


class Struct(dict):
    """A Go struct: unknown fields are errors. `text` is how it prints (a stringer), if set."""

    def __init__(self, fields: Mapping[str, Any], text: Optional[str] = None, type_name: str = 'struct'):
        super().__init__(fields)
        self.text = text
        self.type_name = type_name


@dataclasses.dataclass(frozen=True)
class GoTime:
    ns: int


# --- values ----------------------------------------------------------------------------------------

def go_str(value: Any) -> str:
    if value is MISSING:
        return '<no value>'
    if value is None:
        return '<nil>'
    if isinstance(value, Struct) and value.text is not None:
        return value.text
    if isinstance(value, bool):
        return 'true' if value else 'false'
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() and abs(value) < 1e21 else repr(value)
    if isinstance(value, GoTime):
        return go_time_string(value.ns)
    if isinstance(value, Mapping):
        return 'map[%s]' % ' '.join('%s:%s' % (k, go_str(value[k])) for k in sorted(value, key=str))
    if isinstance(value, (list, tuple)):
        return '[%s]' % ' '.join(go_str(v) for v in value)
    return str(value)


def truth(value: Any) -> bool:
    if value is MISSING or value is None:
        return False
    if isinstance(value, (Struct, GoTime)):
        return True
    if isinstance(value, (bool, int, float, str, list, tuple, dict)):
        return bool(value)
    return True


def _go_name_variants(name: str) -> List[str]:
    """`NodeInfo` -> nodeInfo, `UID` -> uid, `OSImage` -> osImage, `PodCIDR` -> podCIDR."""
    run = len(name) - len(name.lstrip('ABCDEFGHIJKLMNOPQRSTUVWXYZ'))
    if run > 1 and run < len(name):
        run -= 1
    return [name[:run].lower() + name[run:], name[:1].lower() + name[1:]]


def field(value: Any, name: str, pos_text: str) -> Any:
    if value is MISSING or value is None:
        return MISSING
    if isinstance(value, Struct):
        if name not in value:
            raise TemplateError('template: %s: can\'t evaluate field %s in type %s' % (pos_text, name, value.type_name))
        return value[name]
    if isinstance(value, Mapping):
        if name in value:
            return value[name]
        if name[:1].isupper():
            if name == 'ObjectMeta' and 'metadata' in value:
                return value['metadata']
            for variant in _go_name_variants(name):
                if variant in value:
                    return value[variant]
            meta = value.get('metadata')
            if isinstance(meta, Mapping):
                for variant in _go_name_variants(name):
                    if variant in meta:
                        return meta[variant]
        return MISSING
    raise TemplateError('template: %s: can\'t evaluate field %s in type %s' % (pos_text, name, _type(value)))


def _type(value: Any) -> str:
    return {bool: 'bool', int: 'int', float: 'float64', str: 'string', list: 'slice'}.get(type(value), type(value).__name__)


# --- functions -------------------------------------------------------------------------------------

def _compare(op: str, left: Any, right: Any) -> bool:
    numbers = (int, float)
    if isinstance(left, bool) or isinstance(right, bool):
        if op not in ('eq', 'ne') or not (isinstance(left, bool) and isinstance(right, bool)):
            raise TemplateError('incompatible types for comparison')
    elif not ((isinstance(left, numbers) and isinstance(right, numbers)) or (isinstance(left, str) and isinstance(right, str))):
        if op in ('eq', 'ne') and (left is MISSING or right is MISSING or left is None or right is None):
            return (left is right) == (op == 'eq')
        raise TemplateError('incompatible types for comparison: %s and %s' % (_type(left), _type(right)))
    return {'eq': left == right, 'ne': left != right, 'lt': left < right, 'le': left <= right,
            'gt': left > right, 'ge': left >= right}[op]


def _index(item: Any, *keys: Any) -> Any:
    for key in keys:
        if isinstance(item, Mapping):
            item = item.get(key, MISSING)
        elif isinstance(item, (list, tuple, str)) and isinstance(key, int) and not isinstance(key, bool):
            if not 0 <= key < len(item):
                raise TemplateError('error calling index: index out of range: %d' % key)
            item = item[key]
        else:
            raise TemplateError('error calling index: cannot index %s with %r' % (_type(item), key))
    return item


_VERB = re.compile(r'%([-+# 0]*)(\d+)?(?:\.(\d+))?([a-zA-Z%])')


def printf(fmt: str, *args: Any) -> str:
    out, used = [], 0
    pos = 0
    for match in _VERB.finditer(fmt):
        out.append(fmt[pos:match.start()])
        pos = match.end()
        flags, width, precision, verb = match.groups()
        if verb == '%':
            out.append('%')
            continue
        if used >= len(args):
            out.append('%%!%s(MISSING)' % verb)
            continue
        arg = args[used]
        used += 1
        spec = '%' + (flags or '') + (width or '') + ('.' + precision if precision else '')
        try:
            if verb in 'dxXob' and isinstance(arg, int) and not isinstance(arg, bool):
                out.append((spec + {'b': 'd'}.get(verb, verb)) % arg if verb != 'b' else format(arg, 'b'))
            elif verb in 'feEgG' and isinstance(arg, (int, float)) and not isinstance(arg, bool):
                out.append((spec + verb) % arg)
            elif verb == 'q':
                out.append(json.dumps(go_str(arg), ensure_ascii=False))
            elif verb == 't' and isinstance(arg, bool):
                out.append(go_str(arg))
            elif verb in 'vs':
                out.append((spec + 's') % go_str(arg))
            else:
                out.append('%%!%s(%s=%s)' % (verb, _type(arg), go_str(arg)))
        except (TypeError, ValueError):
            out.append('%%!%s(%s=%s)' % (verb, _type(arg), go_str(arg)))
    out.append(fmt[pos:])
    if used < len(args):
        out.append('%%!(EXTRA %s)' % ', '.join('%s=%s' % (_type(a), go_str(a)) for a in args[used:]))
    return ''.join(out)


def _sprint(*args: Any) -> str:
    """fmt.Sprint: a space between operands when neither is a string."""
    out = ''
    for index, arg in enumerate(args):
        if index and not isinstance(arg, str) and not isinstance(args[index - 1], str):
            out += ' '
        out += go_str(arg)
    return out


def _length(value: Any) -> int:
    if isinstance(value, (str, list, tuple, Mapping)):
        return len(value)
    raise TemplateError('error calling len: len of %s' % _type(value))


FUNCTIONS = {
    'not': lambda value: not truth(value),
    'len': _length,
    'index': _index,
    'print': _sprint,
    'println': lambda *args: ' '.join(go_str(a) for a in args) + '\n',
    'printf': lambda fmt, *args: printf(go_str(fmt), *args),
    'html': lambda *args: html.escape(_sprint(*args)),
    'urlquery': lambda *args: urllib.parse.quote_plus(_sprint(*args)),
}


# --- evaluation ------------------------------------------------------------------------------------

class _Renderer:
    def __init__(self, source: str, root: Any):
        self.source = source
        self.out: List[str] = []
        self.size = 0
        self.iterations = 0
        self.root = root

    def where(self, pos: int) -> str:
        return where_in(self.source, pos)

    def emit(self, text: str) -> None:
        self.size += len(text)
        if self.size > MAX_OUTPUT:
            raise TemplateError('template: output exceeds %d bytes' % MAX_OUTPUT)
        self.out.append(text)

    def run(self, nodes: Any, dot: Any, variables: Dict[str, Any]) -> None:
        for node in nodes:
            if isinstance(node, str):
                self.emit(node)
            elif isinstance(node, Pipeline):
                value = self.pipeline(node, dot, variables)
                if not node.decl:
                    self.emit(go_str(value))
            else:
                self.block(node, dot, variables)

    def block(self, node: Block, dot: Any, variables: Dict[str, Any]) -> None:
        scope = dict(variables)
        if node.keyword == 'range':
            self.range(node, dot, scope)
            return
        value = self.pipeline(node.pipe, dot, scope, declare=node.keyword != 'range')
        if truth(value):
            self.run(node.body, value if node.keyword == 'with' else dot, scope)
        else:
            self.run(node.alternative, dot, dict(variables))

    def range(self, node: Block, dot: Any, scope: Dict[str, Any]) -> None:
        value = self.pipeline(Pipeline([], node.pipe.commands, node.pipe.pos), dot, scope)
        if isinstance(value, Mapping):
            items = [(k, value[k]) for k in sorted(value, key=str)]
        elif isinstance(value, (list, tuple)):
            items = list(enumerate(value))
        elif value is MISSING or value is None:
            items = []
        else:
            raise TemplateError('template: %s: range can\'t iterate over %s' % (self.where(node.pipe.pos), go_str(value)))
        if not items:
            self.run(node.alternative, dot, scope)
            return
        for key, item in items:
            self.iterations += 1
            if self.iterations > MAX_ITERATIONS:
                raise TemplateError('template: too many range iterations')
            inner = dict(scope)
            if len(node.pipe.decl) == 1:
                inner[node.pipe.decl[0]] = item
            elif len(node.pipe.decl) >= 2:
                inner[node.pipe.decl[0]], inner[node.pipe.decl[1]] = key, item
            self.run(node.body, item, inner)

    def pipeline(self, pipe: Pipeline, dot: Any, variables: Dict[str, Any], declare: bool = True) -> Any:
        value: Any = MISSING
        for index, command in enumerate(pipe.commands):
            value = self.command(command, dot, variables, value if index else None, index > 0)
        if declare:
            for name in pipe.decl:
                variables[name] = value
        return value

    def command(self, command: List[Any], dot: Any, variables: Dict[str, Any], piped: Any, has_piped: bool) -> Any:
        head = command[0]
        if isinstance(head, Tok) and head.kind == 'ident' and head.text not in ('true', 'false', 'nil'):
            args = [self.operand(op, dot, variables) for op in command[1:]]
            if has_piped:
                args.append(piped)
            return self.call(head, args)
        if len(command) > 1 or has_piped:
            raise TemplateError('template: %s: can\'t give argument to non-function' % self.where(head.pos))
        return self.operand(head, dot, variables)

    def call(self, head: Tok, args: List[Any]) -> Any:
        name = head.text
        try:
            if name in ('and', 'or'):
                if not args:
                    raise TemplateError('wrong number of args for %s' % name)
                for arg in args:
                    if truth(arg) != (name == 'and'):
                        return arg
                return args[-1]
            if name in ('eq', 'ne', 'lt', 'le', 'gt', 'ge'):
                if len(args) < 2 or (name != 'eq' and len(args) != 2):
                    raise TemplateError('wrong number of args for %s' % name)
                if name == 'eq':
                    return any(_compare('eq', args[0], other) for other in args[1:])
                return _compare(name, args[0], args[1])
            function = FUNCTIONS.get(name)
            if function is None:
                raise TemplateError('function "%s" not defined' % name)
            return function(*args)
        except TemplateError as exc:
            text = str(exc)
            if text.startswith('template:'):
                raise
            raise TemplateError('template: %s: %s' % (self.where(head.pos), text)) from None
        except TypeError:
            raise TemplateError('template: %s: wrong number of args for %s' % (self.where(head.pos), name)) from None

    def operand(self, op: Any, dot: Any, variables: Dict[str, Any]) -> Any:
        if isinstance(op, Pipeline):
            return self.pipeline(op, dot, variables)
        where = self.where(op.pos)
        if op.kind == 'dot':
            return dot
        if op.kind == 'field':
            value = dot
            for name in op.text[1:].split('.'):
                value = field(value, name, where)
            return value
        if op.kind == 'var':
            name, _sep, rest = op.text.partition('.')
            if name == '$':
                value = self.root
            elif name in variables:
                value = variables[name]
            else:
                raise TemplateError('template: %s: undefined variable "%s"' % (where, name))
            for part in rest.split('.') if rest else []:
                value = field(value, part, where)
            return value
        if op.kind == 'string':
            return json.loads(op.text)
        if op.kind == 'raw':
            return op.text[1:-1]
        if op.kind == 'number':
            return float(op.text) if '.' in op.text else int(op.text)
        if op.kind == 'ident':
            if op.text in ('true', 'false'):
                return op.text == 'true'
            if op.text == 'nil':
                return None
            return self.call(op, [])
        raise TemplateError('template: %s: unexpected %s' % (where, op.text))


def render(source: str, data: Any) -> str:
    """Render Go-template `source` over `data` (a Struct for strict top-level fields)."""
    try:
        nodes = parse(source)
        renderer = _Renderer(source, data)
        renderer.run(nodes, data, {'$': data})
        return ''.join(renderer.out)
    except TemplateError:
        raise
    except (ValueError, TypeError, KeyError, RecursionError) as exc:
        raise TemplateError('template: %s' % exc) from None


def check_syntax(source: str) -> None:
    parse(source)
