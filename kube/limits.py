"""Input bounds shared by everything that decodes untrusted JSON or YAML: nesting depth, alias amplification.

Sits under devcluster's REST front, the store's write path and the manifest loaders: one depth rule, checked at
decode and again on every object the store is about to keep, so nothing stored is deeper than any encoder in
lahar can write back (orjson stops at 254 levels; a LIST or a watch event adds its own levels around an object).
Pure functions; `LimitError` carries the message a 400 answer quotes.
"""

from __future__ import annotations

from typing import Any

import yaml

__all__ = [
    "MAX_ALIAS_EXPANSION",
    "MAX_BODY_BYTES",
    "MAX_DEPTH",
    "LimitError",
    "check_depth",
    "depth",
    "safe_load",
    "safe_load_all",
]

MAX_DEPTH = 100
"""Deepest nesting of objects and arrays accepted in a body or kept in the store (the root object is level 1)."""

MAX_BODY_BYTES = 3 * 1024 * 1024
"""kube-apiserver's default request body limit for most resources (3 MiB)."""

MAX_ALIAS_EXPANSION = 10_000
"""Nodes a YAML document's aliases may add beyond the nodes written out (aliases of scalars are free)."""


class LimitError(ValueError):
    """Input beyond a bound; the message names the bound and its value."""


def depth(value: Any) -> int:
    """How deeply objects and arrays nest in `value` (a scalar is 0, `{}` and `[]` are 1); iterative."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        deepest = max(deepest, level)
        if level > MAX_DEPTH + 1:  # deeper than any limit: no need to walk further
            return level
        stack.extend((child, level + 1) for child in children if isinstance(child, dict | list | tuple))
    return deepest


def check_depth(value: Any, *, what: str = "the object", limit: int = MAX_DEPTH) -> None:
    """Raise `LimitError` when `value` nests deeper than `limit`."""
    if depth(value) > limit:
        raise LimitError(f"{what} nests objects and arrays more than {limit} levels deep "
                         f"(the limit is {limit})")


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader that counts nesting while composing (no RecursionError) and measures what aliases expand to."""

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self._level = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._level += 1
        try:
            if self._level > MAX_DEPTH + 1:  # +1: the document node itself is not a level of the value
                raise LimitError(f"the YAML document nests more than {MAX_DEPTH} levels deep "
                                 f"(the limit is {MAX_DEPTH})")
            return super().compose_node(parent, index)
        finally:
            self._level -= 1

    def get_single_node(self) -> Any:
        node = super().get_single_node()
        if node is not None:
            _check_aliases(node)
        return node

    def get_node(self) -> Any:
        node = super().get_node()
        if node is not None:
            _check_aliases(node)
        return node


def _check_aliases(root: yaml.Node) -> None:
    """Refuse a composed document whose aliases expand it by more than MAX_ALIAS_EXPANSION nodes, nest it deeper
    than MAX_DEPTH or make it recursive. Sizes and depths are memoized per node, so this is linear in the nodes
    written out, however large the expansion."""
    size: dict[int, int] = {}
    deep: dict[int, int] = {}
    distinct = 0
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    open_nodes: set[int] = set()
    while stack:
        node, done = stack.pop()
        key = id(node)
        if isinstance(node, yaml.ScalarNode):
            if key not in size:
                size[key], deep[key] = 1, 0
                distinct += 1
            continue
        children = ([c for pair in node.value for c in pair] if isinstance(node, yaml.MappingNode)
                    else list(node.value))
        if done:
            open_nodes.discard(key)
            size[key] = 1 + sum(size[id(c)] for c in children)
            deep[key] = 1 + max((deep[id(c)] for c in children), default=0)
            continue
        if key in size:
            continue
        if key in open_nodes:
            raise LimitError("the YAML document refers to itself through an alias (recursive structures are "
                             "refused)")
        open_nodes.add(key)
        distinct += 1
        stack.append((node, True))
        for child in children:
            if id(child) in open_nodes:
                raise LimitError("the YAML document refers to itself through an alias (recursive structures are "
                                 "refused)")
            stack.append((child, False))
    if size[id(root)] - distinct > MAX_ALIAS_EXPANSION:
        raise LimitError(f"the YAML document's aliases expand it by {size[id(root)] - distinct} nodes "
                         f"(the limit is {MAX_ALIAS_EXPANSION})")
    if deep[id(root)] > MAX_DEPTH:
        raise LimitError(f"the YAML document nests more than {MAX_DEPTH} levels deep through aliases "
                         f"(the limit is {MAX_DEPTH})")


def safe_load(text: str | bytes) -> Any:
    """`yaml.safe_load` with the depth and alias bounds; raises `LimitError` or `yaml.YAMLError` only."""
    return _guarded(lambda: yaml.load(text, Loader=_BoundedLoader))  # noqa: S506 - a SafeLoader subclass


def safe_load_all(text: str | bytes) -> list[Any]:
    """`yaml.safe_load_all` with the depth and alias bounds, as a list."""
    return _guarded(lambda: list(yaml.load_all(text, Loader=_BoundedLoader)))  # noqa: S506 - a SafeLoader subclass


def _guarded(load: Any) -> Any:
    """PyYAML's constructors let some values escape as bare exceptions (`!!timestamp 2001-13-45` is a ValueError,
    a huge `!!float` an OverflowError): they become `yaml.YAMLError`, which every caller already handles."""
    try:
        return load()
    except (yaml.YAMLError, LimitError):
        raise
    except (ValueError, TypeError, OverflowError, RecursionError) as e:
        raise yaml.constructor.ConstructorError(None, None, f"cannot construct a value: {e}") from None
