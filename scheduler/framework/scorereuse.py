"""Node-order scores kept from task to task inside one session (`session.Session.node_scores`): the plugins that say,
through `node_order_reuse`, how long their scores of a task last are asked again only for the rows changed since.

`Scores` holds one tuple of reuse answers' scores; the sum runs in plugin order, so every total is the same to the
bit as asking every plugin each time (tests/unit/scheduler/test_sched_score_reuse.py).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from lahar.scheduler.framework import hooks
from lahar.scheduler.framework.nodes import NodeArrays
from lahar.scheduler.framework.snapshot import Task

__all__ = ["Scores", "no_reuse"]


def no_reuse(task: Task) -> None:
    return None


def _node_order_of(plugin: Any, task: Task, arrays: NodeArrays, rows: np.ndarray) -> np.ndarray:
    return plugin.node_order(task, arrays, rows)  # type: ignore[no-any-return]


class Scores:
    """The node-order scores kept for one tuple of reuse answers (`session.Session._reused_scores`): per answering plugin
    its scores over every node; `head` the sum of the leading plugins with kept scores over every node (None when the
    first has none); `tail` the rest in order, (plugin, its kept scores or None: ask it, whether it is asked for one
    number), zero scores left out; `version` the NodeArrays version they are up to date with."""

    __slots__ = ("head", "head_parts", "keys", "parts", "rows", "tail", "version")

    def __init__(self, plugins: list[Any], arrays: NodeArrays, task: Task, keys: tuple[Any, ...]) -> None:
        n = len(arrays)
        every = np.arange(n, dtype=np.int64)
        self.keys = keys
        self.version = len(arrays.changes)
        self.parts: list[np.ndarray | None] = [
            np.array(p.node_order(task, arrays, every), dtype=np.float64)
            if k is not None and k[0] != hooks.REUSE_UNIFORM else None
            for p, k in zip(plugins, keys, strict=True)]
        # per REUSE_ROWS plugin, (index, its scorer of rows)
        self.rows: list[tuple[int, Callable[[np.ndarray], np.ndarray]]] = []
        for i, (p, k) in enumerate(zip(plugins, keys, strict=True)):
            if k is not None and k[0] == hooks.REUSE_ROWS:
                rows_of = getattr(p, "node_order_rows", None)
                self.rows.append((i, rows_of(task) if rows_of is not None else
                                  functools.partial(_node_order_of, p, task, arrays)))
        lead = 0
        while lead < len(plugins) and self.parts[lead] is not None:
            lead += 1
        self.head_parts = [i for i in range(lead) if keys[i][0] == hooks.REUSE_ROWS or self.parts[i].any()]
        self.head: np.ndarray | None = None
        if lead:
            self.head = np.zeros(n, dtype=np.float64)
            for i in self.head_parts:
                self.head += self.parts[i]
        self.tail: list[tuple[Any, np.ndarray | None, bool]] = []
        for i in range(lead, len(plugins)):
            vec = self.parts[i]
            if vec is not None and keys[i][0] == hooks.REUSE_STATIC and not vec.any():
                continue  # zero everywhere for the rest of the session
            self.tail.append((plugins[i], vec, keys[i] is not None and keys[i][0] == hooks.REUSE_UNIFORM))

    def refresh(self, plugins: list[Any], arrays: NodeArrays, task: Task) -> None:
        """Bring the kept scores up to date: the REUSE_ROWS plugins asked for the rows changed since (every row
        when many changed), `head` summed again on those rows."""
        n = len(arrays)
        version = len(arrays.changes)
        every = version - self.version > n // 8 + 1
        rows = np.arange(n, dtype=np.int64) if every else arrays.dirty_since(self.version)
        self.version = version
        if not len(rows):
            return
        for i, score_rows in self.rows:
            part = self.parts[i]
            assert part is not None
            part[rows] = plugins[i].node_order(task, arrays, rows) if every else score_rows(rows)
        if self.head is None:
            return
        if len(rows) == 1:  # one placement since: the same additions on Python floats (IEEE doubles either way)
            row = int(rows[0])
            total = 0.0
            for i in self.head_parts:
                total += self.parts[i].item(row)  # type: ignore[union-attr]
            self.head[row] = total
            return
        head = np.zeros(len(rows), dtype=np.float64)
        for i in self.head_parts:
            head += self.parts[i][rows]  # type: ignore[index]
        self.head[rows] = head
