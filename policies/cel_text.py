"""Passes over a CEL expression's text before any parser sees it: size and nesting bounds, and the JSONPatch rewrite.

Sits in front of `policies.cel.compile`. Every pass here is linear in the text and recursion-free.

Bounds (`check`). the Rust parser behind `cel` has no limit on the length of an operator
chain (`1+1+…` with 40k terms overflows its stack and kills the process with SIGSEGV) and panics on some deep
nestings, and the Python analysis (celpy's lark tree) raises RecursionError a few hundred levels down. `check` is a
single linear pass over the text, with no recursion, that refuses what those parsers cannot survive:

- more than `MAX_EXPRESSION_LENGTH` code points (100,000: cel-go's `expressionSizeCodePointLimit`);
- an estimated AST depth above `MAX_DEPTH` (250: cel-go's default `maxRecursionDepth`). The estimate is an upper
  bound: inside one bracket group every operator (binary, unary, `.`, `?`, `[`, call) adds a level to its operand
  segment, a comma starts a new segment, and a group is one level deeper than its deepest segment. So a chain of n
  operators is n deep whatever its associativity, as it is in the trees the parsers build;
- more than `MAX_TOKENS` tokens (10,000): the Rust parser holds the GIL while it works, about 0.3 ms a token.

String literals (quoted, triple-quoted, raw, bytes) and `//` comments are skipped, so brackets inside them do not
count. The answer is a `Violation` (reason, 1-based line and column) or None.

Rewrite (`rewrite_struct_literals`): MutatingAdmissionPolicy's typed `JSONPatch{op: "add", ...}` literal becomes
the map `{"op": "add", ...}` (the engine has no struct types); literals inside strings are left alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["MAX_DEPTH", "MAX_EXPRESSION_LENGTH", "MAX_TOKENS", "Shape", "Violation", "check", "rewrite_struct_literals",
           "shape"]

MAX_EXPRESSION_LENGTH = 100_000
MAX_DEPTH = 250
MAX_TOKENS = 10_000

_OPEN, _CLOSE = "([{", ")]}"
_OPERATORS = frozenset("+-*/%!<>=&|?.:")
_WORD = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


@dataclass(frozen=True)
class Violation:
    """Why an expression is refused, and where (1-based line and column; 0 when it is about the whole text)."""

    reason: str
    line: int = 0
    column: int = 0


def _position(text: str, index: int) -> tuple[int, int]:
    line = text.count("\n", 0, index) + 1
    return line, index - (text.rfind("\n", 0, index) + 1) + 1


def _string_end(text: str, i: int) -> int:
    """Index just past the string literal whose opening quote is at `i` (len(text) if it never closes)."""
    quote = text[i]
    raw = i > 0 and text[i - 1] in "rR" and (i < 2 or text[i - 2] not in _WORD or text[i - 2] in "bB")
    if text.startswith(quote * 3, i):
        end = text.find(quote * 3, i + 3) if raw else _scan(text, i + 3, quote * 3)
        return len(text) if end < 0 else end + 3
    end = text.find(quote, i + 1) if raw else _scan(text, i + 1, quote)
    return len(text) if end < 0 else end + 1


def _scan(text: str, i: int, closing: str) -> int:
    """Index of `closing` at or after `i`, skipping backslash escapes; -1 if absent."""
    while True:
        end = text.find(closing, i)
        if end < 0:
            return -1
        backslashes = 0
        j = end - 1
        while j >= i and text[j] == "\\":
            backslashes += 1
            j -= 1
        if backslashes % 2 == 0:
            return end
        i = end + 1


@dataclass(frozen=True)
class Shape:
    """What the linear pass measured: tokens counted and the estimated depth, both up to where it stopped."""

    tokens: int
    depth: int
    violation: Violation | None = None


def check(expression: str, **limits: int) -> Violation | None:
    """None if `expression` is within the bounds; else the first bound it breaks and where."""
    return shape(expression, **limits).violation


def shape(expression: str, *, max_length: int = MAX_EXPRESSION_LENGTH, max_depth: int = MAX_DEPTH,  # noqa: C901
          max_tokens: int = MAX_TOKENS) -> Shape:
    """Tokens and estimated AST depth of `expression`, with the first bound it breaks (or none)."""
    if len(expression) > max_length:
        return Shape(0, 0, Violation(f"expression is {len(expression)} characters long, more than the limit of "
                                     f"{max_length}"))
    # One frame per open bracket: [base, segment ops, segment's deepest child, group's deepest segment]; `base` is
    # the depth at which the group opened. The running depth at any token is base + ops + child of the top frame.
    frames: list[list[int]] = [[0, 0, 0, 0]]
    i, n, prev_operand, tokens, deepest = 0, len(expression), False, 0, 0
    while i < n:
        ch = expression[i]
        if ch in " \t\r\n":
            i += 1
            continue
        if ch == "/" and expression.startswith("//", i):
            nl = expression.find("\n", i)
            i = n if nl < 0 else nl + 1
            continue
        tokens, start = tokens + 1, i
        top = frames[-1]
        if ch in "\"'":
            i, prev_operand = _string_end(expression, i), True
        elif ch in _OPEN:
            if prev_operand or ch == "[":   # an index or a call: a node above its target
                top[1] += 1
            frames.append([top[0] + top[1] + top[2] + 1, 0, 0, 0])
            i, prev_operand = i + 1, False
        elif ch in _CLOSE:
            if len(frames) > 1:             # else unbalanced: the parser reports it
                done = frames.pop()
                top = frames[-1]
                top[2] = max(top[2], max(done[3], done[1] + done[2]) + 1)
            i, prev_operand = i + 1, True
        elif ch == ",":
            top[3] = max(top[3], top[1] + top[2])
            top[1] = top[2] = 0
            i, prev_operand = i + 1, False
        elif ch in _OPERATORS:
            j = i + 1
            while j < n and expression[j] in "=&|" and ch in "<>=!&|":   # `==`, `<=`, `&&`, `||` are one operator
                j += 1
            if not (ch == "." and i > 0 and expression[i - 1].isdigit() and j < n and expression[j].isdigit()):
                top[1] += 1                  # (`1.5` is a float literal, not a selection)
            i, prev_operand = j, False
        elif ch in _WORD:
            j = i
            while j < n and expression[j] in _WORD:
                j += 1
            word = expression[i:j]
            if word == "in":
                top[1] += 1
            prev_operand, i = word != "in", j
        else:
            i += 1                            # a character the parser will refuse
        depth = max(top[0] + top[1] + top[2], len(frames) - 1)
        deepest = max(deepest, depth)
        if depth > max_depth:
            line, column = _position(expression, start)
            return Shape(tokens, depth, Violation(
                f"expression is nested more than {max_depth} levels deep (operators chained or brackets nested); "
                "split it into variables", line, column))
        if tokens > max_tokens:
            line, column = _position(expression, start)
            return Shape(tokens, deepest, Violation(f"expression has more than {max_tokens} tokens", line, column))
    return Shape(tokens, deepest)


# --- `JSONPatch{op: "add", ...}` → `{"op": "add", ...}` ------------------------------------------------------------

_STRUCT = re.compile(r"JSONPatch\s*\{")
_IDENT_COLON = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*:")


def rewrite_struct_literals(src: str) -> str:
    """`JSONPatch{...}` literals as plain maps, in one pass. Positions of a syntax error are taken from the original
    text, so the rewrite may shift columns freely."""
    out: list[str] = []
    i = last = 0
    n = len(src)
    while i < n:
        ch = src[i]
        if ch in "\"'":
            i = _string_end(src, i)
            continue
        if ch == "/" and src.startswith("//", i):
            nl = src.find("\n", i)
            i = n if nl < 0 else nl + 1
            continue
        m = _STRUCT.match(src, i) if ch == "J" and (i == 0 or src[i - 1] not in _WORD) else None
        if m is None:
            i += 1
            continue
        out.append(src[last:i] + "{")
        i = last = _struct_body(src, m.end(), out)
    out.append(src[last:])
    return "".join(out)


def _struct_body(src: str, j: int, out: list[str]) -> int:
    """Append the literal's fields from `j` with quoted keys; return the index of its closing brace."""
    depth, expect_key, start = 0, True, j
    while j < len(src):
        ch = src[j]
        if expect_key and depth == 0:
            k = _IDENT_COLON.match(src, j)
            if k:
                out.append(src[start:j] + f' "{k.group(1)}":')
                j = start = k.end()
                expect_key = False
                continue
            expect_key = False
        if ch in "\"'":
            j = _string_end(src, j)
            continue
        if ch in _OPEN:
            depth += 1
        elif ch in _CLOSE:
            if depth == 0:
                break
            depth -= 1
        elif ch == "," and depth == 0:
            expect_key = True
        j += 1
    out.append(src[start:j])
    return j
