"""The CEL rules of a CRD (`x-kubernetes-validations`) as the lab's API emulator evaluates them, so that the lab
refuses an object the way a real API server does (422 Invalid, the field path and the rule's message).

A small interpreter of the CEL subset the collection's CRDs use, written for the emulator (a test double: it
imports nothing of the engine in plugins/): literals (int, double, string, bool, null, lists), `self`, `oldSelf`,
field selection and indexing, `has(x.f)`, `! && || ?:`, `== != < <= > >=`, `+ - * / %`, `in`, the functions and
methods `size`, `int`, `string`, `startsWith`, `endsWith`, `contains`, `matches`, `isURL`,
`duration(s).getSeconds()`, and the macros `all`, `exists`, `filter`, `map`. An expression outside the subset
raises CelUnsupported when the CRD is registered, so a CRD the emulator cannot judge fails loudly at install
instead of letting objects through.

Evaluation follows the API server (apiextensions-apiserver's cel validator): a rule is evaluated at each node of
the schema that declares it and that is present in the object; a rule that reads `oldSelf` (a transition rule) only
on an update, and only where the old object has a value at the same path (array items are not correlated); a rule
that evaluates to false, or fails (no such key, a bad duration), is one cause on the node's path.
"""

from __future__ import annotations

import re
from typing import Any, Dict, Iterator, List, Optional, Tuple
from urllib.parse import urlsplit


class CelUnsupported(Exception):
    """The rule is outside the subset this interpreter reads."""


class CelRuntimeError(Exception):
    """The rule failed while evaluating (CEL's runtime errors: no such key, bad argument)."""


_TOKEN = re.compile(r'''\s*(?:
    (?P<num>\d+\.\d+|\d+)
  | (?P<str>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
  | (?P<id>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op>==|!=|<=|>=|&&|\|\||[-+*/%<>!?:.,()\[\]])
)''', re.VERBOSE)

_DURATION_PART = re.compile(r'(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)')
_DURATION_UNITS = {'ns': 1e-9, 'us': 1e-6, 'µs': 1e-6, 'ms': 1e-3, 's': 1.0, 'm': 60.0, 'h': 3600.0}
_MACROS = ('all', 'exists', 'exists_one', 'filter', 'map')


def _tokens(text: str) -> List[Tuple[str, Any]]:
    out: List[Tuple[str, Any]] = []
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if not match or match.end() == pos:
            raise CelUnsupported('cannot read %r at %d' % (text, pos))
        pos = match.end()
        kind = match.lastgroup
        value = match.group(kind)
        if kind == 'num':
            out.append(('lit', float(value) if '.' in value else int(value)))
        elif kind == 'str':
            out.append(('lit', bytes(value[1:-1], 'utf-8').decode('unicode_escape') if '\\' in value else value[1:-1]))
        elif kind == 'id' and value in ('true', 'false', 'null'):
            out.append(('lit', {'true': True, 'false': False, 'null': None}[value]))
        elif kind == 'id' and value == 'in':
            out.append(('op', 'in'))
        else:
            out.append((kind or '', value))
    return out


# An AST node is a tuple: (kind, ...). Kinds: lit, var, select, index, call, method, has, not, neg, binop, and, or,
# cond, list, macro.
Node = Tuple[Any, ...]


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.toks = _tokens(text)
        self.pos = 0

    def peek(self, value: Optional[str] = None) -> bool:
        if self.pos >= len(self.toks):
            return False
        kind, tok = self.toks[self.pos]
        return value is None or (kind == 'op' and tok == value)

    def take(self, value: str) -> None:
        if not self.peek(value):
            raise CelUnsupported('expected %r in %r' % (value, self.text))
        self.pos += 1

    def parse(self) -> Node:
        node = self.expr()
        if self.pos != len(self.toks):
            raise CelUnsupported('unexpected %r in %r' % (self.toks[self.pos][1], self.text))
        return node

    def expr(self) -> Node:
        cond = self.or_()
        if self.peek('?'):
            self.take('?')
            then = self.expr()
            self.take(':')
            return ('cond', cond, then, self.expr())
        return cond

    def chain(self, ops: Tuple[str, ...], operand: Any, kind: Optional[str] = None) -> Node:
        """A left-associative run of binary operators of one precedence level: `a || b || c`, `a + b - c`.
        `kind` names the node (`or`, `and`); without it the node is a `binop` carrying its operator."""
        node = operand()
        while any(self.peek(op) for op in ops):
            op = self.toks[self.pos][1]
            self.pos += 1
            node = (kind, node, operand()) if kind else ('binop', op, node, operand())
        return node

    def or_(self) -> Node:
        return self.chain(('||',), self.and_, 'or')

    def and_(self) -> Node:
        return self.chain(('&&',), self.rel, 'and')

    def rel(self) -> Node:
        node = self.add()
        for op in ('==', '!=', '<=', '>=', '<', '>', 'in'):
            if self.peek(op):
                self.take(op)
                return ('binop', op, node, self.add())
        return node

    def add(self) -> Node:
        return self.chain(('+', '-'), self.mul)

    def mul(self) -> Node:
        return self.chain(('*', '/', '%'), self.unary)

    def unary(self) -> Node:
        if self.peek('!'):
            self.take('!')
            return ('not', self.unary())
        if self.peek('-'):
            self.take('-')
            return ('neg', self.unary())
        return self.member()

    def items(self, opening: str, closing: str) -> List[Node]:
        """Comma-separated expressions between `opening` and `closing`: call arguments or a list literal."""
        self.take(opening)
        out: List[Node] = []
        while not self.peek(closing):
            out.append(self.expr())
            if not self.peek(closing):
                self.take(',')
        self.take(closing)
        return out

    def args(self) -> List[Node]:
        return self.items('(', ')')

    def member(self) -> Node:
        node = self.primary()
        while True:
            if self.peek('.'):
                self.take('.')
                kind, name = self.toks[self.pos]
                if kind != 'id':
                    raise CelUnsupported('expected a field name in %r' % self.text)
                self.pos += 1
                if self.peek('('):
                    if name in _MACROS:
                        node = self.macro(node, name)
                    else:
                        node = ('method', name, node, self.args())
                else:
                    node = ('select', node, name)
            elif self.peek('['):
                self.take('[')
                index = self.expr()
                self.take(']')
                node = ('index', node, index)
            else:
                return node

    def macro(self, target: Node, name: str) -> Node:
        self.take('(')
        kind, var = self.toks[self.pos]
        if kind != 'id':
            raise CelUnsupported('expected a variable in %s() of %r' % (name, self.text))
        self.pos += 1
        self.take(',')
        body = self.expr()
        self.take(')')
        return ('macro', name, target, var, body)

    def primary(self) -> Node:
        if self.pos >= len(self.toks):
            raise CelUnsupported('unexpected end of %r' % self.text)
        kind, tok = self.toks[self.pos]
        if kind == 'lit':
            self.pos += 1
            return ('lit', tok)
        if kind == 'op' and tok == '(':
            self.take('(')
            node = self.expr()
            self.take(')')
            return node
        if kind == 'op' and tok == '[':
            return ('list', self.items('[', ']'))
        if kind == 'id':
            self.pos += 1
            if tok == 'has':
                (arg,) = self.args()
                if arg[0] != 'select':
                    raise CelUnsupported('has() takes a field selection in %r' % self.text)
                return ('has', arg[1], arg[2])
            if self.peek('('):
                return ('call', tok, self.args())
            return ('var', tok)
        raise CelUnsupported('unexpected %r in %r' % (tok, self.text))


def _uses_old_self(node: Any) -> bool:
    if isinstance(node, tuple):
        if node[:2] == ('var', 'oldSelf'):
            return True
        return any(_uses_old_self(part) for part in node[1:])
    if isinstance(node, list):
        return any(_uses_old_self(part) for part in node)
    return False


def _duration_seconds(text: Any) -> float:
    if not isinstance(text, str) or not text:
        raise CelRuntimeError('invalid duration %r' % (text,))
    sign = -1.0 if text.startswith('-') else 1.0
    body = text.lstrip('+-')
    if body == '0':
        return 0.0
    parts = _DURATION_PART.findall(body)
    if not parts or ''.join(n + u for n, u in parts) != body:
        raise CelRuntimeError('invalid duration %r' % (text,))
    return sign * sum(float(n) * _DURATION_UNITS[u] for n, u in parts)


def _is_url(value: Any) -> bool:
    """CEL's Kubernetes isURL: an absolute URL with a scheme and a host (Go's url.Parse accepts it)."""
    if not isinstance(value, str) or any(c.isspace() for c in value):
        return False
    try:
        parts = urlsplit(value)
        port_ok = parts.port is None or 0 <= parts.port   # reading .port raises ValueError on a bad port
    except ValueError:
        return False
    return bool(parts.scheme and parts.netloc and port_ok)


class _Duration:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds


def _size(value: Any) -> int:
    if isinstance(value, (str, list, dict)):
        return len(value)
    raise CelRuntimeError('no matching overload for size(%s)' % type(value).__name__)


def _method(name: str, target: Any, args: List[Any]) -> Any:
    if isinstance(target, _Duration) and name == 'getSeconds' and not args:
        return int(target.seconds)
    if name == 'size' and not args:
        return _size(target)
    if isinstance(target, str) and len(args) == 1 and isinstance(args[0], str):
        if name == 'startsWith':
            return target.startswith(args[0])
        if name == 'endsWith':
            return target.endswith(args[0])
        if name == 'contains':
            return args[0] in target
        if name == 'matches':
            return re.search(args[0], target) is not None
    raise CelRuntimeError('no matching overload for %s.%s()' % (type(target).__name__, name))


def _call(name: str, args: List[Any]) -> Any:
    if name == 'size' and len(args) == 1:
        return _size(args[0])
    if name == 'duration' and len(args) == 1:
        return _Duration(_duration_seconds(args[0]))
    if name == 'isURL' and len(args) == 1:
        return _is_url(args[0])
    if name == 'int' and len(args) == 1:
        try:
            return int(args[0])
        except (TypeError, ValueError) as exc:
            raise CelRuntimeError('cannot convert %r to int' % (args[0],)) from exc
    if name == 'string' and len(args) == 1:
        return args[0] if isinstance(args[0], str) else str(args[0])
    raise CelRuntimeError('unknown function %s/%d' % (name, len(args)))


def _binop(op: str, left: Any, right: Any) -> Any:
    if op == '==':
        return left == right
    if op == '!=':
        return left != right
    if op == 'in':
        if isinstance(right, (list, dict)):
            return left in right
        raise CelRuntimeError('no matching overload for in')
    number = (int, float)
    if isinstance(left, bool) or isinstance(right, bool):
        raise CelRuntimeError('no matching overload for %s on bool' % op)
    same = (isinstance(left, number) and isinstance(right, number)) or (type(left) is type(right))
    if not same:
        raise CelRuntimeError('no matching overload for %r %s %r' % (left, op, right))
    try:
        if op == '<':
            return left < right
        if op == '<=':
            return left <= right
        if op == '>':
            return left > right
        if op == '>=':
            return left >= right
        if op == '+':
            return left + right
        if op == '-':
            return left - right
        if op == '*':
            return left * right
        if op == '/':
            return left // right if isinstance(left, int) and isinstance(right, int) else left / right
        if op == '%':
            return left % right
    except (TypeError, ZeroDivisionError) as exc:
        raise CelRuntimeError(str(exc)) from exc
    raise CelRuntimeError('unknown operator %s' % op)


def _truth(value: Any) -> bool:
    if not isinstance(value, bool):
        raise CelRuntimeError('expected a bool, got %r' % (value,))
    return value


def _eval(node: Node, env: Dict[str, Any]) -> Any:  # noqa: C901 - one switch over the node kinds
    kind = node[0]
    if kind == 'lit':
        return node[1]
    if kind == 'var':
        if node[1] not in env:
            raise CelRuntimeError('undeclared reference to %r' % node[1])
        return env[node[1]]
    if kind == 'list':
        return [_eval(item, env) for item in node[1]]
    if kind == 'select':
        target = _eval(node[1], env)
        if not isinstance(target, dict) or node[2] not in target:
            raise CelRuntimeError("no such key: %s" % node[2])
        return target[node[2]]
    if kind == 'index':
        target, index = _eval(node[1], env), _eval(node[2], env)
        try:
            return target[index]
        except (KeyError, IndexError, TypeError) as exc:
            raise CelRuntimeError('no such key: %r' % (index,)) from exc
    if kind == 'has':
        target = _eval(node[1], env)
        return isinstance(target, dict) and node[2] in target
    if kind == 'not':
        return not _truth(_eval(node[1], env))
    if kind == 'neg':
        return -_eval(node[1], env)
    if kind == 'and':  # CEL's commutative && / ||: a false (true) side decides even if the other errs
        return _logic(node, env, decided=False)
    if kind == 'or':
        return _logic(node, env, decided=True)
    if kind == 'cond':
        return _eval(node[2], env) if _truth(_eval(node[1], env)) else _eval(node[3], env)
    if kind == 'binop':
        return _binop(node[1], _eval(node[2], env), _eval(node[3], env))
    if kind == 'call':
        return _call(node[1], [_eval(arg, env) for arg in node[2]])
    if kind == 'method':
        return _method(node[1], _eval(node[2], env), [_eval(arg, env) for arg in node[3]])
    if kind == 'macro':
        return _macro(node, env)
    raise CelUnsupported('node %r' % (kind,))


def _logic(node: Node, env: Dict[str, Any], decided: bool) -> bool:
    error: Optional[CelRuntimeError] = None
    for side in node[1:]:
        try:
            if _truth(_eval(side, env)) == decided:
                return decided
        except CelRuntimeError as exc:
            error = exc
    if error is not None:
        raise error
    return not decided


def _macro(node: Node, env: Dict[str, Any]) -> Any:
    _kind, name, target_node, var, body = node
    target = _eval(target_node, env)
    items = list(target) if isinstance(target, (list, dict)) else None
    if items is None:
        raise CelRuntimeError('%s() needs a list or map' % name)
    results = [(_eval(body, dict(env, **{var: item})), item) for item in items]
    if name == 'all':
        return all(_truth(r) for r, _item in results)
    if name == 'exists':
        return any(_truth(r) for r, _item in results)
    if name == 'exists_one':
        return sum(1 for r, _item in results if _truth(r)) == 1
    if name == 'filter':
        return [item for r, item in results if _truth(r)]
    return [r for r, _item in results]  # map


class Rule:
    """One `x-kubernetes-validations` entry, parsed once."""

    def __init__(self, entry: Dict[str, Any]) -> None:
        self.text = entry['rule']
        self.message = entry.get('message') or 'failed rule: %s' % self.text
        self.ast = _Parser(self.text).parse()
        self.transition = _uses_old_self(self.ast)

    def holds(self, value: Any, old: Any) -> Tuple[bool, str]:
        """(True, '') or (False, why): the rule's message, or CEL's runtime error."""
        env = {'self': value}
        if self.transition:
            env['oldSelf'] = old
        try:
            result = _eval(self.ast, env)
        except CelRuntimeError as exc:
            return False, 'rule %r: %s' % (self.text, exc)
        if result is not True:
            return False, self.message
        return True, ''


_MISSING = object()


class Validator:
    """Every CEL rule of one CRD version's openAPIV3Schema, bound to the schema's shape."""

    def __init__(self, schema: Dict[str, Any]) -> None:
        self.schema = schema
        self.rules: Dict[int, List[Rule]] = {}
        for node in _schema_nodes(schema):
            entries = node.get('x-kubernetes-validations') or []
            if entries:
                self.rules[id(node)] = [Rule(entry) for entry in entries]

    def __bool__(self) -> bool:
        return bool(self.rules)

    def causes(self, obj: Any, old: Any = None) -> List[Tuple[str, str, Any]]:
        """[(field path, message, value)] of every rule that does not hold; `old` is the stored object on an
        update (None on a create)."""
        out: List[Tuple[str, str, Any]] = []
        self._walk(self.schema, obj, _MISSING if old is None else old, '', out)
        return out

    def _walk(self, schema: Dict[str, Any], value: Any, old: Any, path: str, out: List[Tuple[str, str, Any]]) -> None:
        for rule in self.rules.get(id(schema), ()):
            if rule.transition and old is _MISSING:
                continue
            ok, why = rule.holds(value, None if old is _MISSING else old)
            if not ok:
                out.append((path or '<root>', why, value))
        if isinstance(value, dict):
            props = schema.get('properties') or {}
            extra = schema.get('additionalProperties')
            for key, item in value.items():
                sub = props.get(key, extra if isinstance(extra, dict) else None)
                if sub is None:
                    continue
                old_item = old.get(key, _MISSING) if isinstance(old, dict) else _MISSING
                self._walk(sub, item, old_item, '%s.%s' % (path, key) if path else key, out)
        elif isinstance(value, list) and isinstance(schema.get('items'), dict):
            for index, item in enumerate(value):
                self._walk(schema['items'], item, _MISSING, '%s[%d]' % (path, index), out)


def _schema_nodes(schema: Any) -> Iterator[Dict[str, Any]]:
    if not isinstance(schema, dict):
        return
    yield schema
    for sub in (schema.get('properties') or {}).values():
        yield from _schema_nodes(sub)
    for key in ('items', 'additionalProperties'):
        if isinstance(schema.get(key), dict):
            yield from _schema_nodes(schema[key])


def type_name(value: Any) -> str:
    """The OpenAPI type of a value, as the API server names it in `Invalid value: "<type>": ...`."""
    if isinstance(value, bool):
        return 'boolean'
    if isinstance(value, int):
        return 'integer'
    if isinstance(value, float):
        return 'number'
    if isinstance(value, str):
        return 'string'
    if isinstance(value, list):
        return 'array'
    return 'object' if isinstance(value, dict) else 'null'


def validator(schema: Optional[Dict[str, Any]]) -> Optional[Validator]:
    """A Validator of `schema`'s rules, or None when it declares none. Raises CelUnsupported for a rule outside
    the subset."""
    if not schema:
        return None
    found = Validator(schema)
    return found if found else None
