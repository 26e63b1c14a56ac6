"""`/metrics` across the worker processes of `lahar webhook --workers N`: a scrape reaches one worker, and must not
see only that worker's counters (they would go up and down from scrape to scrape as Prometheus reaches one worker,
then another: counter resets every time).

Each worker's `Snapshots` thread writes its exposition text to `<watch dir>/<pid>.prom` once a second when it
changed (write then rename: a reader never sees half a file), and `/metrics` answers `merge([own, *others])`: the
samples of counter and histogram families summed across workers, any other family taken from the worker that
answers. A worker the supervisor kills takes its counts with it (Prometheus sees a counter reset, as after a pod
restart). `merge` is the pure part.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

__all__ = ["SUFFIX", "Snapshots", "merge", "others"]

SUFFIX = ".prom"
_ADDITIVE = frozenset({"counter", "histogram", "summary"})


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _format(value: float) -> str:
    return str(int(value)) if value.is_integer() and abs(value) < 2**63 else repr(value)


def merge(texts: Iterable[str]) -> str:
    """One Prometheus text exposition from several processes' (the first is the answering worker's): a sample of a
    counter, histogram or summary family is the sum of that sample (same name and labels) in every text; others are
    the first text's. Order: the first text's lines, then samples only other texts have, at the end."""
    texts = list(texts)
    if not texts:
        return ""
    types: dict[str, str] = {}
    totals: dict[str, float] = {}
    order: list[str] = []                    # comment lines and sample keys, in first-seen order
    for n, text in enumerate(texts):
        for line in text.splitlines():
            if not line.strip():
                continue
            if line.startswith("#"):
                parts = line.split()
                if len(parts) >= 4 and parts[1] == "TYPE":
                    types.setdefault(parts[2], parts[3])
                if n == 0:
                    order.append(line)
                continue
            key, _, raw = line.rpartition(" ")
            value = _number(raw)
            if not key or value is None:
                continue
            family = _family(key, types)
            if key not in totals:
                if n > 0 and family not in _ADDITIVE:
                    continue                     # another worker's gauge: only the answering worker's counts
                totals[key] = value
                order.append(key)
            elif n > 0 and family in _ADDITIVE:
                totals[key] += value
    out = [line if line.startswith("#") else f"{line} {_format(totals[line])}" for line in order]
    return "\n".join(out) + "\n"


def _family(key: str, types: dict[str, str]) -> str | None:
    name = key.partition("{")[0]
    if name in types:
        return types[name]
    for suffix in ("_bucket", "_sum", "_count"):
        if name.endswith(suffix) and name[: -len(suffix)] in types:
            return types[name[: -len(suffix)]]
    return None


def others(directory: str | os.PathLike[str], *, own_pid: int) -> list[str]:
    """The snapshots the other workers wrote."""
    texts = []
    for path in sorted(Path(directory).glob(f"*{SUFFIX}")):
        if path.stem == str(own_pid):
            continue
        with contextlib.suppress(OSError):
            texts.append(path.read_text())
    return texts


class Snapshots:
    """A daemon thread writing `render()` to `<directory>/<pid>.prom` every `interval` seconds when it changed."""

    def __init__(self, directory: str | os.PathLike[str], render: Callable[[], str], *, interval: float = 1.0) -> None:
        self.directory, self.render, self.interval = Path(directory), render, interval
        self._stop = threading.Event()
        self._last = ""
        self._thread: threading.Thread | None = None

    def write(self) -> None:
        text = self.render()
        if text == self._last:
            return
        pid = os.getpid()
        tmp = self.directory / f".{pid}{SUFFIX}.tmp"
        with contextlib.suppress(OSError):
            tmp.write_text(text)
            tmp.replace(self.directory / f"{pid}{SUFFIX}")
            self._last = text

    def start(self) -> Snapshots:
        self._thread = threading.Thread(target=self._run, name="lahar-metrics-snapshots", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.write()
