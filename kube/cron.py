"""Cron schedules the way Volcano reads them (robfig/cron v3 `ParseStandard`), with robfig's error texts.

Shared by the CronJob webhook (`validate`: is the schedule acceptable, and if not robfig's reason) and the cronjob
reconciler (`parse(...).next(t)`: when is the next run). No third-party cron library.

Five fields `minute hour day-of-month month day-of-week` with `*`, `?`, lists, ranges, steps and JAN-DEC /
SUN-SAT names; descriptors `@yearly @annually @monthly @weekly @daily @midnight @hourly @every <duration>`; an
optional `TZ=<zone>` / `CRON_TZ=<zone>` prefix. Day-of-month and day-of-week combine with OR when both are
restricted, as in robfig and Vixie cron. `Schedule.next(t)` is the first activation strictly after `t`.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from lahar.kube import durations

__all__ = ["CronError", "Schedule", "load_zone", "parse", "validate"]


class CronError(ValueError):
    """An unparsable schedule (the text says what is wrong, like robfig's errors)."""


_MONTHS = {m: i + 1 for i, m in enumerate(
    ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"))}
_DAYS = {d: i for i, d in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))}
_BOUNDS = {  # field -> (min, max, names)
    "minute": (0, 59, {}),
    "hour": (0, 23, {}),
    "dom": (1, 31, {}),
    "month": (1, 12, _MONTHS),
    "dow": (0, 6, _DAYS),
}
_DESCRIPTORS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_SEARCH_YEARS = 5


def load_zone(name: str | None) -> dt.tzinfo:
    """time.LoadLocation: "" and "UTC" are UTC; an unknown zone is a CronError."""
    if not name or name == "UTC":
        return dt.UTC
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise CronError(f"unknown time zone {name}") from exc


@dataclass(frozen=True)
class Schedule:
    minutes: frozenset[int] = frozenset()
    hours: frozenset[int] = frozenset()
    dom: frozenset[int] = frozenset()
    months: frozenset[int] = frozenset()
    dow: frozenset[int] = frozenset()
    dom_star: bool = True
    dow_star: bool = True
    zone: dt.tzinfo = dt.UTC
    every: float | None = None  # seconds, for @every

    def _day_matches(self, day: dt.datetime) -> bool:
        dom_ok = day.day in self.dom
        dow_ok = (day.isoweekday() % 7) in self.dow
        if self.dom_star or self.dow_star:
            return dom_ok and dow_ok
        return dom_ok or dow_ok

    def next(self, after: dt.datetime) -> dt.datetime | None:
        """The first activation strictly after `after` (aware), in the schedule's zone; None if none in 5 years."""
        if after.tzinfo is None:
            after = after.replace(tzinfo=dt.UTC)
        if self.every is not None:
            return after.replace(microsecond=0) + dt.timedelta(seconds=self.every)
        local = after.astimezone(self.zone)
        cand = local.replace(tzinfo=None, second=0, microsecond=0) + dt.timedelta(minutes=1)
        limit = cand.year + _SEARCH_YEARS
        while cand.year <= limit:
            if cand.month not in self.months:
                year, month = (cand.year + 1, 1) if cand.month == 12 else (cand.year, cand.month + 1)
                cand = dt.datetime(year, month, 1)
                continue
            if not self._day_matches(cand):
                cand = dt.datetime(cand.year, cand.month, cand.day) + dt.timedelta(days=1)
                continue
            if cand.hour not in self.hours:
                cand = cand.replace(minute=0) + dt.timedelta(hours=1)
                continue
            if cand.minute not in self.minutes:
                cand += dt.timedelta(minutes=1)
                continue
            aware = cand.replace(tzinfo=self.zone)
            back = aware.astimezone(dt.UTC).astimezone(self.zone).replace(tzinfo=None)
            if back != cand or aware <= after:  # a wall time skipped by DST, or the repeat of an hour already past
                cand += dt.timedelta(minutes=1)
                continue
            return aware
        return None


def _number(text: str, names: dict[str, int]) -> int:
    lowered = text.lower()
    if lowered in names:
        return names[lowered]
    if not re.fullmatch(r"\d+", text):
        raise CronError(f'failed to parse int from {text}: strconv.Atoi: parsing "{text}": invalid syntax')
    return int(text)


def _field(expr: str, field: str) -> tuple[frozenset[int], bool]:
    lo, hi, names = _BOUNDS[field]
    values: set[int] = set()
    star = False
    for part in expr.split(","):
        range_and_step = part.split("/")
        if len(range_and_step) > 2:
            raise CronError(f"too many slashes: {part}")
        low_high = range_and_step[0].split("-")
        if len(low_high) > 2:
            raise CronError(f"too many hyphens: {part}")
        part_star = False
        if low_high[0] in ("*", "?"):
            start, end, part_star = lo, hi, True
        else:
            start = _number(low_high[0], names)
            end = _number(low_high[1], names) if len(low_high) == 2 else start
        step = 1
        if len(range_and_step) == 2:
            step = _number(range_and_step[1], {})
            if len(low_high) == 1 and not part_star:  # "N/step" means "N-max/step"
                end = hi
            if step > 1:
                part_star = False
        if start < lo:
            raise CronError(f"beginning of range ({start}) below minimum ({lo}): {part}")
        if end > hi:
            raise CronError(f"end of range ({end}) above maximum ({hi}): {part}")
        if start > end:
            raise CronError(f"beginning of range ({start}) beyond end of range ({end}): {part}")
        if step == 0:
            raise CronError(f"step of range should be a positive number: {part}")
        values.update(range(start, end + 1, step))
        star = star or part_star
    return frozenset(values), star


def parse(spec: str, *, zone: str | None = None) -> Schedule:
    """ParseStandard. `zone` applies unless the spec carries its own `TZ=` / `CRON_TZ=` prefix."""
    text = spec.strip()
    if not text:
        raise CronError("empty spec string")
    tz = load_zone(zone)
    if text.startswith(("TZ=", "CRON_TZ=")):
        head, _, text = text.partition(" ")
        tz = load_zone(head.split("=", 1)[1])
        text = text.strip()
    if text.startswith("@every "):
        every = text[len("@every "):].strip()
        try:
            seconds = durations.parse(every)
        except ValueError as exc:
            raise CronError(f"failed to parse duration @every {every}: {exc}") from exc
        return Schedule(zone=tz, every=float(max(1, int(seconds))))
    if text.startswith("@"):
        if text not in _DESCRIPTORS:
            raise CronError(f"unrecognized descriptor: {text}")
        text = _DESCRIPTORS[text]
    fields = text.split()
    if len(fields) != 5:
        raise CronError(f"expected exactly 5 fields, found {len(fields)}: [{' '.join(fields)}]")
    minutes, _ = _field(fields[0], "minute")
    hours, _ = _field(fields[1], "hour")
    dom, dom_star = _field(fields[2], "dom")
    months, _ = _field(fields[3], "month")
    dow, dow_star = _field(fields[4], "dow")
    return Schedule(minutes=minutes, hours=hours, dom=dom, months=months, dow=dow, dom_star=dom_star,
                    dow_star=dow_star, zone=tz)


def validate(spec: str) -> str | None:
    """None when robfig's `ParseStandard(spec)` accepts it, else robfig's error text."""
    try:
        parse(spec)
    except CronError as exc:
        return str(exc)
    return None
