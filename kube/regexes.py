"""Bounded regular expressions for name selectors (a HyperNode's `regexMatch`): Go RE2's syntax, and no pattern that
Python's backtracking matcher could take exponential time on.

`webhooks.hypernodes` refuses such patterns at admission; `controllers._hypernode_tree` matches only patterns that
pass, so a HyperNode stored without the webhook cannot hang a worker.
"""

from __future__ import annotations

import re
from typing import Any

try:  # Python >= 3.11 names the regex parser `re._parser`; older ones `sre_parse`
    from re import _parser as _sre  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover
    import sre_parse as _sre  # type: ignore[no-redef]

__all__ = ["MAX_LENGTH", "compile_bounded", "problem"]

MAX_LENGTH = 1024
# constructs Go's RE2 (regexp.Compile) refuses: look-ahead/behind and back-references
_PERL_ONLY = re.compile(r"\(\?<?[=!]|\\[1-9]|\(\?P=")


def _children(op: Any, arg: Any) -> list[Any]:
    """The sub-patterns of one parsed regex node (groups, alternatives, assertions)."""
    if op == _sre.SUBPATTERN:
        return [arg[-1]]
    if op == _sre.BRANCH:
        return list(arg[1])
    if op in (_sre.ASSERT, _sre.ASSERT_NOT):
        return [arg[1]]
    return []


def _nested_repeat(items: Any, inside_repeat: bool) -> bool:
    """True when a repetition with no upper bound of 1 sits inside another such repetition (`(a+)+`, `(a*b)*`)."""
    repeat_ops = (_sre.MAX_REPEAT, _sre.MIN_REPEAT, getattr(_sre, "POSSESSIVE_REPEAT", None))
    for op, arg in items:
        if op in repeat_ops:
            _, hi, sub = arg
            repeats = hi is _sre.MAXREPEAT or hi > 1
            if (repeats and inside_repeat) or _nested_repeat(sub, inside_repeat or repeats):
                return True
        elif any(_nested_repeat(child, inside_repeat) for child in _children(op, arg)):
            return True
    return False


def problem(pattern: str) -> str | None:
    """Why `pattern` is not a bounded RE2-style expression (Go's `error parsing regexp: ...` where it has one),
    or None when it is fine."""
    if len(pattern) > MAX_LENGTH:
        return f"longer than {MAX_LENGTH} characters"
    perl = _PERL_ONLY.search(pattern)
    if perl:
        return f"error parsing regexp: invalid or unsupported Perl syntax: `{perl.group(0)}`"
    try:
        parsed = _sre.parse(pattern)
        re.compile(pattern)
    except (re.error, OverflowError, RecursionError) as e:
        return f"error parsing regexp: {e}"
    if _nested_repeat(parsed, False):
        return "nested repetition (like `(a+)+`) is not allowed: it can take exponential time to match"
    return None


def compile_bounded(pattern: Any) -> re.Pattern[str] | None:
    """The compiled pattern, or None when it is empty, not a string, or has a `problem`."""
    if not isinstance(pattern, str) or not pattern or problem(pattern) is not None:
        return None
    return re.compile(pattern)
