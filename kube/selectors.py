"""Label and field selectors: parse apimachinery's string forms and `LabelSelector` objects into matchers.

Pure functions under the store (LIST/WATCH filtering), the informer cache and the scheduler; parse errors carry
apimachinery's messages so devcluster can return them verbatim as `BadRequest`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from lahar.kube import podspec

__all__ = [
    "FieldRequirement",
    "FieldSelector",
    "LabelSelector",
    "Requirement",
    "SelectorError",
    "everything",
    "field_value",
    "from_label_selector",
    "label_selector_string",
    "match_labels",
    "matcher",
    "nothing",
    "parse_fields",
    "parse_labels",
]


class SelectorError(ValueError):
    """A selector that does not parse; `str(err)` is apimachinery's message."""


# --- requirements -----------------------------------------------------------------------------------------------

_OPS_WITH_ONE_VALUE = ("=", "==", "!=")
_SET_OPS = ("in", "notin")
_UNARY_OPS = ("exists", "!")
_ORDER_OPS = ("gt", "lt")


@dataclass(frozen=True)
class Requirement:
    """One label requirement: `key` `op` `values`; op ∈ = == != in notin exists ! gt lt."""

    key: str
    op: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.op
        if op in ("=", "==", "in"):
            return self.key in labels and labels[self.key] in self.values
        if op in ("!=", "notin"):
            return self.key not in labels or labels[self.key] not in self.values
        if op == "exists":
            return self.key in labels
        if op == "!":
            return self.key not in labels
        if op in _ORDER_OPS:
            if self.key not in labels:
                return False
            try:
                have, want = int(labels[self.key]), int(self.values[0])
            except ValueError:
                return False
            return have > want if op == "gt" else have < want
        return False

    def __str__(self) -> str:
        if self.op == "exists":
            return self.key
        if self.op == "!":
            return "!" + self.key
        if self.op in _SET_OPS:
            return f"{self.key} {self.op} ({','.join(self.values)})"
        if self.op in _ORDER_OPS:
            return f"{self.key}{'>' if self.op == 'gt' else '<'}{self.values[0]}"
        return f"{self.key}{self.op}{self.values[0]}"


def _new_requirement(key: str, op: str, values: Iterable[str]) -> Requirement:
    """apimachinery `NewRequirement`: validate the key, the value count for the operator, and each value."""
    vals = tuple(sorted(set(values)))
    errs = podspec.is_qualified_name(key)
    if errs:
        raise SelectorError(f'key: Invalid value: "{key}": {"; ".join(errs)}')
    if op in _SET_OPS and not vals:
        raise SelectorError("values: Invalid value: null: for 'in', 'notin' operators, values set can't be empty")
    if op in _OPS_WITH_ONE_VALUE and len(vals) != 1:
        raise SelectorError(f"values: Invalid value: {list(vals)}: exact-match compatibility requires one single value")
    if op in _UNARY_OPS and vals:
        raise SelectorError(f"values: Invalid value: {list(vals)}: values set must be empty for exists and does not exist")
    if op in _ORDER_OPS:
        if len(vals) != 1:
            raise SelectorError(f"values: Invalid value: {list(vals)}: for 'Gt', 'Lt' operators, exactly one value is "
                                "required")
        try:
            int(vals[0])
        except ValueError:
            raise SelectorError(f'values[0]: Invalid value: "{vals[0]}": for \'Gt\', \'Lt\' operators, the value '
                                "must be an integer") from None
    for i, v in enumerate(vals):
        verrs = podspec.is_valid_label_value(v)
        if verrs:
            raise SelectorError(f'values[{i}][{key}]: Invalid value: "{v}": {"; ".join(verrs)}')
    return Requirement(key, op, vals)


@dataclass(frozen=True)
class LabelSelector:
    """A conjunction of requirements; `None` requirements means "matches nothing" (a nil metav1.LabelSelector)."""

    requirements: tuple[Requirement, ...] | None = ()

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        if self.requirements is None:
            return False
        labels = labels or {}
        return all(r.matches(labels) for r in self.requirements)

    def matches_object(self, obj: Mapping[str, Any]) -> bool:
        return self.matches((obj.get("metadata") or {}).get("labels") or {})

    @property
    def empty(self) -> bool:
        return self.requirements == ()

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements or ())


def everything() -> LabelSelector:
    return LabelSelector(())


def nothing() -> LabelSelector:
    return LabelSelector(None)


# --- the label selector lexer/parser (apimachinery labels/selector.go) ------------------------------------------

_SPECIAL = "=!(),><"
_T_ID, _T_EOS, _T_COMMA, _T_OPEN, _T_CLOSE = "id", "eos", ",", "(", ")"
_T_NOT, _T_EQ, _T_DEQ, _T_NEQ, _T_IN, _T_NOTIN, _T_GT, _T_LT = "!", "=", "==", "!=", "in", "notin", ">", "<"
_KEYWORDS = {"!": _T_NOT, "!=": _T_NEQ, "(": _T_OPEN, ")": _T_CLOSE, ",": _T_COMMA, "=": _T_EQ, "==": _T_DEQ,
             ">": _T_GT, "<": _T_LT, "in": _T_IN, "notin": _T_NOTIN}
_BINARY_OPERATORS = "in, notin, =, ==, !=, gt, lt"


def _lex(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch.isspace():
            i += 1
            continue
        if ch in _SPECIAL:
            j = i + 1
            while j < n and text[j] in _SPECIAL and text[i:j + 1] in _KEYWORDS:
                j += 1
            lit = text[i:j]
            if lit not in _KEYWORDS:
                raise SelectorError(f"error: '{lit}' is not a valid token")  # cannot happen for single specials
            out.append((_KEYWORDS[lit], lit))
            i = j
            continue
        j = i
        while j < n and not text[j].isspace() and text[j] not in _SPECIAL:
            j += 1
        lit = text[i:j]
        out.append((_KEYWORDS.get(lit, _T_ID), lit))
        i = j
    out.append((_T_EOS, ""))
    return out


class _Parser:
    def __init__(self, text: str) -> None:
        self.items = _lex(text)
        self.pos = 0

    def lookahead(self, values: bool = True) -> tuple[str, str]:
        tok, lit = self.items[self.pos]
        if values and tok in (_T_IN, _T_NOTIN):
            tok = _T_ID
        return tok, lit

    def consume(self, values: bool = True) -> tuple[str, str]:
        tok, lit = self.lookahead(values)
        if self.pos < len(self.items) - 1:
            self.pos += 1
        return tok, lit

    def parse(self) -> list[Requirement]:
        reqs: list[Requirement] = []
        while True:
            tok, lit = self.lookahead()
            if tok in (_T_ID, _T_NOT):
                try:
                    reqs.append(self.requirement())
                except SelectorError as err:
                    raise SelectorError(f"unable to parse requirement: {err}") from None
                t, lit2 = self.consume()
                if t == _T_EOS:
                    return reqs
                if t == _T_COMMA:
                    t2, l2 = self.lookahead()
                    if t2 not in (_T_ID, _T_NOT):
                        raise SelectorError(f"found '{l2}', expected: identifier after ','")
                    continue
                raise SelectorError(f"found '{lit2}', expected: ',' or 'end of string'")
            if tok == _T_EOS:
                return reqs
            raise SelectorError(f"found '{lit}', expected: !, identifier, or 'end of string'")

    def requirement(self) -> Requirement:
        op = ""
        tok, lit = self.consume()
        if tok == _T_NOT:
            op = "!"
            tok, lit = self.consume()
        if tok != _T_ID:
            raise SelectorError(f"found '{lit}', expected: identifier")
        key = lit
        errs = podspec.is_qualified_name(key)
        if errs:
            raise SelectorError(f'key: Invalid value: "{key}": {"; ".join(errs)}')
        t, _ = self.lookahead()
        if op == "!" or t in (_T_EOS, _T_COMMA):
            return _new_requirement(key, op or "exists", ())
        tok, lit = self.consume(values=False)
        ops = {_T_IN: "in", _T_NOTIN: "notin", _T_EQ: "=", _T_DEQ: "==", _T_NEQ: "!=", _T_GT: "gt", _T_LT: "lt"}
        if tok not in ops:
            raise SelectorError(f"found '{lit}', expected: {_BINARY_OPERATORS}")
        op = ops[tok]
        values = self.set_values() if op in _SET_OPS else self.exact_value()
        return _new_requirement(key, op, values)

    def set_values(self) -> list[str]:
        tok, lit = self.consume()
        if tok != _T_OPEN:
            raise SelectorError(f"found '{lit}' expected: '('")
        tok, lit = self.lookahead()
        if tok in (_T_ID, _T_COMMA):
            values = self.identifiers()
            tok, _ = self.consume()
            if tok != _T_CLOSE:
                raise SelectorError(f"found '{lit}', expected: ')'")
            return values
        if tok == _T_CLOSE:
            self.consume()
            return [""]
        raise SelectorError(f"found '{lit}', expected: ',', ')' or identifier")

    def identifiers(self) -> list[str]:
        values: list[str] = []
        while True:
            tok, lit = self.consume()
            if tok == _T_ID:
                values.append(lit)
                t2, l2 = self.lookahead()
                if t2 == _T_COMMA:
                    continue
                if t2 == _T_CLOSE:
                    return values
                raise SelectorError(f"found '{l2}', expected: ',' or ')'")
            if tok == _T_COMMA:
                if not values:
                    values.append("")
                t2, _ = self.lookahead()
                if t2 == _T_CLOSE:
                    values.append("")
                    return values
                if t2 == _T_COMMA:
                    self.consume()
                    values.append("")
                continue
            raise SelectorError(f"found '{lit}', expected: ',', or identifier")

    def exact_value(self) -> list[str]:
        tok, _ = self.lookahead()
        if tok in (_T_EOS, _T_COMMA):
            return [""]
        tok, lit = self.consume()
        if tok == _T_ID:
            return [lit]
        raise SelectorError(f"found '{lit}', expected: identifier")


def parse_labels(text: str | None) -> LabelSelector:
    """Parse `a=b,c!=d,e in (x,y),!f` (empty or None → everything). Raises SelectorError."""
    if text is None or not text.strip():
        return everything()
    return LabelSelector(tuple(sorted(_Parser(text).parse(), key=lambda r: r.key)))


def match_labels(selector: str | None, labels: Mapping[str, str] | None) -> bool:
    return parse_labels(selector).matches(labels)


_LS_OPS = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}


def from_label_selector(sel: Mapping[str, Any] | None) -> LabelSelector:
    """A `metav1.LabelSelector` dict → matcher (apimachinery `LabelSelectorAsSelector`): None matches nothing,
    `{}` everything. Raises SelectorError for an unknown operator or invalid key/values."""
    if sel is None:
        return nothing()
    reqs: list[Requirement] = []
    for key, value in sorted((sel.get("matchLabels") or {}).items()):
        reqs.append(_new_requirement(key, "=", [value]))
    for expr in sel.get("matchExpressions") or []:
        op = expr.get("operator")
        if op not in _LS_OPS:
            raise SelectorError(f'"{op}" is not a valid label selector operator')
        reqs.append(_new_requirement(expr.get("key", ""), _LS_OPS[op], expr.get("values") or ()))
    return LabelSelector(tuple(sorted(reqs, key=lambda r: r.key)))


def label_selector_string(sel: Mapping[str, Any] | None) -> str:
    """A `metav1.LabelSelector` dict as the query-string form (`FormatLabelSelector`, "<none>" for empty)."""
    text = str(from_label_selector(sel))
    return text or "<none>"


# --- field selectors (apimachinery fields/selector.go) ----------------------------------------------------------


@dataclass(frozen=True)
class FieldRequirement:
    """`path` (dotted, e.g. `spec.nodeName`) `op` (`=` or `!=`) `value`."""

    path: str
    op: str
    value: str

    def matches(self, obj: Mapping[str, Any]) -> bool:
        have = field_value(obj, self.path)
        return (have == self.value) if self.op == "=" else (have != self.value)

    def __str__(self) -> str:
        return f"{self.path}{'=' if self.op == '=' else '!='}{_escape_field(self.value)}"


@dataclass(frozen=True)
class FieldSelector:
    requirements: tuple[FieldRequirement, ...] = ()

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return all(r.matches(obj) for r in self.requirements)

    @property
    def empty(self) -> bool:
        return not self.requirements

    def paths(self) -> list[str]:
        return [r.path for r in self.requirements]

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)


def _escape_field(value: str) -> str:
    return value.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")


def _split_terms(text: str) -> list[str]:
    terms: list[str] = []
    start, i = 0, 0
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == ",":
            terms.append(text[start:i])
            start = i + 1
        i += 1
    terms.append(text[start:])
    return terms


def _split_operator(term: str) -> tuple[str, str, str] | None:
    i = 0
    while i < len(term):
        if term[i] == "\\":
            i += 2
            continue
        for op, norm in (("!=", "!="), ("==", "="), ("=", "=")):
            if term.startswith(op, i):
                return term[:i], norm, term[i + len(op):]
        i += 1
    return None


def _unescape_field(value: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(value):
        ch = value[i]
        if ch == "\\":
            if i + 1 >= len(value):
                raise SelectorError(f"invalid field selector: trailing backslash character in {value!r}")
            nxt = value[i + 1]
            if nxt not in "\\,=":
                raise SelectorError(f"invalid field selector: invalid escape sequence: \\{nxt}")
            out.append(nxt)
            i += 2
            continue
        if ch in ",=":
            raise SelectorError(f"invalid field selector: unescaped {ch!r} in value")
        out.append(ch)
        i += 1
    return "".join(out)


def parse_fields(text: str | None) -> FieldSelector:
    """Parse `metadata.name=x,spec.nodeName!=,status.phase==Running` (empty → everything). Raises SelectorError."""
    if text is None or not text.strip():
        return FieldSelector(())
    reqs: list[FieldRequirement] = []
    for term in _split_terms(text):
        if not term:
            continue
        split = _split_operator(term)
        if split is None:
            raise SelectorError(f"invalid selector: '{text}'; can't understand '{term}'")
        path, op, raw = split
        reqs.append(FieldRequirement(path.strip(), op, _unescape_field(raw)))
    return FieldSelector(tuple(reqs))


def _to_field_string(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return ""
    return str(value)


def field_value(obj: Mapping[str, Any], path: str) -> str:
    """The string a field selector compares against: a dotted path into the object ("" when absent)."""
    cur: Any = obj
    for part in path.split("."):
        if not isinstance(cur, Mapping):
            return ""
        cur = cur.get(part)
        if cur is None:
            return ""
    return _to_field_string(cur)


def matcher(label_selector: str | None = None, field_selector: str | None = None) -> Callable[[Mapping[str, Any]], bool]:
    """One predicate over objects for both selectors (parse errors raise SelectorError)."""
    labels = parse_labels(label_selector)
    fields = parse_fields(field_selector)
    if labels.empty and fields.empty:
        return lambda obj: True
    if fields.empty:
        return labels.matches_object
    if labels.empty:
        return fields.matches
    return lambda obj: labels.matches_object(obj) and fields.matches(obj)

