"""CEL's common subset as Python closures over plain JSON values: the fast path of `policies.cel.Program.evaluate`.

Sits under `policies.cel.compile`, which calls `build(tree)` on the lark parse tree its cost analysis already has
(`cel_costs.parse_tree`) and keeps the result beside the engine's program. The engine (the Rust binding) needs its
input converted into CEL values first (about 1 ms for a 4-task Job on a loaded machine, and ~30 µs for an empty
environment), then copies nested maps on member access; a closure tree reads the review's Python dicts as they are,
so a review whose expressions all take this path converts nothing.

The closures answer only when they are certain to give the engine's answer: every operator checks its operands'
exact types (no int/double mixing, bool is not an int), int results stay in int64, and anything else — a missing
key, a type the operator does not take, a division by zero, a library function that raises, an element of a
comprehension that does — raises `Unsure`, and `Program.evaluate` runs the engine instead, which gives the answer
or the error users see. `&&`, `||`, `?:` and the comprehensions short-circuit as CEL does: `false && x` is false
without looking at `x` (an error in `x` is absorbed), and when the left side is unsure the engine decides, which
absorbs an error on the left as CEL's commutative `&&`/`||` do. An expression with anything outside the subset (bytes,
uints, escapes in strings, timestamps, `matches`, struct literals, ...) gets no closure (`build` returns None) and
always runs on the engine. Bounds stay where they were: the text checks and the cost estimate are taken before
either path runs, and `cel.NATIVE_MAX_COST` keeps the expensive expressions on the engine.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["Native", "Unsure", "build"]

INT_MIN, INT_MAX = -(2**63), 2**63 - 1
# A closure: (root variables, comprehension slots) -> value.
Fn = Callable[[Mapping[str, Any], list[Any]], Any]


class Unsure(Exception):  # noqa: N818 — not an error: "ask the engine"
    """The closures cannot be sure of the engine's answer on this input: evaluate with the engine."""


_MISSING = object()


class Native:
    """A compiled closure tree: `run(data)` returns the value or raises `Unsure` (or anything else, which the
    caller treats the same way)."""

    __slots__ = ("_fn", "_slots")

    def __init__(self, fn: Fn, slots: int) -> None:
        self._fn, self._slots = fn, slots

    def run(self, data: Mapping[str, Any]) -> Any:
        return _fresh(self._fn(data, [None] * self._slots))


def _fresh(value: Any) -> Any:
    """A result that shares no container with the input (the engine's results are new objects)."""
    if type(value) is dict:
        return {k: _fresh(v) for k, v in value.items()}
    if type(value) is list:
        return [_fresh(v) for v in value]
    return value


class _Unsupported(Exception):  # noqa: N818 — compile-time: this expression gets no closure
    pass


def build(tree: Any, library: Mapping[str, Callable[..., Any]]) -> Native | None:
    """The closure tree of a parsed expression, or None if it uses anything outside the subset."""
    if tree is None:
        return None
    b = _Builder(library)
    try:
        fn = b.node(tree, {})
    except Exception:                         # _Unsupported, RecursionError, a tree shape not foreseen
        return None
    return Native(fn, b.slots)


def _int(v: int) -> int:
    if INT_MIN <= v <= INT_MAX:
        return v
    raise Unsure


def _same_scalar(a: Any, b: Any) -> bool:
    t = type(a)
    return t is type(b) and (t is int or t is str or t is float or t is bool)


def _eq(a: Any, b: Any) -> bool:
    if _same_scalar(a, b):
        return a == b
    if a is None or b is None:
        return a is b
    raise Unsure


def _order(op: str) -> Callable[[Any, Any], bool]:
    import operator

    f = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}[op]

    def cmp(a: Any, b: Any) -> bool:
        t = type(a)
        if t is type(b) and (t is int or t is str or t is float):
            return f(a, b)
        raise Unsure
    return cmp


def _in(x: Any, c: Any) -> bool:
    tc = type(c)
    if tc is dict:
        if type(x) is str:
            return x in c
        raise Unsure
    if tc is list:
        tx = type(x)
        if tx is int or tx is str or tx is float or tx is bool:
            for v in c:
                if type(v) is not tx:
                    raise Unsure
            return x in c
    raise Unsure


def _add(a: Any, b: Any) -> Any:
    t = type(a)
    if t is type(b):
        if t is int:
            return _int(a + b)
        if t is str or t is float or t is list:
            return a + b
    raise Unsure


def _sub(a: Any, b: Any) -> Any:
    t = type(a)
    if t is type(b):
        if t is int:
            return _int(a - b)
        if t is float:
            return a - b
    raise Unsure


def _mul(a: Any, b: Any) -> Any:
    t = type(a)
    if t is type(b):
        if t is int:
            return _int(a * b)
        if t is float:
            return a * b
    raise Unsure


def _div(a: Any, b: Any) -> Any:
    t = type(a)
    if t is type(b) and b != 0:
        if t is int:
            if (a >= 0) == (b > 0):          # same signs: floor division truncates toward zero as CEL's does
                return _int(a // b)
        elif t is float:
            return a / b
    raise Unsure


def _mod(a: Any, b: Any) -> Any:
    if type(a) is int and type(b) is int and a >= 0 and b > 0:
        return a % b
    raise Unsure


_BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "relation_eq": _eq, "relation_ne": lambda a, b: not _eq(a, b), "relation_lt": _order("<"),
    "relation_le": _order("<="), "relation_gt": _order(">"), "relation_ge": _order(">="), "relation_in": _in,
    "addition_add": _add, "addition_sub": _sub, "multiplication_mul": _mul, "multiplication_div": _div,
    "multiplication_mod": _mod,
}
_DIGITS = re.compile(r"[+-]?[0-9]+")


def _size(v: Any) -> int:
    t = type(v)
    if t is list or t is dict or (t is str and v.isascii()):   # the engine counts a string's UTF-8 bytes
        return len(v)
    raise Unsure


def _to_int(v: Any) -> int:
    t = type(v)
    if t is int:
        return v
    if t is float and math.isfinite(v):
        return _int(math.trunc(v))
    if t is str and _DIGITS.fullmatch(v):
        return _int(int(v))
    raise Unsure


def _to_string(v: Any) -> str:
    t = type(v)
    if t is str:
        return v
    if t is int:
        return str(v)
    raise Unsure


def _to_double(v: Any) -> float:
    t = type(v)
    if t is float:
        return v
    if t is int:
        return float(v)
    raise Unsure


def _str_method(f: Callable[[str, str], bool]) -> Callable[[Any, Any], bool]:
    def call(s: Any, x: Any) -> bool:
        if type(s) is str and type(x) is str:
            return f(s, x)
        raise Unsure
    return call


_BUILTIN_GLOBAL = {"size": _size, "int": _to_int, "string": _to_string, "double": _to_double}
_BUILTIN_METHOD = {"size": _size, "startsWith": _str_method(str.startswith), "endsWith": _str_method(str.endswith),
                   "contains": _str_method(str.__contains__)}
_MACROS = frozenset({"all", "exists", "exists_one", "map", "filter"})
_RESULT_TYPES = (bool, int, float, str, list, dict, type(None))


def _checked(v: Any) -> Any:
    """A library function's result as the engine would take it: plain types, ints in int64."""
    t = type(v)
    if t is int:
        return _int(v)
    if t in _RESULT_TYPES:
        return v
    raise Unsure


class _Builder:
    def __init__(self, library: Mapping[str, Callable[..., Any]]) -> None:
        self.library = library
        self.slots = 0

    def node(self, tree: Any, scope: Mapping[str, int]) -> Fn:  # noqa: C901 — one case per grammar rule
        from lark import Token

        while not isinstance(tree, Token) and len(tree.children) == 1 and tree.data not in _LEAVES:
            tree = tree.children[0]
        if isinstance(tree, Token):
            raise _Unsupported
        kind, kids = tree.data, tree.children
        if kind == "literal":
            value = _literal(kids[0])
            return lambda d, s: value
        if kind == "ident":
            return self._ident(str(kids[0]), scope)
        if kind == "expr" and len(kids) == 3:
            return self._ternary(*(self.node(k, scope) for k in kids))
        if kind in ("conditionalor", "conditionaland") and len(kids) == 2:
            return self._logic(kind == "conditionaland", self.node(kids[0], scope), self.node(kids[1], scope))
        if kind in ("relation", "addition", "multiplication") and len(kids) == 2:
            op = kids[0].data
            f = _BINARY.get(op)
            if f is None or len(kids[0].children) != 1:
                raise _Unsupported
            return self._binary(f, self.node(kids[0].children[0], scope), self.node(kids[1], scope))
        if kind == "unary" and len(kids) == 2:
            return self._unary(kids[0].data, self.node(kids[1], scope))
        if kind == "member_dot":
            return self._selection(tree, scope)
        if kind == "member_index":
            return self._index(self.node(kids[0], scope), self.node(kids[1], scope))
        if kind == "member_dot_arg":
            return self._method(kids, scope)
        if kind == "ident_arg":
            return self._call(str(kids[0]), _args(kids[1:]), scope)
        if kind == "paren_expr":
            return self.node(kids[0], scope)
        if kind == "list_lit":
            items = [self.node(a, scope) for a in _args(kids)]
            return lambda d, s: [f(d, s) for f in items]
        if kind == "map_lit":
            return self._map(kids, scope)
        raise _Unsupported                    # member_object, dot_ident, dot_ident_arg, ...

    # -- leaves and operators --------------------------------------------------------------------------------

    def _ident(self, name: str, scope: Mapping[str, int]) -> Fn:
        slot = scope.get(name)
        if slot is not None:
            return lambda d, s: s[slot]

        def root(d: Mapping[str, Any], s: list[Any]) -> Any:
            try:
                return d[name]
            except KeyError:
                raise Unsure from None
        return root

    @staticmethod
    def _ternary(cond: Fn, yes: Fn, no: Fn) -> Fn:
        def f(d: Mapping[str, Any], s: list[Any]) -> Any:
            c = cond(d, s)
            if c is True:
                return yes(d, s)
            if c is False:
                return no(d, s)
            raise Unsure
        return f

    @staticmethod
    def _logic(is_and: bool, left: Fn, right: Fn) -> Fn:
        def f_and(d: Mapping[str, Any], s: list[Any]) -> Any:
            a = left(d, s)
            if a is False:
                return False
            b = right(d, s)
            if a is True and (b is True or b is False):
                return b
            raise Unsure                     # a side that is not a bool: the engine's call

        def f_or(d: Mapping[str, Any], s: list[Any]) -> Any:
            a = left(d, s)
            if a is True:
                return True
            b = right(d, s)
            if a is False and (b is True or b is False):
                return b
            raise Unsure
        return f_and if is_and else f_or

    @staticmethod
    def _binary(op: Callable[[Any, Any], Any], left: Fn, right: Fn) -> Fn:
        return lambda d, s: op(left(d, s), right(d, s))

    @staticmethod
    def _unary(kind: str, inner: Fn) -> Fn:
        if kind == "unary_not":
            def f_not(d: Mapping[str, Any], s: list[Any]) -> bool:
                v = inner(d, s)
                if v is True or v is False:
                    return not v
                raise Unsure
            return f_not
        if kind == "unary_neg":
            def f_neg(d: Mapping[str, Any], s: list[Any]) -> Any:
                v = inner(d, s)
                t = type(v)
                if t is int:
                    return _int(-v)
                if t is float:
                    return -v
                raise Unsure
            return f_neg
        raise _Unsupported

    def _selection(self, tree: Any, scope: Mapping[str, int]) -> Fn:
        """`a.b.c`: one closure walking the chain of field names (one call per selection, not per field)."""
        from lark import Token

        names: list[str] = []
        node = tree
        while True:
            while not isinstance(node, Token) and len(node.children) == 1 and node.data not in _LEAVES:
                node = node.children[0]
            if isinstance(node, Token) or node.data != "member_dot":
                break
            names.append(str(node.children[1]))
            node = node.children[0]
        names.reverse()
        path = tuple(names)
        root = str(node.children[0]) if not isinstance(node, Token) and node.data == "ident" else None
        if root is not None and root not in scope:
            def from_root(d: Mapping[str, Any], s: list[Any]) -> Any:    # `object.spec.x`: no call for `object`
                v = d.get(root, _MISSING)
                for name in path:
                    if type(v) is not dict:
                        raise Unsure
                    v = v.get(name, _MISSING)
                    if v is _MISSING:
                        raise Unsure
                return v
            return from_root
        if root is not None:
            slot = scope[root]

            def from_slot(d: Mapping[str, Any], s: list[Any]) -> Any:    # `t.template.spec` in a comprehension
                v = s[slot]
                for name in path:
                    if type(v) is not dict:
                        raise Unsure
                    v = v.get(name, _MISSING)
                    if v is _MISSING:
                        raise Unsure
                return v
            return from_slot
        target = self.node(node, scope)

        def f(d: Mapping[str, Any], s: list[Any]) -> Any:
            v = target(d, s)
            for name in path:
                if type(v) is not dict:
                    raise Unsure
                v = v.get(name, _MISSING)
                if v is _MISSING:
                    raise Unsure
            return v
        return f

    @staticmethod
    def _index(target: Fn, key: Fn) -> Fn:
        def f(d: Mapping[str, Any], s: list[Any]) -> Any:
            v, k = target(d, s), key(d, s)
            tv, tk = type(v), type(k)
            if tv is dict and tk is str and k in v:
                return v[k]
            if tv is list and tk is int and 0 <= k < len(v):
                return v[k]
            raise Unsure
        return f

    def _map(self, kids: list[Any], scope: Mapping[str, int]) -> Fn:
        inits = list(kids[0].children) if kids and kids[0] is not None else []
        pairs = [(self.node(inits[i], scope), self.node(inits[i + 1], scope)) for i in range(0, len(inits), 2)]

        def f(d: Mapping[str, Any], s: list[Any]) -> dict[str, Any]:
            out: dict[str, Any] = {}
            for kf, vf in pairs:
                k = kf(d, s)
                if type(k) is not str or k in out:
                    raise Unsure             # other key types, or a duplicate key (an error in CEL)
                out[k] = vf(d, s)
            return out
        return f

    # -- calls -------------------------------------------------------------------------------------------------

    def _call(self, name: str, args: list[Any], scope: Mapping[str, int]) -> Fn:
        if name == "has":
            return self._has(args, scope)
        fns = [self.node(a, scope) for a in args]
        builtin = _BUILTIN_GLOBAL.get(name)
        if builtin is not None:
            if len(fns) != 1:
                raise _Unsupported
            (arg,) = fns
            return lambda d, s: builtin(arg(d, s))
        lib = self.library.get(name)
        if lib is None:
            raise _Unsupported
        return _library_call(lib, fns)

    def _has(self, args: list[Any], scope: Mapping[str, int]) -> Fn:
        from lark import Token

        if len(args) != 1:
            raise _Unsupported
        node = args[0]
        while not isinstance(node, Token) and len(node.children) == 1:
            node = node.children[0]
        if isinstance(node, Token) or node.data != "member_dot":
            raise _Unsupported
        target, name = self.node(node.children[0], scope), str(node.children[1])

        def f(d: Mapping[str, Any], s: list[Any]) -> bool:
            v = target(d, s)
            if type(v) is dict:
                return name in v
            raise Unsure
        return f

    def _method(self, kids: list[Any], scope: Mapping[str, int]) -> Fn:
        method, args = str(kids[1]), _args(kids[2:])
        if method in _MACROS:
            return self._macro(method, kids[0], args, scope)
        target = self.node(kids[0], scope)
        fns = [target, *(self.node(a, scope) for a in args)]
        builtin = _BUILTIN_METHOD.get(method)
        if builtin is not None:
            if method == "size":
                if len(fns) != 1:
                    raise _Unsupported
                return lambda d, s: _size(target(d, s))
            if len(fns) != 2:
                raise _Unsupported
            arg = fns[1]
            return lambda d, s: builtin(target(d, s), arg(d, s))
        lib = self.library.get(method)
        if lib is None:
            raise _Unsupported
        return _library_call(lib, fns)

    def _macro(self, method: str, target: Any, args: list[Any], scope: Mapping[str, int]) -> Fn:
        from lark import Token

        var = args[0] if args else None
        while var is not None and not isinstance(var, Token) and len(var.children) == 1 and var.data != "ident":
            var = var.children[0]
        if var is None or isinstance(var, Token) or var.data != "ident" or not 2 <= len(args) <= 3:
            raise _Unsupported
        if len(args) == 3 and method != "map":
            raise _Unsupported
        rng = self.node(target, scope)
        slot = self.slots
        self.slots += 1
        inner = {**scope, str(var.children[0]): slot}
        body = [self.node(a, inner) for a in args[1:]]
        return _MACRO_BUILDERS[method](rng, slot, body)


def _args(rest: list[Any]) -> list[Any]:
    return list(rest[0].children) if rest and rest[0] is not None else []


def _library_call(lib: Callable[..., Any], fns: list[Fn]) -> Fn:
    if len(fns) == 1:
        (g,) = fns

        def f1(d: Mapping[str, Any], s: list[Any]) -> Any:
            a = g(d, s)
            try:
                return _checked(lib(a))
            except Exception:
                raise Unsure from None       # the engine reports the function's error
        return f1

    def f(d: Mapping[str, Any], s: list[Any]) -> Any:
        args = [g(d, s) for g in fns]
        try:
            return _checked(lib(*args))
        except Exception:
            raise Unsure from None
    return f


def _elements(v: Any) -> Any:
    t = type(v)
    if t is list or t is dict:
        return v                              # a map's elements are its keys
    raise Unsure


def _quantifier(decisive: bool) -> Callable[[Fn, int, list[Fn]], Fn]:
    """`all` (decisive False) and `exists` (decisive True): the first element whose predicate gives `decisive` ends
    the loop with it; a predicate that is not a bool leaves the answer to the engine."""
    other = not decisive

    def build(rng: Fn, slot: int, body: list[Fn]) -> Fn:
        (pred,) = body

        def f(d: Mapping[str, Any], s: list[Any]) -> bool:
            for item in _elements(rng(d, s)):
                s[slot] = item
                r = pred(d, s)
                if r is decisive:
                    return decisive
                if r is not other:
                    raise Unsure
            return other
        return f
    return build


def _exists_one(rng: Fn, slot: int, body: list[Fn]) -> Fn:
    (pred,) = body

    def f(d: Mapping[str, Any], s: list[Any]) -> bool:
        n = 0
        for item in _elements(rng(d, s)):
            s[slot] = item
            r = pred(d, s)
            if r is True:
                n += 1
            elif r is not False:
                raise Unsure
        return n == 1
    return f


def _map_macro(rng: Fn, slot: int, body: list[Fn]) -> Fn:
    if len(body) == 1:
        (expr,) = body

        def f(d: Mapping[str, Any], s: list[Any]) -> list[Any]:
            out = []
            for item in _elements(rng(d, s)):
                s[slot] = item
                out.append(expr(d, s))
            return out
        return f
    pred, expr = body

    def g(d: Mapping[str, Any], s: list[Any]) -> list[Any]:
        out = []
        for item in _elements(rng(d, s)):
            s[slot] = item
            r = pred(d, s)
            if r is True:
                out.append(expr(d, s))
            elif r is not False:
                raise Unsure
        return out
    return g


def _filter(rng: Fn, slot: int, body: list[Fn]) -> Fn:
    (pred,) = body

    def f(d: Mapping[str, Any], s: list[Any]) -> list[Any]:
        out = []
        for item in _elements(rng(d, s)):
            s[slot] = item
            r = pred(d, s)
            if r is True:
                out.append(item)
            elif r is not False:
                raise Unsure
        return out
    return f


_MACRO_BUILDERS = {"all": _quantifier(False), "exists": _quantifier(True), "exists_one": _exists_one, "map": _map_macro, "filter": _filter}
_LEAVES = frozenset({"literal", "ident", "list_lit", "map_lit", "paren_expr", "ident_arg", "member_dot",
                     "member_dot_arg", "member_index", "member_object", "dot_ident", "dot_ident_arg"})
_FLOAT = re.compile(r"-?(?:[0-9]+\.[0-9]*|[0-9]*\.[0-9]+|[0-9]+)(?:[eE][+-]?[0-9]+)?")


def _literal(tok: Any) -> Any:
    text, kind = str(tok), tok.type
    if kind == "BOOL_LIT":
        return text == "true"
    if kind == "NULL_LIT":
        return None
    if kind == "INT_LIT" and "x" not in text.lower():
        value = int(text)
        if INT_MIN <= value <= INT_MAX:
            return value
    if kind == "FLOAT_LIT" and _FLOAT.fullmatch(text):
        return float(text)
    if kind == "STRING_LIT" and text[0] in "\"'" and "\\" not in text:
        return text[1:-1]
    raise _Unsupported                        # uint, hex, bytes, raw or triple-quoted strings, escapes
