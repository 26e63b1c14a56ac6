"""The static cost analysis of a CEL expression: celpy's lark parse tree → a cost formula over the input's sizes.

Sits under `policies.cel.compile`, which calls `Analysis().node(parse_tree(source), {})` and keeps the resulting
cost (an int, or a formula evaluated with `cel._Sizes` of the actual input before each run), the variable paths
read (`Analysis.uses`) and identifier positions for error messages. Costs follow Kubernetes' estimator: one unit
per node, a comprehension its range's size times its body, a call that walks a string or list (`WALKS`) its
length, `+` on strings and lists both sides; a list converted to or from Python for lahar's library functions
(`split`'s result, `join`'s input, ...) costs `CONVERSION_WEIGHT` per element.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["CONVERSION_WEIGHT", "MACROS", "WALKS", "Analysis", "Cost", "Formula", "parse_tree"]

MACROS = frozenset({"all", "exists", "exists_one", "map", "filter"})
# A formula takes the input's sizes (`policies.cel._Sizes`: `.at(path)`, `.largest()`) and gives a number.
Formula = Callable[[Any], int]


@functools.cache
def _parser() -> Any:
    from celpy.celparser import CELParser

    return CELParser()


def parse_tree(source: str) -> Any:
    try:
        return _parser().parse(source)
    except Exception:
        return None


@dataclass(frozen=True)
class _Node:
    cost: Cost
    size: Formula
    path: tuple[str, ...] | None = None
    occ: int = -1                      # key in `Analysis.uses` while this path's value is used as a whole


def _one(s: Any) -> int:
    return 1


def _largest(s: Any) -> int:
    return s.largest()


class Analysis:
    """Walks celpy's lark parse tree of the expression; records comprehension variables and identifier positions."""

    def __init__(self) -> None:
        self.bound: set[str] = set()
        self.positions: dict[str, tuple[int, int]] = {}
        # How each variable path is used: True whole (its value escapes: compared, passed, returned), False only
        # iterated (a comprehension's range: elements reached through the bound variable's paths), None only
        # tested for presence (`has(a.b)`).
        self.uses: dict[int, tuple[tuple[str, ...], bool | None]] = {}

    def _use(self, path: tuple[str, ...] | None) -> int:
        if path is None:
            return -1
        self.uses[len(self.uses)] = (path, True)
        return len(self.uses) - 1

    def _extended(self, inner: _Node, *, iterated: bool = False) -> None:
        if inner.occ >= 0:
            if iterated:
                self.uses[inner.occ] = (self.uses[inner.occ][0], False)
            else:
                del self.uses[inner.occ]

    def _token(self, tok: Any) -> str:
        name = str(tok)
        self.positions.setdefault(name, (getattr(tok, "line", 0) or 0, getattr(tok, "column", 0) or 0))
        return name

    def node(self, tree: Any, env: Mapping[str, tuple[str, ...] | None]) -> _Node:  # noqa: C901 — one case per rule
        from lark import Token, Tree

        if isinstance(tree, Token):
            if tree.type == "STRING_LIT" and len(tree) > 3:     # a string literal is as long as its text
                return _Node(1, lambda s, _n=len(tree) - 2: _n)
            return _Node(1, _one)
        kind, kids = tree.data, tree.children
        if kind == "ident":
            name = self._token(kids[0])
            path = env.get(name, (name,))
            return _Node(1, _path_size(path), path, self._use(path))
        if kind == "member_dot":
            inner = self.node(kids[0], env)
            self._token(kids[1])
            path = (*inner.path, str(kids[1])) if inner.path else None
            if path is not None:
                self._extended(inner)
            return _Node(_plus(inner.cost), _path_size(path), path, self._use(path))
        if kind == "member_index":
            inner, index = self.node(kids[0], env), kids[1]
            key = _string_literal(index)
            path = (*inner.path, key if key is not None else "*") if inner.path else None
            if path is not None:
                self._extended(inner)
            return _Node(_sum_cost([inner, self.node(index, env)]), _path_size(path), path, self._use(path))
        if kind == "member_dot_arg":
            target, method = kids[0], self._token(kids[1])
            args = list(kids[2].children) if len(kids) > 2 and isinstance(kids[2], Tree) else []
            var = _bare_ident(args[0]) if args else None
            if method in MACROS and len(args) >= 2 and var is not None:
                self.bound.add(var)
                rng = self.node(target, env)
                if method != "filter":          # filter returns the elements themselves: they stay whole
                    self._extended(rng, iterated=True)
                inner_env = {**env, var: (*rng.path, "*") if rng.path else None}
                body = [self.node(a, inner_env) for a in args[1:]]
                return _Node(_comprehension(rng, body), rng.size if method in ("map", "filter") else _one)
            tgt, argn = self.node(target, env), [self.node(a, env) for a in args]
            return _Node(_total([_sum_cost([tgt, *argn]), *_traversal(method, tgt, argn)], extra=0),
                         _result_size(method, tgt, argn))
        if kind == "ident_arg":
            fn = self._token(kids[0])
            args = list(kids[1].children) if len(kids) > 1 and isinstance(kids[1], Tree) else []
            parts = [self.node(a, env) for a in args]
            if fn == "has" and len(parts) == 1 and parts[0].occ >= 0:   # only the field's presence is read
                self.uses[parts[0].occ] = (self.uses[parts[0].occ][0], None)
            return _Node(_sum_cost(parts), _one if fn in _SCALAR else _largest)
        if kind == "list_lit":
            items = list(kids[0].children) if kids and isinstance(kids[0], Tree) else []
            parts = [self.node(a, env) for a in items]
            n = len(items)
            return _Node(_sum_cost(parts), lambda s, _n=n: _n)
        if kind == "addition" and len(kids) == 2 and isinstance(kids[0], Tree) and kids[0].data == "addition_add":
            left, right = self.node(kids[0].children[0], env), self.node(kids[1], env)
            size = _concat_size(left.size, right.size)   # `+` on strings and lists copies both sides
            return _Node(_total([_sum_cost([left, right]), size], extra=0), size)
        subtrees = [k for k in kids if isinstance(k, Tree)]
        if len(kids) == 1:
            return self.node(kids[0], env)          # pass-through rules (expr, member, primary, literal, ...)
        return _Node(_sum_cost([self.node(k, env) for k in subtrees]), _largest)


# Kubernetes' estimator charges by size, not by node: a call that walks its string or list costs its length, and
# what it returns is as large as what it walked (`split('')` of a 1 MB string is a million-element list).
WALKS = frozenset({"split", "replace", "join", "lowerAscii", "upperAscii", "trim", "indexOf", "lastIndexOf",
                    "contains", "startsWith", "endsWith", "matches", "substring", "sum", "min", "max", "isSorted"})
_KEEPS_SIZE = frozenset({"split", "lowerAscii", "upperAscii", "trim", "substring"})
# Calls whose result is a number, a bool or one character: as small as a literal.
_SCALAR = frozenset({"size", "contains", "startsWith", "endsWith", "matches", "indexOf", "lastIndexOf", "isSorted",
                     "sum", "isGreaterThan", "isLessThan", "compareTo", "asInteger", "asApproximateFloat", "sign",
                     "isInteger", "isQuantity", "q", "charAt", "int", "uint", "double", "has", "getFullYear",
                     "getMonth", "getDate", "getDayOfMonth", "getDayOfWeek", "getDayOfYear", "getHours",
                     "getMinutes", "getSeconds", "getMilliseconds"})


# lahar's library functions run in Python: a list they take or return is converted element by element between CEL
# and Python values (a few µs each, where an engine node takes tens of ns), so each such element costs this much.
CONVERSION_WEIGHT = 100
_LIST_RESULT = frozenset({"split"})
_LIST_TARGET = frozenset({"join", "sum", "min", "max", "isSorted"})


def _traversal(method: str, target: _Node, args: list[_Node]) -> list[Cost]:
    if method not in WALKS:
        return []
    if method == "replace" and len(args) >= 2:     # every match may become the replacement
        return [_replaced_size(target.size, args[1].size)]
    if method in _LIST_RESULT or method in _LIST_TARGET:
        return [_weighted(target.size)]
    return [target.size]


def _weighted(size: Formula) -> Formula:
    return lambda s: CONVERSION_WEIGHT * size(s)


def _result_size(method: str, target: _Node, args: list[_Node]) -> Formula:
    if method == "replace" and len(args) >= 2:
        return _replaced_size(target.size, args[1].size)
    if method in _SCALAR:
        return _one
    return target.size if method in _KEEPS_SIZE else _largest


def _replaced_size(text: Formula, new: Formula) -> Formula:
    return lambda s: text(s) * (1 + new(s))


def _concat_size(a: Formula, b: Formula) -> Formula:
    return lambda s: a(s) + b(s)


def _path_size(path: tuple[str, ...] | None) -> Formula:
    if path is None:
        return _largest
    return lambda s, _p=path: s.at(_p)


# A cost is an int (no comprehension below: known at compile time) or a formula over the input's sizes; constants
# are folded so evaluating the formula costs one call per comprehension, not one per node.
Cost = int | Formula


def _total(costs: list[Cost], extra: int = 1) -> Cost:
    const = extra + sum(c for c in costs if isinstance(c, int))
    fns = [c for c in costs if not isinstance(c, int)]
    if not fns:
        return const
    if len(fns) == 1:
        f = fns[0]
        return lambda s: const + f(s)
    return lambda s: const + sum(f(s) for f in fns)


def _plus(cost: Cost) -> Cost:
    return _total([cost])


def _sum_cost(parts: list[_Node]) -> Cost:
    return _total([p.cost for p in parts])


def _comprehension(rng: _Node, body: list[_Node]) -> Cost:
    per_item, range_cost, size = _total([b.cost for b in body]), rng.cost, rng.size
    if isinstance(per_item, int):
        return _total([range_cost, lambda s: size(s) * per_item], extra=0)
    return _total([range_cost, lambda s: size(s) * per_item(s)], extra=0)


def _bare_ident(tree: Any) -> str | None:
    from lark import Tree

    node = tree
    while isinstance(node, Tree) and len(node.children) == 1 and node.data != "ident":
        node = node.children[0]
    if isinstance(node, Tree) and node.data == "ident":
        return str(node.children[0])
    return None


def _string_literal(tree: Any) -> str | None:
    from lark import Token, Tree

    node = tree
    while isinstance(node, Tree) and len(node.children) == 1:
        node = node.children[0]
    if isinstance(node, Token) and node.type == "STRING_LIT" and not node.startswith(("r", "R")):
        return node[1:-1]
    return None
