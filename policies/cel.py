"""CEL for lahar's admission policies: compile once, evaluate many times under a cost limit.

Sits under `policies.admission_policies` (users' AdmissionPolicy documents) and `lahar policy test|report`.

Engine: `common-expression-language` (the Rust `cel` crate behind Python bindings; the README's "Why this CEL
package" has the measurements against `cel-python`). `compile(expression)` returns a `Program` or raises
`CompileError` carrying the CEL error and its 1-based line and column. Beyond syntax, compilation refuses a
reference to an undeclared variable (`objects.metadata`) or function (`'a'.splt(',')`) with its position, so a
typo is caught when the policy is loaded, not when the first object arrives.

Cost limit. The Rust evaluator holds the GIL and has no interrupt, so a runaway expression cannot be stopped once
it runs. CEL has no loops, only comprehensions (`all`, `exists`, `exists_one`, `map`, `filter`) over finite lists
and maps, so the work an expression can do is bounded by its shape and the sizes of the collections it ranges over.
Before any parser sees it, the text is bounded (`policies.cel_text`: length, tokens, nesting), so a hostile
expression is a `CompileError`, never a crash. Compilation then turns the expression into a cost formula
(`policies.cel_costs`; Kubernetes' estimated cost: one unit per node, a
comprehension costs its range's size times its body), and `Program.evaluate` computes it with the sizes of the
actual input (`object.spec.tasks` has 4 elements; a range it cannot name is bounded by the largest collection
anywhere in the input) before running anything. Above `cost_limit` (default 1,000,000, Kubernetes' per-expression
limit) evaluation is refused with `CostLimitExceeded` naming the estimate and the limit. Costs follow sizes, as in
Kubernetes' estimator: a call that walks a string or list (`split`, `replace`, `contains`, `matches`, ...) costs
its length and returns a value as large, and `+` on strings and lists costs both sides. An `Activation` may carry a
`budget` (per review, Kubernetes' 10,000,000): each evaluation spends its estimate, and one that does not fit is
refused with `CostBudgetExhausted`, as is all that follows. It may also carry a deadline: every evaluation after it
is refused (`EvaluationError`), which bounds a whole policy stage.

Input size. The engine converts a Python value into CEL values slowly (~0.3 ms for a 4-task Job) and copies a
nested map on each member access past the first, so compilation also records the variable paths an expression
reads (`Program.accesses`: whole, only iterated, only tested with `has`); `Reach(root, programs)` turns the union
into `view(value)`, the value pruned to what those programs can read, and `Activation(views=...)` hands the engine
only that (once per review; a rebinding whose view is unchanged costs no reconversion).

Closures. Where the expression stays within a common subset (fields, indexes, `has`, the operators on ints,
doubles and strings, `in`, the comprehensions, `size`/`int`/`string`/`double`, `startsWith`/`endsWith`/`contains`
and the library below), compilation also builds it as Python closures over the plain input (`policies.cel_native`),
and `Program.evaluate` runs those first, after the same cost checks: they read the review's dicts as they are, so
nothing is converted for the engine. They answer only when sure of the engine's answer; on anything else (a
missing key, mixed types, an overflow, an error) the engine runs and answers, error messages included. Above
`NATIVE_MAX_COST` the engine runs directly.

Functions beyond standard CEL (Kubernetes' CEL libraries that policies commonly use):
- quantities: `quantity('1Gi')` (a value compared with `.isGreaterThan(q)`, `.isLessThan(q)`, `.compareTo(q)`
  (-1/0/1), combined with `.add(q|int)`, `.sub(q|int)`, read with `.asInteger()`, `.asApproximateFloat()`,
  `.sign()`, `.isInteger()`; `==` compares canonical forms), `isQuantity(s)`, and the shortcut `q(s)`: the
  quantity as a double in base units (`q('500m') == 0.5`, `q('1Gi') == 1073741824.0`, `q(8) == 8.0`);
- strings: `lowerAscii`, `upperAscii`, `trim`, `split(sep[, n])`, `join([sep])`, `replace(a, b[, n])`,
  `indexOf(x)`, `lastIndexOf(x)` (also on lists), `substring(i[, j])`, `charAt(i)`;
- lists: `sum()`, `min()`, `max()`, `isSorted()`;
- `jsonpatch.escapeKey(key)` for JSONPatch paths (`~` → `~0`, `/` → `~1`), and MutatingAdmissionPolicy's typed
  patch literal `JSONPatch{op: "add", path: "/x", value: 1}`, read as the map `{"op": ..., "path": ..., ...}`.
"""

from __future__ import annotations

import functools
import logging
import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import cel as _cel

from lahar.kube import quantity as _quantity
from lahar.policies import cel_native, cel_text
from lahar.policies.cel_costs import MACROS, WALKS, Analysis, Formula, parse_tree

__all__ = [
    "BUILTIN_FUNCTIONS",
    "DEFAULT_COST_LIMIT",
    "DEFAULT_REVIEW_BUDGET",
    "LIBRARY",
    "NATIVE_MAX_COST",
    "ROOT_VARIABLES",
    "Activation",
    "CelError",
    "CompileError",
    "CostBudgetExhausted",
    "CostLimitExceeded",
    "EvaluationError",
    "Program",
    "Reach",
    "compile",
]

DEFAULT_COST_LIMIT = 1_000_000
DEFAULT_REVIEW_BUDGET = 10_000_000        # Kubernetes' RuntimeCELCostBudget: all expressions of one review together
# Above this estimated cost an expression runs on the engine even when it has closures (`cel_native`): a closure
# node costs ~0.2 µs where an engine node costs tens of ns, so the expensive ones are faster there.
NATIVE_MAX_COST = 20_000
ANALYSIS_TOKENS = 1_000
# The variables of ValidatingAdmissionPolicy / MutatingAdmissionPolicy expressions (`authorizer` is not offered),
# plus lahar's `queueObject`: the Volcano Queue the reviewed Job/PodGroup/Pod is submitted to (null if none).
ROOT_VARIABLES = frozenset({"object", "oldObject", "request", "params", "namespaceObject", "queueObject", "variables",
                            "jsonpatch"})
# What the engine implements itself (macros and `has` never show up in a program's function list).
BUILTIN_FUNCTIONS = frozenset({
    "size", "contains", "startsWith", "endsWith", "matches", "int", "uint", "double", "string", "bytes", "type",
    "dyn", "duration", "timestamp", "getFullYear", "getMonth", "getDate", "getDayOfMonth", "getDayOfWeek",
    "getDayOfYear", "getHours", "getMinutes", "getSeconds", "getMilliseconds", "has", *MACROS,
})

# Our library functions raise ValueError on bad input (a malformed quantity); the binding logs each one as a
# warning before raising it to us, and we report it with the policy's name, so its log line is noise.
logging.getLogger("cel").setLevel(logging.ERROR)


class CelError(Exception):
    """Any CEL problem; `str()` is the message a user reads."""


class CompileError(CelError):
    """The expression does not compile: `reason` at 1-based `line`, `column` (0 when unknown)."""

    def __init__(self, expression: str, reason: str, *, line: int = 0, column: int = 0) -> None:
        self.expression, self.reason, self.line, self.column = expression, reason, line, column
        where = f" at line {line}, column {column}" if line else ""
        text = f"{reason}{where}"
        if line:
            lines = expression.splitlines() or [expression]
            src = lines[min(line, len(lines)) - 1]
            start = max(0, column - 1 - 60)         # a long line is shown as 120 characters around the column
            text += f"\n | {src[start:start + 120]}\n | {'.' * (column - 1 - start)}^"
        super().__init__(text)


class EvaluationError(CelError):
    """The expression compiled but failed on this input (no such key, no matching overload, ...)."""


class CostBudgetExhausted(EvaluationError):
    """The review's cost budget (`Activation.budget`) is spent: this expression and those after it are not run."""

    def __init__(self, estimated: int, remaining: int) -> None:
        self.estimated, self.remaining = estimated, remaining
        super().__init__(f"running out of cost budget: estimated cost {estimated}, {remaining} left of the review's "
                         "budget; no further expressions are evaluated")


class CostLimitExceeded(EvaluationError):
    """The expression's estimated cost on this input is above the limit; it was not run."""

    def __init__(self, estimated: int, limit: int) -> None:
        self.estimated, self.limit = estimated, limit
        super().__init__(f"estimated cost {estimated} exceeds the limit {limit}: the expression was not evaluated "
                         "(nested comprehensions over large lists?)")


# --- library functions -------------------------------------------------------------------------------------------

_QKEY = "@quantity"


@functools.lru_cache(maxsize=4096)
def _parse_q(text: str) -> _quantity.Quantity:
    return _quantity.parse(text)


def _q_of(v: Any) -> _quantity.Quantity:
    if isinstance(v, Mapping) and _QKEY in v:
        return _parse_q(v[_QKEY])
    if isinstance(v, bool):
        raise ValueError(f"not a quantity: {v!r}")
    if isinstance(v, int | float | str):
        return _parse_q(str(v)) if not isinstance(v, float) else _quantity.parse(v)
    raise ValueError(f"not a quantity: {v!r}")


def _q_value(q: _quantity.Quantity) -> dict[str, str]:
    return {_QKEY: q.canonical}


def _cmp(a: Any, b: Any) -> int:
    return _q_of(a).cmp(_q_of(b))


def _as_integer(a: Any) -> int:
    q = _q_of(a)
    if q.fraction.denominator != 1 or not -(2**63) <= q.fraction <= 2**63 - 1:
        raise ValueError(f"quantity {q.canonical} is not an int64 integer")
    return int(q.fraction)


def _isquantity(s: Any) -> bool:
    try:
        _q_of(s)
    except ValueError:
        return False
    return True


def _over(args: tuple[Any, ...]) -> list[Any]:
    if len(args) == 1 and isinstance(args[0], list):
        if not args[0]:
            raise ValueError("empty list")
        return args[0]
    return list(args)


def _split(s: str, sep: str, n: int = -1) -> list[str]:
    if n == 0:
        return []
    if sep == "":
        parts = list(s)
        return parts if n < 0 or len(parts) <= n else [*parts[: n - 1], "".join(parts[n - 1:])]
    return s.split(sep, n - 1 if n > 0 else -1)


def _replace(s: str, old: str, new: str, n: int = -1) -> str:
    return s.replace(old, new, n)


def _index_of(x: Any, item: Any, start: int = 0) -> int:
    return x.index(item, start) if item in x[start:] else -1


def _last_index_of(x: Any, item: Any) -> int:
    if isinstance(x, str):
        return x.rfind(item)
    return len(x) - 1 - x[::-1].index(item) if item in x else -1


def _substring(s: str, start: int, end: int | None = None) -> str:
    end = len(s) if end is None else end
    if not 0 <= start <= end <= len(s):
        raise ValueError(f"substring({start}, {end}) out of range for a string of length {len(s)}")
    return s[start:end]


def _escape_key(*args: Any) -> str:
    key = args[-1]
    return str(key).replace("~", "~0").replace("/", "~1")


def _join(items: list[str], sep: str = "") -> str:
    return sep.join(items)


def _sum(items: list[Any]) -> Any:
    return sum(items) if items else 0


def _is_sorted(items: list[Any]) -> bool:
    return all(a <= b for a, b in zip(items, items[1:], strict=False))


LIBRARY: dict[str, Callable[..., Any]] = {
    "quantity": lambda s: _q_value(_q_of(s)),
    "isQuantity": _isquantity,
    "q": lambda s: float(_q_of(s)),
    "isGreaterThan": lambda a, b: _cmp(a, b) > 0,
    "isLessThan": lambda a, b: _cmp(a, b) < 0,
    "compareTo": _cmp,
    "add": lambda a, b: _q_value(_q_of(a) + _q_of(b)),
    "sub": lambda a, b: _q_value(_q_of(a) - _q_of(b)),
    "asInteger": _as_integer,
    "asApproximateFloat": lambda a: float(_q_of(a)),
    "sign": lambda a: _q_of(a).sign(),
    "isInteger": lambda a: _q_of(a).fraction.denominator == 1,
    "lowerAscii": lambda s: "".join(c.lower() if c.isascii() else c for c in s),
    "upperAscii": lambda s: "".join(c.upper() if c.isascii() else c for c in s),
    "trim": lambda s: s.strip(),
    "split": _split,
    "join": _join,
    "replace": _replace,
    "indexOf": _index_of,
    "lastIndexOf": _last_index_of,
    "substring": _substring,
    "charAt": lambda s, i: s[i] if 0 <= i < len(s) else "",
    "sum": _sum,
    "min": lambda *a: min(_over(a)),
    "max": lambda *a: max(_over(a)),
    "isSorted": _is_sorted,
    "escapeKey": _escape_key,
}
KNOWN_FUNCTIONS = BUILTIN_FUNCTIONS | frozenset(LIBRARY)


# --- activation: the values one review is evaluated with -----------------------------------------------------------


_LAZY = frozenset({"params", "variables"})


class Activation:
    """The variables of one evaluation context (`object`, `request`, ...), converted to CEL once and shared by
    every program run against it; `bind` adds or replaces one (per-policy `params`, `variables`).
    Not thread-safe: one per review."""

    def __init__(self, bindings: Mapping[str, Any] | None = None, *, deadline: float | None = None,
                 views: Mapping[str, Callable[[Any], Any]] | None = None, budget: int | None = None) -> None:
        self._data: dict[str, Any] = {"jsonpatch": {}, **(bindings or {})}
        self._views = dict(views or {})   # name -> the part of its value the programs can reach (`Reach.view`)
        self._seen: dict[str, Any] = {}    # name -> the view last handed to the engine
        self._ctx: Any = None
        self._sizes = _Sizes(self._data)
        self.deadline = deadline          # time.monotonic() value after which nothing more is evaluated
        self.budget = budget              # cost left for every expression still to run on this input (None: no cap)

    @property
    def data(self) -> Mapping[str, Any]:
        return self._data

    def bind(self, name: str, value: Any) -> None:
        if name in self._data and self._data[name] is value:
            if name in _LAZY:
                self._sizes.forget(name)    # the same dict, filled in place (`variables`): its sizes changed
            return                          # rebinding makes the engine rebuild its environment: skip it
        self._data[name] = value
        self._sizes.forget(name)
        if self._ctx is not None and name not in _LAZY:
            shown = self._view(name, value)
            if name in self._views and shown == self._seen.get(name):
                return                      # a change the programs cannot see: no reconversion
            self._seen[name] = shown
            self._ctx.add_variable(name, shown)

    def _view(self, name: str, value: Any) -> Any:
        view = self._views.get(name)
        return value if view is None or value is None else view(value)

    def context(self) -> Any:
        if self._ctx is None:
            # `params` and `variables` change per policy: the engine fetches them through the resolver at each
            # evaluation (a few µs), where add_variable would make it convert the whole environment, `object`
            # included, again (about 30 µs for a 2-task Job, per rebinding). A None from the resolver falls through
            # to the registered placeholder, so `params` reads null when there are none.
            data = self._data
            self._seen = {k: self._view(k, v) for k, v in data.items() if k in self._views}
            self._ctx = _cel.Context({k: (None if k in _LAZY else self._seen.get(k, v)) for k, v in data.items()},
                                     LIBRARY)
            self._ctx.set_variable_resolver(lambda name: data.get(name) if name in _LAZY else None)
        return self._ctx

    def sizes(self) -> _Sizes:
        return self._sizes


class _Sizes:
    """Collection sizes in an activation, by symbolic path (`("object", "spec", "tasks")`, `*` = any element)."""

    def __init__(self, data: Mapping[str, Any]) -> None:
        self._data = data
        self._cache: dict[tuple[str, ...], int] = {}
        self._roots: dict[str, set[tuple[str, ...]]] = {}   # root -> its cached paths (forgotten together)
        self._largest: dict[str, int] = {}                 # root -> its largest collection

    def forget(self, root: str) -> None:
        paths = self._roots.pop(root, None)
        if paths:
            for path in paths:
                del self._cache[path]
        self._largest.pop(root, None)

    def largest(self) -> int:
        """The largest list, map or string anywhere in the input (at least 1)."""
        best = 1
        for root, value in self._data.items():
            if root == "jsonpatch":
                continue
            size = self._largest.get(root)
            if size is None:
                size = self._largest[root] = _largest_in(value)
            if size > best:
                best = size
        return best

    def at(self, path: tuple[str, ...]) -> int:
        hit = self._cache.get(path)
        if hit is not None:
            return hit
        if path[0] not in self._data:
            size = self.largest()
        else:
            values = [self._data[path[0]]]
            for seg in path[1:]:
                nxt: list[Any] = []
                for v in values:
                    if seg == "*":
                        if isinstance(v, list):
                            nxt.extend(v)
                        elif isinstance(v, dict):
                            nxt.extend(v.values())
                    elif isinstance(v, dict) and seg in v:
                        nxt.append(v[seg])
                values = nxt
                if not values:
                    break
            size = max((len(v) for v in values if isinstance(v, list | dict | str)), default=0)
        self._cache[path] = size
        self._roots.setdefault(path[0], set()).add(path)
        return size


def _largest_in(value: Any) -> int:
    best, stack = 1, [value]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            best = max(best, len(v))
            stack.extend(v.values())
        elif isinstance(v, list):
            best = max(best, len(v))
            stack.extend(v)
        elif isinstance(v, str):
            best = max(best, len(v))
    return best


class Reach:
    """The parts of a variable's value that a set of programs can read, built from their `Program.accesses`.
    `view(value)` is the value with everything else left out (same keys along every path read, whole subtrees
    where a value is used as a whole), so the engine converts and copies only that; `None` programs' accesses
    (unknown) or a whole-variable use make `view` the identity."""

    __slots__ = ("_trie", "whole")

    def __init__(self, root: str, programs: Iterable[Program]) -> None:
        trie: dict[str, Any] = {}
        self.whole = False
        for program in programs:
            if program.accesses is None:
                self.whole = True
                break
            for path, whole in program.accesses:
                if path[0] != root:
                    continue
                if len(path) == 1 and whole is not None:
                    self.whole = True
                    break
                node = trie
                for seg in path[1:]:
                    node = node.setdefault(seg, {})
                if whole:
                    node[_WHOLE] = True
                elif whole is False:
                    node.setdefault(_ITER, True)
                else:
                    node.setdefault(_PRESENT, True)
            if self.whole:
                break
        self._trie = trie

    def view(self, value: Any) -> Any:
        return value if self.whole else _prune(value, self._trie)


_WHOLE, _ITER, _PRESENT = "\x00whole", "\x00iter", "\x00present"


def _prune(value: Any, trie: Mapping[str, Any]) -> Any:
    if _WHOLE in trie:
        return value
    if isinstance(value, dict):
        if _ITER in trie:
            return value                  # a map ranged over: its keys are the elements
        star = trie.get("*")
        out = {}
        for key, sub in (value.items() if star is not None else ((k, value[k]) for k in trie if k in value)):
            spec = trie.get(key)
            if star is not None and spec is not None:
                spec = _merge(star, spec)
            out[key] = _prune(sub, spec if spec is not None else star)
        return out
    if isinstance(value, list):
        star = trie.get("*")
        if star is None:
            if len(trie) > (_ITER in trie) + (_PRESENT in trie):
                return value                  # `list.field`: an error either way, keep it as it is
            return [None if isinstance(v, dict | list) else v for v in value]   # elements never looked into
        return [_prune(v, star) for v in value]
    return value


def _merge(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(a)
    for k, v in b.items():
        out[k] = _merge(out[k], v) if k in out and isinstance(v, dict) and isinstance(out[k], dict) else v
    return out


# --- compiled programs --------------------------------------------------------------------------------------------




@dataclass(frozen=True)
class Program:
    """A compiled expression: `evaluate(activation)` returns a plain Python value (bool, int, float, str, list,
    dict, None) or raises `EvaluationError` / `CostLimitExceeded`."""

    source: str
    cost_limit: int = DEFAULT_COST_LIMIT
    _program: Any = field(default=None, repr=False, compare=False)
    _cost: int | Formula = field(default=1, repr=False, compare=False)
    # The variable paths the expression reads: (path, whole?) — `whole` False for a range it only iterates, None
    # for a field it only tests with `has`. None when unknown (the analysis could not parse it): then nothing may
    # be left out of its input.
    accesses: frozenset[tuple[tuple[str, ...], bool | None]] | None = field(default=None, repr=False, compare=False)
    # The expression as Python closures over the plain input (`cel_native`), None when it is outside their subset:
    # tried first, and the engine answers whenever they are unsure.
    _native: cel_native.Native | None = field(default=None, repr=False, compare=False)

    def estimate(self, activation: Activation) -> int:
        """The expression's estimated cost on this input (what the limit is checked against)."""
        return self._cost if isinstance(self._cost, int) else self._cost(activation.sizes())

    def evaluate(self, activation: Activation) -> Any:
        if activation.deadline is not None and time.monotonic() > activation.deadline:
            raise EvaluationError("evaluation time budget exhausted: the expression was not evaluated")
        estimated = self._cost if isinstance(self._cost, int) else self._cost(activation.sizes())
        if estimated > self.cost_limit:
            raise CostLimitExceeded(estimated, self.cost_limit)
        if activation.budget is not None:
            if estimated > activation.budget:
                remaining, activation.budget = activation.budget, 0
                raise CostBudgetExhausted(estimated, remaining)
            activation.budget -= estimated
        if self._native is not None and estimated <= NATIVE_MAX_COST:
            try:
                return self._native.run(activation.data)
            except Exception:  # noqa: S110 — unsure (or a case the closures did not foresee): the engine decides
                pass
        try:
            return self._program.execute(activation.context())
        except KeyError as e:
            raise EvaluationError(f"no such key: {e.args[0] if e.args else e}") from None
        except Exception as e:  # the binding raises ValueError/TypeError/RuntimeError/ZeroDivisionError/...
            raise EvaluationError(_clean(str(e))) from None


def _clean(message: str) -> str:
    message = message.split(" Check function arguments")[0].split(" Check that the variable")[0]
    message = message.replace("Python function call failed: ", "")
    return message.split(" CEL does not coerce between types")[0].strip()


_FUNCTION_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
_POSITION = re.compile(r"<input>:(\d+):(\d+):\s*(.*)")


def compile(expression: str, *, variables: Iterable[str] = ROOT_VARIABLES,  # noqa: A001 — reads as cel.compile
            cost_limit: int = DEFAULT_COST_LIMIT) -> Program:
    """Compile `expression`; `variables` are the names it may reference. Raises `CompileError`, and nothing else:
    the text is bounded (`cel_text.check`) before any parser sees it, and every failure of the engine (a panic
    included) or of the analysis becomes a `CompileError`."""
    if not isinstance(expression, str) or not expression.strip():
        raise CompileError(str(expression or ""), "empty expression")
    measured = cel_text.shape(expression)
    if measured.violation is not None:
        v = measured.violation
        raise CompileError(expression, v.reason, line=v.line, column=v.column)
    source = cel_text.rewrite_struct_literals(expression)
    program = _engine_compile(expression, expression)      # errors are positioned in the user's own text
    if source != expression:
        program = _engine_compile(expression, source)
    allowed = frozenset(variables)
    accesses, cost, native = None, None, None
    # celpy's lark parser takes about 0.5 ms a token: past `ANALYSIS_TOKENS` the coarse bound below is used.
    tree = parse_tree(source) if measured.tokens <= ANALYSIS_TOKENS else None
    if tree is not None:
        analysis = Analysis()
        try:
            cost = analysis.node(tree, {}).cost
        except RecursionError:       # deeper than the analysis can walk: fall back to the coarse bound below
            cost = None
        if cost is not None:
            _check_references(expression, program, analysis, allowed)
            accesses = frozenset(analysis.uses.values())
            native = cel_native.build(tree, LIBRARY)
    if cost is None:  # the analysis could not read it: assume every macro nests over the largest collection,
        _check_names(expression, program, allowed)   # and every walking call and `+` is over it too
        depth = sum(source.count(f".{m}(") for m in MACROS | WALKS) + ("+" in source)

        def cost(s: _Sizes, _d: int = depth, _n: int = len(source)) -> int:
            return _n * s.largest() ** _d
    return Program(source=expression, cost_limit=cost_limit, _program=program, _cost=cost, accesses=accesses,
                   _native=native)


# What the binding raises on a bad expression: ValueError for a syntax error, and pyo3's PanicException when the
# Rust parser panics, which derives from BaseException, not Exception. Everything but the interpreter's own exits.
_EXITS = (KeyboardInterrupt, SystemExit, GeneratorExit)


def _engine_compile(expression: str, text: str) -> Any:
    try:
        return _cel.compile(text)
    except BaseException as e:
        if isinstance(e, _EXITS):
            raise
        message = str(e)
        m = _POSITION.search(message)
        if m and text is expression:
            reason = _RECURSION_LIMIT.sub(lambda r: f"nesting too deep ({r.group(1).lower()})", m.group(3).strip())
            raise CompileError(expression, _first_line(reason), line=int(m.group(1)),
                               column=int(m.group(2))) from None
        raise CompileError(expression, _first_line(message)) from None


def _short(name: str, limit: int = 80) -> str:
    return name if len(name) <= limit else name[:limit] + "…"


def _first_line(text: str, limit: int = 200) -> str:
    line = text.strip().splitlines()[0] if text.strip() else "invalid expression"
    return line if len(line) <= limit else line[:limit] + "…"


_RECURSION_LIMIT = re.compile(r'OtherError\(ParseError \{.*?msg: "([^"]*)".*?\}\)')


def _check_names(expression: str, program: Any, allowed: frozenset[str]) -> None:
    """Undeclared variables without the analysis: only comprehension variables (`x` in `.all(x, ...)`) are bound."""
    bound = set(re.findall(r"\.(?:all|exists|exists_one|map|filter)\(\s*([A-Za-z_][A-Za-z0-9_]*)\s*,", expression))
    for name in program.variables():
        if name not in bound and name not in allowed:
            raise CompileError(expression, f"undeclared reference to '{_short(name)}'")


def _check_references(expression: str, program: Any, analysis: Analysis, allowed: frozenset[str]) -> None:
    for name in program.variables():
        if name in analysis.bound or name in allowed:
            continue
        line, column = analysis.positions.get(name, (0, 0))
        raise CompileError(expression, f"undeclared reference to '{_short(name)}'", line=line, column=column)
    for name in program.functions():
        if not _FUNCTION_NAME.match(name) or name in KNOWN_FUNCTIONS:   # operators: `_+_`, `!_`, `@in`, ...
            continue
        line, column = analysis.positions.get(name, (0, 0))
        raise CompileError(expression, f"undeclared function '{_short(name)}'", line=line, column=column)
