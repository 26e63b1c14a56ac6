"""Cron expressions as Volcano's CronJob webhook reads them (robfig/cron v3 `ParseStandard`), and Go durations.

Used by `webhooks.cronjobs` to decide "schedule is not a valid cron expression"; no third-party cron library.

Accepted, exactly like `cron.ParseStandard`: five whitespace-separated fields (minute 0-59, hour 0-23,
day-of-month 1-31, month 1-12 or JAN-DEC, day-of-week 0-6 or SUN-SAT, names case-insensitive), each a
comma list of `*`, `?`, `N`, `N-M`, with an optional `/step` (`N/step` means `N-max/step`); and the descriptors
`@yearly`, `@annually`, `@monthly`, `@weekly`, `@daily`, `@midnight`, `@hourly`, `@every <Go duration>`.
`parse` returns None when valid, else robfig's error text.
"""

from __future__ import annotations

import re

__all__ = ["parse", "parse_go_duration"]

_DESCRIPTORS = frozenset({"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"})
_MONTHS = {m: i + 1 for i, m in enumerate(
    ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"))}
_DOWS = {d: i for i, d in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))}
# (min, max, names) for minute, hour, dom, month, dow
_BOUNDS: tuple[tuple[int, int, dict[str, int]], ...] = (
    (0, 59, {}), (0, 23, {}), (1, 31, {}), (1, 12, _MONTHS), (0, 6, _DOWS),
)
_GO_DURATION = re.compile(r"^[-+]?(?:(?:\d+(?:\.\d*)?|\.\d+)(?:ns|us|µs|μs|ms|s|m|h))+$")
_GO_INT = re.compile(r"^[+-]?\d+$")


class _CronError(ValueError):
    pass


def parse_go_duration(text: str) -> str | None:
    """None if Go's `time.ParseDuration` accepts `text`, else its error."""
    if text in ("0", "+0", "-0"):
        return None
    if not _GO_DURATION.match(text):
        return f'time: invalid duration "{text}"'
    return None


def _must_int(expr: str) -> int:
    if not _GO_INT.match(expr):
        raise _CronError(f"failed to parse int from {expr}: strconv.Atoi: parsing {expr!r}: invalid syntax")
    n = int(expr)
    if n < 0:
        raise _CronError(f"negative number ({n}) not allowed: {expr}")
    return n


def _int_or_name(expr: str, names: dict[str, int]) -> int:
    if names and expr.lower() in names:
        return names[expr.lower()]
    return _must_int(expr)


def _range(expr: str, lo: int, hi: int, names: dict[str, int]) -> None:
    range_and_step = expr.split("/")
    low_high = range_and_step[0].split("-")
    single = len(low_high) == 1
    if low_high[0] in ("*", "?"):
        start, end = lo, hi
    else:
        start = _int_or_name(low_high[0], names)
        if len(low_high) == 1:
            end = start
        elif len(low_high) == 2:
            end = _int_or_name(low_high[1], names)
        else:
            raise _CronError(f"too many hyphens: {expr}")
    if len(range_and_step) == 1:
        step = 1
    elif len(range_and_step) == 2:
        step = _must_int(range_and_step[1])
        if single:
            end = hi
    else:
        raise _CronError(f"too many slashes: {expr}")
    if start < lo:
        raise _CronError(f"beginning of range ({start}) below minimum ({lo}): {expr}")
    if end > hi:
        raise _CronError(f"end of range ({end}) above maximum ({hi}): {expr}")
    if start > end:
        raise _CronError(f"beginning of range ({start}) beyond end of range ({end}): {expr}")
    if step == 0:
        raise _CronError(f"step of range should be a positive number: {expr}")


def parse(spec: str) -> str | None:
    """None if robfig/cron `ParseStandard(spec)` succeeds, else the reason."""
    if not spec:
        return "empty spec string"
    if spec.startswith("@"):
        if spec in _DESCRIPTORS:
            return None
        if spec.startswith("@every "):
            err = parse_go_duration(spec[len("@every "):])
            return None if err is None else f"failed to parse duration {spec}: {err}"
        return f"unrecognized descriptor: {spec}"
    fields = spec.split()
    if len(fields) != 5:
        return f"expected exactly 5 fields, found {len(fields)}: {fields}"
    try:
        for text, (lo, hi, names) in zip(fields, _BOUNDS, strict=True):
            for expr in text.split(","):
                _range(expr, lo, hi, names)
    except _CronError as e:
        return str(e)
    return None
