"""The common shapes of webhook matchConditions, evaluated natively: `compile_shape(expression)` parses a small CEL
subset into a closure, or returns None so the caller uses cel-python. Pure; used by `conditions._Cel`.

The subset: `||`, `&&`, `!`, parentheses, `has(sel)`, `sel in [strings]`, `'s' in sel` (map keys), `sel == 's'`,
`sel != 's'`, `sel == sel` and `sel != sel` (JSON values of one type throughout), `true`, `false`, with `sel` a variable followed by `.field` or `['key']`. A closure raises `Fallback`
whenever CEL's answer is not certain without CEL (a missing key, a value that is not a string, map or bool): the
caller then asks cel-python, so the native answer is only ever given where it is CEL's own.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["Fallback", "Shape", "compile_shape"]


class Fallback(Exception):  # noqa: N818 — a signal, not an error
    """The native evaluation cannot give CEL's answer for this activation; evaluate with CEL instead."""


Activation = Mapping[str, Any]
Shape = Callable[[Activation], bool]

_TOKEN = re.compile(r"""\s*(?:(\|\||&&|==|!=|[!()\[\].,])|'([^'\\\n]*)'|"([^"\\\n]*)"|([_a-zA-Z][_a-zA-Z0-9]*))""")
_RESERVED = {"true", "false", "null", "in", "has"}


def _tokens(expression: str) -> list[tuple[str, str]] | None:
    """(kind, text) tokens: 'op', 'str', 'id'; None for anything outside the subset (numbers, escapes, ...)."""
    out: list[tuple[str, str]] = []
    pos, end = 0, len(expression.rstrip())
    while pos < end:
        m = _TOKEN.match(expression, pos)
        if m is None or m.end() == pos:
            return None
        op, sq, dq, ident = m.groups()
        if op is not None:
            out.append(("op", op))
        elif sq is not None or dq is not None:
            # a raw or bytes prefix (r'...', b'...') was read as an identifier just before: not in the subset
            if out and out[-1][0] == "id" and expression[m.start(2 if sq is not None else 3) - 2] in "rRbB":
                return None
            out.append(("str", sq if sq is not None else dq))
        else:
            out.append(("id", ident))
        pos = m.end()
    return out


class _Parser:
    """Recursive descent over the tokens; any token it does not expect ends the parse (returns None)."""

    def __init__(self, toks: list[tuple[str, str]]) -> None:
        self.toks, self.i = toks, 0

    def peek(self, text: str) -> bool:
        return self.i < len(self.toks) and self.toks[self.i] == ("op", text)

    def take(self, text: str) -> None:
        if not self.peek(text):
            raise SyntaxError(text)
        self.i += 1

    def parse(self) -> Shape:
        node = self.or_()
        if self.i != len(self.toks):
            raise SyntaxError("trailing tokens")
        return node

    def or_(self) -> Shape:
        terms = [self.and_()]
        while self.peek("||"):
            self.i += 1
            terms.append(self.and_())
        return terms[0] if len(terms) == 1 else _any(terms)

    def and_(self) -> Shape:
        terms = [self.unary()]
        while self.peek("&&"):
            self.i += 1
            terms.append(self.unary())
        return terms[0] if len(terms) == 1 else _all(terms)

    def unary(self) -> Shape:
        if self.peek("!"):
            # CEL's `!` binds tighter than the relations (`!a in b` is `(!a) in b`): only a primary may follow
            self.i += 1
            inner = self.primary()
            return lambda act: not _bool(inner(act))
        return self.relation()

    def primary(self) -> Shape:
        if self.peek("!"):
            return self.unary()
        kind, text = self.toks[self.i] if self.i < len(self.toks) else ("", "")
        if self.peek("(") or (kind == "id" and text in ("true", "false", "has")):
            return self.relation()
        return _truth(self.selector())

    def relation(self) -> Shape:
        if self.peek("("):
            self.i += 1
            node = self.or_()
            self.take(")")
            return node
        kind, text = self.toks[self.i] if self.i < len(self.toks) else ("", "")
        if kind == "id" and text in ("true", "false"):
            self.i += 1
            value = text == "true"
            return lambda act: value
        if kind == "id" and text == "has":
            self.i += 1
            self.take("(")
            path = self.selector()
            self.take(")")
            if len(path) < 2:
                raise SyntaxError("has() needs a field selection")
            return _has(path)
        if kind == "str":
            self.i += 1
            self.expect_in()
            return _key_in(text, self.selector())
        path = self.selector()
        if self.peek("==") or self.peek("!="):
            negate = self.toks[self.i][1] == "!="
            self.i += 1
            if self.i < len(self.toks) and self.toks[self.i][0] == "id":
                return _same(path, self.selector(), negate)
            literal = self.string()
            return _equals(path, literal, negate)
        if self.i < len(self.toks) and self.toks[self.i] == ("id", "in"):
            self.i += 1
            return _in_list(path, self.string_list())
        return _truth(path)

    def expect_in(self) -> None:
        if self.i >= len(self.toks) or self.toks[self.i] != ("id", "in"):
            raise SyntaxError("in")
        self.i += 1

    def string(self) -> str:
        if self.i >= len(self.toks) or self.toks[self.i][0] != "str":
            raise SyntaxError("string literal")
        self.i += 1
        return self.toks[self.i - 1][1]

    def string_list(self) -> frozenset[str]:
        self.take("[")
        items: list[str] = []
        while not self.peek("]"):
            items.append(self.string())
            if not self.peek("]"):
                self.take(",")
        self.take("]")
        return frozenset(items)

    def selector(self) -> tuple[str, ...]:
        kind, text = self.toks[self.i] if self.i < len(self.toks) else ("", "")
        if kind != "id" or text in _RESERVED:
            raise SyntaxError("variable")
        self.i += 1
        path = [text]
        while True:
            if self.peek("."):
                self.i += 1
                kind, text = self.toks[self.i] if self.i < len(self.toks) else ("", "")
                if kind != "id" or text in _RESERVED:
                    raise SyntaxError("field")
                self.i += 1
                path.append(text)
            elif self.peek("["):
                self.i += 1
                path.append(self.string())
                self.take("]")
            else:
                return tuple(path)


def _resolve(act: Activation, path: tuple[str, ...]) -> Any:
    """The value at `path`; Fallback where CEL would raise (a missing key, selecting into a non-map)."""
    if path[0] not in act:
        raise Fallback(path[0])
    value = act[path[0]]
    if callable(value):
        value = value()
    for field in path[1:]:
        if type(value) is not dict or field not in value:
            raise Fallback(field)
        value = value[field]
    return value


def _bool(value: Any) -> bool:
    if type(value) is not bool:
        raise Fallback("not a bool")
    return value


def _any(terms: list[Shape]) -> Shape:
    # CEL's || absorbs errors on either side when the other side is true: a Fallback left of a true term is retried
    def run(act: Activation) -> bool:
        fell = None
        for t in terms:
            try:
                if _bool(t(act)):
                    return True
            except Fallback as exc:
                fell = exc
        if fell is not None:
            raise fell
        return False
    return run


def _all(terms: list[Shape]) -> Shape:
    def run(act: Activation) -> bool:
        fell = None
        for t in terms:
            try:
                if not _bool(t(act)):
                    return False
            except Fallback as exc:
                fell = exc
        if fell is not None:
            raise fell
        return True
    return run


def _has(path: tuple[str, ...]) -> Shape:
    parent, field = path[:-1], path[-1]

    def run(act: Activation) -> bool:
        holder = _resolve(act, parent)
        if type(holder) is not dict:
            raise Fallback("has() on a non-map")
        return field in holder
    return run


def _key_in(key: str, path: tuple[str, ...]) -> Shape:
    def run(act: Activation) -> bool:
        holder = _resolve(act, path)
        if type(holder) is not dict:
            raise Fallback("in on a non-map")
        return key in holder
    return run


def _equals(path: tuple[str, ...], literal: str, negate: bool) -> Shape:
    def run(act: Activation) -> bool:
        value = _resolve(act, path)
        if type(value) is not str:
            raise Fallback("not a string")
        return (value == literal) != negate
    return run


def _same(left: tuple[str, ...], right: tuple[str, ...], negate: bool) -> Shape:
    def run(act: Activation) -> bool:
        return _deep_equal(_resolve(act, left), _resolve(act, right)) != negate
    return run


def _deep_equal(a: Any, b: Any) -> bool:
    """CEL's equality of two JSON values where it is certain: the same type at every level (maps by keys and
    values, lists element-wise); a type that differs anywhere (an int against a double, a bool against a string)
    or a value of another kind is left to CEL."""
    if type(a) is not type(b):
        raise Fallback("values of different types")
    if type(a) is dict:
        if a.keys() != b.keys():
            return False
        return all(_deep_equal(v, b[k]) for k, v in a.items())  # noqa: C419 - each comparison may fall back
    if type(a) is list:
        return len(a) == len(b) and all(_deep_equal(x, y) for x, y in zip(a, b, strict=True))
    if type(a) in (str, bool, int) or a is None:
        return a == b
    raise Fallback("not a JSON string, bool, int, map or list")


def _in_list(path: tuple[str, ...], items: frozenset[str]) -> Shape:
    def run(act: Activation) -> bool:
        value = _resolve(act, path)
        if type(value) is not str:
            raise Fallback("not a string")
        return value in items
    return run


def _truth(path: tuple[str, ...]) -> Shape:
    return lambda act: _bool(_resolve(act, path))


def compile_shape(expression: str) -> Shape | None:
    """The expression as a native closure over an activation (variable → value or zero-argument callable), or None
    when it is outside the subset. The closure returns a bool or raises Fallback."""
    toks = _tokens(expression)
    if not toks:
        return None
    try:
        return _Parser(toks).parse()
    except (SyntaxError, IndexError):
        return None
