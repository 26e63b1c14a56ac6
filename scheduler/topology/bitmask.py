"""NUMA masks as plain Python ints: bit i set = NUMA node i is in the mask (the kubelet's `bitmask.BitMask`).

Used by the merge (`scheduler.topology.merging`) and the hint generators (`scheduler.topology.hints`). Unlike the
kubelet's 64-bit mask there is no upper bound on node ids; negative ids are rejected. Orderings are the kubelet's:
`is_narrower(a, b)` compares bit counts first, then the masks as unsigned integers (`IsLessThan`).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator

__all__ = [
    "bits",
    "count",
    "from_bits",
    "is_narrower",
    "iterate",
    "narrowest",
    "to_frozenset",
    "to_string",
]


def from_bits(*node_ids: int) -> int:
    """`NewBitMask(bits...)`: the mask of the given NUMA node ids."""
    mask = 0
    for i in node_ids:
        if i < 0:
            raise ValueError(f"NUMA node id {i} is negative")
        mask |= 1 << i
    return mask


def bits(mask: int) -> list[int]:
    """`GetBits`: the node ids in the mask, ascending."""
    out = []
    i = 0
    while mask:
        if mask & 1:
            out.append(i)
        mask >>= 1
        i += 1
    return out


def to_frozenset(mask: int) -> frozenset[int]:
    return frozenset(bits(mask))


def count(mask: int) -> int:
    """`Count`: the number of NUMA nodes in the mask."""
    return mask.bit_count()


def is_narrower(a: int, b: int) -> bool:
    """`IsNarrowerThan`: fewer nodes, or as many nodes and a smaller unsigned value. A strict order."""
    ca, cb = a.bit_count(), b.bit_count()
    return a < b if ca == cb else ca < cb


def narrowest(a: int, b: int) -> int:
    """`Narrowest(a, b)`: a if a is narrower than b, else b."""
    return a if is_narrower(a, b) else b


def iterate(node_ids: Iterable[int]) -> Iterator[int]:
    """`IterateBitMasks`: every non-empty mask over the ids; all of size 1, then size 2, ... (2^n - 1 masks).

    Within one size the order is lexicographic over the given id list, as upstream's nested loops produce it.
    """
    ids = list(node_ids)
    for size in range(1, len(ids) + 1):
        for combo in itertools.combinations(ids, size):
            yield from_bits(*combo)


def to_string(mask: int) -> str:
    """`String()`: binary, bit 0 rightmost, at least two digits ("00", "01", "10", "1000")."""
    return format(mask, "02b")
